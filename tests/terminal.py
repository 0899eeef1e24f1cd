"""Run a command with its stderr on a pseudo-terminal, as a user at a shell sees it (progress lines show only there)."""
from __future__ import annotations

import os
import pty
import subprocess


def run_with_terminal_stderr(command: list[str], **kwargs) -> tuple[subprocess.CompletedProcess, str]:
    """`subprocess.run(command)` with stdout captured and stderr a terminal; returns the result and what the
    terminal received."""
    primary, secondary = pty.openpty()
    try:
        done = subprocess.run(command, stdout=subprocess.PIPE, stderr=secondary, text=True, **kwargs)
        os.close(secondary)
        seen = b""
        while True:
            try:
                chunk = os.read(primary, 65536)
            except OSError:  # EIO: the terminal's other end is closed and everything was read
                break
            if not chunk:
                break
            seen += chunk
    finally:
        os.close(primary)
    return done, seen.decode()
