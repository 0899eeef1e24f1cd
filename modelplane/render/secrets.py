"""Secret values never appear in rendered objects: a placeholder names the config field instead.

Rendering is pure and its output is printed (`modelplane render`), diffed and kept in tests, so a
secret (a SaaS API key, a Hugging Face token) is never rendered. Where an object needs one, it
holds `<secret: modelplane:<config path>>` (`PLACEHOLDER` finds them); the Pulumi layer
substitutes the real value as a Pulumi secret (`pulumi.Output.secret`), so it is encrypted in
state and masked in previews.
"""

from __future__ import annotations

import re

from ..api.errors import CONFIG_NAMESPACE

PLACEHOLDER = re.compile(r"<secret: ([^<>]+)>")


def placeholder(*path: str) -> str:
    """`<secret: modelplane:modelEndpoints.ml-team.together.auth.token>` for the config field at `path`."""
    return f"<secret: {CONFIG_NAMESPACE}:{'.'.join(path)}>"
