"""One self-overwriting progress line on stderr, shown only when stderr is a terminal (as kubectl and pip do).

Piped or redirected output never carries it, so scripts and logs see only the command's result.
"""

from __future__ import annotations

import sys
import threading
from typing import TextIO


class Progress:
    """`progress(text)` replaces the line; `progress.done()` clears it before the result is printed.

    Safe to call from worker threads (status reads clusters in parallel)."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self.stream = stream or sys.stderr
        self.shown = self.stream.isatty()
        self._lock = threading.Lock()

    def __call__(self, text: str) -> None:
        if self.shown:
            with self._lock:
                try:
                    self.stream.write(f"\r\033[K{text}")
                    self.stream.flush()
                except OSError:  # the terminal went away: the command's work goes on without the line
                    self.shown = False

    def counter(self, what: str, total: int):
        """A callback for `done` of `total` items: "<what> (3/10)..."."""
        self(f"{what} (0/{total})...")
        return lambda done: self(f"{what} ({done}/{total})...")

    def done(self) -> None:
        self("")
