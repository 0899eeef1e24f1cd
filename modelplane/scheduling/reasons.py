"""Typed reasons why a cluster or pool cannot take a replica (the scheduler framework's filter statuses).

Each reason has a `code`, a `summary` that aggregates across clusters ("untolerated taint
modelplane.ai/drain (NoExecute)") and a `detail` naming the member, request, expression or pool.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Literal

ReasonCode = Literal[
    # a cluster or pool filter said no
    "NotSelected",
    "NotPreferred",
    "UntoleratedTaint",
    "OutsideCacheFootprint",
    "NoCacheStorage",
    "NoPools",
    "SelectorMismatch",
    "SelectorError",
    "OnlySynthetic",
    "InsufficientCapacity",
    # a previous replica is not kept
    "ClusterRemoved",
    "DeploymentRemoved",
    "NoLongerFits",
    "ScaledDown",
    "Evicted",
    "FailedBack",
]


@dataclass(frozen=True)
class Reason:
    code: ReasonCode
    summary: str
    detail: str

    def to_dict(self) -> dict:
        return {"code": self.code, "summary": self.summary, "detail": self.detail}


def not_selected(missing: dict[str, str]) -> Reason:
    pairs = ", ".join(f"{k}={v}" for k, v in sorted(missing.items()))
    return Reason("NotSelected", "not matched by clusterSelector", f"cluster lacks the labels {pairs}")


def not_preferred(tiers: int) -> Reason:
    return Reason(
        "NotPreferred",
        "in no placement preference tier",
        f"the cluster matches none of the deployment's {tiers} placement preferences",
    )


def failed_back(cluster: str, tier: int, was: int) -> Reason:
    return Reason(
        "FailedBack",
        f"moved to preference tier {tier + 1}",
        f"failback WhenRoom: cluster {cluster} in tier {tier + 1} has room, the replica was in tier {was + 1}; "
        "its replacement is made before it is removed",
    )


def outside_cache(cache_labels: dict[str, str]) -> Reason:
    pairs = ", ".join(f"{k}={v}" for k, v in sorted(cache_labels.items()))
    return Reason(
        "OutsideCacheFootprint",
        "outside the ModelCache footprint",
        f"the ModelCache is staged only on clusters labelled {pairs}",
    )


def no_cache_storage(cache: str) -> Reason:
    return Reason(
        "NoCacheStorage",
        "no ReadWriteMany storage for the ModelCache",
        f"the deployment mounts ModelCache {cache}, which stages only on clusters with a ReadWriteMany "
        "StorageClass, and this cluster has none (cloud clusters have one; an Existing cluster needs "
        "existing.cache.storageClassName; Kind has none)",
    )


def untolerated_taint(key: str, value: str | None, effect: str) -> Reason:
    shown = f"{key}={value}" if value else key
    return Reason(
        "UntoleratedTaint",
        f"untolerated taint {shown} ({effect})",
        f"the cluster is tainted {shown}:{effect} and the deployment does not tolerate it",
    )


def evicted(key: str, value: str | None) -> Reason:
    shown = f"{key}={value}" if value else key
    return Reason(
        "Evicted",
        f"evicted by taint {shown} (NoExecute)",
        f"the cluster is tainted {shown}:NoExecute, which moves existing replicas off it",
    )


def no_pools() -> Reason:
    return Reason("NoPools", "no node pools", "the cluster publishes no node pools")


def selector_mismatch(engine: str, member: int, request: str, expression: str, pool: str) -> Reason:
    return Reason(
        "SelectorMismatch",
        f"no device matches engine {engine} request {request}",
        f"pool {pool}: no device has enough free count and satisfies engine {engine} member {member} "
        f"request {request}: {expression}",
    )


def selector_error(
    engine: str, member: int, request: str, expression: str, pool: str, device: str, message: str
) -> Reason:
    return Reason(
        "SelectorError",
        f"selector error for engine {engine} request {request}",
        f"pool {pool}: engine {engine} member {member} request {request}: `{expression}` fails on device "
        f"{device}: {message} (Kubernetes would abort allocation, so modelplane never places it here)",
    )


def only_synthetic(engine: str, pool: str) -> Reason:
    return Reason(
        "OnlySynthetic",
        f"engine {engine} matches only Synthetic devices",
        f"pool {pool}: engine {engine} would claim no DRA device (only Synthetic devices matched); "
        "at least one device must be claimable",
    )


def insufficient_capacity(pool: str, needed: int, free: int) -> Reason:
    return Reason(
        "InsufficientCapacity",
        f"insufficient capacity (needs {needed} node{'s' if needed != 1 else ''}, {free} free)",
        f"pool {pool}: needs {needed} node{'s' if needed != 1 else ''}, {free} free",
    )


def pods_text(pods: tuple[tuple[int, ...], ...], kinds: tuple[str, ...] = ()) -> str:
    """'1 gpu', '2 × 1 gpu' or '1 × 4 gpu + 2 × 1 gpu': a replica's pods grouped by what each takes on one node."""  # noqa: RUF002 - the text shows a multiplication sign
    groups = Counter(pods)
    if len(pods) == 1:
        return vector_text(pods[0], kinds)
    return " + ".join(
        f"{n} \u00d7 {vector_text(v, kinds)}" for v, n in sorted(groups.items(), key=lambda kv: (-sum(kv[0]), kv[0]))
    )


def vector_text(vector: tuple[int, ...], kinds: tuple[str, ...] = ()) -> str:
    """'1 gpu', '2 gpu + 1 nic': devices per kind (kinds unnamed: 'devices')."""
    if not kinds:
        return f"{sum(vector)} device{'s' if sum(vector) != 1 else ''}"
    return " + ".join(f"{n} {kind}" for n, kind in zip(vector, kinds, strict=False) if n) or "0 devices"


def insufficient_devices(
    pool: str, pods: tuple[tuple[int, ...], ...], kinds: tuple[str, ...], free: int, nodes: int, largest: int
) -> Reason:
    """Device-granular capacity: what the pods need against the pool's free devices and how they lie."""
    needs = pods_text(pods, kinds)
    fragmented = free >= sum(sum(p) for p in pods)
    detail = f"pool {pool}: needs {needs}, {free} free across {nodes} node{'s' if nodes != 1 else ''}" + (
        f" (fragmented: largest free block {largest})" if fragmented else ""
    )
    summary = f"insufficient capacity (needs {needs}, {free} free{', fragmented' if fragmented else ''})"
    return Reason("InsufficientCapacity", summary, detail)


def no_longer_fits(detail: str) -> Reason:
    return Reason("NoLongerFits", "replica no longer fits its pinned pool", detail)


def summarize(available: int, total: int, primary: list[Reason]) -> str:
    """'0/3 clusters are available: 1 untolerated taint x (NoExecute), 2 insufficient capacity (...)'."""
    counts = Counter(reason.summary for reason in primary)
    parts = ", ".join(f"{n} {summary}" for summary, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))
    return f"{available}/{total} clusters are available" + (f": {parts}" if parts else "")
