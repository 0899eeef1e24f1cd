"""Cluster backends: one per `cluster.source`, each yielding a `ClusterAccess`."""
from __future__ import annotations

import importlib

import pulumi

from .base import ClusterAccess, ClusterRequest

_MODULES = {"Existing": "existing", "Kind": "kind", "EKS": "eks", "GKE": "gke", "AKS": "aks"}


def provision(request: ClusterRequest, parent: pulumi.Resource) -> ClusterAccess:
    """Provision (or reach) the cluster; every resource is a child of `parent` (its component).

    The backend module is imported here, on first use, so a stack without EKS never imports
    pulumi_aws or pulumi_eks (they take seconds to import).
    """
    module = importlib.import_module(f"{__name__}.{_MODULES[request.source.source]}")
    return module.provision(request, parent)


def cluster_objects(request: ClusterRequest, access: ClusterAccess) -> list[dict]:
    """Kubernetes objects the backend needs inside its cluster (e.g. a cloud's RWX StorageClass)."""
    module = importlib.import_module(f"{__name__}.{_MODULES[request.source.source]}")
    hook = getattr(module, "cluster_objects", None)
    return list(hook(request, access)) if hook is not None else []
