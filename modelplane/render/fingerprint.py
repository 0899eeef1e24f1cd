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
from .fleet import cluster_stacks

# Scheduling-only fields of a cluster: changing them changes the plan, not the cluster.
SCHEDULING_ONLY = {"taints", "labels"}


def _source(source: ClusterSource) -> dict[str, Any]:
    """The cluster's source without its secret (an Existing cluster's kubeconfig: rotating it changes nothing)."""
    return source.model_dump(mode="json", by_alias=True, exclude={"existing": {"kubeconfig"}})


def _digest(document: Any) -> str:
    text = json.dumps(document, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


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
