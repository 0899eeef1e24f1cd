"""Builders of the plain Kubernetes objects the renderers write many times (Namespace, Service, EndpointSlice,
HTTPRoute): one shape each, as dicts ready to be dumped or applied."""

from __future__ import annotations

from typing import Any

from .types import GATEWAY_API, endpoint_slice_labels, meta


def namespace(name: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": meta(name, labels=labels)}


def service(name: str, namespace: str, labels: dict[str, str] | None, spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Service", "metadata": meta(name, namespace, labels), "spec": spec}


def endpoint_slice(
    name: str,
    namespace: str,
    labels: dict[str, str],
    address_type: str,
    ports: list[dict[str, Any]],
    endpoints: list[dict[str, Any]],
) -> dict[str, Any]:
    """The hand-written endpoints of Service `name` (which has no selector)."""
    return {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": meta(name, namespace, {**labels, **endpoint_slice_labels(name)}),
        "addressType": address_type,
        "ports": ports,
        "endpoints": endpoints,
    }


def http_route(name: str, namespace: str, labels: dict[str, str] | None, spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": GATEWAY_API, "kind": "HTTPRoute", "metadata": meta(name, namespace, labels), "spec": spec}
