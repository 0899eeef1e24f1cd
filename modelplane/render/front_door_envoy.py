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
from collections.abc import Mapping
from typing import Any

from ..api.fleet import Fleet, NamespacedName
from ..api.model_service import ModelService
from ..api.served_names import service_engine_names
from ..api.serving_stack import ServingStack
from . import objects as k8s
from .envoy_policy import (
    EG_API,
    EG_GROUP,
    ENVOY_GATEWAY_NAMESPACE,
    ENVOY_GATEWAY_RELEASE,
    ENVOY_READINESS_PORT,
    FRONT_DOOR_CLASS,
    FRONT_DOOR_SERVICE,
    HOP,
    HOP_PORT,
    HOP_SERVICE_FQDN,
    OWNING_GATEWAY_NAME,
    OWNING_GATEWAY_NAMESPACE,
    UNKNOWN_PATH,
    WELL_KNOWN_PORT_SHIFT,
    extension_ref,
    gateway_ref,
    local_error_overrides,
    overprovisioning_factor,
    parent_ref,
)
from .front_door_backends import FrontDoorEndpoint, RouteBackend
from .front_door_envoy_routes import (
    backend,
    fallback_backend_name,
    gateway_alias_fqdn,
    gateway_alias_objects,
    hop_objects,
    service_objects,
)
from .front_door_proxy import FrontDoorProxy
from .model_router import ANTHROPIC_PATHS, MODEL_PATHS, hop_router_lua, model_router_lua, models_list_body
from .types import (
    FRONT_DOOR_GATEWAY,
    GATEWAY_API,
    MANAGED_BY,
    MODEL_HEADER,
    SYSTEM_NAMESPACE,
    WORKLOAD_GATEWAY_PORT,
    HelmRelease,
    RemoteManifest,
    endpoint_host,
    meta,
    model_name,
    replica_host,
)

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
                "targetRefs": [gateway_ref(FRONT_DOOR_GATEWAY)],
                "lua": [{"type": "Inline", "inline": model_router_lua(dict(models), engines, limit)}],
            },
        },
        # Routes without a policy of their own (the API's answers) still answer Envoy's errors in JSON.
        {
            "apiVersion": EG_API,
            "kind": "BackendTrafficPolicy",
            "metadata": meta("front-door", SYSTEM_NAMESPACE, MANAGED_BY),
            "spec": {"targetRefs": [gateway_ref(FRONT_DOOR_GATEWAY)], "responseOverride": local_error_overrides()},
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
            "targetRefs": [gateway_ref(gateway)],
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
                "targetRefs": [gateway_ref(HOP)],
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
    name), and the 404 of any other path.

    Long: the object literals of the API's own answers, in route order.
    """
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
            "filters": [extension_ref("models-list")],
        },
        {
            "matches": [{"path": {"type": "Exact", "value": p}} for p in openai_paths],
            "filters": [extension_ref("unknown-model")],
        },
        {
            "matches": [{"path": {"type": "Exact", "value": p}} for p in sorted(ANTHROPIC_PATHS)],
            "filters": [extension_ref("unknown-model-messages")],
        },
        # The shortest prefix: only what no other route of the Gateway takes.
        {"matches": [{"path": {"type": "PathPrefix", "value": "/"}}], "filters": [extension_ref("unknown-path")]},
    ]
    route = k8s.http_route("model-api", SYSTEM_NAMESPACE, MANAGED_BY, {"parentRefs": [parent_ref()], "rules": rules})
    return [*filters, route]
