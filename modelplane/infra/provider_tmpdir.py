"""Whether this run covers the kubeconfig files the Kubernetes provider leaves in the engine's temporary folder.

pulumi-kubernetes writes every kubeconfig it is given, token or client key included, to
`$TMPDIR/kubeconfig<digits>` (mode 0600) each time it is configured, whether the kubeconfig came as
content or as a path, for Helm to read; nothing removes the file (`writeKubeconfigToFile`,
provider `pkg/provider/util.go`, called from `Configure`: docs/your-own-cluster.md, "Credentials on
disk"). No provider option avoids it, and the engine starts the provider with its own environment,
which a program cannot change. So the operator runs Pulumi through `scripts/private-tmpdir.sh`:
a fresh TMPDIR only that user can open, removed with everything in it when the command ends. The
script names the folder in MODELPLANE_PRIVATE_TMPDIR; a run without it gets a warning.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass

import pulumi

WRAPPER = "scripts/private-tmpdir.sh"
MARKER = "MODELPLANE_PRIVATE_TMPDIR"
DOCS = 'docs/your-own-cluster.md, "Credentials on disk"'


@dataclass(frozen=True)
class Folder:
    """What matters of the temporary folder: who owns it and its permission bits."""

    owner: int
    mode: int


def provider_temp_folder(environ: Mapping[str, str]) -> str:
    """Where the provider's `os.CreateTemp("", ...)` writes: Go's `os.TempDir()` on Unix."""
    return environ.get("TMPDIR") or "/tmp"


def temp_folder_warning(environ: Mapping[str, str], folder: Folder | None, uid: int) -> str | None:
    """None when the run's temporary folder is private and removed afterwards; else what to do about it.

    `folder` describes the provider's temporary folder (None: it does not exist or is not a folder).
    """
    where = provider_temp_folder(environ)
    private = environ.get(MARKER)
    if not private or os.path.normpath(private) != os.path.normpath(where):
        return (
            f"the Kubernetes provider writes each cluster's kubeconfig, credential included, to "
            f"{where}/kubeconfig<digits> and never removes it. Run Pulumi through {WRAPPER} "
            f"(`{WRAPPER} pulumi up`): it gives the engine a private TMPDIR and removes it afterwards "
            f"({DOCS})"
        )
    if folder is None or folder.owner != uid or folder.mode & 0o077:
        return (
            f"TMPDIR {where} is not a folder only this user can open, so the kubeconfig files the Kubernetes "
            f"provider writes there are not private. Run Pulumi through {WRAPPER} ({DOCS})"
        )
    return None


def folder_facts(path: str) -> Folder | None:
    try:
        info = os.stat(path)
    except OSError:
        return None
    if not stat.S_ISDIR(info.st_mode):
        return None
    return Folder(owner=info.st_uid, mode=stat.S_IMODE(info.st_mode))


def warn_unless_private_temp_folder() -> None:
    getuid = getattr(os, "getuid", None)
    if getuid is None:  # not a Unix system: Go's temporary folder is not TMPDIR there
        return
    message = temp_folder_warning(os.environ, folder_facts(provider_temp_folder(os.environ)), getuid())
    if message is not None:
        pulumi.log.warn(message)
