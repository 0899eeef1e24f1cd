"""The front door on Traefik, as the reference has it (`inferenceGateway.backend: Traefik`; spec §7).

* `TraefikFrontDoor.cluster_parts` — Traefik, the `traefik` GatewayClass and the `modelplane` Gateway
  (§7.3), and the Gateway API CRDs from their upstream release manifest: the Traefik chart does not
  install them (since chart v34 they live in the separate `traefik-crds` chart). That file also holds
  a ValidatingAdmissionPolicy guarding CRD upgrades, and the Pulumi layer applies it as it is. Not
  rendered when the (Existing) cluster already has them (`preinstalled: [gatewayApi]`).
* `endpoint_objects` — a backend as a selectorless Service plus a hand-made EndpointSlice (§7.1).
* `service_route` — a ModelService as one HTTPRoute `/<ns>/<service>/` whose weighted backendRefs
  split traffic over its endpoints (§7.2).

Improvements over the reference, deliberately:

* A ModelService selects endpoints in its own namespace only (DESIGN.md "Identity includes the
  namespace"); the reference matched labels across all namespaces, with backendRefs that carry
  no namespace.
* A hand-made endpoint whose URL names a host (not an IP address) gets its `Host` header rewritten
  to that host (`urlRewrite.hostname`). Traefik forwards the client's `Host` by default, which
  would be the front door's address, and a virtual-hosted SaaS API rejects that.
* A hand-made endpoint may carry `auth`; see `endpoint_auth_middleware` (and `validate`'s warning).
* An `https` URL on a port other than 443 names its Service port `https`: Traefik speaks TLS to
  a backend only on port 443 or a port whose name starts with `https`.

Traefik does none of what the Envoy Gateway front door does on failure (no health checks of remote
backends, no retries, no fallback, no routing by `model`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from ..api.fleet import NamespacedName
from ..api.model_service import EndpointAuth, ModelService
from ..api.serving_stack import ServingStack
from ..scheduling.names import child_name
from . import objects as k8s
from .front_door_backends import Backend, FrontDoorEndpoint, RouteBackend, parse_url
from .front_door_proxy import FrontDoorProxy
from .secrets import credential, endpoint_token
from .types import (
    FRONT_DOOR_GATEWAY,
    GATEWAY_API,
    MANAGED_BY,
    SYSTEM_NAMESPACE,
    HelmRelease,
    RemoteManifest,
    meta,
)

# The version is `servingStack.versions.gatewayApi` (fleet-wide): the standard channel release the
# reference vendors on the control cluster.
GATEWAY_API_CRDS_URL = (
    "https://github.com/kubernetes-sigs/gateway-api/releases/download/{version}/standard-install.yaml"
)
GATEWAY_API_CRDS = "gateway-api-crds"  # the remote manifest's name (the ConfigFile is `<cluster>/gateway-api-crds`)

TRAEFIK_NAMESPACE = "traefik-system"
# The release is named after the chart, so the chart's Service is named `traefik` too
# (its fullname is the release name when that contains the chart name): the Gateway's status
# address is copied from that Service.
TRAEFIK_RELEASE = "traefik"
TRAEFIK_SERVICE = "traefik"
TRAEFIK_GATEWAY_CLASS = "traefik"
TRAEFIK_CONTROLLER = "traefik.io/gateway-controller"
TRAEFIK_WEB_PORT = 8000  # Traefik's internal `web` entryPoint; the Service exposes it on port 80


def gateway_api_crds_url(version: str) -> str:
    """Where the Gateway API CRDs for the front door come from."""
    return GATEWAY_API_CRDS_URL.format(version=version)


def gateway_api_crds(version: str) -> RemoteManifest:
    """The front door's Gateway API CRDs, applied from the upstream release manifest."""
    return RemoteManifest(
        name=GATEWAY_API_CRDS, component="gatewayApi", version=version, url=gateway_api_crds_url(version)
    )


class TraefikFrontDoor(FrontDoorProxy):
    name = "Traefik"
    endpoints_hold_gateway_address = True
    # Traefik's Gateway provider needs the Gateway API CRDs at start.
    release_manifests: ClassVar[Mapping[str, tuple[str, ...]]] = {TRAEFIK_RELEASE: (GATEWAY_API_CRDS,)}

    def cluster_parts(
        self, after: tuple[str, ...]
    ) -> tuple[list[dict[str, Any]], list[HelmRelease], list[RemoteManifest]]:
        gateway = self.fleet.inference_gateway
        assert gateway is not None and gateway.traefik is not None  # the model requires it with backend Traefik
        objects: list[dict[str, Any]] = [
            {
                "apiVersion": GATEWAY_API,
                "kind": "GatewayClass",
                "metadata": meta(TRAEFIK_GATEWAY_CLASS, labels=MANAGED_BY),
                "spec": {"controllerName": TRAEFIK_CONTROLLER},
            },
            {
                "apiVersion": GATEWAY_API,
                "kind": "Gateway",
                "metadata": meta(FRONT_DOOR_GATEWAY, SYSTEM_NAMESPACE, labels=MANAGED_BY),
                "spec": {
                    "gatewayClassName": TRAEFIK_GATEWAY_CLASS,
                    "listeners": [
                        {
                            "name": "web",
                            "protocol": "HTTP",
                            "port": TRAEFIK_WEB_PORT,
                            "allowedRoutes": {"namespaces": {"from": "All"}},
                        }
                    ],
                },
            },
        ]
        version = ServingStack.effective(self.fleet.serving_stack).versions.gateway_api  # the fleet-wide block
        manifests = [gateway_api_crds(version)] if gateway.installs("gatewayApi") else []
        return objects, [_traefik(gateway.traefik.version, after)], manifests

    def endpoint_objects(self, endpoint: FrontDoorEndpoint, fallback_tiers: frozenset[bool]) -> list[dict[str, Any]]:
        out = endpoint_objects(endpoint.name, endpoint.namespace, endpoint.url, endpoint.labels)
        if endpoint.auth is not None:
            out.append(endpoint_auth_middleware(endpoint.namespace, endpoint.name, endpoint.auth))
        return out

    def service_objects(
        self, key: NamespacedName, service: ModelService, backends: list[RouteBackend]
    ) -> list[dict[str, Any]]:
        return [service_route(key.namespace, key.name, backends)]

    @staticmethod
    def release_dependencies(obj: Mapping[str, Any]) -> tuple[str, ...]:
        group = obj["apiVersion"].rpartition("/")[0]
        if group == "traefik.io":
            return (TRAEFIK_RELEASE,)
        if group == "gateway.networking.k8s.io":
            return (GATEWAY_API_CRDS,)
        return ()

    @staticmethod
    def preinstalled_hint() -> str:
        return "the Gateway API CRDs (GKE and many platforms install them), add gatewayApi to inferenceGateway.preinstalled"


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
    return HelmRelease(
        name=TRAEFIK_RELEASE,
        namespace=TRAEFIK_NAMESPACE,
        chart="traefik",
        repository="https://traefik.github.io/charts",
        version=version,
        values=values,
        depends_on=depends_on,
    )


# --- endpoints -----------------------------------------------------------------------------------


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
    service = k8s.service(name, namespace, all_labels, {"ports": [service_port]})
    endpoint_slice = k8s.endpoint_slice(
        name,
        namespace,
        all_labels,
        backend.address_type,
        [{"name": port_name, "port": backend.port, "protocol": "TCP"}],
        [{"addresses": [backend.host], "conditions": {"ready": True}}],
    )
    return [service, endpoint_slice]


def auth_object_name(endpoint: str) -> str:
    return child_name(endpoint, "auth")


def endpoint_auth_middleware(namespace: str, name: str, auth: EndpointAuth) -> dict[str, Any]:
    """The Traefik Middleware that adds the endpoint's credential to every request forwarded to it.

    The route attaches it to the endpoint's backendRef with an `ExtensionRef` filter.

    Traefik's Middleware CRD (traefik.io/v1alpha1) cannot take a header value from a Secret:
    `headers.customRequestHeaders` is a plain string map, and its only Secret references are for
    basicAuth/digestAuth users, forwardAuth TLS and Redis credentials. So the value has to be in
    this object, readable by anyone who can read Middlewares in the namespace (`validate` warns).
    Rendered, it holds a placeholder, never the token: `<scheme> <secret:
    modelplane:modelEndpoints.<ns>.<name>.auth.token>`, which the Pulumi layer replaces with the
    decrypted config value as a Pulumi secret.
    """
    value = credential(auth.scheme, endpoint_token(namespace, name))
    return {
        "apiVersion": "traefik.io/v1alpha1",
        "kind": "Middleware",
        "metadata": meta(auth_object_name(name), namespace, labels=MANAGED_BY),
        "spec": {"headers": {"customRequestHeaders": {auth.header: value}}},
    }


# --- services ------------------------------------------------------------------------------------


def service_route(namespace: str, name: str, backends: list[RouteBackend]) -> dict[str, Any]:
    """The HTTPRoute of ModelService `namespace/name`: `/<ns>/<service>/` on the front door's Gateway."""
    backend_refs = []
    for backend in backends:
        endpoint = backend.endpoint
        ref: dict[str, Any] = {"name": backend.service, "port": endpoint.backend.port, "weight": backend.weight}
        filters: list[dict[str, Any]] = []
        rewrite: dict[str, Any] = {}
        if endpoint.host_rewrite:
            rewrite["hostname"] = endpoint.host_rewrite
        if endpoint.rewrite_path:
            rewrite["path"] = {"type": "ReplacePrefixMatch", "replacePrefixMatch": endpoint.rewrite_path}
        if rewrite:
            filters.append({"type": "URLRewrite", "urlRewrite": rewrite})
        if endpoint.auth is not None:
            filters.append(
                {
                    "type": "ExtensionRef",
                    "extensionRef": {
                        "group": "traefik.io",
                        "kind": "Middleware",
                        "name": auth_object_name(endpoint.name),
                    },
                }
            )
        if filters:
            ref["filters"] = filters
        backend_refs.append(ref)
    rule: dict[str, Any] = {"matches": [{"path": {"type": "PathPrefix", "value": f"/{namespace}/{name}/"}}]}
    if backend_refs:
        rule["backendRefs"] = backend_refs
    parent = {"name": FRONT_DOOR_GATEWAY, "namespace": SYSTEM_NAMESPACE}
    return k8s.http_route(name, namespace, MANAGED_BY, {"parentRefs": [parent], "rules": [rule]})
