"""Write rendered manifests to a folder: one folder per cluster, everything `pulumi up` puts on it.

A cluster folder holds only Kubernetes objects, `NNN-<kind>-<namespace>-<name>.yaml` numbered in apply
order (so that `kubectl apply -f <cluster folder>` reads them, and in that order), and in its `meta/`
subfolder, which kubectl does not read without `-R`, what `pulumi up` handles itself:
`remote-manifests.yaml` (CRD manifests applied from a URL), `helm-releases.yaml` (each release with
the releases it waits for) and `placeholders.yaml` (each value the objects hold a placeholder for, and
what `pulumi up` puts there).

`render --out DIR` only ever replaces what it wrote itself. Each cluster folder it writes holds a
marker, `.modelplane-render`: JSON with a format version and the list of files render wrote there.
On the next render a cluster folder is replaced only if it carries the marker and holds nothing
but the files the marker lists; a folder render did not write, one with files added since (render
refuses rather than guess which to keep) or a file where a folder should be is refused, naming it,
before anything is written. Marked folders of clusters no longer in the fleet are removed.
"""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import dataclass
from pathlib import Path

import yaml

from ..api.errors import ModelplaneError
from .types import ClusterManifests

MARKER = ".modelplane-render"
FORMAT = 2  # 2: the notes in meta/; a folder written in format 1 (notes beside the objects) is still render's own
_READABLE_FORMATS = (1, 2)
META = "meta"  # the subfolder of what is not a Kubernetes object
_MARKER_TEMP = MARKER + ".tmp"  # the marker is replaced atomically through this name


@dataclass(frozen=True)
class _Folder:
    """A cluster folder to write: its files (name -> text) and the files a previous render left there."""

    path: Path
    files: dict[str, str]
    old_files: tuple[str, ...] | None  # None: the folder does not exist yet


@dataclass(frozen=True)
class Written:
    """What render wrote for one cluster."""

    cluster: str
    objects: int
    releases: int
    remote_manifests: int
    placeholders: int


REMOTE_MANIFESTS = f"{META}/remote-manifests.yaml"
_REMOTE_NOTE = (
    "# Multi-document manifests applied from their URL before anything else on this cluster\n"
    "# (pulumi up: a kubernetes yaml/v2 ConfigFile named <cluster>/<name>).\n"
)
_PLACEHOLDER_NOTE = (
    "# Values the rendered objects hold a placeholder for (renderedAs);\n"
    "# pulumi up puts deployedAs there. Secrets are never rendered.\n"
)
HELM_RELEASES = f"{META}/helm-releases.yaml"
PLACEHOLDERS = f"{META}/placeholders.yaml"


def write_manifests(manifests: list[ClusterManifests], out: Path) -> tuple[list[Written], list[Path]]:
    """Per cluster: `<out>/<cluster>/<NNN>-<kind>-<namespace>-<name>.yaml` per object, and
    `meta/remote-manifests.yaml`, `meta/helm-releases.yaml` and `meta/placeholders.yaml`.

    Returns what was written per cluster, and the folders removed (of clusters no longer in the
    fleet). A folder render wrote before is replaced, so a removed object does not linger;
    see the module docstring for what is refused (ModelplaneError, nothing written).
    """
    _check_out(out)
    try:
        folders, stale = _plan(manifests, out)
    except OSError as error:
        raise ModelplaneError(
            f"cannot read {error.filename or out}: {error.strerror or error}; nothing written"
        ) from None
    # every check passed: only now write
    try:
        out.mkdir(parents=True, exist_ok=True)
        for folder in folders:
            _write_folder(folder)
        for stale_folder, files in stale:
            _remove_folder(stale_folder, files)
    except OSError as error:
        raise ModelplaneError(
            f"cannot write {error.filename or out}: {error.strerror or error}; "
            "the render stopped part way: fix that and run it again"
        ) from None
    return [
        Written(c.cluster, len(c.objects), len(c.releases), len(c.remote_manifests), len(c.placeholders))
        for c in manifests
    ], [folder for folder, _ in stale]


def _plan(manifests: list[ClusterManifests], out: Path) -> tuple[list[_Folder], list[tuple[Path, tuple[str, ...]]]]:
    """What to write and what to remove; a ModelplaneError (before anything is written) if a folder is not render's."""
    folders = []
    for cluster in manifests:
        _check_cluster_name(cluster.cluster)
        files = {
            REMOTE_MANIFESTS: _REMOTE_NOTE
            + yaml.safe_dump([m.to_dict() for m in cluster.remote_manifests], sort_keys=False)
        }
        digits = max(3, len(str(len(cluster.objects) - 1)))  # names sort in apply order, as kubectl reads them
        for i, obj in enumerate(cluster.objects):
            metadata = obj.get("metadata", {})
            stem = "-".join(
                p
                for p in (
                    f"{i:0{digits}d}",
                    obj["kind"].lower(),
                    metadata.get("namespace", "_cluster"),
                    metadata["name"],
                )
                if p
            )
            files[f"{stem}.yaml"] = yaml.safe_dump(obj, sort_keys=False)
        files[HELM_RELEASES] = yaml.safe_dump([r.to_dict() for r in cluster.releases], sort_keys=False)
        files[PLACEHOLDERS] = _PLACEHOLDER_NOTE + yaml.safe_dump(
            [p.to_dict() for p in cluster.placeholders], sort_keys=False, width=1 << 16
        )
        folder = out / cluster.cluster
        folders.append(_Folder(folder, files, _owned_files(folder)))
    current = {cluster.cluster for cluster in manifests}
    stale = []  # (folder, its files): render-owned folders of clusters no longer in the fleet
    if out.is_dir():
        for entry in sorted(out.iterdir()):
            if (
                entry.name not in current
                and not entry.is_symlink()
                and entry.is_dir()
                and os.path.lexists(entry / MARKER)
            ):
                owned = _owned_files(entry)
                assert owned is not None  # the folder exists
                stale.append((entry, owned))
    return folders, stale


def _check_out(out: Path) -> None:
    if out.exists() and not out.is_dir():
        raise ModelplaneError(
            f"--out {out} is a file, not a folder; nothing written: pass a folder (render writes "
            "one folder per cluster in it)"
        )
    for parent in out.parents:
        if parent.exists() and not parent.is_dir():
            raise ModelplaneError(f"--out {out}: {parent} is a file, not a folder; nothing written: pass a folder")


def _check_cluster_name(name: str) -> None:
    """Cluster names are DNS labels; never let one name a path outside --out."""
    if not name or name in (".", "..") or "/" in name or "\\" in name or name == MARKER:
        raise ModelplaneError(f"cannot render cluster {name!r} to a folder of that name")


def _refuse(folder: Path, why: str, what: str = "it") -> ModelplaneError:
    return ModelplaneError(
        f"{folder} {why}; render replaces only folders it wrote itself (marked by {MARKER}), so "
        f"nothing was written: choose another --out, or move or remove {what} yourself"
    )


def _owned_files(folder: Path) -> tuple[str, ...] | None:
    """The files a previous render wrote to `folder` (None: no folder); refused unless render owns all of it."""
    if not os.path.lexists(folder):
        return None
    if folder.is_symlink() or not folder.is_dir():
        raise _refuse(folder, "exists and is not a folder render wrote (a cluster of the fleet has that name)")
    marker = folder / MARKER
    try:
        data = json.loads(marker.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise _refuse(folder, f"exists and was not written by modelplane render (it has no {MARKER})") from None
    except (OSError, ValueError) as error:
        raise _refuse(folder, f"has a {MARKER} render cannot read ({error})") from None
    files = data.get("files") if isinstance(data, dict) else None
    if (
        not isinstance(data, dict)
        or data.get("format") not in _READABLE_FORMATS
        or not isinstance(files, list)
        or not all(isinstance(f, str) and _is_file_name(f) for f in files)
    ):
        raise _refuse(folder, f"has a {MARKER} of a format this version of modelplane does not write")
    foreign = _foreign_entries(folder, set(files))
    if foreign:
        shown = ", ".join(foreign[:5]) + (f" and {len(foreign) - 5} more" if len(foreign) > 5 else "")
        raise _refuse(folder, f"holds files modelplane render did not write: {shown}", "them")
    return tuple(files)


def _is_file_name(name: str) -> bool:
    """A name render writes: `file` or `meta/file`, never a path that leaves the folder."""
    parts = name.split("/")
    return (
        (len(parts) == 1 or (len(parts) == 2 and parts[0] == META))
        and all(p and p not in (".", "..", MARKER, _MARKER_TEMP) and "\\" not in p for p in parts)
        and name != META
    )


def _foreign_entries(folder: Path, listed: set[str]) -> list[str]:
    """What is in `folder` (and its `meta/`) that the marker does not list as a regular file."""
    foreign = []
    for entry in sorted(os.listdir(folder)):
        path = folder / entry
        if entry in (MARKER, _MARKER_TEMP):
            continue
        if entry == META and path.is_dir() and not path.is_symlink():
            foreign += [
                f"{META}/{name}"
                for name in sorted(os.listdir(path))
                if not _is_listed_file(folder, f"{META}/{name}", listed)
            ]
        elif not _is_listed_file(folder, entry, listed):
            foreign.append(entry)
    return foreign


def _is_listed_file(folder: Path, name: str, listed: set[str]) -> bool:
    path = folder / name
    return name in listed and path.is_file() and not path.is_symlink()


def _write_folder(folder: _Folder) -> None:
    """Write the folder's files and marker; a file of the previous render that is no longer rendered is removed.

    The marker always lists every render-written file in the folder, so an interrupted render leaves
    a folder the next render still recognises as its own.
    """
    folder.path.mkdir(exist_ok=True)
    old = set(folder.old_files or ())
    new = list(folder.files)
    _write_marker(folder.path, sorted(old | set(new)))
    for name in sorted(old - set(new)):
        _unlink(folder.path / name)
    (folder.path / META).mkdir(exist_ok=True)
    for name, text in folder.files.items():
        (folder.path / name).write_text(text, encoding="utf-8")
    _write_marker(folder.path, new)


def _write_marker(folder: Path, files: list[str]) -> None:
    marker = {
        "format": FORMAT,
        "writer": "modelplane render",
        "note": "render replaces this folder's listed files on the next render, and removes the folder once "
        "its cluster leaves the fleet; it refuses a folder holding files it did not write",
        "files": files,
    }
    temp = folder / _MARKER_TEMP
    temp.write_text(json.dumps(marker, indent=2) + "\n", encoding="utf-8")
    os.replace(temp, folder / MARKER)


def _remove_folder(folder: Path, files: tuple[str, ...]) -> None:
    """Remove a render-owned folder of a cluster that left the fleet: its listed files, the marker, then it."""
    for name in files:
        _unlink(folder / name)
    if (folder / META).is_dir():
        (folder / META).rmdir()
    for name in (_MARKER_TEMP, MARKER):
        _unlink(folder / name)
    folder.rmdir()


def _unlink(path: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
