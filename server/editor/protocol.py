"""The server's protocol: pygls' LanguageServerProtocol with one leak closed.

pygls 2.1.1 keeps the future of each handler it runs as a generator or a coroutine in `_request_futures`, under the
request's id so that `$/cancelRequest` finds it, and removes it when it answers the request. A notification has no
answer: its built-in handlers (didOpen, didChange, didSave, didClose, which then call ASAP's) are generators, so each
notification left a future there under a fresh uuid, for as long as the server ran (bench/soak.py: 2.2 a saved edit,
the server 4 MiB larger each thousand edits; tracemalloc: pygls/protocol/json_rpc.py `_execute_handler`). Here each
such future, once done, leaves the table when the next message is handled: not at once, since pygls' shutdown
cancels the futures while it iterates over that table (a request's is still found by its cancel while it runs).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any

from pygls.protocol import LanguageServerProtocol


class Protocol(LanguageServerProtocol):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._finished: deque[tuple[Any, Any]] = deque()  # (message id, its future), done: appended from any thread

    def _execute_handler(
        self,
        msg_id: Any,
        handler: Any,
        callback: Callable[[Any], None],
        args: tuple[Any, ...] | None = None,
        kwargs: dict[str, Any] | None = None,
    ) -> None:
        while self._finished:
            done_id, future = self._finished.popleft()
            if self._request_futures.get(done_id) is future:
                del self._request_futures[done_id]

        def done(future: Any) -> None:
            self._finished.append((msg_id, future))
            callback(future)

        super()._execute_handler(msg_id, handler, done, args, kwargs)
