"""ModelService: one URL on the front door, split by weight over the endpoints it selects."""

from __future__ import annotations

from typing import Any

import pulumi

from ...api.fleet import NamespacedName
from ..kube import apply_object, resource_name
from .common import children_after, component_type
from .replica import component_name


class ModelService(pulumi.ComponentResource):
    """The service's HTTPRoute (on Envoy Gateway with its filters and BackendTrafficPolicy), applied after every
    endpoint it routes to exists (so after their replicas are ready).

    When a replica moves, the route gains the new endpoint only once that is ready; the old
    endpoint and replica are deleted at the end of the update, after the route stopped naming them.
    """

    def __init__(
        self,
        key: NamespacedName,
        objects: list[dict[str, Any]],
        cluster: str,
        provider: pulumi.ProviderResource,
        url: pulumi.Input[str],
        depends_on: list[pulumi.Resource],
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__(component_type("ModelService"), component_name(key.namespace, key.name), None, opts)
        child = children_after(self, provider, depends_on)
        # The traffic policy after the route and its filters: a policy whose target does not exist yet is
        # reported unresolved until it does (the route itself resolves its filters whenever they appear).
        self.resources: list[pulumi.CustomResource] = []
        for obj in objects:
            after = (
                pulumi.ResourceOptions(depends_on=list(self.resources))
                if obj["kind"] == "BackendTrafficPolicy"
                else None
            )
            self.resources.append(
                apply_object(resource_name(cluster, obj), obj, pulumi.ResourceOptions.merge(child, after))
            )
        self.route = next(r for r, o in zip(self.resources, objects, strict=True) if o["kind"] == "HTTPRoute")
        self.url = pulumi.Output.from_input(url)
        self.register_outputs({"url": self.url})
