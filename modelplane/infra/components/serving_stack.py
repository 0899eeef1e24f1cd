"""ServingStack: what every workload cluster runs so replicas can be served and routed (spec §8)."""

from __future__ import annotations

from collections.abc import Collection, Mapping

import pulumi
import pulumi_kubernetes as k8s

from ...render.types import ClusterStack
from .common import children, component_type, install_stack


class ServingStack(pulumi.ComponentResource):
    """The rendered stack of a workload cluster: its remote manifests (Inference Extension CRDs), Helm
    releases, MetalLB on kind, the Gateway, exactly as `render.fleet.workload_stack` made them.

    `installed` is each release and remote manifest by name: a replica's object waits for those
    `render.fleet.replica_waits_for` names. `address` is the workload Gateway's address, which the
    front door's endpoints for this cluster point at.
    """

    def __init__(
        self,
        stack: ClusterStack,
        provider: k8s.Provider,
        replacements: Mapping[str, pulumi.Input[str]],
        opts: pulumi.ResourceOptions | None = None,
        adopt: Collection[str] = (),
    ) -> None:
        super().__init__(component_type("ServingStack"), stack.cluster, None, opts)
        installed = install_stack(stack, children(self, provider), replacements, adopt)
        self.address: pulumi.Output[str] = installed.address
        self.installed: dict[str, pulumi.Resource] = installed.by_name
        self.register_outputs({"address": self.address})
