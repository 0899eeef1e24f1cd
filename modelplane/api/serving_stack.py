"""ServingStack: what modelplane installs on every workload cluster, with overridable versions."""

from __future__ import annotations

import difflib
from typing import Literal

from pydantic import Field, model_validator

from . import syntax
from .common import ApiModel, DnsSubdomain, Rules, SingleLine, duplicates
from .errors import shown


def version_problem(value: str) -> str | None:
    """A chart or release version: it is spliced into chart references and manifest URLs, so only a semantic
    version, optionally after a `v` (`v1.5.1`, `72.6.2`, `1.0.0-rc.1`), and never `../` or `?`."""
    if syntax.semver_problem(value.removeprefix("v")) is None:
        return None
    return (
        f"{shown(value)} is not a version: write MAJOR.MINOR.PATCH, optionally after a 'v' and with a "
        "pre-release such as -rc.1, as the chart or release is tagged (e.g. 'v1.5.1', '72.6.2')"
    )


class ServingStackVersions(ApiModel):
    """Chart versions (reference defaults). Unset fields keep the default."""

    gateway_api: str = "v1.5.1"
    cert_manager: str = "v1.17.1"
    envoy_gateway: str = "v1.8.1"
    envoy_ai_gateway: str = "v0.7.0"
    inference_extension: str = "v1.0.1"
    prometheus: str = "72.6.2"  # kube-prometheus-stack
    leader_worker_set: str = "v0.8.0"
    node_feature_discovery: str = "0.18.3"
    nvidia_dra_driver: str = "0.4.0"
    dra_example_driver: str = "0.4.0"  # fake gpu.example.com devices on kind pools


# The serving-stack components, by their config key (the keys of `servingStack.versions`, and what
# `inferenceClusters.<name>.servingStack.preinstalled` lists), in install order.
COMPONENTS: tuple[str, ...] = tuple(f.alias or n for n, f in ServingStackVersions.model_fields.items())
# Envoy Gateway is installed configured for the Envoy AI Gateway (its extension manager calls the AI
# Gateway controller); one installed by someone else lacks that, so a cluster has both or neither.
PAIRED = {"envoyGateway": "envoyAiGateway", "envoyAiGateway": "envoyGateway"}
FAKE_GPU_DRIVER = "gpu.example.com"  # the DRA driver name dra-example-driver publishes its fake devices under
# Modelplane claims devices through resource.k8s.io/v1 (Dynamic Resource Allocation, GA in 1.34).
MIN_KUBERNETES_VERSION = "1.34"


class Listener(ApiModel):
    name: DnsSubdomain = Field(min_length=1, max_length=63)  # a Gateway API SectionName
    port: int = Field(ge=1, le=65535)
    protocol: Literal["HTTP", "TCP"]


class GatewaySettings(ApiModel):
    class_name: DnsSubdomain = Field(default="envoy", min_length=1, max_length=63)
    listeners: list[Listener] = Field(
        default_factory=lambda: [Listener(name="http", port=80, protocol="HTTP")], max_length=8
    )

    @model_validator(mode="after")
    def _unique_listeners(self) -> GatewaySettings:
        rules = Rules()
        rules.unique_names("listeners", self.listeners, "listener")
        rules.raise_if_any()
        return self


class ServingStackConfig(ApiModel):
    """`modelplane:servingStack` (fleet-wide) or `inferenceClusters.<name>.servingStack` (one cluster).

    A cluster's block is laid over the fleet-wide one field by field.
    """

    versions: dict[str, SingleLine] = Field(default_factory=dict, max_length=len(ServingStackVersions.model_fields))
    gateway: GatewaySettings | None = None
    nvidia_driver_root: SingleLine | None = Field(default=None, max_length=512)
    # Components an Existing cluster already runs: modelplane neither installs nor upgrades them.
    preinstalled: list[str] = Field(default_factory=list, max_length=len(COMPONENTS))

    @model_validator(mode="after")
    def _known_versions(self) -> ServingStackConfig:
        rules = Rules()
        known = ServingStackVersions.model_fields
        aliases = {f.alias or n: n for n, f in known.items()}
        for key, value in self.versions.items():
            if key not in aliases:
                rules.fail(["versions", key], f"unknown component; known: {', '.join(sorted(aliases))}")
            elif not value:
                rules.fail(["versions", key], "must not be empty")
            elif (problem := version_problem(value)) is not None:
                rules.fail(["versions", key], problem)
        self._check_preinstalled(rules)
        rules.raise_if_any()
        return self

    def _check_preinstalled(self, rules: Rules) -> None:
        """Names are known and listed once; a preinstalled component takes no settings here."""
        at = {name: i for i, name in reversed(list(enumerate(self.preinstalled)))}  # first position of each
        for i, name in enumerate(self.preinstalled):
            if name not in COMPONENTS:
                close = difflib.get_close_matches(name, COMPONENTS, n=1)
                hint = f"did you mean '{close[0]}'? " if close else ""
                rules.fail(
                    ["preinstalled", i], f"unknown component {shown(name)}; {hint}known: {', '.join(COMPONENTS)}"
                )
        for i, name in duplicates(self.preinstalled):
            rules.fail(["preinstalled", i], f"{shown(name)} is listed twice")
        for key in self.versions:
            if key in at:
                rules.fail(
                    ["versions", key],
                    f"is set, but {key} is in preinstalled (preinstalled[{at[key]}]): "
                    f"modelplane installs no {key} on this cluster, so the version would "
                    f"never be used; remove the version, or remove {key} from preinstalled "
                    "to let modelplane install it",
                )
        for name, partner in PAIRED.items():
            if name in at and partner not in at:
                rules.fail(["preinstalled", at[name]], _unpaired_message(name, partner))
        if self.nvidia_driver_root is not None and "nvidiaDraDriver" in at:
            rules.fail(
                ["nvidiaDriverRoot"],
                f"is set, but nvidiaDraDriver is in preinstalled "
                f"(preinstalled[{at['nvidiaDraDriver']}]): the setting only configures "
                "the NVIDIA DRA driver modelplane installs; set the driver root in your "
                "own installation of the driver and remove it here",
            )


class ServingStack(ApiModel):
    """The effective serving stack of one cluster (fleet-wide settings with the cluster's overrides)."""

    versions: ServingStackVersions = Field(default_factory=ServingStackVersions)
    gateway: GatewaySettings = Field(default_factory=GatewaySettings)
    nvidia_driver_root: str = "/"
    preinstalled: frozenset[str] = frozenset()  # components the cluster already runs (keys of COMPONENTS)

    @classmethod
    def effective(cls, *layers: ServingStackConfig | None) -> ServingStack:
        versions: dict[str, str] = {}
        gateway = None
        driver_root = None
        preinstalled: set[str] = set()
        for layer in layers:
            if layer is None:
                continue
            versions.update(layer.versions)
            gateway = layer.gateway or gateway
            driver_root = layer.nvidia_driver_root or driver_root
            preinstalled.update(layer.preinstalled)
        return cls(
            versions=ServingStackVersions.model_validate(versions),
            gateway=gateway or GatewaySettings(),
            nvidia_driver_root=driver_root or "/",
            preinstalled=frozenset(preinstalled),
        )

    def installs(self, component: str) -> bool:
        """Whether modelplane installs `component` (a key of COMPONENTS) on this cluster: not preinstalled."""
        if component not in COMPONENTS:
            raise ValueError(f"unknown serving-stack component {component!r}; known: {', '.join(COMPONENTS)}")
        return component not in self.preinstalled


def _unpaired_message(name: str, partner: str) -> str:
    if name == "envoyGateway":
        return (
            "is preinstalled without envoyAiGateway: modelplane installs Envoy Gateway configured for the Envoy AI "
            "Gateway (config.envoyGateway.extensionManager calls the AI Gateway controller, "
            "extensionApis.enableBackend is on); an Envoy Gateway it did not install lacks that, and an AI "
            "Gateway installed next to it would not be called. Declare both (your Envoy Gateway then needs "
            "that extension manager), or neither"
        )
    return (
        "is preinstalled without envoyGateway: an Envoy AI Gateway only works through an Envoy Gateway "
        "configured for it, so the cluster already runs one; modelplane would install a second Envoy Gateway "
        "controller that reconciles the same GatewayClasses, with its extension manager pointed at "
        "ai-gateway-controller.envoy-ai-gateway-system:1063. Declare both, or neither"
    )
