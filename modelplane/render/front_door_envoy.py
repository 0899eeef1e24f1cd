"""The front door on Envoy Gateway: health-checked backends, safe retries, fallback tiers, routing by `model`.

DESIGN "Intent in Pulumi, failure in the data plane": Pulumi places replicas; reacting in seconds
to a dead replica or region is the proxy's job. Envoy Gateway (the version the workload clusters
run) does it through its policy resources, which Traefik's Kubernetes providers cannot: they leave
health to Kubernetes readiness, which cannot see a remote cluster.

The shape follows from one fact of Envoy Gateway: a route rule's backends share one Envoy cluster
(so health checks, ejection, retries on another host and priority failover work across them) only
when no backend carries its own filter and all are addressed the same way. So:

* Every backend is an Envoy Gateway `Backend` addressed by a DNS name, plain HTTP, identified by a
  virtual host name (`Backend.spec.endpoints[].hostname`) that Envoy sends as the Host header of
  both traffic (`urlRewrite.hostname: Backend`) and health checks.
* A replica's Backend points at its workload cluster's gateway through a per-cluster name on the
  front-door cluster (`gateway_alias_objects`: a headless Service whose EndpointSlice holds the
  gateway's IP, or an ExternalName for a load balancer's host name), with the replica's host
  (`replica_host`); the workload cluster answers that host with the replica (`render.replica`).
* A hand-made endpoint (a SaaS provider, another team's server) is reached through a hop: a second,
  internal Gateway (`modelplane-hop`) whose Envoy has a ClusterIP Service only, and a NetworkPolicy
  admitting only the front door's own Envoy pods. Its Backend points at that Service with the
  endpoint's host (`endpoint_host`), and a per-endpoint HTTPRoute there adds what only this endpoint
  needs (base path, Host, TLS, the credential from a Secret) for the model paths only. Nothing on the
  public listener adds a credential: a client sending the hop's Host to the front door is routed like
  any other request.
* Per service: one HTTPRoute with one rule matching the service's path (`/<ns>/<service>/`, as the
  reference) and the model paths with header `x-modelplane-model` (set by the Lua model router from
  the body; a client's own is dropped before routing), so every backend of the service is in one Envoy
  cluster; a BackendTrafficPolicy with active and passive health checks (no panic routing), one retry
  only of requests that never reached a backend, on another host; fallback endpoints as `fallback:
  true` Backends (Envoy priority 1), and an EnvoyPatchPolicy setting the overprovisioning factor that
  decides when they take traffic (`fallback.when`).
* Fleet-wide: the model router (EnvoyExtensionPolicy, Lua), a ClientTrafficPolicy with the request-body
  limit, and the API's own answers (`GET /v1/models`, unknown models and paths, and Envoy's own
  errors in JSON).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from typing import Any

from ..api.fleet import Fleet, NamespacedName
from ..api.model_service import EndpointAuth, FallbackPolicy, ModelService
from ..api.served_names import service_engine_names
from ..api.serving_stack import ServingStack
from ..scheduling.names import child_name
from . import objects as k8s
from .front_door_backends import FrontDoorEndpoint, RouteBackend, ip_family
from .front_door_proxy import FrontDoorProxy
from .model_router import ANTHROPIC_PATHS, MODEL_PATHS, hop_router_lua, model_router_lua, models_list_body
from .secrets import credential, endpoint_token
from .types import (
    FRONT_DOOR_GATEWAY,
    GATEWAY_API,
    HEALTH_PATH,
    MANAGED_BY,
    MODEL_HEADER,
    SYSTEM_NAMESPACE,
    WORKLOAD_GATEWAY_PORT,
    HelmRelease,
    RemoteManifest,
    endpoint_host,
    gateway_address_placeholder,
    meta,
    model_name,
    replica_host,
)

EG_GROUP = "gateway.envoyproxy.io"
EG_API = f"{EG_GROUP}/v1alpha1"

FRONT_DOOR_CLASS = "modelplane-front-door"  # GatewayClass and EnvoyProxy
FRONT_DOOR_SERVICE = "modelplane-front-door"  # the public Envoy Service
ENVOY_GATEWAY_NAMESPACE = "envoy-gateway-system"  # where Envoy Gateway runs the Envoy pods of every Gateway
ENVOY_GATEWAY_RELEASE = "mp-gateway-helm"  # as on the workload clusters
# The hop of hand-made endpoints: its own Gateway, EnvoyProxy and (ClusterIP) Service, all of this name.
HOP = "modelplane-hop"
HOP_PORT = 80
HOP_SERVICE_FQDN = f"{HOP}.{ENVOY_GATEWAY_NAMESPACE}.svc.cluster.local"
# Envoy Gateway's contract with its Envoy pods (v1.8.1): their labels, the container port of a listener
# below 1024 (port + 10000) and the readiness port the kubelet probes.
OWNING_GATEWAY_NAME = "gateway.envoyproxy.io/owning-gateway-name"
OWNING_GATEWAY_NAMESPACE = "gateway.envoyproxy.io/owning-gateway-namespace"
WELL_KNOWN_PORT_SHIFT = 10000
ENVOY_READINESS_PORT = 19003

# Health and failover timings. A dead backend is out of rotation within about 5 s by the active check
# (2 failed probes 2 s apart, 1 s timeout), at once by passive ejection when requests fail, and back
# after one good probe.
ACTIVE_CHECK = {"interval": "2s", "timeout": "1s", "unhealthyThreshold": 2, "healthyThreshold": 1}
PASSIVE_CHECK = {
    "consecutiveLocalOriginFailures": 1,  # connect failure, reset, timeout: eject at once
    "consecutiveGatewayErrors": 3,  # 502/503/504 from the backend's gateway (its replica is gone)
    "consecutive5XxErrors": 5,
    "splitExternalLocalOriginErrors": True,
    "interval": "2s",
    "baseEjectionTime": "10s",
    "maxEjectionPercent": 100,  # all may go: then fallback endpoints take the traffic
}
CONNECT_TIMEOUT = "3s"  # a blackholed region costs 3 s, not Envoy's 10 s, before the retry
# Retried only when the request never reached an engine: a completion is never generated (or billed) twice.
RETRY_TRIGGERS = ("connect-failure", "refused-stream", "reset-before-request")
# The hop checks that a provider answers at all, without its credential and seldom (rate limits).
UPSTREAM_CHECK = {"interval": "30s", "timeout": "5s", "unhealthyThreshold": 2, "healthyThreshold": 1}
UPSTREAM_ANSWERS = [200, 401, 403]  # without a key an API answers 401 or 403: it is up
# Headers a client may send that would act on the fleet's account at a provider, dropped on a hop with a
# credential of its own (the credential header itself is overwritten).
CLIENT_ACCOUNT_HEADERS = (
    "authorization",
    "x-api-key",
    "api-key",
    "proxy-authorization",
    "cookie",
    "openai-organization",
    "openai-project",
    "anthropic-organization",
)
# Envoy's priority failover (fallback tiers): priority 0 takes min(100, factor x healthy/total %) of the
# traffic. Envoy's default factor, 140, spills below 71.4% healthy; 1,000,000 keeps every request on the
# primaries while any of up to 10,000 hosts is healthy.
DEFAULT_OVERPROVISIONING = 140
ALL_PRIMARIES_DOWN_OVERPROVISIONING = 1_000_000


def overprovisioning_factor(policy: FallbackPolicy | None) -> int:
    """The factor that makes Envoy spill to the fallback tier as `policy` says (unset: AllPrimariesDown)."""
    if policy is None or policy.when == "AllPrimariesDown":
        return ALL_PRIMARIES_DOWN_OVERPROVISIONING
    assert policy.healthy_percent is not None  # the model requires it with BelowHealthy
    return -(-10_000 // policy.healthy_percent)  # the smallest factor that keeps all traffic at the percentage


def spill_threshold(factor: int) -> float:
    """Below this percentage of healthy primaries, Envoy sends part of the traffic to the fallback tier."""
    return 10_000 / factor


# --- the API's own answers ---------------------------------------------------------------------------


def _error_body(kind: str, code: str, message: str) -> str:
    """An error both OpenAI's and Anthropic's clients read: `error.message`, `error.type`, `error.code`, `type`."""
    return json.dumps(
        {"type": "error", "error": {"type": kind, "code": code, "message": message}}, separators=(",", ":")
    )


# Errors Envoy answers itself (no healthy backend, a body over the buffer limit), in JSON.
LOCAL_ERRORS = {
    503: _error_body(
        "api_error",
        "no_healthy_backend",
        "No backend of this model is available right now "
        "(every replica and fallback is failing its health checks); retry later",
    ),
    413: _error_body(
        "request_too_large", "request_too_large", "The request body is larger than this front door accepts"
    ),
}
UNKNOWN_PATH = _error_body(
    "not_found_error",
    "unknown_path",
    "This path is not served by this front door: "
    "POST " + ", ".join(MODEL_PATHS) + " with a JSON body naming a `model`, or GET /v1/models",
)


def local_error_overrides() -> list[dict[str, Any]]:
    """A BackendTrafficPolicy's `responseOverride` turning Envoy's own plain-text errors into JSON."""
    return [
        {
            "match": {"statusCodes": [{"type": "Value", "value": status}]},
            "source": "Local",
            "response": {"contentType": "application/json", "body": {"type": "Inline", "inline": body}},
        }
        for status, body in sorted(LOCAL_ERRORS.items())
    ]


# --- the proxy -----------------------------------------------------------------------------------------


class EnvoyFrontDoor(FrontDoorProxy):
    name = "EnvoyGateway"
    endpoints_hold_gateway_address = False  # Backends name a cluster's gateway (`gateway_alias`), not its address

    def __init__(self, fleet: Fleet) -> None:
        super().__init__(fleet)
        # The name each service's engines answer: the model router puts it in the body (`api.served_names`).
        self.engine_names = service_engine_names(fleet)

    def cluster_parts(
        self, after: tuple[str, ...]
    ) -> tuple[list[dict[str, Any]], list[HelmRelease], list[RemoteManifest]]:
        gateway = self.fleet.inference_gateway
        assert gateway is not None
        objects = front_door_objects(self.fleet, self.engine_names)
        releases = []
        if gateway.installs("envoyGateway"):
            version = ServingStack.effective(self.fleet.serving_stack).versions.envoy_gateway  # the fleet-wide block
            releases.append(
                HelmRelease(
                    name=ENVOY_GATEWAY_RELEASE,
                    namespace=ENVOY_GATEWAY_NAMESPACE,
                    chart="gateway-helm",
                    repository="oci://docker.io/envoyproxy",
                    version=version,
                    values=envoy_gateway_values(),
                    depends_on=after,
                )
            )
        return objects, releases, []  # the chart installs the Gateway API CRDs

    def endpoint_objects(self, endpoint: FrontDoorEndpoint, fallback_tiers: frozenset[bool]) -> list[dict[str, Any]]:
        """A Backend per tier the endpoint serves in, and a hand-made one's hop route."""
        if endpoint.replica is not None:
            fqdn, port = gateway_alias_fqdn(endpoint.replica.cluster), WORKLOAD_GATEWAY_PORT
            host = replica_host(endpoint.namespace, endpoint.name)
            out = []
        else:
            fqdn, port, host = HOP_SERVICE_FQDN, HOP_PORT, endpoint_host(endpoint.namespace, endpoint.name)
            target = endpoint.backend
            out = hop_objects(
                endpoint.namespace,
                endpoint.name,
                target.host,
                target.port,
                target.scheme,
                endpoint.rewrite_path or "/",
                endpoint.auth,
                endpoint.labels,
            )
        backends = [
            backend(
                fallback_backend_name(endpoint.name) if fallback else endpoint.name,
                endpoint.namespace,
                fqdn,
                port,
                host,
                fallback,
                endpoint.labels,
            )
            for fallback in sorted(fallback_tiers)
        ]
        return backends + out

    def service_objects(
        self, key: NamespacedName, service: ModelService, backends: list[RouteBackend]
    ) -> list[dict[str, Any]]:
        refs = [(fallback_backend_name(b.service) if b.fallback else b.service, b.weight) for b in backends]
        factor = overprovisioning_factor(service.fallback) if any(b.fallback for b in backends) else None
        return service_objects(key, refs, factor)

    @staticmethod
    def release_dependencies(obj: Mapping[str, Any]) -> tuple[str, ...]:
        group = obj["apiVersion"].rpartition("/")[0]
        in_its_namespace = obj.get("metadata", {}).get("namespace") == ENVOY_GATEWAY_NAMESPACE  # the chart makes it
        return (ENVOY_GATEWAY_RELEASE,) if group in (EG_GROUP, "gateway.networking.k8s.io") or in_its_namespace else ()

    def gateway_aliases(self, addresses: Mapping[str, str]) -> dict[str, list[dict[str, Any]]]:
        # All clusters, so that a cluster's name does not come and go with its replicas.
        return {
            c: gateway_alias_objects(c, addresses.get(c), WORKLOAD_GATEWAY_PORT)
            for c in sorted(self.fleet.inference_clusters)
        }

    @staticmethod
    def preinstalled_hint() -> str:
        return (
            "Envoy Gateway (with extensionApis.enableBackend and enableEnvoyPatchPolicy), add envoyGateway to "
            "inferenceGateway.preinstalled; its chart brings the Gateway API CRDs and leaves ones already there "
            "alone"
        )


# --- the front door's cluster-wide objects --------------------------------------------------------


def envoy_gateway_values() -> dict[str, Any]:
    """Helm values of the front door's Envoy Gateway: the Backend API its routes use, and EnvoyPatchPolicy,
    which sets the fallback tiers' overprovisioning factor (Envoy Gateway offers no field for it)."""
    return {"config": {"envoyGateway": {"extensionApis": {"enableBackend": True, "enableEnvoyPatchPolicy": True}}}}


def front_door_objects(fleet: Fleet, engine_names: Mapping[NamespacedName, str] | None = None) -> list[dict[str, Any]]:
    """EnvoyProxy, GatewayClass, Gateway, the traffic policies, the model router, the API's own answers, the hop."""
    gateway = fleet.inference_gateway
    assert gateway is not None
    limit = gateway.request_body_limit
    models = model_names(fleet)
    engines = {model_name(key.namespace, key.name): name for key, name in (engine_names or {}).items()}
    objects = [
        {
            "apiVersion": EG_API,
            "kind": "EnvoyProxy",
            "metadata": meta(FRONT_DOOR_CLASS, SYSTEM_NAMESPACE, MANAGED_BY),
            # externalTrafficPolicy Cluster: some clouds' load balancers reject Envoy Gateway's default, Local.
            "spec": {
                "provider": {
                    "type": "Kubernetes",
                    "kubernetes": {"envoyService": {"name": FRONT_DOOR_SERVICE, "externalTrafficPolicy": "Cluster"}},
                }
            },
        },
        {
            "apiVersion": GATEWAY_API,
            "kind": "GatewayClass",
            "metadata": meta(FRONT_DOOR_CLASS, labels=MANAGED_BY),
            "spec": {
                "controllerName": "gateway.envoyproxy.io/gatewayclass-controller",
                "parametersRef": {
                    "group": EG_GROUP,
                    "kind": "EnvoyProxy",
                    "name": FRONT_DOOR_CLASS,
                    "namespace": SYSTEM_NAMESPACE,
                },
            },
        },
        _gateway(FRONT_DOOR_GATEWAY),
        _client_policy("front-door", FRONT_DOOR_GATEWAY, limit),
        {
            "apiVersion": EG_API,
            "kind": "EnvoyExtensionPolicy",
            "metadata": meta("model-router", SYSTEM_NAMESPACE, MANAGED_BY),
            "spec": {
                "targetRefs": [_gateway_ref(FRONT_DOOR_GATEWAY)],
                "lua": [{"type": "Inline", "inline": model_router_lua(dict(models), engines, limit)}],
            },
        },
        # Routes without a policy of their own (the API's answers) still answer Envoy's errors in JSON.
        {
            "apiVersion": EG_API,
            "kind": "BackendTrafficPolicy",
            "metadata": meta("front-door", SYSTEM_NAMESPACE, MANAGED_BY),
            "spec": {"targetRefs": [_gateway_ref(FRONT_DOOR_GATEWAY)], "responseOverride": local_error_overrides()},
        },
        *_api_answers(models),
    ]
    if fleet.model_endpoints:
        objects += hop_gateway_objects(fleet, limit)
    return objects


def _gateway(name: str, parameters: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "gatewayClassName": FRONT_DOOR_CLASS,
        "listeners": [
            {"name": "http", "protocol": "HTTP", "port": 80, "allowedRoutes": {"namespaces": {"from": "All"}}}
        ],
    }
    if parameters:
        spec["infrastructure"] = {"parametersRef": {"group": EG_GROUP, "kind": "EnvoyProxy", "name": parameters}}
    return {
        "apiVersion": GATEWAY_API,
        "kind": "Gateway",
        "metadata": meta(name, SYSTEM_NAMESPACE, MANAGED_BY),
        "spec": spec,
    }


def _client_policy(name: str, gateway: str, body_limit: int) -> dict[str, Any]:
    """The body buffer the Lua reads (the request-body limit), and no client-sent internal header past the edge."""
    return {
        "apiVersion": EG_API,
        "kind": "ClientTrafficPolicy",
        "metadata": meta(name, SYSTEM_NAMESPACE, MANAGED_BY),
        "spec": {
            "targetRefs": [_gateway_ref(gateway)],
            "connection": {"bufferLimit": str(body_limit)},
            "headers": {"earlyRequestHeaders": {"remove": [MODEL_HEADER]}},
        },
    }


def hop_gateway_objects(fleet: Fleet, body_limit: int) -> list[dict[str, Any]]:
    """The internal Gateway hand-made endpoints are reached through; only the front door's Envoy reaches it."""
    renames = {
        endpoint_host(key.namespace, key.name): endpoint.model
        for key, endpoint in sorted(fleet.model_endpoints.items())
        if endpoint.model
    }
    own_pods = {OWNING_GATEWAY_NAME: FRONT_DOOR_GATEWAY, OWNING_GATEWAY_NAMESPACE: SYSTEM_NAMESPACE}
    hop_pods = {OWNING_GATEWAY_NAME: HOP, OWNING_GATEWAY_NAMESPACE: SYSTEM_NAMESPACE}
    return [
        {
            "apiVersion": EG_API,
            "kind": "EnvoyProxy",
            "metadata": meta(HOP, SYSTEM_NAMESPACE, MANAGED_BY),
            "spec": {
                "provider": {"type": "Kubernetes", "kubernetes": {"envoyService": {"name": HOP, "type": "ClusterIP"}}}
            },
        },  # no load balancer, no node port: never outside the cluster
        _gateway(HOP, parameters=HOP),
        _client_policy(HOP, HOP, body_limit),
        {
            "apiVersion": EG_API,
            "kind": "EnvoyExtensionPolicy",
            "metadata": meta(HOP, SYSTEM_NAMESPACE, MANAGED_BY),
            "spec": {
                "targetRefs": [_gateway_ref(HOP)],
                "lua": [{"type": "Inline", "inline": hop_router_lua(renames, body_limit)}],
            },
        },
        # Inside the cluster, only the front door's own Envoy pods reach the hop's listener (and the kubelet its
        # readiness port); a CNI without NetworkPolicy support leaves the ClusterIP as the only guard.
        {
            "apiVersion": "networking.k8s.io/v1",
            "kind": "NetworkPolicy",
            "metadata": meta(HOP, ENVOY_GATEWAY_NAMESPACE, MANAGED_BY),
            "spec": {
                "podSelector": {"matchLabels": hop_pods},
                "policyTypes": ["Ingress"],
                "ingress": [
                    {
                        "from": [{"podSelector": {"matchLabels": own_pods}}],
                        "ports": [{"protocol": "TCP", "port": HOP_PORT + WELL_KNOWN_PORT_SHIFT}],
                    },
                    {"ports": [{"protocol": "TCP", "port": ENVOY_READINESS_PORT}]},
                ],
            },
        },
    ]


def _gateway_ref(name: str) -> dict[str, str]:
    return {"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": name}


def model_names(fleet: Fleet) -> list[tuple[str, str]]:
    """(name a request may use, the service's canonical name), for every ModelService: canonical names and aliases."""
    out = []
    for key, service in sorted(fleet.model_services.items()):
        canonical = model_name(key.namespace, key.name)
        out.append((canonical, canonical))
        if service.alias:
            out.append((service.alias, canonical))
    return sorted(out)


def _api_answers(models: list[tuple[str, str]]) -> list[dict[str, Any]]:
    """`GET /v1/models`, the 404s of a model path no service's rule took (the router answers first, with the
    name), and the 404 of any other path."""
    openai_404 = json.dumps(
        {
            "error": {
                "message": "The model does not exist or is not served by this front door (GET /v1/models lists them)",
                "type": "invalid_request_error",
                "param": "model",
                "code": "model_not_found",
            }
        },
        separators=(",", ":"),
    )
    anthropic_404 = json.dumps(
        {
            "type": "error",
            "error": {
                "type": "not_found_error",
                "message": "model: not served by this front door (GET /v1/models lists them)",
            },
        },
        separators=(",", ":"),
    )
    answers = {
        "models-list": (200, models_list_body(models)),
        "unknown-model": (404, openai_404),
        "unknown-model-messages": (404, anthropic_404),
        "unknown-path": (404, UNKNOWN_PATH),
    }
    filters = [
        {
            "apiVersion": EG_API,
            "kind": "HTTPRouteFilter",
            "metadata": meta(name, SYSTEM_NAMESPACE, MANAGED_BY),
            "spec": {
                "directResponse": {
                    "statusCode": status,
                    "contentType": "application/json",
                    "body": {"type": "Inline", "inline": body},
                }
            },
        }
        for name, (status, body) in answers.items()
    ]
    openai_paths = [p for p in MODEL_PATHS if p not in ANTHROPIC_PATHS]
    rules = [
        {
            "matches": [{"path": {"type": "Exact", "value": "/v1/models"}, "method": "GET"}],
            "filters": [_extension_ref("models-list")],
        },
        {
            "matches": [{"path": {"type": "Exact", "value": p}} for p in openai_paths],
            "filters": [_extension_ref("unknown-model")],
        },
        {
            "matches": [{"path": {"type": "Exact", "value": p}} for p in sorted(ANTHROPIC_PATHS)],
            "filters": [_extension_ref("unknown-model-messages")],
        },
        # The shortest prefix: only what no other route of the Gateway takes.
        {"matches": [{"path": {"type": "PathPrefix", "value": "/"}}], "filters": [_extension_ref("unknown-path")]},
    ]
    route = k8s.http_route("model-api", SYSTEM_NAMESPACE, MANAGED_BY, {"parentRefs": [_parent_ref()], "rules": rules})
    return [*filters, route]


def _extension_ref(name: str) -> dict[str, Any]:
    return {"type": "ExtensionRef", "extensionRef": {"group": EG_GROUP, "kind": "HTTPRouteFilter", "name": name}}


def _parent_ref(gateway: str = FRONT_DOOR_GATEWAY) -> dict[str, str]:
    return {"name": gateway, "namespace": SYSTEM_NAMESPACE}


# --- workload clusters, as the front door reaches them ---------------------------------------------


def gateway_alias(cluster: str) -> str:
    """The Service on the front-door cluster that names workload cluster `cluster`'s gateway."""
    return child_name(cluster, "gateway")


def gateway_alias_fqdn(cluster: str) -> str:
    return f"{gateway_alias(cluster)}.{SYSTEM_NAMESPACE}.svc.cluster.local"


def gateway_alias_objects(cluster: str, address: str | None, port: int) -> list[dict[str, Any]]:
    """A DNS name for `cluster`'s gateway on the front-door cluster, so every Backend is addressed by name.

    An IP address (kind, MetalLB, GKE, AKS, most clusters): a headless Service whose EndpointSlice
    holds it, which the cluster DNS answers directly. A host name (an AWS load balancer): an
    ExternalName Service (a CNAME); its EndpointSlice stays empty. Rendered offline with the address
    placeholder (a host name, so an ExternalName); the Pulumi layer renders it again with the real address.
    """
    name = gateway_alias(cluster)
    value = address or gateway_address_placeholder(cluster)
    family = ip_family(value)
    labels = {**MANAGED_BY, "modelplane.ai/cluster": cluster}
    ports = [{"name": "http", "port": port, "protocol": "TCP"}]
    if family is None:
        spec: dict[str, Any] = {"type": "ExternalName", "externalName": value, "ports": ports}
        endpoints: list[dict[str, Any]] = []
        family = "IPv4"
    else:
        spec = {"clusterIP": "None", "ports": ports}
        endpoints = [{"addresses": [value], "conditions": {"ready": True}}]
    return [
        k8s.service(name, SYSTEM_NAMESPACE, labels, spec),
        k8s.endpoint_slice(name, SYSTEM_NAMESPACE, labels, family, ports, endpoints),
    ]


# --- backends ---------------------------------------------------------------------------------------


def backend(
    name: str, namespace: str, fqdn: str, port: int, host: str, fallback: bool, labels: dict[str, str]
) -> dict[str, Any]:
    """A Backend: `fqdn:port`, sent `host` as its Host header and health-check host."""
    spec: dict[str, Any] = {"endpoints": [{"fqdn": {"hostname": fqdn, "port": port}, "hostname": host}]}
    if fallback:
        spec["fallback"] = True
    return {
        "apiVersion": EG_API,
        "kind": "Backend",
        "metadata": meta(name, namespace, {**MANAGED_BY, **labels}),
        "spec": spec,
    }


def fallback_backend_name(endpoint: str) -> str:
    """The fallback-tier Backend of an endpoint some service marks `fallback` (a Backend is one tier)."""
    return child_name(endpoint, "fallback")


def hop_route_name(endpoint: str) -> str:
    return child_name(endpoint, "hop")


def hop_objects(
    namespace: str,
    name: str,
    url_host: str,
    url_port: int,
    scheme: str,
    base_path: str,
    auth: EndpointAuth | None,
    labels: dict[str, str],
) -> list[dict[str, Any]]:
    """What only hand-made endpoint `name` needs, on its own host on the hop (see the module docstring).

    `base_path` replaces the leading `/` of what the service's route sends (`/v1/chat/completions`),
    so `/` keeps paths as they are and `/api/` reaches an API served under `/api/v1/...`. Only the model
    paths are forwarded (no files, fine-tuning or images on the fleet's key). The front door's health probe
    is answered by the hop itself: a provider is not polled with its key every 2 s from every Envoy (rate
    limits); the hop checks it answers at all every 30 s, without the key, and the front door ejects an
    endpoint whose requests fail.
    """
    upstream = child_name(name, "upstream")
    all_labels = {**MANAGED_BY, **labels}
    address = _address(url_host, url_port)
    if ip_family(url_host) is None:
        address["hostname"] = url_host.lower()  # the Host of the hop's own health check
    spec: dict[str, Any] = {"endpoints": [address]}
    if scheme == "https":
        tls: dict[str, Any] = {"wellKnownCACertificates": "System"}
        if ip_family(url_host) is None:
            tls["sni"] = url_host
        spec["tls"] = tls
    healthy = child_name(name, "healthy")
    objects: list[dict[str, Any]] = [
        {"apiVersion": EG_API, "kind": "Backend", "metadata": meta(upstream, namespace, all_labels), "spec": spec},
        {
            "apiVersion": EG_API,
            "kind": "HTTPRouteFilter",
            "metadata": meta(healthy, namespace, all_labels),
            "spec": {
                "directResponse": {
                    "statusCode": 200,
                    "contentType": "application/json",
                    "body": {"type": "Inline", "inline": '{"status":"ok"}'},
                }
            },
        },
    ]
    filters: list[dict[str, Any]] = []
    if auth is not None:
        secret = child_name(name, "auth")
        objects.append(
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": meta(secret, namespace, all_labels),
                "type": "Opaque",
                "stringData": {"credential": credential(auth.scheme, endpoint_token(namespace, name))},
            }
        )
        objects.append(
            {
                "apiVersion": EG_API,
                "kind": "HTTPRouteFilter",
                "metadata": meta(secret, namespace, all_labels),
                "spec": {
                    "credentialInjection": {
                        "header": auth.header,
                        "overwrite": True,
                        "credential": {"valueRef": {"name": secret}},
                    }
                },
            }
        )
        dropped = [h for h in CLIENT_ACCOUNT_HEADERS if h != auth.header.lower()]
        filters += [
            {"type": "RequestHeaderModifier", "requestHeaderModifier": {"remove": dropped}},
            _extension_ref(secret),
        ]
    # The Host the endpoint expects (a virtual-hosted SaaS API rejects the hop's); an IPv6 literal cannot be
    # a Gateway API hostname, and an IPv6 server rarely virtual-hosts: its Host stays the hop's.
    rewrites: list[dict[str, Any]] = []
    if ip_family(url_host) != "IPv6":
        rewrites.append({"type": "URLRewrite", "urlRewrite": {"hostname": url_host.lower()}})
    if base_path != "/":  # the paths are exact matches, which Gateway API's prefix replacement does not take
        base = child_name(name, "base-path")
        objects.append(
            {
                "apiVersion": EG_API,
                "kind": "HTTPRouteFilter",
                "metadata": meta(base, namespace, all_labels),
                "spec": {
                    "urlRewrite": {
                        "path": {
                            "type": "ReplaceRegexMatch",
                            "replaceRegexMatch": {"pattern": "^/", "substitution": base_path},
                        }
                    }
                },
            }
        )
        rewrites.append(_extension_ref(base))
    health = {"matches": [{"path": {"type": "Exact", "value": HEALTH_PATH}}], "filters": [_extension_ref(healthy)]}
    traffic = {
        "matches": [{"path": {"type": "Exact", "value": p}, "method": "POST"} for p in MODEL_PATHS],
        "filters": rewrites + filters,
        "timeouts": {"request": "0s"},  # streamed completions run as long as they run
        "backendRefs": [{"group": EG_GROUP, "kind": "Backend", "name": upstream}],
    }
    route = hop_route_name(name)
    objects.append(
        k8s.http_route(
            route,
            namespace,
            all_labels,
            {
                "parentRefs": [_parent_ref(HOP)],
                "hostnames": [endpoint_host(namespace, name)],
                "rules": [health, traffic],
            },
        )
    )
    objects.append(
        {
            "apiVersion": EG_API,
            "kind": "BackendTrafficPolicy",
            "metadata": meta(route, namespace, all_labels),
            "spec": {
                "targetRefs": [{"group": "gateway.networking.k8s.io", "kind": "HTTPRoute", "name": route}],
                "healthCheck": {
                    "active": {
                        "type": "HTTP",
                        **UPSTREAM_CHECK,
                        "http": {"path": f"{base_path}v1/models", "expectedStatuses": list(UPSTREAM_ANSWERS)},
                    }
                },
                "timeout": {"tcp": {"connectTimeout": CONNECT_TIMEOUT}},
                "responseOverride": local_error_overrides(),
            },
        }
    )
    return objects


def _address(host: str, port: int) -> dict[str, Any]:
    if ip_family(host) is not None:
        return {"ip": {"address": host, "port": port}}
    return {"fqdn": {"hostname": host.lower(), "port": port}}


# --- services ---------------------------------------------------------------------------------------


def envoy_cluster_name(key: NamespacedName) -> str:
    """Envoy Gateway's name for the Envoy cluster of a service's one rule (its xDS naming: route, rule index)."""
    return f"httproute/{key.namespace}/{key.name}/rule/0"


def service_objects(
    key: NamespacedName, backends: Iterable[tuple[str, int]], overprovisioning: int | None = None
) -> list[dict[str, Any]]:
    """A ModelService's HTTPRoute, its URL filter, its BackendTrafficPolicy and, with a fallback tier, the
    EnvoyPatchPolicy that sets when that tier takes traffic.

    `backends`: (Backend name, weight), primary and fallback alike (a fallback Backend says so itself).
    One rule holds both ways in (the service's path, and the model paths with the router's header), so
    all of the service's backends are one Envoy cluster: one health state, one ejection state, probed on
    the active interval (a cluster without traffic would be probed only every 60 s).
    """
    ns, name = key.namespace, key.name
    path_filter = child_name(name, "path")
    prefix = f"/{ns}/{name}/"
    matches: list[dict[str, Any]] = [{"path": {"type": "PathPrefix", "value": prefix}}]
    matches += [
        {
            "path": {"type": "Exact", "value": p},
            "headers": [{"type": "Exact", "name": MODEL_HEADER, "value": model_name(ns, name)}],
        }
        for p in MODEL_PATHS
    ]
    rule = {
        "matches": matches,
        "filters": [
            _extension_ref(path_filter),
            {"type": "RequestHeaderModifier", "requestHeaderModifier": {"remove": [MODEL_HEADER]}},
        ],
        "timeouts": {"request": "0s"},  # streamed completions run as long as they run
        "backendRefs": [{"group": EG_GROUP, "kind": "Backend", "name": b, "weight": w} for b, w in backends],
    }
    objects = [
        # The path way in loses its prefix (`/ns/svc/v1/...` -> `/v1/...`); a model path has none to lose.
        {
            "apiVersion": EG_API,
            "kind": "HTTPRouteFilter",
            "metadata": meta(path_filter, ns, MANAGED_BY),
            "spec": {
                "urlRewrite": {
                    "hostname": {"type": "Backend"},
                    "path": {
                        "type": "ReplaceRegexMatch",
                        "replaceRegexMatch": {"pattern": f"^{re.escape(prefix)}", "substitution": "/"},
                    },
                }
            },
        },
        k8s.http_route(name, ns, MANAGED_BY, {"parentRefs": [_parent_ref()], "rules": [rule]}),
        {
            "apiVersion": EG_API,
            "kind": "BackendTrafficPolicy",
            "metadata": meta(name, ns, MANAGED_BY),
            "spec": {
                "targetRefs": [{"group": "gateway.networking.k8s.io", "kind": "HTTPRoute", "name": name}],
                "healthCheck": {
                    "panicThreshold": 0,  # never send to a backend known dead, even if all are
                    "active": {
                        "type": "HTTP",
                        **ACTIVE_CHECK,
                        "http": {"path": HEALTH_PATH, "expectedStatuses": [200]},
                    },
                    "passive": dict(PASSIVE_CHECK),
                },
                "retry": {"numRetries": 1, "retryOn": {"triggers": list(RETRY_TRIGGERS)}},
                "timeout": {"tcp": {"connectTimeout": CONNECT_TIMEOUT}},
                "responseOverride": local_error_overrides(),
            },
        },
    ]
    if overprovisioning is not None:
        objects.append(fallback_policy(key, overprovisioning))
    return objects


def fallback_policy(key: NamespacedName, factor: int) -> dict[str, Any]:
    """The EnvoyPatchPolicy giving the service's Envoy cluster its overprovisioning factor (`overprovisioning_factor`).

    It sits beside the Gateway it patches (Envoy Gateway requires its namespace), named after the service.
    """
    patch = {
        "type": "type.googleapis.com/envoy.config.cluster.v3.Cluster",
        "name": envoy_cluster_name(key),
        "operation": {"op": "add", "path": "/load_assignment/policy", "value": {"overprovisioning_factor": factor}},
    }
    return {
        "apiVersion": EG_API,
        "kind": "EnvoyPatchPolicy",
        "metadata": meta(f"fallback.{key.name}.{key.namespace}", SYSTEM_NAMESPACE, MANAGED_BY),
        "spec": {"targetRef": _gateway_ref(FRONT_DOOR_GATEWAY), "type": "JSONPatch", "jsonPatches": [patch]},
    }
