"""The Envoy front door's objects per workload cluster, hand-made endpoint and service (see `front_door_envoy`).

A workload cluster's gateway by name (`gateway_alias_objects`); a Backend per replica and endpoint,
and a hand-made endpoint's hop route with its credential (`hop_objects`); per service one HTTPRoute
with its traffic policy and, with fallback endpoints, the overprovisioning patch (`service_objects`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from ..api.fleet import NamespacedName
from ..api.model_service import EndpointAuth
from ..scheduling.names import child_name
from . import objects as k8s
from .envoy_policy import (
    ACTIVE_CHECK,
    CLIENT_ACCOUNT_HEADERS,
    CONNECT_TIMEOUT,
    EG_API,
    EG_GROUP,
    HOP,
    PASSIVE_CHECK,
    RETRY_TRIGGERS,
    UPSTREAM_ANSWERS,
    UPSTREAM_CHECK,
    extension_ref,
    gateway_ref,
    local_error_overrides,
    parent_ref,
)
from .front_door_backends import ip_family
from .model_router import MODEL_PATHS
from .secrets import credential, endpoint_token
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

    Long: the hop's objects for one endpoint as literals (Backend, route, policies, Secret), in apply order.
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
            extension_ref(secret),
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
        rewrites.append(extension_ref(base))
    health = {"matches": [{"path": {"type": "Exact", "value": HEALTH_PATH}}], "filters": [extension_ref(healthy)]}
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
                "parentRefs": [parent_ref(HOP)],
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

    Long: one service's route and policies as object literals.
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
            extension_ref(path_filter),
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
        k8s.http_route(name, ns, MANAGED_BY, {"parentRefs": [parent_ref()], "rules": [rule]}),
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
        "spec": {"targetRef": gateway_ref(FRONT_DOOR_GATEWAY), "type": "JSONPatch", "jsonPatches": [patch]},
    }
