"""What the fleet should hold, read from `modelplane render` (the whole truth of what `pulumi up` deploys)."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from .kube_api import ApiError, KubeApi, object_path



@dataclass(frozen=True)
class Expected:
    cluster: str
    api_version: str
    kind: str
    namespace: str | None
    name: str

    @property
    def resource_name(self) -> str:
        """The Pulumi resource name the program gives it (`modelplane.infra.kube.resource_name`)."""
        return f"{self.cluster}/{self.namespace}/{self.name}" if self.namespace else f"{self.cluster}/{self.name}"

    @property
    def type_token(self) -> str:
        group_version = self.api_version if "/" in self.api_version else f"core/{self.api_version}"
        return f"kubernetes:{group_version}:{self.kind}"

    def __str__(self) -> str:
        return f"{self.cluster}: {self.kind} {self.namespace + '/' if self.namespace else ''}{self.name}"


@dataclass(frozen=True)
class Rendered:
    objects: tuple[Expected, ...]
    releases: tuple[tuple[str, str, str], ...]  # (cluster, release name, namespace)
    manifests: tuple[tuple[str, str], ...]       # (cluster, manifest name)

    def of_kind(self, kind: str, cluster: str | None = None) -> list[Expected]:
        return [o for o in self.objects if o.kind == kind and (cluster is None or o.cluster == cluster)]


def read_render(folder: Path) -> Rendered:
    objects, releases, manifests = [], [], []
    for cluster_dir in sorted(p for p in folder.iterdir() if p.is_dir()):
        cluster = cluster_dir.name
        for path in sorted(cluster_dir.glob("*.yaml")):  # only objects: the notes are in meta/
            for obj in yaml.safe_load_all(path.read_text()):
                if obj:
                    meta = obj["metadata"]
                    objects.append(Expected(cluster, obj["apiVersion"], obj["kind"], meta.get("namespace"), meta["name"]))
        for release in yaml.safe_load((cluster_dir / "meta" / "helm-releases.yaml").read_text()) or []:
            releases.append((cluster, release["name"], release["namespace"]))
        for manifest in yaml.safe_load((cluster_dir / "meta" / "remote-manifests.yaml").read_text()) or []:
            manifests.append((cluster, manifest["name"]))
    return Rendered(tuple(objects), tuple(releases), tuple(manifests))


class Discovery:
    """Kind -> resource plural per API server (what `kubectl api-resources` shows), cached."""

    def __init__(self) -> None:
        self._plurals: dict[tuple[int, str], dict[str, tuple[str, bool]]] = {}

    def resource(self, api: KubeApi, api_version: str, kind: str) -> tuple[str, bool]:
        key = (id(api), api_version)
        if key not in self._plurals:
            path = f"/api/{api_version}" if "/" not in api_version else f"/apis/{api_version}"
            listing = api.get(path) or {"resources": []}
            self._plurals[key] = {r["kind"]: (r["name"], r["namespaced"]) for r in listing["resources"] if "/" not in r["name"]}
        if kind not in self._plurals[key]:
            del self._plurals[key]  # a CRD may have been established since
            raise LookupError(f"{kind} ({api_version}) is not served")
        return self._plurals[key][kind]

    def path(self, api: KubeApi, api_version: str, kind: str, namespace: str | None, name: str | None = None) -> str:
        plural, namespaced = self.resource(api, api_version, kind)
        return object_path(api_version, plural, namespace if namespaced else None, name)


def fetch(api: KubeApi, discovery: Discovery, expected: Expected) -> dict[str, Any] | None:
    try:
        return api.get(discovery.path(api, expected.api_version, expected.kind, expected.namespace, expected.name))
    except (LookupError, ApiError):
        return None
