"""The server's stdio transport: the client's messages read by one thread in large chunks.

pygls' own stdin reader asks its thread pool for every header line and every body (three round trips a message,
each a wake-up of the event loop through a future). While an analysis runs in a worker thread, each of those
wake-ups waits for the GIL; on a busy 2-core machine that is a scheduling slice each time, and a request's
answer waited for all of them (bench/lsp_latency.py, code actions while large documents are analysed).

`ChunkReader` reads with `os.read` in one daemon thread and hands each chunk (any number of messages) to the loop
in one call; pygls' message loop (`pygls.io_.run_async`) then takes its lines and bodies from the buffer without
suspending while they are there. The rest is pygls' own: its message loop, its writer and its shutdown.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
from typing import BinaryIO

from pygls.io_ import StdoutWriter, run_async
from pygls.lsp.server import LanguageServer

log = logging.getLogger("asap")

CHUNK = 1 << 16


class ChunkReader:
    """pygls' AsyncReader over a file descriptor read by a thread: `readline` and `readexactly` return at once
    while the buffer holds what they need, and wait for the next chunk otherwise. At end of input they return
    what is left (b"" at the end), as pygls' reader does."""

    def __init__(self, stdin: BinaryIO) -> None:
        self._stdin = stdin  # kept open: its file descriptor is read
        self._fd = stdin.fileno()
        self._buf = bytearray()
        self._eof = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._waiter: asyncio.Future[None] | None = None

    def _start(self) -> asyncio.AbstractEventLoop:
        if self._loop is None:
            self._loop = asyncio.get_running_loop()
            threading.Thread(target=self._pump, name="asap-stdin", daemon=True).start()
        return self._loop

    def _pump(self) -> None:
        assert self._loop is not None
        while True:
            try:
                data = os.read(self._fd, CHUNK)
            except OSError as e:
                log.error("reading the client's messages failed: %s", e)
                data = b""
            try:
                self._loop.call_soon_threadsafe(self._feed, data)
            except RuntimeError:  # the loop is closed: the server is exiting
                return
            if not data:
                return

    def _feed(self, data: bytes) -> None:
        if data:
            self._buf += data
        else:
            self._eof = True
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    async def _more(self) -> None:
        self._waiter = self._start().create_future()
        await self._waiter

    def _take(self, n: int) -> bytes:
        out = bytes(self._buf[:n])
        del self._buf[:n]
        return out

    async def readline(self) -> bytes:
        self._start()
        while True:
            end = self._buf.find(b"\n")
            if end >= 0:
                return self._take(end + 1)
            if self._eof:
                return self._take(len(self._buf))
            await self._more()

    async def readexactly(self, n: int) -> bytes:
        self._start()
        while len(self._buf) < n and not self._eof:
            await self._more()
        return self._take(n)


def serve(server: LanguageServer, stdin: BinaryIO, stdout: BinaryIO) -> None:
    """pygls' `start_io` with the ChunkReader: run the server on these streams until the client exits."""
    stop = threading.Event()
    server._stop_event = stop  # pygls' `exit` handling and `shutdown` set it
    server.protocol.set_writer(StdoutWriter(stdout))
    try:
        asyncio.run(
            run_async(
                stop_event=stop,
                reader=ChunkReader(stdin),
                protocol=server.protocol,
                logger=logging.getLogger("pygls.server"),
                error_handler=server.report_server_error,
            )
        )
    except BrokenPipeError:
        log.error("the connection to the client is lost; shutting down")
    except (KeyboardInterrupt, SystemExit):
        pass
    finally:
        server.shutdown()
