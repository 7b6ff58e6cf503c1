"""`python -m server`: the ASAP language server over stdio."""

from server.lsp import main

main()
