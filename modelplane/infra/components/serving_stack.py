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
from ..kube import WAIT_FOR, with_annotations
from .common import apply_objects, children, component_type, first_address, install_releases

METALLB_POOL_PLACEHOLDER = "<metallb address pool>"
# The Gateway is created once it has an address: endpoints on the front door point at it.
GATEWAY_WAIT = {WAIT_FOR: "jsonpath={.status.addresses[0].value}"}


class ServingStack(pulumi.ComponentResource):
    """Inference Extension CRDs, the Helm releases, MetalLB where there is no cloud load balancer, the Gateway.

    `ready` is what replica workloads wait for (every CRD and controller they use); `address` is
    the workload Gateway's address, which the front door's endpoints for this cluster point at.
    """

    def __init__(self, cluster: str, spec: ServingStackSpec, fake_gpus: bool, provider: k8s.Provider,
                 metallb_pool: pulumi.Input[str] | None, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(component_type("ServingStack"), cluster, None, opts)
        child = children(self, provider)
        objects, releases = render_serving_stack(cluster, spec, fake_gpus)
        # No chart ships the Inference Extension CRDs: apply the upstream release manifest.
        crds = k8s.yaml.v2.ConfigFile(f"{cluster}/inference-extension-crds",
                                      file=inference_extension_crds_url(spec.versions.inference_extension),
                                      resource_prefix=cluster, opts=child)
        replacements = {}
        if metallb_pool is not None:
            lb_objects, lb_releases = metallb(METALLB_POOL_PLACEHOLDER)
            objects, releases = lb_objects + objects, lb_releases + releases
            replacements[METALLB_POOL_PLACEHOLDER] = metallb_pool
        # Namespaces and quotas first: the charts' pods are admitted against them (the NVIDIA
        # driver's critical pods need the quota; MetalLB's speaker a privileged namespace).
        base = apply_objects(cluster, [o for o in objects if not _needs(o)], child, replacements=replacements)
        # Envoy Gateway's extension manager watches InferencePools: their CRD comes first.
        installed = install_releases(cluster, releases, child,
                                     after={r.name: base + ([crds] if r.name == ENVOY_GATEWAY else []) for r in releases})
        served = [with_annotations(o, GATEWAY_WAIT) if _is_workload_gateway(o) else o for o in objects if _needs(o)]
        applied = apply_objects(cluster, served, child, replacements=replacements,
                                depends_on=lambda obj: [installed[name] for name in _needs(obj)],
                                read_back=lambda obj: ("status",) if _is_workload_gateway(obj) else ())
        gateway = next(r for o, r in zip(served, applied) if _is_workload_gateway(o))
        self.address: pulumi.Output[str] = gateway.status.apply(first_address)  # type: ignore[attr-defined]
        self.ready: list[pulumi.Resource] = [crds, *installed.values()]
        self.register_outputs({"address": self.address})


def _is_workload_gateway(obj: dict) -> bool:
    return obj["kind"] == "Gateway" and obj["metadata"]["name"] == WORKLOAD_GATEWAY


def _needs(obj: dict) -> tuple[str, ...]:
    from ...render.front_door import release_dependencies as front_door_dependencies  # MetalLB's pool
    return release_dependencies(obj) + front_door_dependencies(obj)
