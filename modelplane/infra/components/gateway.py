"""InferenceGateway: the front door's cluster, Traefik, and the Gateway every ModelService route attaches to."""
from __future__ import annotations

import pulumi
import pulumi_kubernetes as k8s

from ...api.inference_gateway import InferenceGateway as InferenceGatewaySpec
from ...render.front_door import TRAEFIK_RELEASE, gateway_api_crds_url, release_dependencies, render_inference_gateway
from ...render.types import FRONT_DOOR_GATEWAY
from .. import backends
from ..backends.base import ClusterRequest
from .common import children, cluster_provider, component_type, install_stack
from .serving_stack import METALLB_POOL_PLACEHOLDER


class InferenceGateway(pulumi.ComponentResource):
    """The front door: one address for every ModelService (`http://<address>/<ns>/<service>`).

    `ready` is what endpoints and routes wait for (the Gateway API CRDs and Traefik, whose CRDs
    the auth Middlewares use).
    """

    def __init__(self, spec: InferenceGatewaySpec, kind_clusters: tuple[str, ...],
                 opts: pulumi.ResourceOptions | None = None) -> None:
        name = spec.cluster_name
        super().__init__(component_type("InferenceGateway"), name, None, opts)
        self.cluster = name
        access = backends.provision(ClusterRequest(name, spec.cluster, (), kind_clusters), self)
        self.provider = cluster_provider(name, access, self)
        child = children(self, self.provider)
        # Traefik's chart does not install the Gateway API CRDs; the upstream standard channel does.
        crds = k8s.yaml.v2.ConfigFile(f"{name}/gateway-api-crds", file=gateway_api_crds_url(),
                                      resource_prefix=name, opts=child)
        pool: pulumi.Input[str] | None = None
        if spec.traefik.metallb is not None:
            pool = spec.traefik.metallb.address_pool or access.metallb_pool
        objects, releases = render_inference_gateway(spec, METALLB_POOL_PLACEHOLDER if pool is not None else None)
        # Traefik's Gateway provider needs the Gateway API CRDs when it starts.
        installed = install_stack(name, objects, releases, child, served_by=release_dependencies, crds=crds,
                                  needs_crds=_is_gateway_api, crds_release=TRAEFIK_RELEASE, gateway=FRONT_DOOR_GATEWAY,
                                  replacements={METALLB_POOL_PLACEHOLDER: pool} if pool is not None else {})
        self.address: pulumi.Output[str] = installed.address
        self.ready: list[pulumi.Resource] = [crds, *installed.releases.values()]
        self.register_outputs({"address": self.address})


def _is_gateway_api(obj: dict) -> bool:
    return obj["apiVersion"].startswith("gateway.networking.k8s.io/")
