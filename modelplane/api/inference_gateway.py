"""InferenceGateway: the fleet's one front door, and the (GPU-less) cluster it runs on."""

from __future__ import annotations

import difflib
import re
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
    def _metallb_block(self) -> LoadBalancing:
        rules = Rules()
        if self.load_balancer == "MetalLB":
            rules.check(self.metallb is not None, ["metallb"], "loadBalancer MetalLB requires the 'metallb' block")
        else:
            rules.check(self.metallb is None, ["metallb"], "only valid with loadBalancer: MetalLB")
        rules.raise_if_any()
        return self


class Traefik(LoadBalancing):
    version: SingleLine = Field(min_length=1)  # the Traefik Helm chart version, e.g. "40.2.0"


_BODY_LIMIT = re.compile(r"([1-9][0-9]{0,9})(Ki|Mi)?")
_BODY_LIMIT_RANGE = (1024, 64 * 1024 * 1024)
DEFAULT_BODY_LIMIT = "4Mi"


def body_limit_bytes(value: str) -> int:
    """A request-body limit (`4Mi`, `512Ki`, `1000000`) in bytes."""
    match = _BODY_LIMIT.fullmatch(value)
    if match is None:
        raise ValueError(value)
    return int(match.group(1)) * {None: 1, "Ki": 1024, "Mi": 1024 * 1024}[match.group(2)]


def _body_limit(value: str) -> str:
    try:
        size = body_limit_bytes(value)
    except ValueError:
        raise ValueError(
            f"{shown(value)} is not a size: bytes, or a number with Ki or Mi (e.g. '4Mi', '512Ki')"
        ) from None
    low, high = _BODY_LIMIT_RANGE
    if not low <= size <= high:
        raise ValueError(
            f"{shown(value)} is outside 1Ki..64Mi: a smaller limit refuses real prompts, and the "
            "front door holds up to this much per request in memory"
        )
    return value


class EnvoyGatewayFrontDoor(LoadBalancing):
    """The front door on Envoy Gateway, at `servingStack.versions.envoyGateway` (the workload clusters' version)."""

    # The largest request body the front door accepts: a larger one is answered 413 (in the API's error
    # shape) before it is read. Envoy buffers a request's body up to this size to read its `model`.
    request_body_limit: Annotated[str, AfterValidator(_body_limit)] = DEFAULT_BODY_LIMIT


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
    def request_body_limit(self) -> int:
        """The front door's request-body limit in bytes (Envoy Gateway only)."""
        block = self.envoy_gateway
        return body_limit_bytes(block.request_body_limit if block is not None else DEFAULT_BODY_LIMIT)

    @property
    def proxy(self) -> Proxy:
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
    def _rules(self) -> InferenceGateway:
        rules = Rules()
        if self.proxy == "Traefik":
            rules.check(
                self.traefik is not None,
                ["traefik"],
                "backend Traefik needs the 'traefik' block with the "
                'Traefik chart version (e.g. traefik: {version: "40.2.0"})',
            )
            rules.check(
                self.envoy_gateway is None,
                ["envoyGateway"],
                "only valid with backend: EnvoyGateway; "
                "remove it, or move loadBalancer and metallb into the 'traefik' block",
            )
        else:
            rules.check(
                self.traefik is None,
                ["traefik"],
                "only valid with backend: Traefik; remove it (the "
                "front door runs Envoy Gateway), or move loadBalancer and metallb into 'envoyGateway'",
            )
        metallb = self.load_balancing.metallb
        if metallb is not None and metallb.address_pool is None:
            rules.check(
                self.cluster.source == "Kind",
                [self._block_key, "metallb", "addressPool"],
                "is required unless the cluster is Kind (e.g. '192.168.10.200-192.168.10.250', "
                "a free range in the cluster's node network)",
            )
        if self.cluster.source == "Existing" and self.cluster.existing and self.cluster.existing.cache:
            rules.fail(["cluster", "existing", "cache"], "the front-door cluster hosts no model caches; remove it")
        self._check_preinstalled(rules)
        rules.raise_if_any()
        return self

    def _check_preinstalled(self, rules: Rules) -> None:
        """Only on an Existing cluster; names are known and listed once."""
        if self.preinstalled and self.cluster.source != "Existing":
            rules.fail(
                ["preinstalled"],
                f"only an Existing front-door cluster can have preinstalled components: "
                f"modelplane creates this {self.cluster.source} cluster, so nothing runs on "
                "it before modelplane installs the Gateway API CRDs; remove preinstalled",
            )
        known = PREINSTALLABLE[self.proxy]
        for i, name in enumerate(self.preinstalled):
            if name not in known:
                close = difflib.get_close_matches(name, known, n=1)
                hint = f"did you mean '{close[0]}'? " if close else ""
                always = "Traefik and MetalLB are" if self.proxy == "Traefik" else "MetalLB is"
                rules.fail(
                    ["preinstalled", i],
                    f"unknown component {shown(name)} for a front door on {self.proxy}; {hint}known: "
                    f"{', '.join(known)} ({always} always installed by modelplane)",
                )
        for i, name in duplicates(self.preinstalled):
            rules.fail(["preinstalled", i], f"{shown(name)} is listed twice")
