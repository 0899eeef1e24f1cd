"""ModelEndpoint: a backend on the front door (a placed replica's gateway path, or a hand-made URL)."""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any

import pulumi

from ...render.front_door_backends import FrontDoorEndpoint
from ...render.front_door_envoy_routes import gateway_alias_objects
from ...render.types import WORKLOAD_GATEWAY_PORT, gateway_address_placeholder
from ..kube import apply_object, resource_name, substitute
from .common import children_after, component_type
from .replica import component_name


class ModelEndpoint(pulumi.ComponentResource):
    """A backend on the front door: what the proxy deploys for it (`FrontDoorParts.objects_of`).

    `render(endpoint, url)` gives its objects at a URL. When they hold a replica's workload-cluster
    gateway address (`hold_gateway_address`: Traefik), which is known only once that Gateway is
    programmed, they are rendered again with the real address (an IP gives an IPv4 EndpointSlice, a
    load balancer hostname an FQDN one); Envoy Gateway's Backends name the cluster's gateway instead.
    It is created only after `depends_on` (the replica's workloads, ready).
    """

    def __init__(
        self,
        endpoint: FrontDoorEndpoint,
        cluster: str,
        provider: pulumi.ProviderResource,
        gateway_address: pulumi.Output[str] | None,
        secrets: Mapping[str, pulumi.Input[str]],
        depends_on: list[pulumi.Resource],
        render: Callable[[FrontDoorEndpoint, str | None], list[dict[str, Any]]],
        hold_gateway_address: bool,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__(component_type("ModelEndpoint"), component_name(endpoint.namespace, endpoint.name), None, opts)
        child = children_after(self, provider, depends_on)
        templates = render(endpoint, None)
        url: pulumi.Input[str] = endpoint.url
        actual: pulumi.Output[list[dict[str, Any]]] | None = None
        if endpoint.replica is not None and gateway_address is not None and hold_gateway_address:
            placeholder = gateway_address_placeholder(endpoint.replica.cluster)
            url = gateway_address.apply(lambda address: endpoint.url.replace(placeholder, _known(address, endpoint)))
            actual = url.apply(lambda real: render(endpoint, real))
        self.resources = []
        for i, template in enumerate(templates):
            obj = template if actual is None else _late_fields(template, actual, i)
            self.resources.append(apply_object(resource_name(cluster, template), substitute(obj, secrets), child))
        self.url = url
        self.register_outputs({"url": url})


def _known(address: str | None, endpoint: FrontDoorEndpoint) -> str:
    """The Gateway is awaited until it has an address; without one, keep the placeholder and say so."""
    assert endpoint.replica is not None
    cluster = endpoint.replica.cluster
    if not address:
        pulumi.log.warn(
            f"the inference-gateway on cluster '{cluster}' reports no address yet; endpoint "
            f"{endpoint.namespace}/{endpoint.name} points at a placeholder until the next `pulumi up` "
            "(check the cluster's load balancer: MetalLB on kind)"
        )
        return gateway_address_placeholder(cluster)
    return address


def _field(objects: list[dict[str, Any]], i: int, key: str) -> Any:
    return objects[i][key]


def _late_fields(template: dict[str, Any], actual: pulumi.Output[list[dict[str, Any]]], i: int) -> dict[str, Any]:
    """The template's identity (apiVersion, kind, metadata) with every other field taken from `actual[i]`."""
    out = {key: template[key] for key in ("apiVersion", "kind", "metadata")}
    for key in template:
        if key not in out:
            out[key] = actual.apply(functools.partial(_field, i=i, key=key))
    return out


class GatewayAlias(pulumi.ComponentResource):
    """A workload cluster's gateway by name on the front-door cluster (`render.front_door_envoy.gateway_alias_objects`).

    Rendered again with the gateway's address once it is known: an IP gives a headless Service and
    its EndpointSlice, a load balancer's host name an ExternalName Service.
    """

    def __init__(
        self,
        cluster: str,
        workload_cluster: str,
        provider: pulumi.ProviderResource,
        gateway_address: pulumi.Output[str],
        depends_on: list[pulumi.Resource],
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__(component_type("GatewayAlias"), workload_cluster, None, opts)
        child = children_after(self, provider, depends_on)
        templates = gateway_alias_objects(workload_cluster, None, WORKLOAD_GATEWAY_PORT)
        actual = gateway_address.apply(
            lambda address: gateway_alias_objects(workload_cluster, address or None, WORKLOAD_GATEWAY_PORT)
        )
        self.resources = [
            apply_object(resource_name(cluster, template), _late_fields(template, actual, i), child)
            for i, template in enumerate(templates)
        ]
        self.register_outputs({})
