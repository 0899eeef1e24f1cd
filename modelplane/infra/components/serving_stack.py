"""ServingStack: what every workload cluster runs so replicas can be served and routed (spec §8)."""
from __future__ import annotations

import pulumi
import pulumi_kubernetes as k8s

from ...api.serving_stack import ServingStack as ServingStackSpec
from ...render.front_door import metallb
from ...render.front_door import release_dependencies as front_door_release_dependencies
from ...render.serving_stack import (
    ENVOY_GATEWAY,
    inference_extension_crds_url,
    release_dependencies,
    render_serving_stack,
)
from ...render.types import WORKLOAD_GATEWAY
from .common import children, component_type, install_stack

METALLB_POOL_PLACEHOLDER = "<metallb address pool>"


class ServingStack(pulumi.ComponentResource):
    """Inference Extension CRDs, the Helm releases, MetalLB where there is no cloud load balancer, the Gateway.

    `ready` is what replica workloads wait for (every CRD and controller they use); `address` is
    the workload Gateway's address, which the front door's endpoints for this cluster point at.
    """

    def __init__(self, cluster: str, spec: ServingStackSpec, fake_gpus: bool, provider: k8s.Provider,
                 metallb_pool: pulumi.Input[str] | None, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(component_type("ServingStack"), cluster, None, opts)
        objects, releases = render_serving_stack(cluster, spec, fake_gpus)
        # No chart ships the Inference Extension CRDs: apply the upstream release manifest.
        crds = k8s.yaml.v2.ConfigFile(f"{cluster}/inference-extension-crds",
                                      file=inference_extension_crds_url(spec.versions.inference_extension),
                                      resource_prefix=cluster, opts=children(self, provider))
        replacements = {}
        if metallb_pool is not None:
            lb_objects, lb_releases = metallb(METALLB_POOL_PLACEHOLDER)
            objects, releases = lb_objects + objects, lb_releases + releases
            replacements[METALLB_POOL_PLACEHOLDER] = metallb_pool
        # Envoy Gateway's extension manager watches InferencePools: their CRD comes first.
        installed = install_stack(cluster, objects, releases, children(self, provider), served_by=_served_by,
                                  crds=crds, needs_crds=lambda obj: False, crds_release=ENVOY_GATEWAY,
                                  gateway=WORKLOAD_GATEWAY, replacements=replacements)
        self.address: pulumi.Output[str] = installed.address
        self.ready: list[pulumi.Resource] = [crds, *installed.releases.values()]
        self.register_outputs({"address": self.address})


def _served_by(obj: dict) -> tuple[str, ...]:
    """The releases serving `obj`'s kind (MetalLB's pool comes from the front door's renderer)."""
    return release_dependencies(obj) + front_door_release_dependencies(obj)
