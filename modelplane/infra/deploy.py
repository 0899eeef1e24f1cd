"""Rendered data -> components: the clusters and front door first, then what the placement puts on them.

Every Kubernetes object, Helm release and remote manifest comes from `modelplane.render`, exactly
as `modelplane render` shows it; components only turn them into resources and fill in the
placeholders for what exists only once deployed. Clusters, serving stacks and the front door do
not depend on the placement (`render.fleet.workload_stack`, `render.front_door.front_door_stack`),
so they are built before it is known. Everything that does (tenant namespaces, caches, replicas,
endpoints, service routes) is built from the plan, in this order of dependencies:

    cluster provider -> serving stack -> replica workloads (ready) -> front-door endpoint -> service route

A replica that moves has a new name (names derive from placement), so its replacement is a new
set of resources, created and awaited during the update; the engine deletes the old replica,
its endpoint and its place in the route only at the end of the update. There is no serving gap.
"""

from __future__ import annotations

import functools
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

import pulumi

from ..api import Fleet, NamespacedName
from ..render.fleet import (
    WorkloadClusterParts,
    caches_on,
    replica_waits_for,
    workload_cluster_parts,
    workload_stack,
)
from ..render.front_door import front_door_parts, front_door_stack, service_address
from ..render.metallb import kind_cluster_names
from ..render.secrets import cache_token, endpoint_token
from ..render.types import ClusterStack
from ..scheduling import PlanResult
from .backends.base import ClusterRequest, GpuPool
from .components import (
    GatewayAlias,
    InferenceCluster,
    InferenceGateway,
    ModelCache,
    ModelEndpoint,
    ModelReplica,
    ModelService,
    tenant_namespaces,
)
from .config import secret_output
from .skip import SkippedCluster


@dataclass
class Infrastructure:
    clusters: dict[str, InferenceCluster]
    gateway: InferenceGateway | None
    skipped: dict[str, SkippedCluster] = field(default_factory=dict)  # left out of this update (`modelplane up`)

    def address_of(self, cluster: str) -> pulumi.Output[str]:
        """A workload cluster's gateway address: as registered now, or as the last update left it."""
        if cluster in self.clusters:
            return self.clusters[cluster].serving_stack.address
        return self.skipped[cluster].address


def cluster_request(fleet: Fleet, name: str) -> ClusterRequest:
    cluster = fleet.inference_clusters[name]
    pools = tuple(GpuPool(pool, fleet.inference_classes[pool.class_name]) for pool in cluster.node_pools)
    return ClusterRequest(name, cluster.cluster, pools, kind_cluster_names(fleet))


def front_door_request(fleet: Fleet) -> ClusterRequest:
    gateway = fleet.inference_gateway
    assert gateway is not None
    return ClusterRequest(gateway.cluster_name, gateway.cluster, (), kind_cluster_names(fleet))


def build_infrastructure(
    fleet: Fleet,
    adopt: Mapping[str, Collection[str]] | None = None,
    skipped: Mapping[str, SkippedCluster] | None = None,
) -> Infrastructure:
    """Every cluster but the `skipped` ones, and the front door; `adopt` names, per cluster, the Helm releases
    to import (release_adoption.py)."""
    adopt, skipped = adopt or {}, skipped or {}
    clusters = {
        name: InferenceCluster(cluster_request(fleet, name), workload_stack(fleet, name), adopt=adopt.get(name, ()))
        for name in sorted(fleet.inference_clusters)
        if name not in skipped
    }
    gateway = None
    if fleet.inference_gateway is not None:
        name = fleet.inference_gateway.cluster_name
        gateway = InferenceGateway(front_door_request(fleet), front_door_stack(fleet), adopt=adopt.get(name, ()))
    return Infrastructure(clusters, gateway, dict(skipped))


def secret_values(fleet: Fleet) -> dict[str, pulumi.Output[str]]:
    """Each secret placeholder the renderer may leave -> the config value, as a Pulumi secret."""
    out = {}
    for key, endpoint in fleet.model_endpoints.items():
        if endpoint.auth is not None:
            out[endpoint_token(key.namespace, key.name)] = secret_output(endpoint.auth.token)
    for key, cache in fleet.model_caches.items():
        if cache.hugging_face is not None and cache.hugging_face.token is not None:
            out[cache_token(key.namespace, key.name)] = secret_output(cache.hugging_face.token)
    return out


@dataclass
class Placement:
    """What was built for one plan, by the names users know."""

    replicas: dict[str, ModelReplica]  # "<ns>/<replica>"
    endpoints: dict[str, ModelEndpoint]
    services: dict[str, ModelService]
    caches: dict[str, ModelCache]


def build_placement(fleet: Fleet, result: PlanResult, infra: Infrastructure) -> Placement:
    secrets = secret_values(fleet)
    parts = {name: workload_cluster_parts(fleet, result, name) for name in sorted(infra.clusters)}
    namespaces = {
        name: tenant_namespaces(name, p.namespaces, infra.clusters[name], infra.clusters[name].provider)
        for name, p in parts.items()
    }
    # A cache staged only on skipped clusters still has its component, or the engine would delete it.
    skipped_caches = {key for name in infra.skipped for key in caches_on(fleet, name)}
    caches = _build_caches(parts, infra, namespaces, secrets, skipped_caches)
    replicas: dict[str, ModelReplica] = {}
    for name, cluster_parts in parts.items():
        cluster = infra.clusters[name]
        for replica, objects in cluster_parts.replicas:
            ns = replica.key.namespace
            after = functools.partial(
                _replica_prerequisites, cluster_parts.stack, cluster.serving_stack.installed, namespaces[name][ns]
            )
            ref = fleet.model_deployments[replica.key].spec.model_cache_ref
            cache_key = f"{ns}/{ref.name}" if ref is not None else None
            mounts = caches[cache_key].resources.get(name, []) if cache_key in caches else []  # the PVC it mounts
            replicas[f"{ns}/{replica.name}"] = ModelReplica(replica, objects, cluster.provider, after, mounts)
    endpoints: dict[str, ModelEndpoint] = {}
    services: dict[str, ModelService] = {}
    if infra.gateway is not None:
        endpoints, services = _build_front_door(fleet, result, infra, replicas, secrets)
    return Placement(replicas, endpoints, services, caches)


def _replica_prerequisites(
    stack: ClusterStack, installed: dict[str, pulumi.Resource], namespace: pulumi.Resource, obj: dict[str, Any]
) -> list[pulumi.Resource]:
    """What a replica's object waits for: its tenant namespace, and what `replica_waits_for` names."""
    return [namespace, *(installed[name] for name in replica_waits_for(stack, obj))]


def _build_caches(
    parts: dict[str, WorkloadClusterParts],
    infra: Infrastructure,
    namespaces: dict[str, dict[str, pulumi.CustomResource]],
    secrets: dict[str, pulumi.Output[str]],
    skipped_caches: Collection[NamespacedName] = (),
) -> dict[str, ModelCache]:
    per_cache: dict[NamespacedName, dict[str, Any]] = {key: {} for key in skipped_caches}
    for name, cluster_parts in parts.items():
        for key, objects in cluster_parts.caches.items():
            per_cache.setdefault(key, {})[name] = (
                objects,
                infra.clusters[name].provider,
                [namespaces[name][key.namespace]],
            )
    return {
        f"{key.namespace}/{key.name}": ModelCache(key, clusters, secrets) for key, clusters in sorted(per_cache.items())
    }


def _build_front_door(
    fleet: Fleet,
    result: PlanResult,
    infra: Infrastructure,
    replicas: dict[str, ModelReplica],
    secrets: dict[str, pulumi.Output[str]],
) -> tuple[dict[str, ModelEndpoint], dict[str, ModelService]]:
    gateway = infra.gateway
    assert gateway is not None
    parts = front_door_parts(fleet, result, {})
    namespaces = tenant_namespaces(gateway.cluster, parts.namespaces, gateway, gateway.provider)
    aliases = {
        name: GatewayAlias(
            gateway.cluster,
            name,
            gateway.provider,
            infra.address_of(name),
            list(gateway.ready),
            pulumi.ResourceOptions(parent=gateway),
        )
        for name in parts.gateway_aliases
    }
    endpoints: dict[str, ModelEndpoint] = {}
    for endpoint in parts.endpoints:
        key = f"{endpoint.namespace}/{endpoint.name}"
        depends_on = [*gateway.ready, namespaces[endpoint.namespace]]
        address = None
        if endpoint.replica is not None:
            if endpoint.replica.cluster not in infra.skipped:  # a skipped cluster's replicas are ready and unchanged
                depends_on += replicas[key].workloads  # ready: Pulumi awaited them
            address = infra.address_of(endpoint.replica.cluster)
            if endpoint.replica.cluster in aliases:
                depends_on.append(aliases[endpoint.replica.cluster])
        endpoints[key] = ModelEndpoint(
            endpoint,
            gateway.cluster,
            gateway.provider,
            address,
            secrets,
            depends_on,
            render=parts.objects_of,
            hold_gateway_address=parts.proxy.endpoints_hold_gateway_address,
        )
    services: dict[str, ModelService] = {}
    for service, objects in parts.routes.items():
        depends_on = [*gateway.ready, namespaces[service.namespace]]
        depends_on += [endpoints[f"{service.namespace}/{name}"] for name in parts.route_endpoints[service]]
        url = gateway.address.apply(functools.partial(service_address, key=service))
        services[f"{service.namespace}/{service.name}"] = ModelService(
            service, objects, gateway.cluster, gateway.provider, url, depends_on
        )
    return endpoints, services
