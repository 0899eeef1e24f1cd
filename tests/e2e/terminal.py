"""A terminal for one command, as a user's: `python tests/e2e/terminal.py ROWS COLUMNS COMMAND [ARG...]`.

The command's stdin, stdout and stderr are one pseudo-terminal of ROWS x COLUMNS, so the Pulumi CLI draws its
interactive progress display. Like a terminal emulator, this reads everything at once and answers the queries
the CLI sends when it starts (the background colour, the cursor position): unanswered, each waits for a
timeout (5 s in all). What the command printed, up to its last 256 KB, goes to stdout once it has ended; the
exit status is the command's. Standalone (no imports from the harness): tests/e2e/engine.py runs it by path.
"""
from __future__ import annotations

import contextlib
import ctypes
import fcntl
import os
import struct
import subprocess
import sys
import termios

KEEP = 1 << 18  # bytes of output kept for the report
# What the CLI asks a terminal when it starts, and what a dark terminal answers (xterm's forms).
ANSWERS = {b"\x1b]11;?": b"\x1b]11;rgb:0000/0000/0000\x1b\\", b"\x1b]10;?": b"\x1b]10;rgb:ffff/ffff/ffff\x1b\\",
           b"\x1b[6n": b"\x1b[1;1R"}
LONGEST_QUERY = max(map(len, ANSWERS))
_PR_SET_NAME = 15


def answers(seen: bytes, chunk: bytes) -> bytes:
    """The replies to the queries that end in `chunk` (`seen`: what came before it, for a query split in two)."""
    text = seen[-(LONGEST_QUERY - 1):] + chunk
    start = len(text) - len(chunk)
    found = []
    for query, reply in ANSWERS.items():  # bytes.find: a frame of the progress display is kilobytes, many a second
        at = text.find(query, max(0, start - len(query) + 1))
        while at != -1:
            found.append((at, reply))
            at = text.find(query, at + 1)
    return b"".join(reply for _, reply in sorted(found))


def main(argv: list[str]) -> int:
    rows, columns, *command = argv
    with contextlib.suppress(OSError, AttributeError):  # named for what it is in process listings: the harness
        ctypes.CDLL(None).prctl(_PR_SET_NAME, b"terminal", 0, 0, 0)  # counts `python` processes as the program
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", int(rows), int(columns), 0, 0))
    environment = dict(os.environ)
    if environment.get("TERM", "dumb") in ("", "dumb"):
        environment["TERM"] = "xterm-256color"
    environment.pop("CI", None)  # the CLI draws no progress display where it sees CI
    process = subprocess.Popen(command, stdin=slave, stdout=slave, stderr=slave, env=environment)
    os.close(slave)  # the command holds it now: reading the master fails once the command is gone
    received = bytearray()
    while True:
        try:
            chunk = os.read(master, 1 << 16)
        except OSError:  # EIO: every holder of the other side has closed it
            break
        if not chunk:
            break
        reply = answers(received, chunk)
        if reply:
            os.write(master, reply)
        received += chunk
        del received[:-KEEP]
    os.close(master)
    sys.stdout.buffer.write(received)
    sys.stdout.flush()
    return process.wait()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
