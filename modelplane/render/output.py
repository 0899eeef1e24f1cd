"""Write rendered manifests to a folder: one folder per cluster, objects in apply order, Helm releases."""
from __future__ import annotations

import shutil
from pathlib import Path

import yaml

from .types import ClusterManifests


def write_manifests(manifests: list[ClusterManifests], out: Path) -> list[tuple[str, int, int]]:
    """Files `<out>/<cluster>/<NNN>-<kind>-<namespace>-<name>.yaml` and `<out>/<cluster>/helm-releases.yaml`.

    Returns (cluster, objects, releases) per cluster. The folder is replaced, so a removed
    object does not linger.
    """
    summary = []
    for cluster in manifests:
        folder = out / cluster.cluster
        if folder.exists():
            shutil.rmtree(folder)
        folder.mkdir(parents=True)
        for i, obj in enumerate(cluster.objects):
            metadata = obj.get("metadata", {})
            stem = "-".join(p for p in (f"{i:03d}", obj["kind"].lower(), metadata.get("namespace", "_cluster"),
                                        metadata["name"]) if p)
            (folder / f"{stem}.yaml").write_text(yaml.safe_dump(obj, sort_keys=False))
        releases = [r.to_dict() for r in cluster.releases]
        (folder / "helm-releases.yaml").write_text(yaml.safe_dump(releases, sort_keys=False))
        summary.append((cluster.cluster, len(cluster.objects), len(cluster.releases)))
    return summary
