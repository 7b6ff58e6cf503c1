"""`python -m server`: the ASAP language server over stdio; `python -m server mcp`: the MCP server over stdio
(server/mcp_server/), as `asap mcp`."""

import sys

if __name__ == "__main__":  # not when a worker process (the agents' pool) imports it
    if sys.argv[1:] == ["mcp"]:
        from server.mcp_server import main as mcp_main

        mcp_main()
    else:
        from server.lsp import main

        main()
