"""The front door on Envoy Gateway: health-checked backends, one retry, fallback tiers, routing by `model`.

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
* A hand-made endpoint (a SaaS provider, another team's server) is reached through a hop on the
  front door itself: its Backend points at the front door's own Envoy Service with the endpoint's
  host (`endpoint_host`), and a per-endpoint HTTPRoute on that host adds what only this endpoint
  needs (base path, Host, TLS, the credential from a Secret) and maps the health probe to its
  `GET <base>v1/models`.
* Per service: one HTTPRoute with a path rule (`/<ns>/<service>/`, as the reference) and a model
  rule (the model paths with header `x-modelplane-model`, set by the Lua model router from the
  body), both over the same Backends; a BackendTrafficPolicy with active and passive health checks
  (no panic routing), one retry of requests that failed before any response byte, on another host;
  fallback endpoints as `fallback: true` Backends (Envoy priority 1).
* Fleet-wide: the model router (EnvoyExtensionPolicy, Lua), a ClientTrafficPolicy raising the body
  buffer the router reads, and the OpenAI-shaped answers of `GET /v1/models` and unknown models.
"""
from __future__ import annotations

import ipaddress
import json
import re
from typing import Any, Iterable

from ..api.fleet import Fleet, NamespacedName
from ..api.model_service import EndpointAuth
from ..scheduling.names import child_name
from .model_router import MODEL_PATHS, model_router_lua, models_list_body
from .secrets import placeholder
from .types import (
    FRONT_DOOR_GATEWAY,
    HEALTH_PATH,
    MANAGED_BY,
    MODEL_HEADER,
    SYSTEM_NAMESPACE,
    endpoint_host,
    gateway_address_placeholder,
    meta,
    model_name,
)

EG_GROUP = "gateway.envoyproxy.io"
EG_API = f"{EG_GROUP}/v1alpha1"
GATEWAY_API = "gateway.networking.k8s.io/v1"

FRONT_DOOR_CLASS = "modelplane-front-door"  # GatewayClass and EnvoyProxy
# The front door's Envoy Service: named, so that hops can address it (Envoy Gateway puts it in its own namespace).
FRONT_DOOR_SERVICE = "modelplane-front-door"
FRONT_DOOR_PORT = 80
ENVOY_GATEWAY_NAMESPACE = "envoy-gateway-system"
FRONT_DOOR_SERVICE_FQDN = f"{FRONT_DOOR_SERVICE}.{ENVOY_GATEWAY_NAMESPACE}.svc.cluster.local"
# The body the model router may buffer: long prompts and base64 images, well past Envoy's 32 KiB default.
BODY_BUFFER_LIMIT = "16Mi"

# Health and failover timings. A dead backend is out of rotation within about 5 s by the active check
# (2 failed probes 2 s apart, 1 s timeout), at once by passive ejection when requests fail, and back
# after one good probe. DESIGN promises "within seconds"; the issue asks for 10 s.
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
# Failed before any response byte: safe to send again, to another backend (Envoy's previous_hosts predicate).
RETRY_TRIGGERS = ["connect-failure", "refused-stream", "reset"]


# --- the front door's cluster-wide objects --------------------------------------------------------

def envoy_gateway_values() -> dict[str, Any]:
    """Helm values of the front door's Envoy Gateway: the Backend API its routes use."""
    return {"config": {"envoyGateway": {"extensionApis": {"enableBackend": True}}}}


def front_door_objects(fleet: Fleet) -> list[dict[str, Any]]:
    """EnvoyProxy, GatewayClass, Gateway, the traffic policies, the model router and the API's own answers."""
    models = model_names(fleet)
    renames = {endpoint_host(key.namespace, key.name): endpoint.model
               for key, endpoint in sorted(fleet.model_endpoints.items()) if endpoint.model}
    return [
        {"apiVersion": EG_API, "kind": "EnvoyProxy", "metadata": meta(FRONT_DOOR_CLASS, SYSTEM_NAMESPACE, MANAGED_BY),
         # externalTrafficPolicy Cluster: some clouds' load balancers reject Envoy Gateway's default, Local.
         "spec": {"provider": {"type": "Kubernetes", "kubernetes": {"envoyService": {
             "name": FRONT_DOOR_SERVICE, "externalTrafficPolicy": "Cluster"}}}}},
        {"apiVersion": GATEWAY_API, "kind": "GatewayClass", "metadata": meta(FRONT_DOOR_CLASS, labels=MANAGED_BY),
         "spec": {"controllerName": "gateway.envoyproxy.io/gatewayclass-controller",
                  "parametersRef": {"group": EG_GROUP, "kind": "EnvoyProxy", "name": FRONT_DOOR_CLASS,
                                    "namespace": SYSTEM_NAMESPACE}}},
        {"apiVersion": GATEWAY_API, "kind": "Gateway", "metadata": meta(FRONT_DOOR_GATEWAY, SYSTEM_NAMESPACE, MANAGED_BY),
         "spec": {"gatewayClassName": FRONT_DOOR_CLASS,
                  "listeners": [{"name": "http", "protocol": "HTTP", "port": FRONT_DOOR_PORT,
                                 "allowedRoutes": {"namespaces": {"from": "All"}}}]}},
        {"apiVersion": EG_API, "kind": "ClientTrafficPolicy", "metadata": meta("front-door", SYSTEM_NAMESPACE, MANAGED_BY),
         "spec": {"targetRefs": [_gateway_ref()], "connection": {"bufferLimit": BODY_BUFFER_LIMIT}}},
        {"apiVersion": EG_API, "kind": "EnvoyExtensionPolicy", "metadata": meta("model-router", SYSTEM_NAMESPACE, MANAGED_BY),
         "spec": {"targetRefs": [_gateway_ref()],
                  "lua": [{"type": "Inline", "inline": model_router_lua(dict(models), renames)}]}},
        *_api_answers(models),
    ]


def _gateway_ref() -> dict[str, str]:
    return {"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": FRONT_DOOR_GATEWAY}


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
    """`GET /v1/models`, and the 404s of a model path no service's rule took (the router answers first, with the name)."""
    openai_404 = json.dumps({"error": {"message": "The model does not exist or is not served by this front door "
                                                  "(GET /v1/models lists them)", "type": "invalid_request_error",
                                       "param": "model", "code": "model_not_found"}}, separators=(",", ":"))
    anthropic_404 = json.dumps({"type": "error", "error": {"type": "not_found_error", "message": "model: not served "
                                                           "by this front door (GET /v1/models lists them)"}},
                               separators=(",", ":"))
    answers = {"models-list": (200, models_list_body(models)), "unknown-model": (404, openai_404),
               "unknown-model-messages": (404, anthropic_404)}
    filters = [{"apiVersion": EG_API, "kind": "HTTPRouteFilter", "metadata": meta(name, SYSTEM_NAMESPACE, MANAGED_BY),
                "spec": {"directResponse": {"statusCode": status, "contentType": "application/json",
                                            "body": {"type": "Inline", "inline": body}}}}
               for name, (status, body) in answers.items()]
    openai_paths = [p for p in MODEL_PATHS if p != "/v1/messages"]
    rules = [
        {"matches": [{"path": {"type": "Exact", "value": "/v1/models"}, "method": "GET"}],
         "filters": [_extension_ref("models-list")]},
        {"matches": [{"path": {"type": "Exact", "value": p}} for p in openai_paths],
         "filters": [_extension_ref("unknown-model")]},
        {"matches": [{"path": {"type": "Exact", "value": "/v1/messages"}}],
         "filters": [_extension_ref("unknown-model-messages")]},
    ]
    route = {"apiVersion": GATEWAY_API, "kind": "HTTPRoute", "metadata": meta("model-api", SYSTEM_NAMESPACE, MANAGED_BY),
             "spec": {"parentRefs": [_parent_ref()], "rules": rules}}
    return [*filters, route]


def _extension_ref(name: str) -> dict[str, Any]:
    return {"type": "ExtensionRef", "extensionRef": {"group": EG_GROUP, "kind": "HTTPRouteFilter", "name": name}}


def _parent_ref() -> dict[str, str]:
    return {"name": FRONT_DOOR_GATEWAY, "namespace": SYSTEM_NAMESPACE}


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
    family = _ip_family(value)
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
        {"apiVersion": "v1", "kind": "Service", "metadata": meta(name, SYSTEM_NAMESPACE, labels), "spec": spec},
        {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
         "metadata": meta(name, SYSTEM_NAMESPACE, {**labels, "kubernetes.io/service-name": name,
                                                   "endpointslice.kubernetes.io/managed-by": "modelplane"}),
         "addressType": family, "ports": ports, "endpoints": endpoints},
    ]


def _ip_family(value: str) -> str | None:
    try:
        return "IPv6" if ipaddress.ip_address(value).version == 6 else "IPv4"
    except ValueError:
        return None


# --- backends ---------------------------------------------------------------------------------------

def backend(name: str, namespace: str, fqdn: str, port: int, host: str, fallback: bool,
            labels: dict[str, str]) -> dict[str, Any]:
    """A Backend: `fqdn:port`, sent `host` as its Host header and health-check host."""
    spec: dict[str, Any] = {"endpoints": [{"fqdn": {"hostname": fqdn, "port": port}, "hostname": host}]}
    if fallback:
        spec["fallback"] = True
    return {"apiVersion": EG_API, "kind": "Backend", "metadata": meta(name, namespace, {**MANAGED_BY, **labels}),
            "spec": spec}


def fallback_backend_name(endpoint: str) -> str:
    """The fallback-tier Backend of an endpoint some service marks `fallback` (a Backend is one tier)."""
    return child_name(endpoint, "fallback")


def hop_objects(namespace: str, name: str, url_host: str, url_port: int, scheme: str, base_path: str,
                auth: EndpointAuth | None, labels: dict[str, str]) -> list[dict[str, Any]]:
    """What only hand-made endpoint `name` needs, on its own host on the front door (see the module docstring).

    `base_path` replaces the leading `/` of what the service's route sends (`/v1/chat/completions`),
    so `/` keeps paths as they are and `/api/` reaches an API served under `/api/v1/...`. The health
    probe becomes `GET <base>v1/models`, which every OpenAI-compatible API answers (with the
    credential, so a revoked key also takes the endpoint out).
    """
    upstream = child_name(name, "upstream")
    all_labels = {**MANAGED_BY, **labels}
    spec: dict[str, Any] = {"endpoints": [_address(url_host, url_port)]}
    if scheme == "https":
        tls: dict[str, Any] = {"wellKnownCACertificates": "System"}
        if _ip_family(url_host) is None:
            tls["sni"] = url_host
        spec["tls"] = tls
    objects: list[dict[str, Any]] = [
        {"apiVersion": EG_API, "kind": "Backend", "metadata": meta(upstream, namespace, all_labels), "spec": spec}]
    filters: list[dict[str, Any]] = []
    if auth is not None:
        secret = child_name(name, "auth")
        value = placeholder("modelEndpoints", namespace, name, "auth", "token")
        objects.append({"apiVersion": "v1", "kind": "Secret", "metadata": meta(secret, namespace, all_labels),
                        "type": "Opaque", "stringData": {"credential": f"{auth.scheme} {value}" if auth.scheme else value}})
        objects.append({"apiVersion": EG_API, "kind": "HTTPRouteFilter", "metadata": meta(secret, namespace, all_labels),
                        "spec": {"credentialInjection": {"header": auth.header, "overwrite": True,
                                                         "credential": {"valueRef": {"name": secret}}}}})
        filters.append(_extension_ref(secret))
    # The Host the endpoint expects (a virtual-hosted SaaS API rejects the front door's); an IPv6 literal
    # cannot be a Gateway API hostname, and an IPv6 server rarely virtual-hosts: its Host stays the hop's.
    host = {} if _ip_family(url_host) == "IPv6" else {"hostname": url_host.lower()}
    ref = [{"group": EG_GROUP, "kind": "Backend", "name": upstream}]
    health = {"matches": [{"path": {"type": "Exact", "value": HEALTH_PATH}}],
              "filters": [{"type": "URLRewrite", "urlRewrite": {**host, "path": {
                  "type": "ReplaceFullPath", "replaceFullPath": f"{base_path}v1/models"}}}, *filters],
              "backendRefs": ref}
    rewrite: dict[str, Any] = dict(host)
    if base_path != "/":
        rewrite["path"] = {"type": "ReplacePrefixMatch", "replacePrefixMatch": base_path}
    traffic = {"matches": [{"path": {"type": "PathPrefix", "value": "/"}}],
               "filters": [{"type": "URLRewrite", "urlRewrite": rewrite}] * bool(rewrite) + filters,
               "timeouts": {"request": "0s"},  # streamed completions run as long as they run
               "backendRefs": ref}
    objects.append({"apiVersion": GATEWAY_API, "kind": "HTTPRoute", "metadata": meta(hop_route_name(name), namespace, all_labels),
                    "spec": {"parentRefs": [_parent_ref()], "hostnames": [endpoint_host(namespace, name)],
                             "rules": [health, traffic]}})
    return objects


def hop_route_name(endpoint: str) -> str:
    return child_name(endpoint, "hop")


def _address(host: str, port: int) -> dict[str, Any]:
    if _ip_family(host) is not None:
        return {"ip": {"address": host, "port": port}}
    return {"fqdn": {"hostname": host.lower(), "port": port}}


# --- services ---------------------------------------------------------------------------------------

def service_objects(key: NamespacedName, backends: Iterable[tuple[str, int]]) -> list[dict[str, Any]]:
    """A ModelService's HTTPRoute (path rule and model rule), its two URL filters and its BackendTrafficPolicy.

    `backends`: (Backend name, weight), primary and fallback alike (a fallback Backend says so itself).
    """
    ns, name = key.namespace, key.name
    backends = list(backends)

    def refs() -> list[dict[str, Any]]:  # one list per rule: YAML of a shared list has anchors
        return [{"group": EG_GROUP, "kind": "Backend", "name": b, "weight": w} for b, w in backends]

    path_filter, host_filter = child_name(name, "path"), child_name(name, "host")
    prefix = f"/{ns}/{name}/"
    path_rule = {"matches": [{"path": {"type": "PathPrefix", "value": prefix}}],
                 "filters": [_extension_ref(path_filter)], "timeouts": {"request": "0s"}, "backendRefs": refs()}
    model_rule = {"matches": [{"path": {"type": "Exact", "value": p},
                               "headers": [{"type": "Exact", "name": MODEL_HEADER, "value": model_name(ns, name)}]}
                              for p in MODEL_PATHS],
                  "filters": [_extension_ref(host_filter)], "timeouts": {"request": "0s"}, "backendRefs": refs()}
    return [
        {"apiVersion": EG_API, "kind": "HTTPRouteFilter", "metadata": meta(path_filter, ns, MANAGED_BY),
         "spec": {"urlRewrite": {"hostname": {"type": "Backend"}, "path": {
             "type": "ReplaceRegexMatch", "replaceRegexMatch": {"pattern": f"^{re.escape(prefix)}", "substitution": "/"}}}}},
        {"apiVersion": EG_API, "kind": "HTTPRouteFilter", "metadata": meta(host_filter, ns, MANAGED_BY),
         "spec": {"urlRewrite": {"hostname": {"type": "Backend"}}}},
        {"apiVersion": GATEWAY_API, "kind": "HTTPRoute", "metadata": meta(name, ns, MANAGED_BY),
         "spec": {"parentRefs": [_parent_ref()], "rules": [path_rule, model_rule]}},
        {"apiVersion": EG_API, "kind": "BackendTrafficPolicy", "metadata": meta(name, ns, MANAGED_BY),
         "spec": {"targetRefs": [{"group": "gateway.networking.k8s.io", "kind": "HTTPRoute", "name": name}],
                  "healthCheck": {"panicThreshold": 0,  # never send to a backend known dead, even if all are
                                  "active": {"type": "HTTP", **ACTIVE_CHECK,
                                             "http": {"path": HEALTH_PATH, "expectedStatuses": [200]}},
                                  "passive": dict(PASSIVE_CHECK)},
                  "retry": {"numRetries": 1, "retryOn": {"triggers": list(RETRY_TRIGGERS)}},
                  "timeout": {"tcp": {"connectTimeout": CONNECT_TIMEOUT}}}},
    ]
