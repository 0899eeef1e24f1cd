"""Hard time limits for status's network reads.

A socket timeout bounds one read, not an answer: a server that trickles one byte every 2 s never
trips a 5 s timeout. `Watchdog` shuts the sockets it guards down when its deadline passes, so a
read blocked on such a server returns then. `gather` runs work items on daemon threads and returns
by an overall deadline whatever a thread is stuck in (a DNS lookup, a plugin), with the late items'
fallback result in their place; an exception in one item becomes that item's result, never the
whole command's traceback.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Callable, Sequence
from typing import TypeVar

T = TypeVar("T")
R = TypeVar("R")


class Watchdog:
    """Shuts down every socket it guards once `time.monotonic()` passes `deadline`."""

    def __init__(self, deadline: float) -> None:
        self.deadline = deadline
        self.expired = False
        self._sockets: set[socket.socket] = set()
        self._lock = threading.Lock()
        self._timer = threading.Timer(max(0.0, deadline - time.monotonic()), self._expire)
        self._timer.daemon = True
        self._timer.start()

    def guard(self, sock: socket.socket) -> None:
        with self._lock:
            self._sockets.add(sock)
            if self.expired:
                _shutdown(sock)

    def release(self, sock: socket.socket | None) -> None:
        with self._lock:
            self._sockets.discard(sock)

    def cancel(self) -> None:
        self._timer.cancel()
        with self._lock:
            self._sockets.clear()

    def _expire(self) -> None:
        with self._lock:
            self.expired = True
            for sock in self._sockets:
                _shutdown(sock)


def _shutdown(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):  # already closed
        sock.shutdown(socket.SHUT_RDWR)


def gather(
    work: Callable[[T], R],
    items: Sequence[T],
    workers: int,
    seconds: float,
    late: Callable[[T], R],
    failed: Callable[[T, Exception], R],
    on_done: Callable[[int], None] = lambda done: None,
) -> list[R]:
    """`work(item)` for every item, at most `workers` at a time, all within `seconds`: an item not done
    by then gets `late(item)`, one that raised gets `failed(item, error)`. `on_done(n)` is told each time
    an item finishes, with how many have (for a progress line)."""
    if not items:
        return []
    results: dict[int, R] = {}
    lock = threading.Lock()
    all_done = threading.Event()
    queue = iter(range(len(items)))

    def worker() -> None:
        while True:
            with lock:
                index = next(queue, None)
            if index is None:
                return
            try:
                result = work(items[index])
            except Exception as error:
                result = failed(items[index], error)
            with lock:
                results[index] = result
                on_done(len(results))
                if len(results) == len(items):
                    all_done.set()

    for _ in range(min(workers, len(items))):
        threading.Thread(target=worker, daemon=True).start()
    all_done.wait(seconds)
    with lock:
        done = dict(results)
    return [done[i] if i in done else late(item) for i, item in enumerate(items)]
