#!/usr/bin/env python3
"""Fetch the pinned upstream CRDs (tests/upstream-crds.toml) into the user cache, for the tests.

    venv/bin/python scripts/fetch_crds.py                    # from GitHub (raw.githubusercontent.com)
    venv/bin/python scripts/fetch_crds.py --base-url URL     # from a mirror with GitHub's paths
    venv/bin/python scripts/fetch_crds.py --from DIR         # copy what DIR has (a mirror), fetch the rest
    venv/bin/python scripts/fetch_crds.py --from DIR --offline   # an air-gapped machine: DIR only

The cache is $MODELPLANE_CRD_CACHE, else $XDG_CACHE_HOME/modelplane/k8s-crds, else
~/.cache/modelplane/k8s-crds. Each file comes from the first source that has it with the pinned
SHA-256: a file already in the cache, the ``--from`` folder, then the upstream URL at the pinned
commit (or the same path under ``--base-url``). Nothing else: no other host is ever asked. A
download is bounded: at most MAX_BYTES per file and DEADLINE_SECONDS per file in all, however
slowly a server sends. A file is kept only if its SHA-256 is the pinned one, and it appears under
its name only once complete (written beside it, then renamed). Credentials in ``--base-url``
(``https://user:token@mirror``) are sent as HTTP Basic auth, to that host only, and never
printed. Standard library only, so that it needs nothing but Python. See docs/schemas.md.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import http.client
import os
import socket
import sys
import tempfile
import time
import tomllib
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

REPO = Path(__file__).resolve().parent.parent
PINS_FILE = REPO / "tests" / "upstream-crds.toml"
UPSTREAM = "https://raw.githubusercontent.com"
TIMEOUT_SECONDS = 30  # to connect, and for any one read
DEADLINE_SECONDS = 120  # for one file in all: a server that drips bytes cannot hold the run
MAX_BYTES = 16 << 20  # per file (the largest pinned CRD is under 2 MB): an endless body cannot fill the disk
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
    """Where the fetched CRDs live (the test helper looks there)."""
    if env.get("MODELPLANE_CRD_CACHE"):
        return Path(env["MODELPLANE_CRD_CACHE"]).expanduser()
    return Path(env.get("XDG_CACHE_HOME") or "~/.cache").expanduser() / "modelplane" / "k8s-crds"


def sha256_of(path: Path) -> str:
    with open(path, "rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


class DigestMismatch(Exception):
    pass


class TooLarge(Exception):
    pass


class Offline(Exception):
    """The download host cannot be reached: every other file would fail the same way."""

    ADVICE = "Offline? Copy the CRDs from a machine that has them and run: scripts/fetch_crds.py --from DIR"

    def __init__(self, url: str, reason: object) -> None:
        self.short = f"cannot download {url}: {reason}"
        super().__init__(f"{self.short}. {self.ADVICE}")


class NotThere(Exception):
    """This source does not have the file; not a problem in itself, the next source is tried."""


@dataclass(frozen=True)
class BaseURL:
    """A download base (GitHub or a mirror with its paths): the URL without credentials, and its auth header."""

    url: str
    shown: str  # for messages: the password replaced by ***
    authorization: str | None = None

    @classmethod
    def parse(cls, text: str) -> BaseURL:
        """Raises ValueError with a message that never repeats a password."""
        try:
            parts = urllib.parse.urlsplit(text.strip())
            host, port = parts.hostname, parts.port  # each can raise ValueError on a malformed URL
        except ValueError as error:
            raise ValueError(f"not a valid URL ({error})") from None
        if parts.scheme not in ("http", "https") or not host:
            raise ValueError("not an http:// or https:// URL with a host")
        netloc = (f"[{host}]" if ":" in host else host) + (f":{port}" if port is not None else "")
        bare = urllib.parse.urlunsplit((parts.scheme, netloc, parts.path.rstrip("/"), "", ""))
        if parts.username is None and parts.password is None:
            return cls(bare, bare)
        user = urllib.parse.unquote(parts.username or "")
        password = urllib.parse.unquote(parts.password or "")
        token = base64.b64encode(f"{user}:{password}".encode()).decode()
        shown_netloc = (
            f"{parts.username or ''}:***@{netloc}" if parts.password is not None else f"{parts.username}@{netloc}"
        )
        shown = urllib.parse.urlunsplit((parts.scheme, shown_netloc, parts.path.rstrip("/"), "", ""))
        return cls(bare, shown, f"Basic {token}")


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


def _bounded(response: http.client.HTTPResponse, deadline: float, shown: str) -> Iterator[bytes]:
    """The body, a chunk per socket read, stopped at MAX_BYTES or the deadline (the caller keeps nothing)."""
    declared = response.getheader("Content-Length")
    if declared and declared.isdigit() and int(declared) > MAX_BYTES:
        raise TooLarge(f"{shown}: {int(declared)} bytes announced, more than the {MAX_BYTES}-byte limit; not kept")
    sock = getattr(getattr(response.fp, "raw", None), "_sock", None)
    total = 0
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError(f"{shown}: not complete within {DEADLINE_SECONDS} s; not kept")
        wait = min(TIMEOUT_SECONDS, left)
        if isinstance(sock, socket.socket):
            sock.settimeout(wait)
        try:
            chunk = response.read1(CHUNK)  # returns what one read brought: a slow server cannot pin us inside
        except TimeoutError:
            if wait < TIMEOUT_SECONDS:  # the wait was cut to what was left of the deadline
                raise TimeoutError(f"{shown}: not complete within {DEADLINE_SECONDS} s; not kept") from None
            raise TimeoutError(f"{shown}: no data for {TIMEOUT_SECONDS} s; not kept") from None
        if not chunk:
            return
        total += len(chunk)
        if total > MAX_BYTES:
            raise TooLarge(f"{shown}: more than the {MAX_BYTES}-byte limit; not kept")
        yield chunk


def _open_url(url: str, shown: str, authorization: str | None, timeout: float):
    """``urlopen``, with its failures as OSError (this file is not there) or Offline (nothing will be)."""
    request = urllib.request.Request(url)
    if authorization:
        request.add_unredirected_header("Authorization", authorization)  # not sent on to a redirect's host
    try:
        return urllib.request.urlopen(request, timeout=timeout)
    except urllib.error.HTTPError as error:
        raise OSError(f"{shown}: HTTP {error.code} {error.reason}") from None
    except (urllib.error.URLError, TimeoutError, ConnectionError, http.client.HTTPException) as error:
        reason = getattr(error, "reason", None) or error
        raise Offline(shown, reason) from None


# --- sources: each puts one pinned file at ``target``, verified, or raises -------------------


class Source:
    """Where files can come from. ``outcome`` names what happened in the per-file line."""

    name = "?"
    outcome = "fetched"

    def put(self, pin: Pin, target: Path) -> None:
        """Put the file at ``target``, verified."""
        raise NotImplementedError


class FolderSource(Source):
    """A folder in the CRD-directory layout (a copy of the cache, or any mirror of it)."""

    outcome = "copied"

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.name = str(folder)

    def put(self, pin: Pin, target: Path) -> None:
        source = self.folder / pin.path
        if not source.is_file():
            raise NotThere(f"{source}: not there")
        if source.stat().st_size > MAX_BYTES:
            raise TooLarge(f"{source}: more than the {MAX_BYTES}-byte limit; not kept")
        with open(source, "rb") as fh:
            try:
                _write_verified(_read_chunks(fh), pin, target)
            except DigestMismatch as error:
                raise DigestMismatch(f"{source}: {error}") from None


class URLSource(Source):
    """raw.githubusercontent.com at the pinned commit, or a mirror of it with the same paths."""

    def __init__(self, base: BaseURL | str = UPSTREAM) -> None:
        self.base = base if isinstance(base, BaseURL) else BaseURL.parse(base)
        self.name = "GitHub" if self.base.url == UPSTREAM else self.base.shown

    def put(self, pin: Pin, target: Path) -> None:
        tail = pin.url.removeprefix(UPSTREAM)
        url, shown = self.base.url + tail, self.base.shown + tail
        deadline = time.monotonic() + DEADLINE_SECONDS
        with _open_url(url, shown, self.base.authorization, min(TIMEOUT_SECONDS, DEADLINE_SECONDS)) as response:
            try:
                _write_verified(_bounded(response, deadline, shown), pin, target)
            except DigestMismatch as error:
                raise DigestMismatch(f"{shown}: {error}") from None


def fetch(
    pins: list[Pin],
    dest: Path,
    *,
    source_dir: Path | None = None,
    base_url: BaseURL | str | None = UPSTREAM,
    say: Callable[[str], None] = print,
    complain: Callable[[str], None] | None = None,
) -> bool:
    """Put every pinned file under ``dest``, verified; one line per file, then a summary. True: all there.

    Sources, in order: the file already in ``dest``, ``source_dir``, ``base_url`` (None: offline).
    A host that cannot be reached is reported once and not asked again.
    """
    complain = complain or (lambda line: print(line, file=sys.stderr))
    for pin in pins:
        if not pin.url.startswith(UPSTREAM + "/"):
            raise ValueError(f"{pin.path}: url must start with {UPSTREAM}/ (got {pin.url})")
    counts = {"present": 0, "copied": 0, "fetched": 0, "failed": 0}
    sources: list[Source] = [FolderSource(source_dir)] if source_dir else []
    if base_url is not None:
        sources.append(URLSource(base_url))
    unreachable: dict[str, str] = {}  # source name -> why
    for pin in pins:
        target = dest / pin.path
        if target.is_file() and sha256_of(target) == pin.sha256:
            counts["present"] += 1
            say(f"{'present':<8} {pin.path} ({pin.tag})")
            continue
        problems: list[str | Offline] = []
        done: Source | None = None
        for source in sources:
            if source.name in unreachable:
                continue
            try:
                source.put(pin, target)
                done = source
                break
            except NotThere:
                continue
            except Offline as error:
                unreachable[source.name] = str(error)
                problems.append(error)
            except (OSError, http.client.HTTPException, DigestMismatch, TooLarge) as error:
                problems.append(str(error))  # each names the file or URL it is about
        if done is None:
            counts["failed"] += 1
            if not problems:
                dead = [s.name for s in sources if s.name in unreachable]
                problems = [
                    f"not tried: {' and '.join(dead)} unreachable (see above). {Offline.ADVICE}"
                    if dead
                    else f"in none of {', '.join(s.name for s in sources) or 'the sources'}"
                ]
            complain(f"{'FAILED':<8} {pin.path}: {'; '.join(map(str, problems))}")
            continue
        for problem in problems:  # an earlier source failed, a later one had it: say so, but it is fine
            if isinstance(problem, Offline):
                problem = f"{problem.short}; using the other sources from now on"
            complain(f"{'note':<8} {pin.path}: {problem}")
        counts[done.outcome] += 1
        say(f"{done.outcome:<8} {pin.path} ({pin.tag})")
    summary = ", ".join(f"{n} {'already present' if k == 'present' else k}" for k, n in counts.items() if n)
    (complain if counts["failed"] else say)(f"{len(pins)} pinned CRD files in {dest}: {summary}")
    return not counts["failed"]


def main(argv: list[str] | None = None, env: Mapping[str, str] = os.environ) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog=f"Destination: {cache_dir(env)} (set MODELPLANE_CRD_CACHE to change it).",
    )
    parser.add_argument(
        "--from",
        dest="source_dir",
        type=Path,
        metavar="DIR",
        help="first copy from a local folder with the same layout (a copy of the cache, or any "
        "mirror of it); what it lacks is fetched (unless --offline)",
    )
    parser.add_argument("--offline", action="store_true", help="no downloads: only the --from folder")
    parser.add_argument(
        "--base-url",
        default=UPSTREAM,
        metavar="URL",
        help=f"download from a mirror of {UPSTREAM} (same paths) instead; "
        "https://user:token@host/... sends Basic auth, and the token is never printed",
    )
    args = parser.parse_args(argv)
    if args.source_dir and not args.source_dir.is_dir():
        parser.error(f"--from {args.source_dir}: not a directory")
    try:
        base = BaseURL.parse(args.base_url)
    except ValueError as error:
        parser.error(f"--base-url: {error}")
    return (
        0
        if fetch(load_pins(), cache_dir(env), source_dir=args.source_dir, base_url=None if args.offline else base)
        else 1
    )


if __name__ == "__main__":
    sys.exit(main())
