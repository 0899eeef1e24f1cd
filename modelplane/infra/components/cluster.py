"""InferenceCluster: a workload cluster, provisioned by its backend, with its provider and serving stack."""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

import pulumi

from ...render.types import ClusterStack
from .. import backends
from ..backends.base import ClusterRequest
from ..kube import apply_object, resource_name
from .common import apply_objects, children, cluster_provider, component_type, deployed_values, selected_kubeconfig
from .serving_stack import ServingStack


class InferenceCluster(pulumi.ComponentResource):
    """Everything that exists per workload cluster regardless of the plan.

    The rendered stack (`render.fleet.workload_stack`): the objects the cluster itself needs (a
    cloud's RWX StorageClass for ModelCache) are its own children, the rest its ServingStack's.
    Deploy-time placeholders in them are filled from what the backend reports. Plan-dependent
    objects (tenant namespaces, replicas, caches) are added later, through `provider`, once the
    placement is known.
    """

    def __init__(
        self,
        request: ClusterRequest,
        stack: ClusterStack,
        opts: pulumi.ResourceOptions | None = None,
        adopt: Collection[str] = (),
    ) -> None:
        super().__init__(component_type("InferenceCluster"), request.name, None, opts)
        self.name = request.name
        access = backends.provision(request, self)
        self.provider = cluster_provider(request.name, access, self)
        self.kubeconfig = selected_kubeconfig(access)
        values = deployed_values(stack, access)
        apply_objects(request.name, stack.cluster_objects, children(self, self.provider), replacements=values)
        self.serving_stack = ServingStack(stack, self.provider, values, pulumi.ResourceOptions(parent=self), adopt)
        self.register_outputs({"gatewayAddress": self.serving_stack.address})


def tenant_namespaces(
    cluster: str, objects: list[dict[str, Any]], parent: pulumi.Resource, provider: pulumi.ProviderResource
) -> dict[str, pulumi.CustomResource]:
    """The tenants' namespaces on a cluster, by name.

    Kept (not deleted) when no longer used: deleting a namespace deletes everything in it, and on a
    cluster you bring yourself the namespace may hold more than what modelplane put there.
    """
    opts = pulumi.ResourceOptions(parent=parent, provider=provider, retain_on_delete=True)
    return {obj["metadata"]["name"]: apply_object(resource_name(cluster, obj), obj, opts) for obj in objects}
