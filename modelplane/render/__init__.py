"""Pure rendering: every Kubernetes object (plain dicts), Helm release and remote manifest of the fleet, per cluster."""

from .fleet import render_fleet
from .metallb import kind_address_pools
from .output import write_manifests
from .types import ClusterManifests, HelmRelease, Placeholder, RemoteManifest

__all__ = [
    "ClusterManifests",
    "HelmRelease",
    "Placeholder",
    "RemoteManifest",
    "kind_address_pools",
    "render_fleet",
    "write_manifests",
]
