"""`asap mcp` (and `python -m server mcp`): ASAP's tools for coding agents, as an MCP server over stdio (the official
Python SDK, `mcp` 2.x). docs/mcp.md is the reference.

Each tool answers with the document the CLI prints with `--json` for the same command, built by the same code
(server/cli/commands.py's `json_document`) and published with the same pydantic models as its output schema
(server/cli/documents.py). This package is a front end over the CLI's commands: the layer above server/cli
(pyproject's import-linter contracts).

Startup stays light (the first `tools/list` answers in well under 3 s from a cold process): the analysis, the
agents, the knowledge store and the compiler are imported by the first tool call that needs them.
"""

from __future__ import annotations

__all__ = ["main"]


def main() -> None:
    """Serve MCP over stdio until the client closes it."""
    from server.mcp_server.app import serve

    serve()
