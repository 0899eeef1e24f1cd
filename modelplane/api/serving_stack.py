"""ServingStack: what modelplane installs on every workload cluster, with overridable versions."""
from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from .common import ApiModel, DnsSubdomain, Rules, SingleLine


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


class Listener(ApiModel):
    name: DnsSubdomain = Field(min_length=1, max_length=63)  # a Gateway API SectionName
    port: int = Field(ge=1, le=65535)
    protocol: Literal["HTTP", "TCP"]


class GatewaySettings(ApiModel):
    class_name: DnsSubdomain = Field(default="envoy", min_length=1, max_length=63)
    listeners: list[Listener] = Field(default_factory=lambda: [Listener(name="http", port=80, protocol="HTTP")],
                                      max_length=8)

    @model_validator(mode="after")
    def _unique_listeners(self) -> "GatewaySettings":
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

    @model_validator(mode="after")
    def _known_versions(self) -> "ServingStackConfig":
        rules = Rules()
        known = ServingStackVersions.model_fields
        aliases = {f.alias or n: n for n, f in known.items()}
        for key, value in self.versions.items():
            if key not in aliases:
                rules.fail(["versions", key], f"unknown component; known: {', '.join(sorted(aliases))}")
            elif not value:
                rules.fail(["versions", key], "must not be empty")
        rules.raise_if_any()
        return self


class ServingStack(ApiModel):
    """The effective serving stack of one cluster (fleet-wide settings with the cluster's overrides)."""

    versions: ServingStackVersions = Field(default_factory=ServingStackVersions)
    gateway: GatewaySettings = Field(default_factory=GatewaySettings)
    nvidia_driver_root: str = "/"

    @classmethod
    def effective(cls, *layers: ServingStackConfig | None) -> "ServingStack":
        versions: dict[str, str] = {}
        gateway = None
        driver_root = None
        for layer in layers:
            if layer is None:
                continue
            versions.update(layer.versions)
            gateway = layer.gateway or gateway
            driver_root = layer.nvidia_driver_root or driver_root
        return cls(versions=ServingStackVersions.model_validate(versions),
                   gateway=gateway or GatewaySettings(), nvidia_driver_root=driver_root or "/")
