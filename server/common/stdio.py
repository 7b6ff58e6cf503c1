"""Stdio reserved for a protocol: the language server's (server/lsp.py) and the MCP server's
(server/mcp_server/) messages, and nothing else, on the process's stdout."""

from __future__ import annotations

import os
import sys
from typing import BinaryIO


def reserve_stdio() -> tuple[BinaryIO, BinaryIO]:
    """The protocol's own copies of stdin and stdout; file descriptor 1 then points at stderr and 0 at
    /dev/null. Over stdio one stray byte on stdout (a library's print, a C extension's message, the agents'
    worker process, which inherits the descriptors) corrupts the client's message stream, and with it every
    later message; a child reading stdin would steal the client's requests."""
    proto_in = os.fdopen(os.dup(0), "rb")
    proto_out = os.fdopen(os.dup(1), "wb")
    sys.stdout.flush()
    os.dup2(2, 1)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    sys.stdout = sys.stderr
    return proto_in, proto_out
