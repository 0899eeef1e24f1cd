"""Files of a folder mirror (`modelplane:mirror`), checked before Pulumi hands them to the provider.

The decisions (names, digests, messages) are pure, in `modelplane.render.sources`; this module
only reads the files. A missing file or a manifest whose SHA-256 differs from its pin stops the
run with `pulumi.RunError` (a plain message, no traceback). `check_folder_mirror` checks every file
before the program registers any resource; `local_chart` and `manifest_file` check each one again
where it is used.
"""

from __future__ import annotations

import os
from pathlib import Path

import pulumi

from ..api import Fleet
from ..api.errors import ModelplaneError
from ..api.textfile import read_bytes
from ..render.fleet import fleet_sources
from ..render.sources import digest_problem, is_local_path, missing_file_message
from ..render.types import RemoteManifest

MAX_MANIFEST_BYTES = 64 << 20


def local_chart(path: str) -> str:
    """`path` (a folder mirror's `<chart>-<version>.tgz`), once it is known to exist."""
    if not Path(path).is_file():
        raise pulumi.RunError(missing_file_message(path, "a Helm chart `helm pull` writes"))
    return path


def manifest_file(manifest: RemoteManifest) -> str:
    """What to give `yaml.v2.ConfigFile(file=...)` for `manifest`.

    A URL is returned as it is (the provider downloads it). A local file (a folder mirror) is read
    and, when a digest is pinned, checked against it first.
    """
    if not is_local_path(manifest.url):
        return manifest.url
    if not os.path.lexists(manifest.url):
        raise pulumi.RunError(
            missing_file_message(manifest.url, f"the {manifest.component} {manifest.version} manifest")
        )
    try:  # a regular file of bounded size only: a symlink to /dev/zero, a FIFO or a huge sparse file is refused unread
        content = read_bytes(
            Path(manifest.url),
            "the mirrored manifest",
            MAX_MANIFEST_BYTES,
            "the largest pinned CRD manifest is under 4 MiB",
        )
    except ModelplaneError as error:
        raise pulumi.RunError(str(error)) from None
    if (problem := digest_problem(manifest, content)) is not None:
        raise pulumi.RunError(problem)
    return manifest.url


def folder_mirror_problems(fleet: Fleet) -> list[str]:
    """Every file a folder mirror of `fleet` lacks, and every mirrored manifest that is not its pinned file.

    Nothing to read (an empty list) without a folder mirror. Charts and manifests do not depend on
    placement, so no plan is needed.
    """
    mirror = fleet.mirror
    charts = mirror.chart_location if mirror is not None else None
    files = mirror.manifest_location if mirror is not None else None
    if not ((charts and charts.kind == "folder") or (files and files.kind == "folder")):
        return []
    sources = fleet_sources(fleet)
    problems = []
    if charts is not None and charts.kind == "folder":
        problems += [
            missing_file_message(c.destination, f"chart {c.chart} {c.version}")
            for c in sources.charts
            if c.destination and not Path(c.destination).is_file()
        ]
    if files is not None and files.kind == "folder":
        for m in sources.manifests:
            manifest = RemoteManifest(m.file, m.component, m.version, m.destination or "", m.sha256)
            try:
                manifest_file(manifest)
            except pulumi.RunError as error:
                problems.append(str(error))
    return problems


def check_folder_mirror(fleet: Fleet) -> None:
    """Stop the run, before any resource is registered, if a folder mirror is incomplete or altered."""
    problems = folder_mirror_problems(fleet)
    if problems:
        for problem in problems:
            pulumi.log.error(problem)
        noun = "problem" if len(problems) == 1 else "problems"
        raise pulumi.RunError(f"{len(problems)} {noun} with the mirror folder (listed above); nothing was changed")
