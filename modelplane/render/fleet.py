"""The whole fleet's objects, Helm releases and remote manifests, per cluster: a pure function of config and plan.

Each cluster's part that does not depend on the plan is a `ClusterStack` (`workload_stack`,
`front_door.front_door_stack`): the Pulumi layer builds its clusters from exactly these, and adds
the plan-dependent parts (tenant namespaces, caches, replicas, endpoints, routes) from
`workload_cluster_parts` and `front_door.front_door_parts`. What `modelplane render` shows is the
same data (`render_fleet`).

A workload cluster gets, in install order:

1. its remote manifests (the Gateway API Inference Extension CRDs);
2. the objects its backend needs (a cloud cluster's ReadWriteMany StorageClass);
3. on kind, MetalLB (its namespace, IPAddressPool and L2Advertisement; the release) with the
   cluster's range of the kind network (`metallb.kind_address_pools`);
4. the serving stack (`render_serving_stack`);
5. the tenants' namespaces, the ModelCaches staged there, the replicas placed there (each
   replica's configuration, then its workloads).

Objects are listed in apply order: within the stack, those that wait for nothing come first (every
release waits for them: charts' pods are admitted against their namespaces and quotas), then those
a release or remote manifest serves (`waits_for` names which). Releases install in `depends_on`
order, each also after the remote manifests `release_waits_for` names.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from ..api import Fleet, NamespacedName
from ..scheduling import PlacedReplica, PlanResult
from ..scheduling.names import child_name
from . import front_door
from . import metallb as lb
from . import objects as k8s
from . import serving_stack as ss
from .cache import cache_storage_class, render_cache, storage_classes
from .front_door import front_door_parts, front_door_stack
from .metallb import KIND_NETWORK, kind_address_pools, kind_cluster_names
from .replica import render_replica
from .sources import Sources, mirror_manifest, mirror_release, mirror_sources
from .types import (
    MANAGED_BY,
    WORKLOAD_GATEWAY,
    WORKLOAD_KINDS,
    ClusterManifests,
    ClusterStack,
    HelmRelease,
    check_unique_names,
    collect_placeholders,
    with_await,
)


def render_fleet(
    fleet: Fleet, result: PlanResult, gateway_addresses: dict[str, str] | None = None, kind_network: str = KIND_NETWORK
) -> list[ClusterManifests]:
    """Front door first, then every workload cluster in name order.

    `gateway_addresses` are the workload gateways' addresses where known (else their placeholders);
    `kind_network` is the kind Docker network MetalLB ranges are carved from (offline: kind's default).
    """
    addresses = dict(gateway_addresses or {})
    manifests = []
    if fleet.inference_gateway is not None:
        manifests.append(front_door_parts(fleet, result, addresses, kind_network).manifests())
    for name in sorted(fleet.inference_clusters):
        manifests.append(workload_cluster_parts(fleet, result, name, kind_network).manifests())
    return manifests


def cluster_stacks(fleet: Fleet, kind_network: str = KIND_NETWORK) -> list[ClusterStack]:
    """Every cluster's plan-independent stack (all its releases and remote manifests): front door first."""
    stacks = [front_door_stack(fleet, kind_network)] if fleet.inference_gateway is not None else []
    return stacks + [workload_stack(fleet, name, kind_network) for name in sorted(fleet.inference_clusters)]


def fleet_sources(fleet: Fleet) -> Sources:
    """What a mirror must hold for `fleet`: the charts and manifests of its clusters as they are upstream.

    Only the clusters' stacks hold releases and remote manifests (a placement adds objects only), so
    no plan is needed.
    """
    return mirror_sources(cluster_stacks(dataclasses.replace(fleet, mirror=None)), fleet.mirror)


# --- a workload cluster, whatever the plan -----------------------------------------------------------


def workload_stack(fleet: Fleet, cluster: str, kind_network: str = KIND_NETWORK) -> ClusterStack:
    """What workload cluster `cluster` gets whatever the plan (see the module docstring)."""
    spec = fleet.serving_stack_for(cluster)
    objects, releases = ss.render_serving_stack(cluster, spec, fleet.uses_fake_gpus(cluster))
    cluster_objects, placeholders = storage_classes(fleet, cluster)
    if fleet.inference_clusters[cluster].cluster.source == "Kind":  # no cloud load balancer: MetalLB
        pool = kind_address_pools(kind_cluster_names(fleet), kind_network)[cluster]
        lb_objects, lb_releases = lb.metallb(pool)
        objects, releases = lb_objects + objects, lb_releases + releases
        placeholders.append(lb.pool_placeholder(cluster, pool, kind_network))
    # The cluster's releases and remote manifests are final here: chart and manifest mirrors
    # (air-gapped sites, `modelplane:mirror`) apply at this point, and nowhere else.
    stack = ClusterStack(
        cluster=cluster,
        role="workload",
        gateway=WORKLOAD_GATEWAY,
        cluster_objects=cluster_objects,
        objects=[with_await(o, WORKLOAD_GATEWAY) for o in objects],
        releases=[mirror_release(r, fleet.mirror) for r in releases],
        remote_manifests=[mirror_manifest(m, fleet.mirror) for m in ss.inference_extension_crds(spec)],
        placeholders=placeholders,
    )
    # Install order: what waits for nothing (the releases wait for it), then what a release or manifest serves.
    stack.objects = [o for o in stack.objects if not waits_for(stack, o)] + [
        o for o in stack.objects if waits_for(stack, o)
    ]
    return stack


# Releases that need a remote manifest first: Envoy Gateway's extension manager watches InferencePools.
RELEASE_MANIFESTS = {ss.ENVOY_GATEWAY: (ss.INFERENCE_EXTENSION_CRDS,)}


def waits_for(stack: ClusterStack, obj: dict[str, Any]) -> tuple[str, ...]:
    """Releases and remote manifests (by name) of `stack` that must be installed before `obj` (its CRD)."""
    if stack.role == "front-door":
        return front_door.waits_for(stack, obj)
    present = {r.name for r in stack.releases} | {m.name for m in stack.remote_manifests}
    needs = ss.release_dependencies(obj) + lb.release_dependencies(obj)
    return tuple(n for n in needs if n in present)


def release_waits_for(stack: ClusterStack, release: HelmRelease) -> tuple[str, ...]:
    """Remote manifests of `stack` that must be applied before `release` is installed."""
    table = front_door.RELEASE_MANIFESTS if stack.role == "front-door" else RELEASE_MANIFESTS
    present = {m.name for m in stack.remote_manifests}
    return tuple(n for n in table.get(release.name, ()) if n in present)


# What a replica's object needs installed first, by API group: the release or remote manifest its CRD comes from.
REPLICA_KIND_SOURCES = {
    "gateway.networking.k8s.io": ss.ENVOY_GATEWAY,
    "inference.networking.k8s.io": ss.INFERENCE_EXTENSION_CRDS,
    "leaderworkerset.x-k8s.io": ss.LEADER_WORKER_SET,
}
DRA_DRIVERS = (ss.NVIDIA_DRA_DRIVER, ss.EXAMPLE_DRA_DRIVER)  # the DeviceClass a claiming pod names


def replica_waits_for(stack: ClusterStack, obj: dict[str, Any]) -> tuple[str, ...]:
    """Releases and remote manifests (by name) of `stack` that must be installed before a replica's `obj`.

    Only what the object itself needs: its kind's CRD, and for a workload whose pods claim devices, the
    DRA driver. The rest of the serving stack is not waited for: each dependency is a URN in the state
    of every object that names it, and each is work for the engine on every `up` (issue 27).
    """
    present = {r.name for r in stack.releases} | {m.name for m in stack.remote_manifests}
    source = REPLICA_KIND_SOURCES.get(obj["apiVersion"].rpartition("/")[0])
    needs: tuple[str, ...] = (source,) if source else ()
    if obj["kind"] in WORKLOAD_KINDS and _claims_devices(obj):
        needs += DRA_DRIVERS
    return tuple(n for n in needs if n in present)


def _claims_devices(workload: dict[str, Any]) -> bool:
    spec = workload.get("spec") or {}
    templates = [spec.get("template")] if "template" in spec else []
    templates += [(spec.get("leaderWorkerTemplate") or {}).get(key) for key in ("leaderTemplate", "workerTemplate")]
    return any(((t or {}).get("spec") or {}).get("resourceClaims") for t in templates)


# --- a workload cluster, with the plan -----------------------------------------------------------


@dataclass
class WorkloadClusterParts:
    """One workload cluster, split the way it is deployed: its stack, namespaces, caches, replicas."""

    stack: ClusterStack
    namespaces: list[dict]  # the tenants' namespaces (replicas and caches live there)
    caches: dict[NamespacedName, list[dict]]
    replicas: list[tuple[PlacedReplica, list[dict]]]

    @property
    def cluster(self) -> str:
        return self.stack.cluster

    def objects(self) -> list[dict]:
        """Every object of the cluster, in apply order."""
        objects = self.stack.cluster_objects + self.stack.objects + self.namespaces
        for cache_objects in self.caches.values():
            objects += cache_objects
        for _, replica_objects in self.replicas:
            objects += replica_objects
        return objects

    def manifests(self) -> ClusterManifests:
        objects = self.objects()
        return ClusterManifests(
            self.cluster,
            "workload",
            objects,
            list(self.stack.releases),
            list(self.stack.remote_manifests),
            collect_placeholders(objects, self.stack.placeholders),
        )


def caches_on(fleet: Fleet, cluster: str) -> list[NamespacedName]:
    """The ModelCaches staged on `cluster`: those whose selector matches it, if it has RWX storage."""
    if not cache_storage_class(fleet, cluster):
        return []
    return [
        key
        for key, cache in sorted(fleet.model_caches.items())
        if cluster in fleet.clusters_matching(cache.cluster_selector.match_labels if cache.cluster_selector else None)
    ]


def workload_cluster_parts(
    fleet: Fleet, result: PlanResult, cluster: str, kind_network: str = KIND_NETWORK
) -> WorkloadClusterParts:
    stack = workload_stack(fleet, cluster, kind_network)
    replicas = [r for r in result.replicas() if r.cluster == cluster]
    storage = cache_storage_class(fleet, cluster)
    caches = {
        key: [with_await(o) for o in render_cache(key.namespace, key.name, fleet.model_caches[key], cluster, storage)]
        for key in caches_on(fleet, cluster)
    }
    namespaces = sorted({r.key.namespace for r in replicas} | {key.namespace for key in caches})
    rendered = []
    for replica in replicas:
        deployment = fleet.model_deployments[replica.key]
        ref = deployment.spec.model_cache_ref
        claim = None
        if ref is not None:
            if NamespacedName(replica.key.namespace, ref.name) not in caches:  # the scheduler never does this
                raise ValueError(
                    f"replica {replica.key.namespace}/{replica.name} mounts ModelCache {ref.name}, which "
                    f"is not staged on cluster {cluster}; without it vLLM would serve its default model"
                )
            claim = child_name("modelcache", replica.key.namespace, ref.name)
        objects = [with_await(o) for o in render_replica(replica, deployment, claim)]
        # Install order: the replica's configuration, then its workloads (awaited until available).
        rendered.append(
            (
                replica,
                [o for o in objects if o["kind"] not in WORKLOAD_KINDS]
                + [o for o in objects if o["kind"] in WORKLOAD_KINDS],
            )
        )
    parts = WorkloadClusterParts(
        stack,
        [k8s.namespace(ns, MANAGED_BY) for ns in namespaces],
        caches,
        rendered,
    )
    check_unique_names(cluster, parts.objects())
    return parts
