"""The one interface of a front-door proxy; `front_door.proxy_for` chooses the implementation.

Two proxies serve the front door: Envoy Gateway (`front_door_envoy`, the default: health checks,
retries, fallback tiers, routing by the body's `model`) and Traefik (`front_door_traefik`, as the
reference has it). Everything proxy-neutral (endpoints, weights, MetalLB, install order) is in
`front_door_backends` and `front_door`; everything that differs is behind this interface.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import Any, ClassVar

from ..api.fleet import Fleet, NamespacedName
from ..api.inference_gateway import Proxy
from ..api.model_service import ModelService
from .front_door_backends import FrontDoorEndpoint, RouteBackend
from .types import HelmRelease, RemoteManifest


class FrontDoorProxy(ABC):
    """What one proxy puts on the front-door cluster, for one fleet."""

    name: ClassVar[Proxy]
    # Whether an endpoint's objects hold its workload cluster's gateway address (so the Pulumi layer renders
    # them again once the address is known), rather than a name for that gateway on the front-door cluster.
    endpoints_hold_gateway_address: ClassVar[bool]
    # Releases (by name) that need a remote manifest (by name) installed first.
    release_manifests: ClassVar[Mapping[str, tuple[str, ...]]] = {}

    def __init__(self, fleet: Fleet) -> None:
        self.fleet = fleet

    @abstractmethod
    def cluster_parts(
        self, after: tuple[str, ...]
    ) -> tuple[list[dict[str, Any]], list[HelmRelease], list[RemoteManifest]]:
        """The proxy's own objects (GatewayClass, Gateway, fleet-wide policies), its Helm releases (installed
        after the releases named in `after`) and the remote manifests it needs."""

    @abstractmethod
    def endpoint_objects(self, endpoint: FrontDoorEndpoint, fallback_tiers: frozenset[bool]) -> list[dict[str, Any]]:
        """What one endpoint deploys; `fallback_tiers`: whether services use it as primary (False) and/or fallback (True)."""

    @abstractmethod
    def service_objects(
        self, key: NamespacedName, service: ModelService, backends: list[RouteBackend]
    ) -> list[dict[str, Any]]:
        """A ModelService's route over its weighted backends (and what the route needs with it)."""

    @staticmethod
    @abstractmethod
    def release_dependencies(obj: Mapping[str, Any]) -> tuple[str, ...]:
        """The releases and remote manifests of this proxy (by name) that serve `obj`'s kind or namespace."""

    def gateway_aliases(self, addresses: Mapping[str, str]) -> dict[str, list[dict[str, Any]]]:
        """Per workload cluster, objects naming its gateway on the front-door cluster (none by default)."""
        return {}

    @staticmethod
    @abstractmethod
    def preinstalled_hint() -> str:
        """What an Existing front-door cluster may already run, for `validate`'s note."""
