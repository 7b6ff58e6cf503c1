"""Work-done progress in the client, one way for every long job (agents, compiles, profile conversion, analyze).

    async with client_progress(ls, "ASAP: TPU compiler", "c.yml", cancel=token) as progress:
        await loop.run_in_executor(None, lambda: work(progress.report))

`report` may be called from any thread. When the client shows progress and a `cancel` token or `on_cancel` is
given, the bar is cancellable and its cancel reaches them. A client without work-done progress gets nothing, and
the job runs the same.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

from lsprotocol import types as lsp

from server.common.progress import CancelToken

if TYPE_CHECKING:
    from pygls.lsp.server import LanguageServer


class ClientProgress:
    """One progress bar: `report` (thread-safe), and `end_message` shown when it closes."""

    def __init__(self, ls: LanguageServer, token: str | None, loop: asyncio.AbstractEventLoop) -> None:
        self.ls, self.token, self.loop = ls, token, loop
        self.end_message: str | None = None

    @property
    def shown(self) -> bool:
        return self.token is not None

    def report(self, message: str, fraction: float | None = None) -> None:
        if self.token is None:
            return
        pct = None if fraction is None else round(100 * fraction)
        value = lsp.WorkDoneProgressReport(message=message, percentage=pct)
        self.loop.call_soon_threadsafe(self.ls.work_done_progress.report, self.token, value)


@asynccontextmanager
async def client_progress(
    ls: LanguageServer,
    title: str,
    message: str,
    cancel: CancelToken | None = None,
    on_cancel: Callable[[], object] | None = None,
    enabled: bool = True,
) -> AsyncIterator[ClientProgress]:
    loop = asyncio.get_running_loop()
    cancellable = cancel is not None or on_cancel is not None
    token = await _begin(ls, title, message, cancellable) if enabled else None
    progress = ClientProgress(ls, token, loop)
    if token is not None and cancellable:
        fut = ls.work_done_progress.tokens.get(token)
        if fut is not None:

            def cancelled(f: Any) -> None:
                if f.cancelled():
                    if cancel is not None:
                        cancel.cancel()
                    if on_cancel is not None:
                        on_cancel()

            fut.add_done_callback(cancelled)
    try:
        yield progress
    finally:
        if token is not None:
            ls.work_done_progress.end(token, lsp.WorkDoneProgressEnd(message=progress.end_message))
            ls.work_done_progress.tokens.pop(token, None)  # pygls keeps every token's future otherwise


async def _begin(ls: LanguageServer, title: str, message: str, cancellable: bool) -> str | None:
    """A new progress token, begun; None when the client does not show work-done progress or refuses one."""
    window = ls.client_capabilities.window
    if getattr(ls, "shutting_down", False) or window is None or not window.work_done_progress:
        return None
    token = f"asap-{title.split(':')[-1].strip().split()[0].lower()}-{id(message)}-{asyncio.get_running_loop().time()}"
    try:
        # shielded: a task cancelled while the client answers must not cancel pygls' own future (pygls then fails
        # to set the answer on it and logs an InvalidStateError)
        await asyncio.shield(ls.work_done_progress.create_async(token))
    except Exception:  # the client refused: run without a progress bar
        return None
    ls.work_done_progress.begin(
        token, lsp.WorkDoneProgressBegin(title=title, message=message, cancellable=cancellable or None)
    )
    return token
