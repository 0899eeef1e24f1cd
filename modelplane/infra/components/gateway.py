"""InferenceGateway: the front door's cluster, its proxy, and the Gateway every ModelService route attaches to."""

from __future__ import annotations

from collections.abc import Collection

import pulumi

from ...render.types import ClusterStack
from .. import backends
from ..backends.base import ClusterRequest
from .common import children, cluster_provider, component_type, deployed_values, install_stack, selected_kubeconfig


class InferenceGateway(pulumi.ComponentResource):
    """The front door: one address for every ModelService (`http://<address>/<ns>/<service>`).

    Its cluster, provisioned by its backend, and the rendered stack (`render.front_door.front_door_stack`):
    MetalLB where asked, the proxy (Envoy Gateway, or the Gateway API CRDs and Traefik), the `modelplane`
    Gateway and the fleet-wide policies. `ready` is what endpoints and routes wait for (the CRDs they use).
    """

    def __init__(
        self,
        request: ClusterRequest,
        stack: ClusterStack,
        opts: pulumi.ResourceOptions | None = None,
        adopt: Collection[str] = (),
    ) -> None:
        name = stack.cluster
        super().__init__(component_type("InferenceGateway"), name, None, opts)
        self.cluster = name
        access = backends.provision(request, self)
        self.provider = cluster_provider(name, access, self)
        self.kubeconfig = selected_kubeconfig(access)
        installed = install_stack(stack, children(self, self.provider), deployed_values(stack, access), adopt)
        self.address: pulumi.Output[str] = installed.address
        self.ready: list[pulumi.Resource] = installed.ready
        self.register_outputs({"address": self.address})
