"""Where charts and CRD manifests come from: upstream, or the stack's mirror (`modelplane:mirror`).

Pure data, no I/O:

* `mirror_release` / `mirror_manifest` rewrite one rendered Helm release or remote manifest to
  point into the mirror (unchanged without one). They are idempotent, so applying them to a
  cluster's final releases and manifests is one line each.
* `mirror_sources` lists exactly what the mirror must hold for a fleet's clusters (`render.fleet.fleet_sources`), deduplicated across
  clusters and sorted; `sources_table` and `fill_commands` are its views for `modelplane sources`.
* `digest_problem` checks a manifest's bytes against its pinned SHA-256 (the Pulumi layer reads a
  folder mirror's file and calls it before applying the file).

Naming in the mirror:

* chart `X` version `V`: `X-V.tgz` in a folder (what `helm pull` writes), `oci://<prefix>/X:V` in an
  OCI registry (what `helm push X-V.tgz oci://<prefix>` creates), `X-V.tgz` in a Helm repository;
* manifest: `<component>-<version>-<upstream file name>` (e.g.
  `gatewayApi-v1.5.1-standard-install.yaml`), so two versions sit side by side in one folder.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
import shlex
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from ..api.errors import ModelplaneError
from ..api.mirror import Location, Mirror, is_local_path
from ..text_table import text_table
from .types import ClusterManifests, ClusterStack, HelmRelease, RemoteManifest

# SHA-256 of upstream manifests, keyed by their exact URL (a new version has no pin until someone
# checks it). Only digests found published for exactly that URL are listed, with where they were found.
PINNED_SHA256: dict[str, str] = {
    # Gateway API v1.5.1 standard channel (1,024,333 bytes). The same digest is stated for this URL by
    # several unrelated public repositories that vendor or verify the file (found with a code search):
    # a vendored-CRDs README ("751002b3...  gateway-api-v1.5.1-standard-install.yaml"), a test-lab
    # recipe README recording url, sha256 and size, a kind e2e script (GATEWAY_API_SHA256=...), a
    # Makefile (GATEWAY_API_MANIFEST_SHA256 ?= ...) and a release-input lock (digest: "sha256:...").
    "https://github.com/kubernetes-sigs/gateway-api/releases/download/v1.5.1/standard-install.yaml": "751002b3b91a87f7ae3bd2517c79a47a8d7ed6702901808a1cf9bd97d284f9b8",
    # Gateway API Inference Extension v1.0.1 manifests.yaml: no published digest found; not pinned.
}

NOT_PINNED = "not pinned: check it after download"
STAGING = "modelplane-mirror"  # the folder `fill_commands` downloads into, on a machine with internet access

_UNSAFE = re.compile(r"[^A-Za-z0-9._+-]")


def pinned_sha256(url: str) -> str | None:
    """The pinned SHA-256 of the upstream manifest at `url`, if one is known."""
    return PINNED_SHA256.get(url)


def with_pinned_digest(manifest: RemoteManifest) -> RemoteManifest:
    """`manifest` with its pinned digest filled in (an explicit one is kept)."""
    if manifest.sha256 is not None:
        return manifest
    digest = pinned_sha256(manifest.url)
    return manifest if digest is None else dataclasses.replace(manifest, sha256=digest)


# --- names in the mirror ---------------------------------------------------------------------------


def chart_file_name(chart: str, version: str) -> str:
    """What `helm pull` writes for chart `chart` version `version`."""
    return f"{chart}-{version}.tgz"


def manifest_file_name(manifest: RemoteManifest) -> str:
    """`<component>-<version>-<upstream file name>`: deterministic, one per manifest and version."""
    basename = urlsplit(manifest.url).path.rsplit("/", 1)[-1] or manifest.name
    return "-".join(_UNSAFE.sub("_", part) for part in (manifest.component, manifest.version, basename))


def chart_destination(chart: str, version: str, where: Location) -> str:
    """Where chart `chart` version `version` sits in the mirror."""
    if where.kind == "oci":
        return f"{where.join(chart)}:{version}"
    return where.join(chart_file_name(chart, version))


# --- rewriting --------------------------------------------------------------------------------------


def mirror_release(release: HelmRelease, mirror: Mirror | None) -> HelmRelease:
    """`release` pulled from the mirror's charts location (unchanged without one).

    OCI: `repository` becomes the mirror prefix (the chart is `<prefix>/<chart>`, version as is).
    Helm repository: `repository` becomes the mirror's URL. Folder: `chart` becomes the absolute
    path of `<chart>-<version>.tgz` and `repository` is empty (the Pulumi layer installs the file).
    """
    where = mirror.chart_location if mirror is not None else None
    if where is None or _in_mirror(release, where):
        return release
    if where.kind == "folder":
        return dataclasses.replace(
            release, chart=where.join(chart_file_name(release.chart, release.version)), repository=""
        )
    return dataclasses.replace(release, repository=where.value)


def _in_mirror(release: HelmRelease, where: Location) -> bool:
    if where.kind == "folder":
        return release.repository == "" and release.chart.startswith(where.value + "/")
    return release.repository.rstrip("/") == where.value


def mirror_manifest(manifest: RemoteManifest, mirror: Mirror | None) -> RemoteManifest:
    """`manifest` read from the mirror's manifests location, its pinned digest filled in.

    The URL becomes `<base>/<manifest_file_name>` (a URL or an absolute file path); without a
    manifests mirror only the digest is filled in.
    """
    manifest = with_pinned_digest(manifest)
    where = mirror.manifest_location if mirror is not None else None
    if where is None or manifest.url.startswith(where.value + "/"):
        return manifest
    return dataclasses.replace(manifest, url=where.join(manifest_file_name(manifest)))


# --- digests ----------------------------------------------------------------------------------------


def digest_problem(manifest: RemoteManifest, content: bytes) -> str | None:
    """Why `content` is not the manifest the fleet pins, or None (also None when nothing is pinned)."""
    if manifest.sha256 is None:
        return None
    actual = hashlib.sha256(content).hexdigest()
    if actual == manifest.sha256.lower():
        return None
    return (
        f"{manifest.url} is not the pinned {manifest.component} {manifest.version} manifest: its SHA-256 is "
        f"{actual}, the pinned one is {manifest.sha256}. Download it again (`modelplane sources --stack "
        "<stack>` prints the commands, with a sha256sum check) and replace the file; it was not applied"
    )


def missing_file_message(path: str, what: str) -> str:
    return (
        f"{path}: no such file in the mirror folder ({what}). `modelplane sources --stack <stack>` lists every "
        "file the mirror must hold and the commands that fetch them"
    )


# --- what to mirror ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class ChartSource:
    """One chart version the fleet installs: where it comes from and where the mirror keeps it."""

    chart: str
    version: str
    repository: str  # upstream: https://... Helm repository or oci://... registry prefix
    file: str  # what `helm pull` writes
    destination: str | None  # in the configured mirror (None: no charts mirror configured)
    clusters: tuple[str, ...]

    @property
    def reference(self) -> str:
        """The chart as `helm pull` takes it (with `--repo` for a Helm repository)."""
        return f"{self.repository.rstrip('/')}/{self.chart}" if self.repository.startswith("oci://") else self.chart

    def to_dict(self) -> dict[str, Any]:
        return {
            "chart": self.chart,
            "version": self.version,
            "repository": self.repository,
            "file": self.file,
            "destination": self.destination,
            "clusters": list(self.clusters),
        }


@dataclass(frozen=True)
class ManifestSource:
    """One remote manifest the fleet applies: its upstream URL, pinned digest and mirror file."""

    component: str
    version: str
    url: str  # upstream
    sha256: str | None
    file: str
    destination: str | None  # in the configured mirror (None: no manifests mirror configured)
    clusters: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "component": self.component,
            "version": self.version,
            "url": self.url,
            "sha256": self.sha256,
            "pinned": self.sha256 is not None,
            "file": self.file,
            "destination": self.destination,
            "clusters": list(self.clusters),
        }


@dataclass(frozen=True)
class Sources:
    """Everything a mirror must hold for one fleet."""

    mirror: Mirror | None
    charts: tuple[ChartSource, ...]
    manifests: tuple[ManifestSource, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "mirror": self.mirror.to_config() if self.mirror else None,
            "charts": [c.to_dict() for c in self.charts],
            "manifests": [m.to_dict() for m in self.manifests],
        }


def mirror_sources(manifests: Iterable[ClusterStack | ClusterManifests], mirror: Mirror | None) -> Sources:
    """What to mirror, from the fleet's rendered clusters as they are upstream (before `mirror_*`).

    One entry per chart version and per manifest URL, with the clusters that use it. Two upstream
    repositories offering the same chart name and version would collide in the mirror: refused.
    """
    charts: dict[tuple[str, str], tuple[HelmRelease, set[str]]] = {}
    files: dict[str, tuple[RemoteManifest, set[str]]] = {}
    for cluster in manifests:
        for release in cluster.releases:
            if not release.repository:
                raise ValueError(
                    f"{cluster.cluster}/{release.name} is already a local chart ({release.chart}): "
                    "list sources from the upstream render, before mirror_release"
                )
            key = (release.chart, release.version)
            seen = charts.setdefault(key, (release, set()))
            if seen[0].repository.rstrip("/") != release.repository.rstrip("/"):
                raise ModelplaneError(
                    f"chart {release.chart} {release.version} comes from two repositories "
                    f"({seen[0].repository} and {release.repository}); one mirror cannot hold "
                    "both under one name"
                )
            seen[1].add(cluster.cluster)
        for manifest in cluster.remote_manifests:
            files.setdefault(manifest.url, (with_pinned_digest(manifest), set()))[1].add(cluster.cluster)
    chart_where = mirror.chart_location if mirror is not None else None
    file_where = mirror.manifest_location if mirror is not None else None
    chart_list = tuple(
        ChartSource(
            r.chart,
            r.version,
            r.repository,
            chart_file_name(r.chart, r.version),
            chart_destination(r.chart, r.version, chart_where) if chart_where else None,
            tuple(sorted(c)),
        )
        for (_, _), (r, c) in sorted(charts.items())
    )
    manifest_list = []
    by_file: dict[str, str] = {}
    for url, (m, c) in sorted(files.items(), key=lambda item: (manifest_file_name(item[1][0]), item[0])):
        name = manifest_file_name(m)
        if by_file.setdefault(name, url) != url:
            raise ModelplaneError(f"manifests {by_file[name]} and {url} would both be stored as {name} in the mirror")
        manifest_list.append(
            ManifestSource(
                m.component,
                m.version,
                url,
                m.sha256,
                name,
                file_where.join(name) if file_where else None,
                tuple(sorted(c)),
            )
        )
    return Sources(mirror, chart_list, tuple(manifest_list))


# --- views ------------------------------------------------------------------------------------------


def _clusters(names: tuple[str, ...]) -> str:
    return ",".join(names) if len(names) <= 3 else f"{len(names)} clusters"


def sources_table(sources: Sources) -> str:
    mirror = sources.mirror
    if mirror is None:
        lines = ["No mirror configured (modelplane:mirror): everything below is fetched from upstream at preview time."]
    else:
        lines = [f"Mirror: charts {mirror.charts or '(upstream)'}, manifests {mirror.manifests or '(upstream)'}"]
    lines += ["", f"Helm charts ({len(sources.charts)}):"]
    lines += text_table(
        ["CHART", "VERSION", "UPSTREAM", "IN THE MIRROR", "CLUSTERS"],
        [[c.chart, c.version, c.repository, c.destination or c.file, _clusters(c.clusters)] for c in sources.charts],
    )
    lines += ["", f"CRD manifests ({len(sources.manifests)}):"]
    lines += text_table(
        ["FILE", "UPSTREAM", "SHA-256", "IN THE MIRROR", "CLUSTERS"],
        [
            [m.file, m.url, m.sha256 or NOT_PINNED, m.destination or m.file, _clusters(m.clusters)]
            for m in sources.manifests
        ],
    )
    return "\n".join(lines) + "\n"


def fill_commands(sources: Sources) -> str:
    """Shell commands that download every source and fill the configured mirror (copy-paste ready)."""
    q = shlex.quote
    charts_dir, files_dir = f"{STAGING}/charts", f"{STAGING}/manifests"
    lines = [
        "# 1. On a machine with internet access: download everything into ./" + STAGING,
        "#    (each chart is pulled into a folder of its own, then named <chart>-<version>.tgz: helm names",
        "#    the file after the tag it resolved, which may spell the version differently, e.g. without a 'v')",
        f"mkdir -p {charts_dir} {files_dir}",
    ]
    for c in sources.charts:
        pull = q(f"{STAGING}/pull/{c.file[: -len('.tgz')]}")
        where = f"--repo {q(c.repository)} " if not c.repository.startswith("oci://") else ""
        lines.append(
            f"mkdir -p {pull} && helm pull {q(c.reference)} {where}--version {q(c.version)} --destination "
            f"{pull} && mv {pull}/*.tgz {q(f'{charts_dir}/{c.file}')}"
        )
    for m in sources.manifests:
        lines.append(f"curl -fsSL -o {q(f'{files_dir}/{m.file}')} {q(m.url)}")
    pinned = [m for m in sources.manifests if m.sha256]
    unpinned = [m for m in sources.manifests if not m.sha256]
    if pinned:
        lines.append("# check the pinned digests: a mismatch means the file is not the pinned upstream file")
        lines += [f"echo {q(f'{m.sha256}  {files_dir}/{m.file}')} | sha256sum -c -" for m in pinned]
    if unpinned:
        lines.append("# not pinned: record these digests and compare them with the upstream release")
        lines += [f"sha256sum {q(f'{files_dir}/{m.file}')}" for m in unpinned]
    lines += ["", f"# 2. Carry ./{STAGING} into the network, then fill the mirror:"]
    lines += _fill_charts(sources)
    lines += _fill_manifests(sources)
    return "\n".join(lines) + "\n"


def _fill_charts(sources: Sources) -> list[str]:
    q = shlex.quote
    where = sources.mirror.chart_location if sources.mirror else None
    if not sources.charts:
        return []
    if where is None:
        return [
            "# charts: no mirror configured; set modelplane:mirror.charts (docs/air-gapped.md) and run "
            "`modelplane sources` again for the commands that fill it"
        ]
    if where.kind == "folder":
        return [f"mkdir -p {q(where.value)}", f"cp {STAGING}/charts/*.tgz {q(where.value + '/')}"]
    if where.kind == "oci":
        host = urlsplit(where.value).netloc
        return [f"# helm registry login {q(host)}   (if the registry needs it)"] + [
            f"helm push {q(f'{STAGING}/charts/{c.file}')} {q(where.value)}" for c in sources.charts
        ]
    return [
        f"# upload each .tgz to the Helm repository {where.value} with its upload API (Artifactory, Nexus",
        "# and ChartMuseum each have one), so that its index.yaml lists every chart version:",
    ] + [f"#   {STAGING}/charts/{c.file}" for c in sources.charts]


def _fill_manifests(sources: Sources) -> list[str]:
    q = shlex.quote
    where = sources.mirror.manifest_location if sources.mirror else None
    if not sources.manifests:
        return []
    if where is None:
        return [
            "# manifests: no mirror configured; set modelplane:mirror.manifests (docs/air-gapped.md) and run "
            "`modelplane sources` again for the commands that fill it"
        ]
    if where.kind == "folder":
        return [f"mkdir -p {q(where.value)}"] + [
            f"cp {q(f'{STAGING}/manifests/{m.file}')} {q(where.join(m.file))}" for m in sources.manifests
        ]
    return [
        "# put each file at <base>/<file>, e.g. with HTTP PUT (Artifactory generic, Nexus raw, WebDAV;",
        "# add -u USER if it needs a login):",
    ] + [f"curl -fsS -T {q(f'{STAGING}/manifests/{m.file}')} {q(where.join(m.file))}" for m in sources.manifests]


__all__ = [
    "PINNED_SHA256",
    "ChartSource",
    "ManifestSource",
    "Sources",
    "chart_file_name",
    "digest_problem",
    "fill_commands",
    "is_local_path",
    "manifest_file_name",
    "mirror_manifest",
    "mirror_release",
    "mirror_sources",
    "pinned_sha256",
    "sources_table",
    "with_pinned_digest",
]
