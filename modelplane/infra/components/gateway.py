"""InferenceGateway: the front door's cluster, Traefik, and the Gateway every ModelService route attaches to."""
from __future__ import annotations

import pulumi
import pulumi_kubernetes as k8s

from ...api.inference_gateway import InferenceGateway as InferenceGatewaySpec
from ...render.front_door import TRAEFIK_RELEASE, gateway_api_crds_url, release_dependencies, render_inference_gateway
from ...render.types import FRONT_DOOR_GATEWAY
from .. import backends
from ..backends.base import ClusterRequest
from ..kube import with_annotations
from .common import apply_objects, children, cluster_provider, component_type, first_address, install_releases
from .serving_stack import GATEWAY_WAIT, METALLB_POOL_PLACEHOLDER


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
        replacements = {METALLB_POOL_PLACEHOLDER: pool} if pool is not None else {}
        # Namespaces first (MetalLB's speaker needs its privileged one); Traefik after the CRDs.
        base = apply_objects(name, [o for o in objects if not _needs(o)], child)
        installed = install_releases(name, releases, child,
                                     after={r.name: base + ([crds] if r.name == TRAEFIK_RELEASE else []) for r in releases})
        served = [with_annotations(o, GATEWAY_WAIT) if _is_front_door_gateway(o) else o for o in objects if _needs(o)]
        applied = apply_objects(
            name, served, child, replacements=replacements,
            depends_on=lambda obj: [installed[r] for r in release_dependencies(obj)] + ([crds] if _is_gateway_api(obj) else []),
            read_back=lambda obj: ("status",) if _is_front_door_gateway(obj) else ())
        gateway = next(r for o, r in zip(served, applied) if _is_front_door_gateway(o))
        self.address: pulumi.Output[str] = gateway.status.apply(first_address)  # type: ignore[attr-defined]
        self.ready: list[pulumi.Resource] = [crds, *installed.values()]
        self.register_outputs({"address": self.address})


def _is_gateway_api(obj: dict) -> bool:
    return obj["apiVersion"].startswith("gateway.networking.k8s.io/")


def _needs(obj: dict) -> bool:
    """Whether `obj` can only be applied once a release or the Gateway API CRDs are in."""
    return bool(release_dependencies(obj)) or _is_gateway_api(obj)


def _is_front_door_gateway(obj: dict) -> bool:
    return obj["kind"] == "Gateway" and obj["metadata"]["name"] == FRONT_DOOR_GATEWAY
