"""The whole fleet's objects and Helm releases, per cluster: a pure function of config and plan."""
from __future__ import annotations

import ipaddress
from dataclasses import dataclass

from ..api import Fleet, NamespacedName
from ..scheduling.names import child_name
from ..scheduling.result import PlacedReplica, PlanResult
from .cache import cache_storage_class, render_cache
from .front_door import render_front_door
from .replica import render_replica
from .serving_stack import render_serving_stack, uses_fake_gpus
from .types import MANAGED_BY, ClusterManifests, HelmRelease, check_unique_names, meta

KIND_NETWORK = "172.18.0.0/16"  # kind's default Docker network; the kind backend reads the real one


def kind_address_pools(names: list[str], network: str = KIND_NETWORK, size: int = 16) -> dict[str, str]:
    """A MetalLB range per kind cluster, carved from the top of the kind network, never overlapping."""
    net = ipaddress.ip_network(network)
    top = int(net.broadcast_address) - 1
    pools = {}
    for i, name in enumerate(sorted(names)):
        last = top - i * size
        pools[name] = f"{ipaddress.ip_address(last - size + 1)}-{ipaddress.ip_address(last)}"
    return pools


def render_fleet(fleet: Fleet, result: PlanResult, gateway_addresses: dict[str, str] | None = None,
                 ) -> list[ClusterManifests]:
    """Front door first, then every workload cluster in name order."""
    addresses = dict(gateway_addresses or {})
    manifests = []
    gateway = fleet.inference_gateway
    if gateway is not None:
        pool = None
        if gateway.traefik.metallb is not None:
            pool = gateway.traefik.metallb.address_pool or kind_address_pools([gateway.cluster_name])[gateway.cluster_name]
        manifests.append(render_front_door(fleet, result, addresses, pool))
    for name in sorted(fleet.inference_clusters):
        manifests.append(render_workload_cluster(fleet, result, name))
    return manifests


@dataclass
class WorkloadClusterParts:
    """One workload cluster, split the way it is deployed: serving stack, namespaces, caches, replicas."""

    cluster: str
    stack_objects: list[dict]
    stack_releases: list[HelmRelease]
    namespaces: list[dict]  # the tenants' namespaces (replicas and caches live there)
    caches: dict[NamespacedName, list[dict]]
    replicas: list[tuple[PlacedReplica, list[dict]]]

    def manifests(self) -> ClusterManifests:
        objects = self.stack_objects + self.namespaces
        for cache_objects in self.caches.values():
            objects += cache_objects
        for _, replica_objects in self.replicas:
            objects += replica_objects
        return ClusterManifests(self.cluster, "workload", objects, list(self.stack_releases))


def workload_cluster_parts(fleet: Fleet, result: PlanResult, cluster: str) -> WorkloadClusterParts:
    stack_objects, releases = render_serving_stack(cluster, fleet.serving_stack_for(cluster),
                                                   uses_fake_gpus(fleet, cluster))
    replicas = [r for r in result.replicas() if r.cluster == cluster]
    storage = cache_storage_class(fleet, cluster)
    caches = {key: render_cache(key.namespace, key.name, cache, cluster, storage)
              for key, cache in sorted(fleet.model_caches.items())
              if storage and cluster in fleet.clusters_matching(
                  cache.cluster_selector.match_labels if cache.cluster_selector else None)}
    namespaces = sorted({r.key.namespace for r in replicas} | {key.namespace for key in caches})
    rendered = []
    for replica in replicas:
        deployment = fleet.model_deployments[replica.key]
        ref = deployment.spec.model_cache_ref
        claim = None
        if ref is not None:
            if NamespacedName(replica.key.namespace, ref.name) not in caches:  # the scheduler never does this
                raise ValueError(f"replica {replica.key.namespace}/{replica.name} mounts ModelCache {ref.name}, which "
                                 f"is not staged on cluster {cluster}; without it vLLM would serve its default model")
            claim = child_name("modelcache", replica.key.namespace, ref.name)
        rendered.append((replica, render_replica(replica, deployment, claim)))
    parts = WorkloadClusterParts(
        cluster, stack_objects, releases,
        [{"apiVersion": "v1", "kind": "Namespace", "metadata": meta(ns, labels=MANAGED_BY)} for ns in namespaces],
        caches, rendered)
    check_unique_names(cluster, parts.manifests().objects)
    return parts


def render_workload_cluster(fleet: Fleet, result: PlanResult, cluster: str) -> ClusterManifests:
    return workload_cluster_parts(fleet, result, cluster).manifests()
