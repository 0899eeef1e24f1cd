"""The front door (spec §7): a proxy on its own cluster, one backend per endpoint, one route per service.

The proxy is chosen in one place, `proxy_for`: Envoy Gateway by default (`front_door_envoy`: health
checks, safe retries, fallback tiers, routing by the request's `model`), or Traefik as the reference
has it (`front_door_traefik`, `backend: Traefik`). Both implement `front_door_proxy.FrontDoorProxy`
and share what is proxy-neutral: endpoints and weights (`front_door_backends`), MetalLB, and the
install order below.

* `front_door_stack` — the front door's cluster whatever the plan: MetalLB (when configured), the
  proxy's release, objects and CRD manifests.
* `front_door_parts` — all of it for a fleet (`.manifests()`: the objects in apply order).

Install order (the Pulumi layer turns it into `depends_on`, and deletes in reverse):

1. The proxy's remote manifests (Traefik: the Gateway API CRDs, see `front_door_traefik`).
2. MetalLB (when configured), then the proxy's release (after the manifests it needs).
3. The objects in list order, each after what `waits_for(stack, obj)` names.

Secret values are never rendered: see `modelplane.render.secrets`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from ..api.fleet import Fleet, NamespacedName
from ..api.inference_gateway import Proxy
from ..scheduling import PlanResult
from . import metallb as lb
from . import objects as k8s
from .front_door_backends import FrontDoorEndpoint, fleet_endpoints, route_backends
from .front_door_envoy import EnvoyFrontDoor
from .front_door_proxy import FrontDoorProxy
from .front_door_traefik import TraefikFrontDoor
from .metallb import KIND_NETWORK, metallb
from .sources import mirror_manifest, mirror_release
from .types import (
    FRONT_DOOR_GATEWAY,
    MANAGED_BY,
    SYSTEM_NAMESPACE,
    ClusterManifests,
    ClusterStack,
    HelmRelease,
    check_unique_names,
    collect_placeholders,
    with_await,
)

PROXIES: Mapping[Proxy, type[FrontDoorProxy]] = {"EnvoyGateway": EnvoyFrontDoor, "Traefik": TraefikFrontDoor}


def proxy_for(fleet: Fleet) -> FrontDoorProxy:
    """The front door's proxy (`inferenceGateway.backend`): the one place it is chosen."""
    gateway = fleet.inference_gateway
    if gateway is None:
        raise ValueError("the fleet has no front door: set modelplane:inferenceGateway")
    return PROXIES[gateway.proxy](fleet)


def release_dependencies(obj: Mapping[str, Any]) -> tuple[str, ...]:
    """Releases and remote manifests of any front door (by name) that must be installed before `obj`;
    `waits_for` keeps those the stack has."""
    needs = lb.release_dependencies(dict(obj))
    for proxy in PROXIES.values():
        needs += proxy.release_dependencies(obj)
    return needs


# Releases (by name) that need a remote manifest (by name) first, whatever the proxy.
RELEASE_MANIFESTS = {
    release: manifests for proxy in PROXIES.values() for release, manifests in proxy.release_manifests.items()
}


def waits_for(stack: ClusterStack, obj: dict[str, Any]) -> tuple[str, ...]:
    """The front door's releases and remote manifests (by name) that must be installed before `obj`."""
    present = {r.name for r in stack.releases} | {m.name for m in stack.remote_manifests}
    return tuple(dict.fromkeys(n for n in release_dependencies(obj) if n in present))


def namespace(name: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    return k8s.namespace(name, {**MANAGED_BY, **(labels or {})})


def service_address(gateway_address: str, key: NamespacedName) -> str:
    """A ModelService's public URL (§7.4); engine paths such as /v1/chat/completions go after it."""
    return f"http://{gateway_address}/{key.namespace}/{key.name}"


# --- the whole front door ------------------------------------------------------------------------


def front_door_stack(
    fleet: Fleet, kind_network: str = KIND_NETWORK, proxy: FrontDoorProxy | None = None
) -> ClusterStack:
    """The front door's cluster whatever the plan: MetalLB, the proxy (its release, objects and CRD manifests).

    MetalLB's range is `<block>.metallb.addressPool` when set; on kind it is carved from
    `kind_network` by the one rule of `metallb.kind_address_pools` (offline: kind's default network;
    the Pulumi program passes the real one).
    """
    proxy = proxy or proxy_for(fleet)
    gateway = fleet.inference_gateway
    assert gateway is not None  # proxy_for checked
    cluster = gateway.cluster_name
    objects: list[dict[str, Any]] = [namespace(SYSTEM_NAMESPACE)]
    releases: list[HelmRelease] = []
    placeholders = []
    balancing = gateway.load_balancing
    if balancing.load_balancer == "MetalLB":
        assert balancing.metallb is not None  # the model requires the block with loadBalancer: MetalLB
        pool = balancing.metallb.address_pool
        if pool is None and gateway.cluster.source == "Kind":
            pool = lb.kind_address_pools(lb.kind_cluster_names(fleet), kind_network)[cluster]
            placeholders.append(lb.pool_placeholder(cluster, pool, kind_network))
        if not pool:
            raise ValueError(
                f"the front door on cluster '{cluster}' uses MetalLB but no address pool was given (on "
                "kind it is carved from the kind network; elsewhere set "
                "inferenceGateway.<traefik|envoyGateway>.metallb.addressPool)"
            )
        metallb_objects, releases = metallb(pool, balancing.metallb.version)
        objects += metallb_objects
    proxy_objects, proxy_releases, manifests = proxy.cluster_parts(tuple(r.name for r in releases))
    # The front door's releases and remote manifests are final here: chart and manifest mirrors
    # (air-gapped sites, `modelplane:mirror`) apply at this point, and nowhere else.
    stack = ClusterStack(
        cluster=cluster,
        role="front-door",
        gateway=FRONT_DOOR_GATEWAY,
        objects=[with_await(o, FRONT_DOOR_GATEWAY) for o in objects + proxy_objects],
        releases=[mirror_release(r, fleet.mirror) for r in releases + proxy_releases],
        remote_manifests=[mirror_manifest(m, fleet.mirror) for m in manifests],
        placeholders=placeholders,
    )
    # Install order: what waits for nothing (the releases wait for it), then what a release or manifest serves.
    stack.objects = [o for o in stack.objects if not waits_for(stack, o)] + [
        o for o in stack.objects if waits_for(stack, o)
    ]
    return stack


@dataclass
class FrontDoorParts:
    """The front door, split the way it is deployed: the gateway, then endpoints, then routes."""

    stack: ClusterStack  # the proxy (and MetalLB), the GatewayClass and Gateway, the fleet-wide policies
    namespaces: list[dict]  # the tenants' namespaces on the front-door cluster
    endpoints: list[FrontDoorEndpoint]
    routes: dict[NamespacedName, list[dict]]  # ModelService -> its HTTPRoute (and its filters and traffic policy)
    route_endpoints: dict[NamespacedName, list[str]]  # ModelService -> the endpoint names its route uses
    proxy: FrontDoorProxy
    # Per endpoint (namespace, name): whether services use it as primary (False) and/or fallback (True).
    fallback_tiers: dict[tuple[str, str], frozenset[bool]] = field(default_factory=dict)
    # Each workload cluster's gateway by name on the front-door cluster (rendered with the address placeholder).
    gateway_aliases: dict[str, list[dict]] = field(default_factory=dict)

    @property
    def cluster(self) -> str:
        return self.stack.cluster

    def objects(self) -> list[dict]:
        """Every object of the front-door cluster, in apply order."""
        objects = self.stack.cluster_objects + self.stack.objects + self.namespaces
        for aliases in self.gateway_aliases.values():
            objects += aliases
        for endpoint in self.endpoints:
            objects += self.objects_of(endpoint)
        return objects + [o for route in self.routes.values() for o in route]

    def objects_of(self, endpoint: FrontDoorEndpoint, url: str | None = None) -> list[dict]:
        """What one endpoint deploys on the front-door cluster (with `url`: at that URL, e.g. its gateway's
        real address)."""
        tiers = self.fallback_tiers.get((endpoint.namespace, endpoint.name), frozenset({False}))
        return self.proxy.endpoint_objects(replace(endpoint, url=url) if url else endpoint, tiers)

    def manifests(self) -> ClusterManifests:
        objects = self.objects()
        return ClusterManifests(
            cluster=self.cluster,
            role="front-door",
            objects=objects,
            releases=list(self.stack.releases),
            remote_manifests=list(self.stack.remote_manifests),
            placeholders=collect_placeholders(objects, self.stack.placeholders),
        )


def front_door_parts(
    fleet: Fleet, result: PlanResult, gateway_addresses: dict[str, str], kind_network: str = KIND_NETWORK
) -> FrontDoorParts:
    """Everything the front-door cluster gets.

    Endpoints of every placed replica are included; the Pulumi layer creates each only once its
    replica is ready, and a route only after the endpoints it names. A ModelService none of whose
    selectors match an endpoint gets no route, as upstream. A replica's endpoint points at its
    workload cluster's gateway: `gateway_addresses[cluster]`, or `inference-gateway.<cluster>.invalid`
    until that is known.
    """
    proxy = proxy_for(fleet)
    stack = front_door_stack(fleet, kind_network, proxy)
    endpoints = fleet_endpoints(fleet, result, gateway_addresses)
    routes: dict[NamespacedName, list[dict]] = {}
    route_endpoints: dict[NamespacedName, list[str]] = {}
    tiers: dict[tuple[str, str], set[bool]] = {}
    for key, service in sorted(fleet.model_services.items()):
        backends = route_backends(key.namespace, service, endpoints)
        if not backends:
            continue
        route_endpoints[key] = [b.service for b in backends]
        for b in backends:
            tiers.setdefault((key.namespace, b.service), set()).add(b.fallback)
        routes[key] = proxy.service_objects(key, service, backends)
    used = {e.namespace for e in endpoints} | {key.namespace for key in fleet.model_services}
    namespaces = [namespace(ns) for ns in sorted(used - {SYSTEM_NAMESPACE})]
    parts = FrontDoorParts(
        stack,
        namespaces,
        endpoints,
        routes,
        route_endpoints,
        proxy,
        fallback_tiers={key: frozenset(found) for key, found in tiers.items()},
        gateway_aliases=proxy.gateway_aliases(gateway_addresses),
    )
    check_unique_names(stack.cluster, parts.objects())
    return parts
