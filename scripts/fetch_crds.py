#!/usr/bin/env python3
"""Fetch the pinned upstream CRDs (tests/upstream-crds.toml) into the user cache, for the tests.

    venv/bin/python scripts/fetch_crds.py              # from GitHub, at the pinned commits
    venv/bin/python scripts/fetch_crds.py --from DIR   # from a local copy (an air-gapped machine)

The cache is $MODELPLANE_CRD_CACHE, else $XDG_CACHE_HOME/modelplane/k8s-crds, else
~/.cache/modelplane/k8s-crds. A file is kept only if its SHA-256 is the pinned one, and it
appears under its name only once complete (written beside it, then renamed). Files already there
with the right digest are left alone, so running it again is cheap. Standard library only, so
that it needs nothing but Python. See docs/schemas.md.
"""
from __future__ import annotations

import argparse
import hashlib
import os
import sys
import tempfile
import tomllib
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

REPO = Path(__file__).resolve().parent.parent
PINS_FILE = REPO / "tests" / "upstream-crds.toml"
UPSTREAM = "https://raw.githubusercontent.com"
TIMEOUT_SECONDS = 30  # per connection attempt and per read, not for the whole file
CHUNK = 1 << 16


@dataclass(frozen=True)
class Pin:
    """One pinned CRD file: where it goes under the CRD directory, where it comes from, its digest."""

    path: str
    url: str
    tag: str
    sha256: str


def load_pins(pins_file: Path = PINS_FILE) -> list[Pin]:
    with open(pins_file, "rb") as fh:
        return [Pin(**entry) for entry in tomllib.load(fh)["crd"]]


def cache_dir(env: Mapping[str, str] = os.environ) -> Path:
    """Where the fetched CRDs live (the test helper looks here last)."""
    if env.get("MODELPLANE_CRD_CACHE"):
        return Path(env["MODELPLANE_CRD_CACHE"]).expanduser()
    return Path(env.get("XDG_CACHE_HOME") or "~/.cache").expanduser() / "modelplane" / "k8s-crds"


def sha256_of(path: Path) -> str:
    with open(path, "rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


class DigestMismatch(Exception):
    pass


class Offline(Exception):
    """The download host cannot be reached: every other file would fail the same way."""


def _write_verified(chunks: Iterable[bytes], pin: Pin, target: Path) -> None:
    """Write ``chunks`` to ``target`` if their digest is the pinned one; otherwise leave nothing behind."""
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, partial = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".part")
    try:
        digest = hashlib.sha256()
        with os.fdopen(fd, "wb") as fh:
            for chunk in chunks:
                digest.update(chunk)
                fh.write(chunk)
        if digest.hexdigest() != pin.sha256:
            raise DigestMismatch(f"SHA-256 mismatch: expected {pin.sha256}, got {digest.hexdigest()}; not kept")
        os.chmod(partial, 0o644)  # mkstemp's 0600 would hide the cache from other users of a shared one
        os.replace(partial, target)
    finally:
        if os.path.exists(partial):
            os.unlink(partial)


def _read_chunks(fh: BinaryIO) -> Iterable[bytes]:
    return iter(lambda: fh.read(CHUNK), b"")


def _download(pin: Pin, target: Path, base_url: str) -> None:
    url = base_url.rstrip("/") + pin.url.removeprefix(UPSTREAM)
    try:
        with urllib.request.urlopen(url, timeout=TIMEOUT_SECONDS) as response:
            _write_verified(_read_chunks(response), pin, target)
    except urllib.error.HTTPError as error:
        raise OSError(f"{url}: HTTP {error.code} {error.reason}") from None
    except (urllib.error.URLError, TimeoutError, ConnectionError) as error:
        reason = getattr(error, "reason", None) or error
        raise Offline(f"cannot download {url}: {reason}. Offline? Copy the CRDs from a machine that "
                      "has them and run: scripts/fetch_crds.py --from DIR") from None


def _copy(pin: Pin, target: Path, source_dir: Path) -> None:
    with open(source_dir / pin.path, "rb") as fh:
        _write_verified(_read_chunks(fh), pin, target)


def fetch(pins: list[Pin], dest: Path, *, source_dir: Path | None = None, base_url: str = UPSTREAM,
          say: Callable[[str], None] = print, complain: Callable[[str], None] | None = None) -> bool:
    """Put every pinned file under ``dest``, verified; one line per file, then a summary. True: all there."""
    complain = complain or (lambda line: print(line, file=sys.stderr))
    counts = {"present": 0, "copied": 0, "fetched": 0, "failed": 0}
    for pin in pins:
        if not pin.url.startswith(UPSTREAM + "/"):
            raise ValueError(f"{pin.path}: url must start with {UPSTREAM}/ (got {pin.url})")
        target = dest / pin.path
        if target.is_file() and sha256_of(target) == pin.sha256:
            outcome = "present"
        else:
            outcome = "copied" if source_dir else "fetched"
            try:
                _copy(pin, target, source_dir) if source_dir else _download(pin, target, base_url)
            except Offline as error:
                complain(f"FAILED   {pin.path}: {error}")
                counts["failed"] += len(pins) - sum(counts.values())
                break
            except (OSError, DigestMismatch) as error:
                complain(f"FAILED   {pin.path}: {error}")
                counts["failed"] += 1
                continue
        counts[outcome] += 1
        say(f"{outcome:<8} {pin.path} ({pin.tag})")
    summary = ", ".join(f"{n} {'already present' if k == 'present' else k}" for k, n in counts.items() if n)
    (complain if counts["failed"] else say)(f"{len(pins)} pinned CRD files in {dest}: {summary}")
    return not counts["failed"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     epilog=f"Destination: {cache_dir()} (set MODELPLANE_CRD_CACHE to change it).")
    parser.add_argument("--from", dest="source_dir", type=Path, metavar="DIR",
                        help="copy from a local folder with the same layout (e.g. a copy of the cache) instead of downloading")
    parser.add_argument("--base-url", default=UPSTREAM, metavar="URL",
                        help=f"download from a mirror of {UPSTREAM} (same paths) instead")
    args = parser.parse_args(argv)
    if args.source_dir and not args.source_dir.is_dir():
        parser.error(f"--from {args.source_dir}: not a directory")
    return 0 if fetch(load_pins(), cache_dir(), source_dir=args.source_dir, base_url=args.base_url) else 1


if __name__ == "__main__":
    sys.exit(main())
