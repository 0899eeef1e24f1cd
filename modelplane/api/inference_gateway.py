"""InferenceGateway: the fleet's one front door, and the (GPU-less) cluster it runs on."""
from __future__ import annotations

import difflib
from typing import Annotated, Literal

from pydantic import AfterValidator, Field, model_validator

from . import syntax
from .common import ApiModel, DnsLabel, Rules, SingleLine, duplicates
from .errors import shown
from .inference_cluster import ClusterSource

# What `inferenceGateway.preinstalled` may list, per proxy: components an Existing front-door cluster
# already runs, which modelplane then neither installs nor upgrades there. MetalLB (and Traefik, with
# backend Traefik) are always installed by modelplane.
PREINSTALLABLE: dict[str, tuple[str, ...]] = {"EnvoyGateway": ("envoyGateway",), "Traefik": ("gatewayApi",)}
FRONT_DOOR_COMPONENTS: tuple[str, ...] = tuple(sorted({c for names in PREINSTALLABLE.values() for c in names}))


def _ip_range(value: str) -> str:
    if (problem := syntax.ip_range_problem(value)) is not None:
        raise ValueError(problem)
    return value


class MetalLB(ApiModel):
    # On Kind clusters leave it out: the pool is computed inside the kind Docker network's subnet.
    address_pool: Annotated[str, AfterValidator(_ip_range)] | None = None
    version: SingleLine = "0.14.9"


class LoadBalancing(ApiModel):
    """How the front door's Service gets an external address: the cluster's own load balancer, or MetalLB."""

    load_balancer: Literal["MetalLB"] | None = None
    metallb: MetalLB | None = None

    @model_validator(mode="after")
    def _metallb_block(self) -> "LoadBalancing":
        rules = Rules()
        if self.load_balancer == "MetalLB":
            rules.check(self.metallb is not None, ["metallb"], "loadBalancer MetalLB requires the 'metallb' block")
        else:
            rules.check(self.metallb is None, ["metallb"], "only valid with loadBalancer: MetalLB")
        rules.raise_if_any()
        return self


class Traefik(LoadBalancing):
    version: SingleLine = Field(min_length=1)  # the Traefik Helm chart version, e.g. "40.2.0"


class EnvoyGatewayFrontDoor(LoadBalancing):
    """The front door on Envoy Gateway, at `servingStack.versions.envoyGateway` (the workload clusters' version)."""


Proxy = Literal["EnvoyGateway", "Traefik"]


class InferenceGateway(ApiModel):
    cluster_name: DnsLabel = "control"
    cluster: ClusterSource
    # EnvoyGateway health-checks every backend, retries and fails over (DESIGN: failure in the data plane).
    # Unset: Traefik when a `traefik` block is given (a reference config ports over as it is), else EnvoyGateway.
    backend: Proxy | None = None
    traefik: Traefik | None = None
    envoy_gateway: EnvoyGatewayFrontDoor | None = None
    # Components the (Existing) front-door cluster already runs: modelplane neither installs nor upgrades them.
    preinstalled: list[str] = Field(default_factory=list, max_length=8)

    @property
    def proxy(self) -> str:
        """The proxy that serves the front door: `backend`, or what its unset default means."""
        return self.backend or ("Traefik" if self.traefik is not None else "EnvoyGateway")

    @property
    def load_balancing(self) -> LoadBalancing:
        """The active proxy's block (`traefik` or `envoyGateway`); an empty one when not given."""
        block = self.traefik if self.proxy == "Traefik" else self.envoy_gateway
        return block if block is not None else LoadBalancing()

    @property
    def _block_key(self) -> str:
        return "traefik" if self.proxy == "Traefik" else "envoyGateway"

    def installs(self, component: str) -> bool:
        """Whether modelplane installs `component` (one of FRONT_DOOR_COMPONENTS) on the front-door cluster."""
        if component not in FRONT_DOOR_COMPONENTS:
            raise ValueError(f"unknown front-door component {component!r}; known: {', '.join(FRONT_DOOR_COMPONENTS)}")
        return component not in self.preinstalled

    @model_validator(mode="after")
    def _rules(self) -> "InferenceGateway":
        rules = Rules()
        if self.proxy == "Traefik":
            rules.check(self.traefik is not None, ["traefik"], "backend Traefik needs the 'traefik' block with the "
                        "Traefik chart version (e.g. traefik: {version: \"40.2.0\"})")
            rules.check(self.envoy_gateway is None, ["envoyGateway"], "only valid with backend: EnvoyGateway; "
                        "remove it, or move loadBalancer and metallb into the 'traefik' block")
        else:
            rules.check(self.traefik is None, ["traefik"], "only valid with backend: Traefik; remove it (the "
                        "front door runs Envoy Gateway), or move loadBalancer and metallb into 'envoyGateway'")
        metallb = self.load_balancing.metallb
        if metallb is not None and metallb.address_pool is None:
            rules.check(self.cluster.source == "Kind", [self._block_key, "metallb", "addressPool"],
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
        known = PREINSTALLABLE[self.proxy]
        for i, name in enumerate(self.preinstalled):
            if name not in known:
                close = difflib.get_close_matches(name, known, n=1)
                hint = f"did you mean '{close[0]}'? " if close else ""
                always = "Traefik and MetalLB are" if self.proxy == "Traefik" else "MetalLB is"
                rules.fail(["preinstalled", i],
                           f"unknown component {shown(name)} for a front door on {self.proxy}; {hint}known: "
                           f"{', '.join(known)} ({always} always installed by modelplane)")
        for i, name in duplicates(self.preinstalled):
            rules.fail(["preinstalled", i], f"{shown(name)} is listed twice")
