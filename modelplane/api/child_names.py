"""Names of the objects derived from one object's name, and the check that two endpoints' never clash.

`child_name` is crossplane-function-sdk's `resource.child_name` (the joined parts cut to 57
characters, then 5 hex digits of a SHA-256 of them all): two names that agree in their first 57
characters get children that differ only in those 20 bits, so two long endpoint names can
derive the same child name. `render` would then refuse the stack as a bug; `validate` refuses
it first, naming both endpoints.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping

from .errors import ConfigIssue

MAX_PREFIX = 57  # 63 - 5 hex - 1 dash
# What the front doors derive from a hand-made endpoint's name (render/front_door.py, front_door_envoy.py);
# tests/test_child_names.py checks this list against what render makes.
ENDPOINT_CHILDREN = ("upstream", "healthy", "base-path", "fallback", "auth", "hop", "path", "host")


def hash5(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:5]


def child_name(*parts: str) -> str:
    """crossplane-function-sdk `resource.child_name`: the joined parts, truncated, plus a hash of them all."""
    full = "-".join(parts)
    return f"{full[:MAX_PREFIX].rstrip('-')}-{hash5(full)}"


def endpoint_name_clashes(endpoints: Mapping, key: str = "modelEndpoints") -> list[ConfigIssue]:
    """One issue per endpoint (a `NamespacedName` key of `endpoints`) some of whose objects would be named like
    an object of an earlier endpoint of its namespace."""
    owners: dict[tuple[str, str], tuple[str, str]] = {}  # (namespace, object name) -> (endpoint, what)
    issues = []
    for endpoint in sorted(endpoints, key=lambda k: (k.namespace, k.name)):
        derived = [(endpoint.name, "its Service")] + [
            (child_name(endpoint.name, s), f"its {s} object") for s in ENDPOINT_CHILDREN
        ]
        for name, what in derived:
            other = owners.get((endpoint.namespace, name))
            if other is not None and other[0] != endpoint.name:
                issues.append(
                    ConfigIssue(
                        (key, endpoint.namespace, endpoint.name),
                        (
                            f"{what} would be named {name}, as is {other[1]} of endpoint {other[0]}: names that agree in "
                            f"their first {MAX_PREFIX} characters can derive the same object name; shorten or rename one "
                            "of the two endpoints"
                        ),
                    )
                )
                break
        for name, what in derived:
            owners.setdefault((endpoint.namespace, name), (endpoint.name, what))
    return issues
