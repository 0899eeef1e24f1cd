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


def endpoint_token(namespace: str, name: str) -> str:
    """The placeholder of a hand-made endpoint's `auth.token`."""
    return placeholder("modelEndpoints", namespace, name, "auth", "token")


def cache_token(namespace: str, name: str) -> str:
    """The placeholder of a model cache's `huggingFace.token`."""
    return placeholder("modelCaches", namespace, name, "huggingFace", "token")


def credential(scheme: str, token: str) -> str:
    """The header value a hand-made endpoint is sent: `<scheme> <token>`, the bare token when the scheme is ''."""
    return f"{scheme} {token}" if scheme else token
