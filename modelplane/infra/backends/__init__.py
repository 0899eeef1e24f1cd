"""Cluster backends: one per `cluster.source`, each yielding a `ClusterAccess`.

Backends create no Kubernetes object: what a cluster needs inside it (a cloud's ReadWriteMany
StorageClass) is rendered (`render.cache.storage_classes`); a backend only reports the values those
objects need once the cluster exists (`ClusterAccess.deployed_values`).
"""

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
    return _backend(request.source.source).provision(request, parent)


# The extra of `pyproject.toml` that installs each cloud's SDK.
_EXTRAS = {"EKS": "aws", "GKE": "gcp", "AKS": "azure"}


def _backend(source: str):
    try:
        return importlib.import_module(f"{__name__}.{_MODULES[source]}")
    except ModuleNotFoundError as error:
        if source not in _EXTRAS or not (error.name or "").startswith("pulumi_"):
            raise
        raise ModuleNotFoundError(
            f"a cluster with source {source} needs the {error.name} package, which is not installed: "
            f"from the modelplane checkout, venv/bin/pip install '.[{_EXTRAS[source]}]' (or -r requirements.txt, every "
            "cloud)",
            name=error.name,
        ) from None
