"""Errors a user can cause, each naming the stack-config path to fix."""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable, Sequence

CONFIG_NAMESPACE = "modelplane"

_PLAIN_KEY = re.compile(r"^[A-Za-z0-9_-]+$")

PathPart = str | int


def format_path(parts: Sequence[PathPart]) -> str:
    """`("modelDeployments", "ml-team", "x", "engines", 0)` -> `modelplane:modelDeployments.ml-team.x.engines[0]`.

    Keys that `pulumi config set --path` could not read bare (dots, slashes) are quoted the
    way it expects: `labels["modelplane.ai/region"]`.
    """
    text = f"{CONFIG_NAMESPACE}:"
    for i, part in enumerate(parts):
        if isinstance(part, int):
            text += f"[{part}]"
        elif _PLAIN_KEY.match(part):
            text += part if i == 0 else f".{part}"
        else:
            text += f'["{part}"]'
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


class ConfigError(ModelplaneError):
    """The stack config is invalid. Holds every issue found, not only the first."""

    def __init__(self, issues: Iterable[ConfigIssue]):
        self.issues = sorted(set(issues), key=ConfigIssue.sort_key)
        noun = "error" if len(self.issues) == 1 else "errors"
        lines = [f"{len(self.issues)} {noun} in the modelplane stack config:"]
        lines += [f"  {issue}" for issue in self.issues]
        super().__init__("\n".join(lines))


class StackFileError(ModelplaneError):
    """The stack file itself cannot be found or read (not a field-level problem)."""
