"""The front door's Envoy numbers and conventions (health checks, retries, priority failover) and its own answers.

Shared by the proxy (`front_door_envoy`) and the per-endpoint and per-service objects
(`front_door_envoy_routes`); `status` reads the fallback numbers back (`overprovisioning_factor`).
"""

from __future__ import annotations

import json
from typing import Any

from ..api.model_service import FallbackPolicy
from .model_router import MODEL_PATHS
from .types import FRONT_DOOR_GATEWAY, SYSTEM_NAMESPACE

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


def extension_ref(name: str) -> dict[str, Any]:
    return {"type": "ExtensionRef", "extensionRef": {"group": EG_GROUP, "kind": "HTTPRouteFilter", "name": name}}


def parent_ref(gateway: str = FRONT_DOOR_GATEWAY) -> dict[str, str]:
    return {"name": gateway, "namespace": SYSTEM_NAMESPACE}


def gateway_ref(name: str) -> dict[str, str]:
    return {"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": name}
