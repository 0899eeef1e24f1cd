"""The front door (spec §7): a proxy on its own cluster, one endpoint per backend, one route per service.

The proxy is Envoy Gateway by default (`front_door_envoy`: health checks, retries, fallback tiers,
routing by the request's `model`), or Traefik as the reference has it (`backend: Traefik`). What
follows describes the Traefik objects; both share the endpoints, weights and install order.

* `render_inference_gateway` — Traefik (and MetalLB on clusters without a load balancer), the
  `traefik` GatewayClass and the `modelplane` Gateway (§7.3).
* `endpoint_objects` — a backend as a selectorless Service plus a hand-made EndpointSlice (§7.1).
  Every placed replica is one (its URL is its workload cluster's gateway), and so is every
  hand-made ModelEndpoint (e.g. a SaaS provider).
* `service_route` — a ModelService as one HTTPRoute `/<ns>/<service>/` whose weighted backendRefs
  split traffic over its endpoints (§7.2, weights by `distribute_weights`).
* `front_door_stack` — the front door's cluster whatever the plan: the Gateway API CRDs (a remote
  manifest), MetalLB, Traefik and the Gateway.
* `front_door_parts` — all of it for a fleet (`.manifests()`: the objects in apply order).

Install order (the Pulumi layer turns it into `depends_on`, and deletes in reverse):

1. The Gateway API CRDs, a `RemoteManifest` named `gateway-api-crds`. The Traefik chart does not
   install them (since chart v34 they live in the separate `traefik-crds` chart), so they come from
   the upstream release manifest, `gateway_api_crds_url(servingStack.versions.gatewayApi)` (standard channel, as
   the reference vendors). That file also holds a ValidatingAdmissionPolicy guarding CRD upgrades,
   and the Pulumi layer applies the whole file as it is. Not rendered when the (Existing) cluster
   already has them (`inferenceGateway.preinstalled: [gatewayApi]`); then nothing waits for them.
2. MetalLB (when configured), then Traefik (after the Gateway API CRDs: its Gateway provider
   needs them at start).
3. The objects in list order, each after what `waits_for(stack, obj)` names.

Improvements over the reference, deliberately:

* A ModelService selects endpoints in its own namespace only (DESIGN.md "Identity includes the
  namespace"); the reference matched labels across all namespaces, with backendRefs that carry
  no namespace.
* A hand-made endpoint whose URL names a host (not an IP address) gets its `Host` header rewritten
  to that host (`urlRewrite.hostname`). Traefik forwards the client's `Host` by default, which
  would be the front door's address, and a virtual-hosted SaaS API rejects that.
* A hand-made endpoint may carry `auth`; see `endpoint_auth_middleware`.
* An `https` URL on a port other than 443 names its Service port `https`: Traefik speaks TLS to
  a backend only on port 443 or a port whose name starts with `https`.

Secret values are never rendered: see `modelplane.render.secrets`.
"""
from __future__ import annotations

import ipaddress
import math
from dataclasses import dataclass, field
from functools import reduce
from typing import Any, Iterable
from urllib.parse import urlsplit

from ..api.fleet import Fleet, NamespacedName
from ..api.inference_gateway import InferenceGateway
from ..api.serving_stack import ServingStack
from ..api.model_service import EndpointAuth, ModelService
from ..api.references import CLUSTER_LABEL, DEPLOYMENT_LABEL, INDEX_LABEL
from ..scheduling.names import child_name
from ..scheduling import PlacedReplica, PlanResult
from . import front_door_envoy as envoy
from . import metallb as lb
from .metallb import KIND_NETWORK, metallb
from .secrets import placeholder
from .sources import mirror_manifest, mirror_release
from .types import (
    FRONT_DOOR_GATEWAY,
    MANAGED_BY,
    SYSTEM_NAMESPACE,
    WORKLOAD_GATEWAY_PORT,
    check_unique_names,
    ClusterManifests,
    ClusterStack,
    HelmRelease,
    RemoteManifest,
    collect_placeholders,
    endpoint_host,
    gateway_address_placeholder,
    meta,
    replica_host,
    with_await,
)

# --- Gateway API CRDs on the front-door cluster ----------------------------------------------------

# The version is `servingStack.versions.gatewayApi` (fleet-wide): v1.5.1 by default, the standard
# channel release the reference vendors on the control cluster.
GATEWAY_API_CRDS_URL = (
    "https://github.com/kubernetes-sigs/gateway-api/releases/download/{version}/standard-install.yaml"
)
GATEWAY_API_CRDS = "gateway-api-crds"  # the remote manifest's name (the ConfigFile is `<cluster>/gateway-api-crds`)


def gateway_api_crds_url(version: str) -> str:
    """Where the Gateway API CRDs for the front door come from."""
    return GATEWAY_API_CRDS_URL.format(version=version)


def gateway_api_crds(version: str) -> RemoteManifest:
    """The front door's Gateway API CRDs, applied from the upstream release manifest."""
    return RemoteManifest(name=GATEWAY_API_CRDS, component="gatewayApi", version=version,
                          url=gateway_api_crds_url(version))


# --- the gateway ---------------------------------------------------------------------------------

TRAEFIK_NAMESPACE = "traefik-system"
# The release is named after the chart, so the chart's Service is named `traefik` too
# (its fullname is the release name when that contains the chart name): the Gateway's status
# address is copied from that Service.
TRAEFIK_RELEASE = "traefik"
TRAEFIK_SERVICE = "traefik"
TRAEFIK_GATEWAY_CLASS = "traefik"
TRAEFIK_CONTROLLER = "traefik.io/gateway-controller"
TRAEFIK_WEB_PORT = 8000  # Traefik's internal `web` entryPoint; the Service exposes it on port 80


def render_inference_gateway(gateway: InferenceGateway, metallb_pool: str | None
                             ) -> tuple[list[dict], list[HelmRelease]]:
    """Traefik, MetalLB when `loadBalancer: MetalLB`, and the front door's GatewayClass and Gateway.

    `metallb_pool` is the address range MetalLB hands out; on kind it is computed from the kind
    network by the caller, otherwise it is `gateway.traefik.metallb.address_pool`.
    """
    objects: list[dict[str, Any]] = [namespace(SYSTEM_NAMESPACE)]
    releases: list[HelmRelease] = []
    balancing = gateway.load_balancing
    if balancing.load_balancer == "MetalLB":
        assert balancing.metallb is not None  # the model requires the block with loadBalancer: MetalLB
        pool = metallb_pool or balancing.metallb.address_pool
        if not pool:
            raise ValueError(f"the front door on cluster '{gateway.cluster_name}' uses MetalLB but no address pool "
                             "was given (on kind it is carved from the kind network; elsewhere set "
                             "inferenceGateway.<traefik|envoyGateway>.metallb.addressPool)")
        metallb_objects, metallb_releases = metallb(pool, balancing.metallb.version)
        objects += metallb_objects
        releases += metallb_releases
    if gateway.proxy == "EnvoyGateway":
        return objects, releases
    assert gateway.traefik is not None  # the model requires it with backend Traefik
    releases.append(_traefik(gateway.traefik.version, depends_on=tuple(r.name for r in releases)))
    objects += [
        {
            "apiVersion": "gateway.networking.k8s.io/v1",
            "kind": "GatewayClass",
            "metadata": meta(TRAEFIK_GATEWAY_CLASS, labels=MANAGED_BY),
            "spec": {"controllerName": TRAEFIK_CONTROLLER},
        },
        {
            "apiVersion": "gateway.networking.k8s.io/v1",
            "kind": "Gateway",
            "metadata": meta(FRONT_DOOR_GATEWAY, SYSTEM_NAMESPACE, labels=MANAGED_BY),
            "spec": {
                "gatewayClassName": TRAEFIK_GATEWAY_CLASS,
                "listeners": [{"name": "web", "protocol": "HTTP", "port": TRAEFIK_WEB_PORT,
                               "allowedRoutes": {"namespaces": {"from": "All"}}}],
            },
        },
    ]
    return objects, releases


def _traefik(version: str, depends_on: tuple[str, ...]) -> HelmRelease:
    values = {
        "providers": {
            "kubernetesGateway": {
                "enabled": True,
                # Gateways report the Traefik Service's load-balancer address as theirs.
                "statusAddress": {"service": {"namespace": TRAEFIK_NAMESPACE, "name": TRAEFIK_SERVICE}},
            },
            "kubernetesIngress": {"enabled": False},
            # The CRD provider stays on (chart default): Middlewares referenced by HTTPRoute
            # ExtensionRef filters are resolved through it.
        },
        # As the reference sets it; the chart names its Service after the release, which is why
        # the release is called `traefik`.
        "service": {"nameOverride": TRAEFIK_SERVICE},
        # modelplane brings its own GatewayClass and Gateway.
        "gateway": {"enabled": False},
        "gatewayClass": {"enabled": False},
    }
    return HelmRelease(name=TRAEFIK_RELEASE, namespace=TRAEFIK_NAMESPACE, chart="traefik",
                       repository="https://traefik.github.io/charts", version=version, values=values,
                       depends_on=depends_on)


def release_dependencies(obj: dict[str, Any]) -> tuple[str, ...]:
    """Releases that must be installed before `obj` can be applied (its CRD comes from them).

    Gateway API objects need the Gateway API CRDs (a remote manifest, see `waits_for`), not a release.
    """
    group = obj["apiVersion"].rpartition("/")[0]
    if group == "traefik.io":
        return (TRAEFIK_RELEASE,)
    if group in ("gateway.envoyproxy.io", "gateway.networking.k8s.io"):
        return (ENVOY_GATEWAY_RELEASE,)  # only present on an Envoy Gateway front door; `waits_for` filters
    return lb.release_dependencies(obj)


ENVOY_GATEWAY_RELEASE = "mp-gateway-helm"  # as on the workload clusters


def _envoy_gateway(version: str, depends_on: tuple[str, ...]) -> HelmRelease:
    """Envoy Gateway's chart, which also installs the Gateway API CRDs (as on the workload clusters)."""
    return HelmRelease(name=ENVOY_GATEWAY_RELEASE, namespace=envoy.ENVOY_GATEWAY_NAMESPACE, chart="gateway-helm",
                       repository="oci://docker.io/envoyproxy", version=version, values=envoy.envoy_gateway_values(),
                       depends_on=depends_on)


# Releases that need a remote manifest first: Traefik's Gateway provider needs the Gateway API CRDs at start.
RELEASE_MANIFESTS = {TRAEFIK_RELEASE: (GATEWAY_API_CRDS,)}


def waits_for(stack: ClusterStack, obj: dict[str, Any]) -> tuple[str, ...]:
    """The front door's releases and remote manifests (by name) that must be installed before `obj`."""
    present = {r.name for r in stack.releases} | {m.name for m in stack.remote_manifests}
    needs = release_dependencies(obj)
    if obj["apiVersion"].startswith("gateway.networking.k8s.io/"):
        needs += (GATEWAY_API_CRDS,)
    return tuple(n for n in needs if n in present)


def namespace(name: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": meta(name, labels={**MANAGED_BY, **(labels or {})})}


# --- endpoints -----------------------------------------------------------------------------------

@dataclass(frozen=True)
class Backend:
    """Where an endpoint's traffic goes, from its URL: only scheme, host and port are used."""

    scheme: str
    host: str
    port: int

    @property
    def address_type(self) -> str:
        try:
            return "IPv6" if ipaddress.ip_address(self.host).version == 6 else "IPv4"
        except ValueError:
            return "FQDN"


def parse_url(url: str) -> Backend:
    """Port: explicit, else 443 for https, else 80 (§7.1). Raises ValueError without a host or with a bad port."""
    parts = urlsplit(url)
    if not parts.hostname:
        raise ValueError(f"Invalid spec.url: {url}")
    try:
        explicit = parts.port
    except ValueError:
        raise ValueError(f"Invalid spec.url: {url}") from None
    scheme = parts.scheme.lower()
    port = explicit if explicit is not None else (443 if scheme == "https" else 80)
    return Backend(scheme=scheme, host=parts.hostname, port=port)


def _port_name(backend: Backend) -> str:
    return "https" if backend.scheme == "https" and backend.port != 443 else ""


def endpoint_objects(name: str, namespace: str, url: str, labels: dict[str, str]) -> list[dict]:
    """A selectorless Service named `name` (a DNS-1035 label) and the EndpointSlice that fills it.

    The slice points at the URL's host: an IP address (IPv4/IPv6) or a DNS name (FQDN). Its
    endpoint is `ready: true` explicitly because Traefik ignores endpoints whose readiness is unset.
    (Traefik rejects ExternalName Services, hence the hand-made slice.)
    """
    backend = parse_url(url)
    port_name = _port_name(backend)
    service_port: dict[str, Any] = {"port": backend.port, "protocol": "TCP"}
    if port_name:
        service_port = {"name": port_name, **service_port}
    all_labels = {**MANAGED_BY, **labels}
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": meta(name, namespace, labels=all_labels),
        "spec": {"ports": [service_port]},
    }
    endpoint_slice = {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": meta(name, namespace, labels={**all_labels, "kubernetes.io/service-name": name,
                                                  "endpointslice.kubernetes.io/managed-by": "modelplane"}),
        "addressType": backend.address_type,
        "ports": [{"name": port_name, "port": backend.port, "protocol": "TCP"}],
        "endpoints": [{"addresses": [backend.host], "conditions": {"ready": True}}],
    }
    return [service, endpoint_slice]


@dataclass(frozen=True)
class FrontDoorEndpoint:
    """A backend a ModelService can route to: a placed replica, or a hand-made ModelEndpoint."""

    namespace: str
    name: str
    url: str
    labels: dict[str, str]
    rewrite_path: str | None = None
    auth: EndpointAuth | None = None  # hand-made endpoints only
    replica: PlacedReplica | None = None  # set for a replica's endpoint

    @property
    def backend(self) -> Backend:
        return parse_url(self.url)

    @property
    def host_rewrite(self) -> str | None:
        """The Host header a hand-made endpoint on a DNS name expects (see the module docstring)."""
        backend = self.backend
        return backend.host if self.replica is None and backend.address_type == "FQDN" else None

    @property
    def middleware(self) -> str | None:
        return auth_object_name(self.name) if self.auth is not None else None

    def objects(self) -> list[dict]:
        out = endpoint_objects(self.name, self.namespace, self.url, self.labels)
        if self.auth is not None:
            out.append(endpoint_auth_middleware(self.namespace, self.name, self.auth))
        return out

    def envoy_objects(self, tiers: frozenset[bool] = frozenset({False})) -> list[dict]:
        """The endpoint on an Envoy Gateway front door: a Backend per tier it serves in, and a hand-made one's hop.

        `tiers`: whether services use it as primary (False) and/or fallback (True).
        """
        if self.replica is not None:
            cluster = self.replica.cluster
            fqdn, port, host = envoy.gateway_alias_fqdn(cluster), WORKLOAD_GATEWAY_PORT, \
                replica_host(self.namespace, self.name)
            out = []
        else:
            target = self.backend
            fqdn, port, host = envoy.FRONT_DOOR_SERVICE_FQDN, envoy.FRONT_DOOR_PORT, endpoint_host(self.namespace, self.name)
            out = envoy.hop_objects(self.namespace, self.name, target.host, target.port, target.scheme,
                                    self.rewrite_path or "/", self.auth, self.labels)
        backends = [envoy.backend(envoy.fallback_backend_name(self.name) if fallback else self.name, self.namespace,
                                  fqdn, port, host, fallback, self.labels) for fallback in sorted(tiers)]
        return backends + out


def replica_endpoint(fleet: Fleet, replica: PlacedReplica, gateway_addresses: dict[str, str]) -> FrontDoorEndpoint:
    """The endpoint of one placed replica: its workload cluster's gateway, path `/<ns>/<replica>/`.

    Labels: the deployment's template labels, then the managed ones (which win).
    """
    ns = replica.key.namespace
    address = gateway_addresses.get(replica.cluster) or gateway_address_placeholder(replica.cluster)
    deployment = fleet.model_deployments[replica.key]
    labels = {**deployment.labels, DEPLOYMENT_LABEL: replica.key.name, CLUSTER_LABEL: replica.cluster,
              INDEX_LABEL: str(replica.index)}
    return FrontDoorEndpoint(namespace=ns, name=replica.name, url=f"http://{address}/{ns}/{replica.name}/v1",
                             labels=labels, rewrite_path=f"/{ns}/{replica.name}/", replica=replica)


def fleet_endpoints(fleet: Fleet, result: PlanResult, gateway_addresses: dict[str, str]) -> list[FrontDoorEndpoint]:
    """Every endpoint of the fleet, sorted by (namespace, name): all placed replicas and every hand-made one."""
    endpoints = [replica_endpoint(fleet, r, gateway_addresses) for r in result.replicas()]
    endpoints += [FrontDoorEndpoint(namespace=key.namespace, name=key.name, url=e.url, labels=dict(e.labels),
                                    rewrite_path=e.rewrite_path, auth=e.auth)
                  for key, e in fleet.model_endpoints.items()]
    seen: dict[tuple[str, str], FrontDoorEndpoint] = {}
    for endpoint in endpoints:
        key = (endpoint.namespace, endpoint.name)
        if key in seen:
            raise ValueError(f"two front-door endpoints are named {endpoint.namespace}/{endpoint.name} (a replica and "
                             "a ModelEndpoint); rename the ModelEndpoint")
        seen[key] = endpoint
    return [seen[key] for key in sorted(seen)]


# --- auth for hand-made endpoints ----------------------------------------------------------------

def auth_object_name(endpoint: str) -> str:
    return child_name(endpoint, "auth")


def _token_placeholder(namespace: str, name: str) -> str:
    return placeholder("modelEndpoints", namespace, name, "auth", "token")


def endpoint_auth_middleware(namespace: str, name: str, auth: EndpointAuth) -> dict[str, Any]:
    """The Traefik Middleware that adds the endpoint's credential to every request forwarded to it.

    The route attaches it to the endpoint's backendRef with an `ExtensionRef` filter.

    Traefik's Middleware CRD (traefik.io/v1alpha1) cannot take a header value from a Secret:
    `headers.customRequestHeaders` is a plain string map, and its only Secret references are for
    basicAuth/digestAuth users, forwardAuth TLS and Redis credentials. So the value has to be in
    this object. Rendered, it holds a placeholder, never the token: `<scheme> <secret:
    modelplane:modelEndpoints.<ns>.<name>.auth.token>`, which the Pulumi layer replaces with the
    decrypted config value as a Pulumi secret. Keeping it in a Middleware rather than a
    RequestHeaderModifier filter on the HTTPRoute keeps the credential out of the route, which
    more people and tools read.
    """
    value = _token_placeholder(namespace, name)
    if auth.scheme:
        value = f"{auth.scheme} {value}"
    return {
        "apiVersion": "traefik.io/v1alpha1",
        "kind": "Middleware",
        "metadata": meta(auth_object_name(name), namespace, labels=MANAGED_BY),
        "spec": {"headers": {"customRequestHeaders": {auth.header: value}}},
    }


# --- services ------------------------------------------------------------------------------------

MAX_WEIGHT = 1_000_000


def distribute_weights(groups: list[tuple[int, int]]) -> list[int]:
    """Integer backendRef weights for (entry weight, number of its endpoints) groups, in order (§7.2).

    Each group's share is split evenly over its endpoints (the first ones get the remainder),
    scaled so that every endpoint gets at least 1, reduced by the gcd, and capped at 1,000,000
    (proportionally, with Python's banker's rounding, never below 1). Groups without endpoints
    get nothing.
    """
    groups = [(weight, count) for weight, count in groups if count > 0]
    if not groups:
        return []
    scale = max(1, max(math.ceil(count / weight) for weight, count in groups))
    weights: list[int] = []
    for weight, count in groups:
        base, rem = divmod(weight * scale, count)
        weights += [base + 1] * rem + [base] * (count - rem)
    divisor = reduce(math.gcd, weights)
    weights = [w // divisor for w in weights]
    highest = max(weights)
    if highest > MAX_WEIGHT:
        weights = [max(1, round(w / highest * 1e6)) for w in weights]
    return weights


@dataclass(frozen=True)
class RouteBackend:
    """One weighted backendRef of a service's route."""

    service: str  # the endpoint's Service, in the route's namespace
    port: int
    weight: int
    fallback: bool = False  # from a `fallback: true` entry of the service (Envoy Gateway front door)
    rewrite_path: str | None = None
    host_rewrite: str | None = None
    middleware: str | None = None  # a Traefik Middleware in the route's namespace


def route_backends(namespace: str, service: ModelService, endpoints: Iterable[FrontDoorEndpoint]) -> list[RouteBackend]:
    """The service's endpoints (in its own namespace) with their weights.

    Each `spec.endpoints[i]` entry matches by labels; an endpoint matched by several entries
    counts for the first only. Within an entry endpoints go by name. Pass only the ready
    endpoints to route to ready ones only: weights are computed over what is passed.
    """
    candidates = sorted((e for e in endpoints if e.namespace == namespace), key=lambda e: e.name)
    taken: set[str] = set()
    groups: list[tuple[int, bool, list[FrontDoorEndpoint]]] = []
    for entry in service.endpoints:
        matched = [e for e in candidates if e.name not in taken and entry.selector.matches(e.labels)]
        taken.update(e.name for e in matched)
        groups.append((entry.weight, entry.fallback, matched))
    weights = distribute_weights([(weight, len(matched)) for weight, _, matched in groups])
    chosen = [(e, fallback) for _, fallback, matched in groups for e in matched]
    return [RouteBackend(service=e.name, port=e.backend.port, weight=w, rewrite_path=e.rewrite_path,
                         host_rewrite=e.host_rewrite, middleware=e.middleware, fallback=fallback)
            for (e, fallback), w in zip(chosen, weights)]


def service_route(namespace: str, name: str, backends: list[RouteBackend]) -> dict[str, Any]:
    """The HTTPRoute of ModelService `namespace/name`: `/<ns>/<service>/` on the front door's Gateway."""
    backend_refs = []
    for backend in backends:
        ref: dict[str, Any] = {"name": backend.service, "port": backend.port, "weight": backend.weight}
        filters: list[dict[str, Any]] = []
        rewrite: dict[str, Any] = {}
        if backend.host_rewrite:
            rewrite["hostname"] = backend.host_rewrite
        if backend.rewrite_path:
            rewrite["path"] = {"type": "ReplacePrefixMatch", "replacePrefixMatch": backend.rewrite_path}
        if rewrite:
            filters.append({"type": "URLRewrite", "urlRewrite": rewrite})
        if backend.middleware:
            filters.append({"type": "ExtensionRef",
                            "extensionRef": {"group": "traefik.io", "kind": "Middleware", "name": backend.middleware}})
        if filters:
            ref["filters"] = filters
        backend_refs.append(ref)
    rule: dict[str, Any] = {"matches": [{"path": {"type": "PathPrefix", "value": f"/{namespace}/{name}/"}}]}
    if backend_refs:
        rule["backendRefs"] = backend_refs
    return {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "HTTPRoute",
        "metadata": meta(name, namespace, labels=MANAGED_BY),
        "spec": {
            "parentRefs": [{"name": FRONT_DOOR_GATEWAY, "namespace": SYSTEM_NAMESPACE}],
            "rules": [rule],
        },
    }


def service_address(gateway_address: str, key: NamespacedName) -> str:
    """A ModelService's public URL (§7.4); engine paths such as /v1/chat/completions go after it."""
    return f"http://{gateway_address}/{key.namespace}/{key.name}"


# --- the whole front door ------------------------------------------------------------------------

def front_door_stack(fleet: Fleet, kind_network: str = KIND_NETWORK) -> ClusterStack:
    """The front door's cluster whatever the plan: the Gateway API CRDs, MetalLB, Traefik, the Gateway.

    MetalLB's range is `traefik.metallb.addressPool` when set; on kind it is carved from
    `kind_network` by the one rule of `metallb.kind_address_pools` (offline: kind's default network;
    the Pulumi program passes the real one).
    """
    gateway = fleet.inference_gateway
    if gateway is None:
        raise ValueError("the fleet has no front door: set modelplane:inferenceGateway")
    cluster = gateway.cluster_name
    pool = None
    placeholders = []
    metallb_block = gateway.load_balancing.metallb
    if gateway.load_balancing.load_balancer == "MetalLB" and metallb_block is not None:
        pool = metallb_block.address_pool
        if pool is None and gateway.cluster.source == "Kind":
            pool = lb.kind_address_pools(lb.kind_cluster_names(fleet), kind_network)[cluster]
            placeholders.append(lb.pool_placeholder(cluster, pool, kind_network))
    objects, releases = render_inference_gateway(gateway, pool)
    front_door_versions = ServingStack.effective(fleet.serving_stack).versions  # the fleet-wide block
    envoy_front_door = gateway.proxy == "EnvoyGateway"
    if envoy_front_door:
        objects += envoy.front_door_objects(fleet)
        if gateway.installs("envoyGateway"):
            releases.append(_envoy_gateway(front_door_versions.envoy_gateway, tuple(r.name for r in releases)))
    # The front door's releases and remote manifests are final here: chart and manifest mirrors
    # (air-gapped sites, `modelplane:mirror`) apply at this point, and nowhere else.
    stack = ClusterStack(cluster=cluster, role="front-door", gateway=FRONT_DOOR_GATEWAY,
                         objects=[with_await(o, FRONT_DOOR_GATEWAY) for o in objects],
                         releases=[mirror_release(r, fleet.mirror) for r in releases],
                         remote_manifests=[mirror_manifest(gateway_api_crds(front_door_versions.gateway_api),
                                                           fleet.mirror)]
                         if gateway.installs("gatewayApi") and not envoy_front_door else [],
                         placeholders=placeholders)
    # Install order: what waits for nothing (the releases wait for it), then what a release or manifest serves.
    stack.objects = [o for o in stack.objects if not waits_for(stack, o)] + \
        [o for o in stack.objects if waits_for(stack, o)]
    return stack


@dataclass
class FrontDoorParts:
    """The front door, split the way it is deployed: the gateway, then endpoints, then routes."""

    stack: ClusterStack  # the proxy (and MetalLB), the GatewayClass and Gateway, the fleet-wide policies
    namespaces: list[dict]  # the tenants' namespaces on the front-door cluster
    endpoints: list[FrontDoorEndpoint]
    routes: dict[NamespacedName, list[dict]]  # ModelService -> its HTTPRoute (and its filters and traffic policy)
    route_endpoints: dict[NamespacedName, list[str]]  # ModelService -> the endpoint names its route uses
    proxy: str = "Traefik"  # `InferenceGateway.proxy`
    # Envoy Gateway only: how each endpoint is deployed (its Backends and hop), and each workload
    # cluster's gateway by name on the front-door cluster (rendered with the address placeholder).
    endpoint_objects: dict[tuple[str, str], list[dict]] = field(default_factory=dict)
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

    def objects_of(self, endpoint: FrontDoorEndpoint) -> list[dict]:
        """What one endpoint deploys on the front-door cluster."""
        if self.proxy == "EnvoyGateway":
            return self.endpoint_objects[(endpoint.namespace, endpoint.name)]
        return endpoint.objects()

    def manifests(self) -> ClusterManifests:
        objects = self.objects()
        return ClusterManifests(cluster=self.cluster, role="front-door", objects=objects,
                                releases=list(self.stack.releases), remote_manifests=list(self.stack.remote_manifests),
                                placeholders=collect_placeholders(objects, self.stack.placeholders))


def front_door_parts(fleet: Fleet, result: PlanResult, gateway_addresses: dict[str, str],
                     kind_network: str = KIND_NETWORK) -> FrontDoorParts:
    """Everything the front-door cluster gets.

    Endpoints of every placed replica are included; the Pulumi layer creates each only once its
    replica is ready, and a route only after the endpoints it names. A ModelService none of whose
    selectors match an endpoint gets no route, as upstream. A replica's endpoint points at its
    workload cluster's gateway: `gateway_addresses[cluster]`, or `inference-gateway.<cluster>.invalid`
    until that is known.
    """
    stack = front_door_stack(fleet, kind_network)
    endpoints = fleet_endpoints(fleet, result, gateway_addresses)
    assert fleet.inference_gateway is not None  # front_door_stack checked
    envoy_front_door = fleet.inference_gateway.proxy == "EnvoyGateway"
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
        if envoy_front_door:
            routes[key] = envoy.service_objects(key, [(envoy.fallback_backend_name(b.service) if b.fallback
                                                       else b.service, b.weight) for b in backends])
        else:
            routes[key] = [service_route(key.namespace, key.name, backends)]
    used = {e.namespace for e in endpoints} | {key.namespace for key in fleet.model_services}
    namespaces = [namespace(ns) for ns in sorted(used - {SYSTEM_NAMESPACE})]
    parts = FrontDoorParts(stack, namespaces, endpoints, routes, route_endpoints, fleet.inference_gateway.proxy)
    if envoy_front_door:
        parts.endpoint_objects = {(e.namespace, e.name): e.envoy_objects(frozenset(tiers.get((e.namespace, e.name),
                                                                                            {False})))
                                  for e in endpoints}
        clusters = sorted(fleet.inference_clusters)  # all, so that a cluster's name does not come and go with replicas
        parts.gateway_aliases = {c: envoy.gateway_alias_objects(c, gateway_addresses.get(c), WORKLOAD_GATEWAY_PORT)
                                 for c in clusters}
    check_unique_names(stack.cluster, parts.objects())
    return parts
