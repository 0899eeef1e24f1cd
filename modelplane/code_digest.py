"""A digest of the code that turns a plan into Pulumi registrations: modelplane's own source and the versions of
the Pulumi packages. Part of each cluster's fingerprint (render/fingerprint.py): after an upgrade, no cluster is
taken as unchanged."""

from __future__ import annotations

import functools
import hashlib
from importlib import metadata
from pathlib import Path

PACKAGES = ("pulumi", "pulumi-kubernetes")


@functools.cache
def code_digest() -> str:
    digest = hashlib.sha256()
    root = Path(__file__).parent
    for path in sorted(root.rglob("*.py")):
        digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes() + b"\0")
    for package in PACKAGES:
        try:
            version = metadata.version(package)
        except metadata.PackageNotFoundError:
            version = "absent"
        digest.update(f"{package}=={version}\0".encode())
    return digest.hexdigest()[:16]
