"""Progress reports and cancellation for long work (a profile conversion, a compile): the one vocabulary
the services, the CLI and the editor share, so none of them imports another's module for it.

`Progress` is the callback a long job calls with a message and the fraction done (None when unknown);
the editor turns it into `$/progress`, the CLI into a status line. A `CancelToken` is how a caller (the
editor's progress bar, a shutdown) stops the job from another thread: a job that runs a child process
registers a callback that kills it, and the callback runs at once, even when the token was already
cancelled. `Cancelled` is what a job raises when it stopped because of its token.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field

Progress = Callable[[str, float | None], None]  # (message, fraction done or None)


class Cancelled(Exception):
    """The user cancelled the conversion."""


@dataclass
class CancelToken:
    """Cancels a conversion from another thread: callbacks run at once (the child is killed)."""

    cancelled: bool = False
    _callbacks: list[Callable[[], None]] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def cancel(self) -> None:
        with self._lock:
            self.cancelled = True
            cbs, self._callbacks = self._callbacks, []
        for cb in cbs:
            cb()

    def on_cancel(self, cb: Callable[[], None]) -> None:
        with self._lock:
            if not self.cancelled:
                self._callbacks.append(cb)
                return
        cb()
