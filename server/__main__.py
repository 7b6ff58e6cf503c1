"""`python -m server`: the ASAP language server over stdio."""

from server.lsp import main

if __name__ == "__main__":  # not when a worker process (the agents' pool) imports it
    main()
