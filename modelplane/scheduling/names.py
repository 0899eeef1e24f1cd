"""Names derived from placement, exactly as the reference system derives them (spec §2).

A replica's name is a function of (deployment, cluster, index), so a replica that leaves a
cluster and comes back to the same index gets the same name again.
"""
from __future__ import annotations

import hashlib

_MAX_PREFIX = 57  # 63 - 5 hex - 1 dash


def _hash5(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:5]


def child_name(*parts: str) -> str:
    """crossplane-function-sdk `resource.child_name`: the joined parts, truncated, plus a hash of them all."""
    full = "-".join(parts)
    return f"{full[:_MAX_PREFIX].rstrip('-')}-{_hash5(full)}"


def opaque_name(visible: str, *discriminators: str) -> str:
    """Only `visible` is readable; the discriminators go into the hash."""
    return f"{visible[:_MAX_PREFIX].rstrip('-')}-{_hash5('-'.join((visible, *discriminators)))}"


def replica_name(deployment: str, cluster: str, index: int) -> str:
    return opaque_name(deployment, cluster, str(index))
