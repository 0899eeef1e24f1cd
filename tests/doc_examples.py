"""The docs' command-line examples: find one in a markdown file, and run `modelplane` as the example does."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
ENV = {**{k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONUNBUFFERED")},
       "PYTHONPATH": str(REPO)}


def modelplane(*args: str, cwd: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-P", "-m", "modelplane", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=120, env={**ENV, **(env or {})})


def blocks(text: str) -> list[list[str]]:
    """The fenced code blocks of a markdown text, as lists of lines (with their newlines)."""
    found, current = [], None
    for line in text.splitlines(keepends=True):
        if line.startswith("```"):
            if current is None:
                current = []
            else:
                found.append(current)
                current = None
        elif current is not None:
            current.append(line)
    return found


def doc_block(doc: str, command: str) -> tuple[str, str]:
    """The line `$ <command>...` in a code block of `doc` (without the `$ `), and the lines after it up to the next `$`.

    A `command` that is not a command line (a warning) is matched as the line itself, and returned as the shown text.
    """
    for lines in blocks((REPO / doc).read_text()):
        for i, line in enumerate(lines):
            if command.startswith("warning:") and line.startswith(command):
                return "", line
            if line.startswith(f"$ {command}"):
                rest = []
                for following in lines[i + 1:]:
                    if following.startswith("$ "):
                        break
                    rest.append(following)
                return line[2:].split("  #")[0].rstrip(), "".join(rest)
    raise AssertionError(f"{doc} has no example of {command}")
