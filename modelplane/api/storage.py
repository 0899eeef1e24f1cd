"""Which clusters can hold a ModelCache: those with a ReadWriteMany StorageClass.

One answer for validation, the scheduler (a cached deployment is placed only where its cache can
stage) and render (where the cache's PVC goes).
"""

from __future__ import annotations

from .inference_cluster import InferenceCluster

# RWX StorageClasses the cloud backends create on every cluster they provision.
CLOUD_STORAGE_CLASSES = {"GKE": "modelplane-rwx", "EKS": "modelplane-rwx-efs", "AKS": "modelplane-rwx-fs"}


def rwx_storage_class(cluster: InferenceCluster) -> str | None:
    """The cluster's ReadWriteMany StorageClass, or None when it has none (kind; Existing without one)."""
    source = cluster.cluster
    if source.source == "Existing":
        existing = source.existing
        return existing.cache.storage_class_name if existing is not None and existing.cache is not None else None
    return CLOUD_STORAGE_CLASSES.get(source.source)
