"""The server's stdin reader (server/editor/stdio.py) over a real pipe: what pygls' message loop reads from it is
the bytes written, however they are split into writes, and end of input ends it."""

from __future__ import annotations

import asyncio
import itertools
import os
import threading

from server.editor.stdio import ChunkReader


def _message(body: bytes) -> bytes:
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


async def _read_messages(reader: ChunkReader) -> list[bytes]:
    """pygls' framing, as pygls.io_.run_async reads it."""
    out: list[bytes] = []
    length = 0
    while True:
        header = await reader.readline()
        if not header:
            return out
        if header.startswith(b"Content-Length: "):
            length = int(header.split(b":")[1])
        elif header == b"\r\n":
            out.append(await reader.readexactly(length))


def test_stdio_reader_returns_every_message_however_the_writes_split_them():
    bodies = [b'{"a": %d}' % i + b" " * (i * 997 % 70_000) for i in range(40)]  # some over a 64 KiB chunk
    data = b"".join(_message(b) for b in bodies)
    cuts = [0, 1, 7, 18, 19, 20, 21, 4096, 65_535, 65_536, 65_537, 200_000, len(data)]
    r, w = os.pipe()

    def write() -> None:
        with os.fdopen(w, "wb", buffering=0) as out:
            for a, b in itertools.pairwise(cuts):
                out.write(data[a:b])  # header lines and bodies split across writes

    with os.fdopen(r, "rb", buffering=0) as stdin:
        writer = threading.Thread(target=write)
        writer.start()
        got = asyncio.run(_read_messages(ChunkReader(stdin)))
        writer.join()
    assert got == bodies


def test_stdio_reader_at_end_of_input_returns_what_is_left_then_nothing():
    r, w = os.pipe()
    os.write(w, b"Content-Length: 10\r\n\r\nabc")
    os.close(w)

    async def read() -> tuple[bytes, bytes, bytes, bytes]:
        reader = ChunkReader(os.fdopen(r, "rb", buffering=0))
        return (await reader.readline(), await reader.readline(), await reader.readexactly(10), await reader.readline())

    assert asyncio.run(read()) == (b"Content-Length: 10\r\n", b"\r\n", b"abc", b"")
