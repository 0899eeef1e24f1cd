"""Errors a user can cause, each naming the stack-config path to fix."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

CONFIG_NAMESPACE = "modelplane"

_PLAIN_KEY = re.compile(r"[A-Za-z0-9_-]+")

PathPart = str | int

SHOWN_TEXT_LIMIT = 48  # characters of a value echoed in a message
MAX_KEY_SHOWN = 320  # a label key can be 317 characters (253 prefix + '/' + 63 name)
_MAX_INT_SHOWN = 10**40
HIDDEN_NOTE = "not shown: this config key holds secrets; `modelplane validate` shows it"

# Set while validating config that may hold decrypted secrets anywhere (a Pulumi config key the
# engine marks secret): then no text value is echoed in a message, only described.
_HIDE_TEXT: ContextVar[bool] = ContextVar("modelplane_hide_text", default=False)


@contextmanager
def text_hidden(hide: bool = True) -> Iterator[None]:
    token = _HIDE_TEXT.set(hide or _HIDE_TEXT.get())
    try:
        yield
    finally:
        _HIDE_TEXT.reset(token)


def shown(value: Any, limit: int = SHOWN_TEXT_LIMIT) -> str:
    """A user's value as it may appear in a message: one short line, quoted text, YAML words.

    Text is cut to `limit` characters and escaped (a newline shows as \\n), numbers too long to
    read are described, and while `text_hidden()` is in force text is never shown at all.
    """
    if value is None or isinstance(value, bool):
        return {True: "true", False: "false", None: "null"}[value]
    if (description := getattr(type(value), "shown_as", None)) is not None:
        return description  # a secret, or a value the file reader already refused
    if isinstance(value, int):
        if -_MAX_INT_SHOWN < value < _MAX_INT_SHOWN:
            return str(value)
        digits = int(value.bit_length() * 0.30103) + 1  # never str(): it fails past 4300 digits
        return f"a number of about {digits:,} digits"
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, str):
        if _HIDE_TEXT.get():
            return f"text of {len(value):,} characters ({HIDDEN_NOTE})"
        return quoted(without_credentials(value), limit)
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, (list, tuple)):
        return "a list"
    return type(value).__name__


# `scheme://` then anything up to the last `@` of the same word: a URL's user and password, however
# they are written (a password may hold '/', ':' or '#', which URL parsers take for the path or port).
_URL_CREDENTIALS = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*://)[^\s]*@")


def without_credentials(text: str) -> str:
    """`text` with any URL's `user:password@` shown as `***@`."""
    return _URL_CREDENTIALS.sub(r"\1***@", text) if "@" in text else text


def quoted(text: str, limit: int = SHOWN_TEXT_LIMIT) -> str:
    """`'text'` on one line: control characters escaped, cut after `limit` characters."""
    if len(text) <= limit:
        return repr(text)
    head = repr(text[:limit])
    return f"{head[:-1]}...{head[-1]} ({len(text):,} characters)"


def _key_text(key: str) -> str:
    """A mapping key inside `["..."]`: escaped like JSON, so a newline or a quote stays visible."""
    body = key if len(key) <= MAX_KEY_SHOWN else key[:MAX_KEY_SHOWN]
    escaped = "".join(_escape(c) for c in body)
    return escaped + (f"...({len(key):,} characters)" if len(key) > MAX_KEY_SHOWN else "")


def _escape(char: str) -> str:
    if char in ('"', "\\"):
        return "\\" + char
    if char.isprintable():
        return char
    return repr(char)[1:-1]


def format_path(parts: Sequence[PathPart]) -> str:
    """`("modelDeployments", "ml-team", "x", "engines", 0)` -> `modelplane:modelDeployments.ml-team.x.engines[0]`.

    Keys that `pulumi config set --path` could not read bare (dots, slashes) are quoted the
    way it expects: `labels["modelplane.ai/region"]`.
    """
    text = f"{CONFIG_NAMESPACE}:"
    for i, part in enumerate(parts):
        if isinstance(part, int):
            text += f"[{part}]"
        elif _PLAIN_KEY.fullmatch(part):
            text += part if i == 0 else f".{part}"
        else:
            text += f'["{_key_text(part)}"]'
    return text


@dataclass(frozen=True, order=True)
class ConfigIssue:
    """One problem in the stack config: where it is and what to do about it."""

    path: tuple[PathPart, ...]
    message: str

    def __str__(self) -> str:
        return f"{format_path(self.path)}: {self.message}"

    def sort_key(self) -> tuple:
        return tuple((0, p) if isinstance(p, int) else (1, p) for p in self.path), self.message


class ModelplaneError(Exception):
    """Base class of every error a user can cause; the CLI exits 2 on these, without a traceback."""


class SourceFile(Protocol):
    """A file config issues are located in (a `stackfile.StackFile`)."""

    @property
    def path(self) -> Path: ...

    def line_of(self, path: tuple[PathPart, ...]) -> int | None: ...


class ConfigError(ModelplaneError):
    """The stack config is invalid. Holds every issue found, not only the first.

    The command fills in what the printer needs: `stack_file`, the file the issues are in (their lines
    are shown), and `unchanged`, True when an edit was refused and the file left as it was.
    """

    stack_file: SourceFile | None = None
    unchanged: bool = False

    def __init__(self, issues: Iterable[ConfigIssue]):
        self.issues = sorted(set(issues), key=ConfigIssue.sort_key)
        noun = "error" if len(self.issues) == 1 else "errors"
        lines = [f"{len(self.issues)} {noun} in the modelplane stack config:"]
        lines += [f"  {issue}" for issue in self.issues]
        super().__init__("\n".join(lines))


class StackFileError(ModelplaneError):
    """The stack file itself cannot be found or read (not a field-level problem)."""
