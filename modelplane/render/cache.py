"""A ModelCache staged on one workload cluster (spec §10): an RWX volume and the Job that fills it.

The ReadWriteMany StorageClass the volume uses is the cluster's: on a cloud cluster with node pools
modelplane creates it (`storage_classes`: EFS on EKS, Filestore on GKE, Azure Files on AKS); an
Existing cluster names its own (`existing.cache.storageClassName`); kind has none.

Per matched cluster: a ReadWriteMany PVC, the hydration Job that downloads the model into it
once, and, when the cache has a Hugging Face token, the Secret the Job reads it from. All three
live in the cache's namespace on the workload cluster, where the replicas that mount the volume
run (the namespace itself is created with the replicas' objects). Replica pods mount the PVC at
`/mnt/models`.

Differences from the reference, which drives a reconcile loop: the token Secret and the Job are
not deleted once the cache is Ready (a Pulumi program has no "Ready" to react to; the Job is
idempotent, exits at once when the marker file exists, and removes itself
`ttlSecondsAfterFinished` after it finishes, so the Pulumi layer should not wait on or recreate
it). The token is never rendered; the Secret holds a placeholder the Pulumi layer substitutes
(`modelplane.render.secrets`).
"""

from __future__ import annotations

import shlex
from typing import Any

from ..api.fleet import Fleet
from ..api.model_cache import ModelCache
from ..api.storage import CLOUD_STORAGE_CLASSES, rwx_storage_class
from ..scheduling.names import child_name
from .secrets import cache_token
from .types import MANAGED_BY, Placeholder, deployed_placeholder, meta

CACHE_LABEL = "modelplane.ai/modelcache"
MOUNT_PATH = "/mnt/artifact"  # where the hydration Job mounts the volume
MARKER = f"{MOUNT_PATH}/.modelplane-hydrated"
TOKEN_KEY = "HF_TOKEN"
HYDRATE_IMAGE = "python:3.11-slim"


def cache_storage_class(fleet: Fleet, cluster: str) -> str | None:
    """The cluster's ReadWriteMany StorageClass, or None: a cache stages only on clusters that have one."""
    return rwx_storage_class(fleet.inference_clusters[cluster])


# --- the clouds' ReadWriteMany StorageClasses ---------------------------------------------------

# Deploy-time values the StorageClasses name (`<deployed: <cluster>.<value>>`), filled by the backends.
EFS_FILE_SYSTEM_ID = "efsFileSystemId"  # EKS: the EFS file system modelplane creates for the cluster
GKE_NETWORK_NAME = "networkName"  # GKE: the cluster's VPC network, which Filestore instances attach to
# World-writable SMB mounts: the hydrate Job and the engines run as different users.
AZURE_FILES_MOUNT_OPTIONS = [
    "dir_mode=0777",
    "file_mode=0777",
    "uid=0",
    "gid=0",
    "mfsymlinks",
    "cache=strict",
    "actimeo=30",
    "nosharesock",
]
_STORAGE_VALUES = {
    EFS_FILE_SYSTEM_ID: "the id of the EFS file system modelplane creates for the cluster",
    GKE_NETWORK_NAME: "the name of the VPC network modelplane creates for the cluster",
}


def storage_classes(fleet: Fleet, cluster: str) -> tuple[list[dict[str, Any]], list[Placeholder]]:
    """The ReadWriteMany StorageClass a cloud cluster gets (only one with node pools: only those stage caches).

    Named as `CLOUD_STORAGE_CLASSES` says, which is what cache PVCs ask for. Values the cloud hands
    out once the cluster exists (the EFS file system, the VPC network) are deploy-time placeholders.
    """
    spec = fleet.inference_clusters[cluster]
    source = spec.cluster.source
    if source not in CLOUD_STORAGE_CLASSES or not spec.node_pools:
        return [], []
    values: list[str] = []

    def deployed(value: str) -> str:
        values.append(value)
        return deployed_placeholder(cluster, value)

    if source == "EKS":
        # One EFS access point (its own directory) per volume.
        storage = _storage_class(
            source,
            "efs.csi.aws.com",
            {"provisioningMode": "efs-ap", "fileSystemId": deployed(EFS_FILE_SYSTEM_ID), "directoryPerms": "700"},
        )
    elif source == "GKE":
        storage = _storage_class(
            source,
            "filestore.csi.storage.gke.io",
            {"tier": "enterprise", "network": deployed(GKE_NETWORK_NAME)},
            allowVolumeExpansion=True,
        )
    else:
        storage = _storage_class(
            source,
            "file.csi.azure.com",
            {"skuName": "Premium_LRS"},
            mountOptions=list(AZURE_FILES_MOUNT_OPTIONS),
            allowVolumeExpansion=True,
        )
    placeholders = [
        Placeholder(f"{cluster}.{value}", deployed_placeholder(cluster, value), _STORAGE_VALUES[value])
        for value in values
    ]
    return [storage], placeholders


def _storage_class(source: str, provisioner: str, parameters: dict[str, str], **fields: Any) -> dict[str, Any]:
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": CLOUD_STORAGE_CLASSES[source]},
        "provisioner": provisioner,
        "parameters": parameters,
        "reclaimPolicy": "Delete",
        "volumeBindingMode": "Immediate",
        **fields,
    }


def pvc_name(namespace: str, name: str) -> str:
    return child_name("modelcache", namespace, name)


def job_name(namespace: str, name: str) -> str:
    return child_name("modelcache", namespace, name, "hydrate")


def secret_name(namespace: str, name: str) -> str:
    return child_name("modelcache", namespace, name, "auth")


def cache_auth_secret(namespace: str, name: str) -> dict[str, Any]:
    """The hydration Job's token Secret; `stringData.HF_TOKEN` is a placeholder, never the token."""
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": meta(secret_name(namespace, name), namespace, labels=_labels(name)),
        "type": "Opaque",
        "stringData": {TOKEN_KEY: cache_token(namespace, name)},
    }


def hydrate_script(repo: str, revision: str | None) -> str:
    """Download the repo into the volume once; the marker file makes reruns a no-op."""
    download = ["hf", "download", repo]
    if revision:
        download += ["--revision", revision]
    download += ["--local-dir", MOUNT_PATH]
    return (
        "\n".join(
            [
                "set -e",
                f'if [ -f {MARKER} ]; then echo "{repo} is already staged"; exit 0; fi',
                "pip install --quiet huggingface_hub",
                shlex.join(download),
                f"touch {MARKER}",
            ]
        )
        + "\n"
    )


def render_cache(namespace: str, name: str, cache: ModelCache, cluster: str, storage_class: str | None) -> list[dict]:
    """The PVC, the token Secret (only with a token) and the hydration Job of cache `namespace/name` on `cluster`."""
    source = cache.hugging_face
    if source is None:
        raise ValueError(f"ModelCache {namespace}/{name} has no huggingFace source")
    if not storage_class:
        raise ValueError(
            f"ModelCache {namespace}/{name} cannot stage on cluster '{cluster}': it has no ReadWriteMany StorageClass"
        )
    labels = _labels(name)
    claim = pvc_name(namespace, name)
    pvc = {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": meta(claim, namespace, labels=labels),
        "spec": {
            "accessModes": ["ReadWriteMany"],
            "storageClassName": storage_class,
            "resources": {"requests": {"storage": f"{source.size_gib}Gi"}},
        },
    }
    container: dict[str, Any] = {
        "name": "hydrate",
        "image": HYDRATE_IMAGE,
        "command": ["/bin/sh", "-c", hydrate_script(source.repo, source.revision)],
        "volumeMounts": [{"name": "artifact", "mountPath": MOUNT_PATH}],
    }
    objects: list[dict[str, Any]] = [pvc]
    if source.token is not None:
        secret = cache_auth_secret(namespace, name)
        objects.append(secret)
        container["env"] = [
            {"name": TOKEN_KEY, "valueFrom": {"secretKeyRef": {"name": secret["metadata"]["name"], "key": TOKEN_KEY}}}
        ]
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": meta(job_name(namespace, name), namespace, labels=labels),
        "spec": {
            "backoffLimit": 3,
            "ttlSecondsAfterFinished": 180,
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "restartPolicy": "OnFailure",
                    "containers": [container],
                    "volumes": [{"name": "artifact", "persistentVolumeClaim": {"claimName": claim}}],
                },
            },
        },
    }
    objects.append(job)
    return objects


def _labels(name: str) -> dict[str, str]:
    return {**MANAGED_BY, CACHE_LABEL: name}
