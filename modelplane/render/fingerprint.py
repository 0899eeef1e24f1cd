"""A fingerprint per cluster of what an `up` could not take back by applying again: the cluster itself
and its serving stack (or front door), whatever the plan.

Kubernetes objects go through server-side apply, so an object an interrupted `up` created and state
never recorded is adopted by the next `up` (its create is an apply). Two things are not: a cloud or
kind cluster (a second create makes a second cluster) and a Helm release (a second install of the
same name fails). Both come from a cluster's config and its rendered stack, never from the plan, so
an unchanged fingerprint means an `up` only adds, moves or removes replicas, endpoints and routes.
`infra/checkpoints.py` reads it. Drain taints and labels only steer the scheduler: they are left out.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from typing import Any

from ..api import Fleet
from ..api.inference_cluster import ClusterSource
from ..scheduling import PlanResult
from .fleet import cluster_stacks, workload_cluster_parts
from .secrets import cache_token

# Scheduling-only fields of a cluster: changing them changes the plan, not the cluster.
SCHEDULING_ONLY = {"taints", "labels"}


def _source(source: ClusterSource) -> dict[str, Any]:
    """The cluster's source without its secret (an Existing cluster's kubeconfig: rotating it changes nothing)."""
    return source.model_dump(mode="json", by_alias=True, exclude={"existing": {"kubeconfig"}})


def _digest(document: Any, length: int = 16) -> str:
    text = json.dumps(document, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:length]


def infrastructure_fingerprints(fleet: Fleet) -> dict[str, str]:
    """Cluster name -> a digest of its source (and provisioned node pools) and its rendered stack."""
    stacks = {stack.cluster: dataclasses.asdict(stack) for stack in cluster_stacks(fleet)}
    out: dict[str, str] = {}
    for name, cluster in fleet.inference_clusters.items():
        pools = (
            [p.model_dump(mode="json", by_alias=True) for p in cluster.node_pools]
            if _provisioned(cluster.cluster)
            else []
        )
        out[name] = _digest({"source": _source(cluster.cluster), "nodePools": pools, "stack": stacks[name]})
    gateway = fleet.inference_gateway
    if gateway is not None:
        front_door = {"source": _source(gateway.cluster), "stack": stacks[gateway.cluster_name]}
        # a cluster that is both a workload cluster and the front door's: both parts
        out[gateway.cluster_name] = _digest([out.get(gateway.cluster_name), front_door])
    return dict(sorted(out.items()))


def _provisioned(source: ClusterSource) -> bool:
    return source.is_cloud or source.source == "Kind"


def provisioned_clusters(fleet: Fleet) -> set[str]:
    """The clusters (workload or front door) the program creates: a second create would make a second cluster."""
    out = {name for name, cluster in fleet.inference_clusters.items() if _provisioned(cluster.cluster)}
    gateway = fleet.inference_gateway
    if gateway is not None and _provisioned(gateway.cluster):
        out.add(gateway.cluster_name)
    return out


def skippable_clusters(fleet: Fleet) -> list[str]:
    """Workload clusters an `up` may leave out when nothing of theirs changed (`modelplane up`): Existing ones,
    never the front door's (its endpoints and routes change with every placement)."""
    front_door = fleet.inference_gateway.cluster_name if fleet.inference_gateway is not None else None
    return sorted(
        name
        for name, cluster in fleet.inference_clusters.items()
        if cluster.cluster.source == "Existing" and name != front_door
    )


def workload_fingerprints(fleet: Fleet, result: PlanResult, code: str) -> dict[str, str]:
    """Skippable cluster -> a digest of everything the program registers on it for this plan.

    Its config with the kubeconfig in clear (rotated credentials change the provider), its rendered stack,
    namespaces, caches (with their tokens) and replicas, and `code` (`code_digest.code_digest`: the program and
    the Pulumi packages that turn these into resources). Equal digests mean equal registrations, so an `up`
    that leaves the cluster out changes nothing there that a full `up` would have changed. Secret: store it
    only as a Pulumi secret.
    """
    tokens = {
        cache_token(key.namespace, key.name): cache.hugging_face.token.plaintext
        for key, cache in fleet.model_caches.items()
        if cache.hugging_face is not None and cache.hugging_face.token is not None
    }
    out: dict[str, str] = {}
    for name in skippable_clusters(fleet):
        cluster = fleet.inference_clusters[name]
        parts = workload_cluster_parts(fleet, result, name)
        document = {
            "code": code,
            "cluster": cluster.model_dump(
                mode="json", by_alias=True, exclude={"cluster": {"existing": {"kubeconfig"}}}
            ),
            "kubeconfig": cluster.cluster.existing.kubeconfig.plaintext if cluster.cluster.existing else None,
            "stack": dataclasses.asdict(parts.stack),
            "namespaces": parts.namespaces,
            "caches": {str(key): objects for key, objects in parts.caches.items()},
            "tokens": {str(key): tokens.get(cache_token(key.namespace, key.name)) for key in parts.caches},
            "replicas": [[replica.to_dict(), objects] for replica, objects in parts.replicas],
        }
        out[name] = _digest(document, length=64)
    return out
