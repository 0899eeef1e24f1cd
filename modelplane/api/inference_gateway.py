"""InferenceGateway: the fleet's one front door, and the (GPU-less) cluster it runs on."""
from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, Field, model_validator

from . import syntax
from .common import ApiModel, DnsLabel, Rules, SingleLine
from .inference_cluster import ClusterSource


def _ip_range(value: str) -> str:
    if (problem := syntax.ip_range_problem(value)) is not None:
        raise ValueError(problem)
    return value


class MetalLB(ApiModel):
    # On Kind clusters leave it out: the pool is computed inside the kind Docker network's subnet.
    address_pool: Annotated[str, AfterValidator(_ip_range)] | None = None
    version: SingleLine = "0.14.9"


class Traefik(ApiModel):
    version: SingleLine = Field(min_length=1)  # the Traefik Helm chart version, e.g. "40.2.0"
    load_balancer: Literal["MetalLB"] | None = None
    metallb: MetalLB | None = None

    @model_validator(mode="after")
    def _metallb_block(self) -> "Traefik":
        rules = Rules()
        if self.load_balancer == "MetalLB":
            rules.check(self.metallb is not None, ["metallb"], "loadBalancer MetalLB requires the 'metallb' block")
        else:
            rules.check(self.metallb is None, ["metallb"], "only valid with loadBalancer: MetalLB")
        rules.raise_if_any()
        return self


class InferenceGateway(ApiModel):
    cluster_name: DnsLabel = "control"
    cluster: ClusterSource
    backend: Literal["Traefik"] = "Traefik"
    traefik: Traefik

    @model_validator(mode="after")
    def _rules(self) -> "InferenceGateway":
        rules = Rules()
        metallb = self.traefik.metallb
        if metallb is not None and metallb.address_pool is None:
            rules.check(self.cluster.source == "Kind", ["traefik", "metallb", "addressPool"],
                        "is required unless the cluster is Kind (e.g. '192.168.10.200-192.168.10.250', "
                        "a free range in the cluster's node network)")
        if self.cluster.source == "Existing" and self.cluster.existing and self.cluster.existing.cache:
            rules.fail(["cluster", "existing", "cache"], "the front-door cluster hosts no model caches; remove it")
        rules.raise_if_any()
        return self
