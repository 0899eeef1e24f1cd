"""Names derived from placement, exactly as the reference system derives them (spec §2).

A replica's name is a function of (deployment, cluster, index), so a replica that leaves a
cluster and comes back to the same index gets the same name again.
"""

from __future__ import annotations

from ..api.child_names import MAX_PREFIX as _MAX_PREFIX
from ..api.child_names import child_name  # noqa: F401 - where render and scheduling import it from
from ..api.child_names import hash5 as _hash5


def opaque_name(visible: str, *discriminators: str) -> str:
    """Only `visible` is readable; the discriminators go into the hash."""
    return f"{visible[:_MAX_PREFIX].rstrip('-')}-{_hash5('-'.join((visible, *discriminators)))}"


def replica_name(deployment: str, cluster: str, index: int) -> str:
    return opaque_name(deployment, cluster, str(index))


_MAX_TRIES = 256  # a clash needs 5 equal hex digits; 256 in a row does not happen


def replica_name_candidates(deployment: str, cluster: str, index: int):
    """The reference's name first, then deterministic alternatives for when it is taken."""
    yield replica_name(deployment, cluster, index)
    for attempt in range(1, _MAX_TRIES):
        yield opaque_name(deployment, cluster, str(index), str(attempt))


class NameBook:
    """Replica names per namespace: unique, deterministic, and stable across runs.

    A replica keeps the name it had while that name is one of its own candidates and free; a new
    replica takes the first free candidate. Names reserved for another identity (a hand-made
    ModelEndpoint, a replica leaving in this plan) are not free to it.
    """

    def __init__(self) -> None:
        self._owner: dict[tuple[str, str], object] = {}  # (namespace, name) -> identity holding it

    def reserve(self, namespace: str, name: str, identity: object) -> None:
        self._owner.setdefault((namespace, name), identity)

    def _free(self, namespace: str, name: str, identity: object) -> bool:
        return self._owner.get((namespace, name), identity) == identity

    def assign(self, namespace: str, deployment: str, cluster: str, index: int, previous: str | None = None) -> str:
        identity = replica_identity(deployment, cluster, index)
        if (
            previous is not None
            and self._free(namespace, previous, identity)
            and previous in replica_name_candidates(deployment, cluster, index)
        ):
            chosen = previous
        else:
            found = next(
                (c for c in replica_name_candidates(deployment, cluster, index) if self._free(namespace, c, identity)),
                None,
            )
            if found is None:
                raise RuntimeError(f"no free name for {namespace}/{deployment} on {cluster} index {index}")
            chosen = found
        self._owner[(namespace, chosen)] = identity
        return chosen


def replica_identity(deployment: str, cluster: str, index: int) -> tuple:
    return ("replica", deployment, cluster, index)
