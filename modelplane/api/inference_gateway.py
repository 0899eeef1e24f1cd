"""InferenceGateway: the fleet's one front door, and the (GPU-less) cluster it runs on."""
from __future__ import annotations

import difflib
from typing import Annotated, Literal

from pydantic import AfterValidator, Field, model_validator

from . import syntax
from .common import ApiModel, DnsLabel, Rules, SingleLine, duplicates
from .errors import shown
from .inference_cluster import ClusterSource

# What `inferenceGateway.preinstalled` may list: components an Existing front-door cluster already
# runs, which modelplane then neither installs nor upgrades there. Traefik and MetalLB are always
# installed by modelplane (Helm releases `traefik` and `metallb`).
FRONT_DOOR_COMPONENTS: tuple[str, ...] = ("gatewayApi",)


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
    # Components the (Existing) front-door cluster already runs: modelplane neither installs nor upgrades them.
    preinstalled: list[str] = Field(default_factory=list, max_length=8)

    def installs(self, component: str) -> bool:
        """Whether modelplane installs `component` (one of FRONT_DOOR_COMPONENTS) on the front-door cluster."""
        if component not in FRONT_DOOR_COMPONENTS:
            raise ValueError(f"unknown front-door component {component!r}; known: {', '.join(FRONT_DOOR_COMPONENTS)}")
        return component not in self.preinstalled

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
        self._check_preinstalled(rules)
        rules.raise_if_any()
        return self

    def _check_preinstalled(self, rules: Rules) -> None:
        """Only on an Existing cluster; names are known and listed once."""
        if self.preinstalled and self.cluster.source != "Existing":
            rules.fail(["preinstalled"], f"only an Existing front-door cluster can have preinstalled components: "
                                         f"modelplane creates this {self.cluster.source} cluster, so nothing runs on "
                                         "it before modelplane installs the Gateway API CRDs; remove preinstalled")
        for i, name in enumerate(self.preinstalled):
            if name not in FRONT_DOOR_COMPONENTS:
                close = difflib.get_close_matches(name, FRONT_DOOR_COMPONENTS, n=1)
                hint = f"did you mean '{close[0]}'? " if close else ""
                rules.fail(["preinstalled", i],
                           f"unknown component {shown(name)}; {hint}known: {', '.join(FRONT_DOOR_COMPONENTS)} "
                           "(Traefik and MetalLB are always installed by modelplane, as the Helm releases "
                           "'traefik' and 'metallb')")
        for i, name in duplicates(self.preinstalled):
            rules.fail(["preinstalled", i], f"{shown(name)} is listed twice")
