"""Helm releases an interrupted `up` installed but state never recorded: the next `up` imports them.

Every Kubernetes object goes through server-side apply, so an object a killed `up` created is taken
over by the next one. A Helm release is not: the provider installs it, and a second install of the
same name fails ("cannot re-use a name that is still in use"). A release ends up installed but not
in state whenever the engine dies after Helm finished and before the state was saved: anywhere in
an `up` that skips checkpoints (checkpoints.py), in a short window otherwise.

So for each cluster whose serving stack the last `up` did not record (its fingerprint is new or
changed, render/fingerprint.py), the program lists the Helm releases deployed there before it
registers any, and registers each rendered release found deployed with `import_`: the engine reads
it into state, then updates it to the program's chart and values. A release already in state is
not imported again: the engine imports only when the ID differs from the recorded one, and a
release's ID is `<namespace>/<name>` either way.

Only Existing clusters are read, with the kubeconfig from the config (the status command's
client). A cluster the program provisions has no kubeconfig before it exists; checkpoints.py keeps
refusing to skip checkpoints while one is new or changed. A release left mid-install
(`pending-install`) is not adopted: docs/runbook.md, "An `up` that was killed".
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import pulumi

from ..api import Fleet
from ..api.inference_cluster import ClusterSource, ExistingSource
from ..status.deadline import gather
from ..status.kube_client import KubeClient, ReadError
from ..status.kubeconfig import KubeconfigError, parse_kubeconfig
from .checkpoints import builds

HELM_SECRETS = "/api/v1/secrets"
DEPLOYED = "owner=helm,status=deployed"  # the labels Helm's storage driver puts on a release's current revision
METADATA_ONLY = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json"
READ_TIMEOUT, READ_BUDGET, WORKERS = 10.0, 30.0, 8


@dataclass(frozen=True)
class Readable:
    """An Existing cluster whose deployed releases the program reads."""

    name: str
    source: ClusterSource


def clusters_to_read(fleet: Fleet, now: Mapping[str, str], recorded: object) -> list[Readable]:
    """Existing clusters (workload or front door) whose serving stack the last `up` did not record."""
    sources = {name: cluster.cluster for name, cluster in fleet.inference_clusters.items()}
    if fleet.inference_gateway is not None:
        sources.setdefault(fleet.inference_gateway.cluster_name, fleet.inference_gateway.cluster)
    unrecorded = {change.cluster for change in builds(now, recorded)}
    return [Readable(name, sources[name]) for name in sorted(unrecorded) if sources[name].source == "Existing"]


def release_ids(listing: Mapping | None) -> frozenset[str]:
    """`<namespace>/<name>` of every release in a list of Helm's release secrets (the provider's release ID)."""
    out = set()
    for item in (listing or {}).get("items") or []:
        metadata = item.get("metadata") or {}
        name, namespace = (metadata.get("labels") or {}).get("name"), metadata.get("namespace")
        if isinstance(name, str) and isinstance(namespace, str):
            out.add(f"{namespace}/{name}")
    return frozenset(out)


def deployed_releases(cluster: Readable) -> frozenset[str]:
    """The releases deployed on `cluster` now. Raises ReadError or KubeconfigError (no secret in either)."""
    block = cluster.source.block()
    if not isinstance(block, ExistingSource) or block.kubeconfig.plaintext is None:
        raise KubeconfigError("its kubeconfig is not available to the program")
    text = block.kubeconfig.plaintext
    access = parse_kubeconfig(text, cluster.name, "the stack config", context=block.context)
    if access.problem:
        raise KubeconfigError(access.problem)
    client = KubeClient(access, READ_TIMEOUT, READ_BUDGET)
    try:
        return release_ids(client.get(HELM_SECRETS, {"labelSelector": DEPLOYED}, accept=METADATA_ONLY))
    finally:
        client.close()


def adoptable_releases(fleet: Fleet, now: Mapping[str, str], recorded: object) -> dict[str, frozenset[str]]:
    """Cluster -> the releases deployed there that the last `up` may not have recorded (import them).

    A cluster that cannot be read is warned about and adopts nothing: its releases are installed as
    usual, which is all an `up` did before (and fails as before if one is already there).
    """
    readable = clusters_to_read(fleet, now, recorded)

    def failed(cluster: Readable, error: Exception) -> frozenset[str]:
        known = isinstance(error, (ReadError, KubeconfigError))
        why = str(error) if known else type(error).__name__  # our errors carry no secret; others might
        pulumi.log.warn(
            f"could not list the Helm releases on cluster {cluster.name} ({why}): a release an interrupted "
            "`pulumi up` installed there will fail to install again (docs/runbook.md, 'An `up` that was killed')"
        )
        return frozenset()

    def late(cluster: Readable) -> frozenset[str]:
        return failed(cluster, ReadError("unreachable", f"no answer within {READ_BUDGET:.0f} s"))

    found = gather(deployed_releases, readable, WORKERS, READ_BUDGET + 5, late, failed)
    return {cluster.name: ids for cluster, ids in zip(readable, found, strict=True) if ids}
