"""Pure rendering: every Kubernetes object (plain dicts) and Helm release spec of the fleet, per cluster."""
from .fleet import kind_address_pools, render_fleet, render_workload_cluster
from .output import write_manifests
from .types import ClusterManifests, HelmRelease

__all__ = ["ClusterManifests", "HelmRelease", "kind_address_pools", "render_fleet", "render_workload_cluster",
           "write_manifests"]
