"""Secret values never appear in rendered objects: a placeholder names the config field instead.

Rendering is pure and its output is printed (`modelplane render`), diffed and kept in tests, so a
secret (a SaaS API key, a Hugging Face token) is never rendered. Where an object needs one, it
holds `<secret: modelplane:<config path>>`; the Pulumi layer finds the placeholders
(`find_placeholders`) and substitutes the real value as a Pulumi secret (`pulumi.Output.secret`),
so it is encrypted in state and masked in previews.
"""
from __future__ import annotations

import re
from typing import Any, Iterator

from ..api.errors import CONFIG_NAMESPACE

PLACEHOLDER = re.compile(r"<secret: ([^<>]+)>")


def placeholder(*path: str) -> str:
    """`<secret: modelplane:modelEndpoints.ml-team.together.auth.token>` for the config field at `path`."""
    return f"<secret: {CONFIG_NAMESPACE}:{'.'.join(path)}>"


def find_placeholders(obj: Any) -> Iterator[tuple[tuple[str | int, ...], str]]:
    """(location in `obj`, config key) of every placeholder, depth first, in order."""
    def walk(value: Any, where: tuple[str | int, ...]) -> Iterator[tuple[tuple[str | int, ...], str]]:
        if isinstance(value, dict):
            for key, item in value.items():
                yield from walk(item, where + (key,))
        elif isinstance(value, list):
            for i, item in enumerate(value):
                yield from walk(item, where + (i,))
        elif isinstance(value, str):
            for match in PLACEHOLDER.finditer(value):
                yield where, match.group(1)

    yield from walk(obj, ())
