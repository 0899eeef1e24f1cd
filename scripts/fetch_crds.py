#!/usr/bin/env python3
"""Fetch the pinned upstream CRDs (tests/upstream-crds.toml) into the user cache, for the tests.

    venv/bin/python scripts/fetch_crds.py              # from GitHub, else the Go module proxy
    venv/bin/python scripts/fetch_crds.py --from DIR   # copy what DIR has (a mirror), fetch the rest
    venv/bin/python scripts/fetch_crds.py --from DIR --offline   # an air-gapped machine: DIR only

The cache is $MODELPLANE_CRD_CACHE, else $XDG_CACHE_HOME/modelplane/k8s-crds, else
~/.cache/modelplane/k8s-crds. Each file comes from the first source that has it with the pinned
SHA-256: the ``--from`` folder, the local Go module cache, GitHub (raw.githubusercontent.com at the
pinned commit), the Go module proxy. The Go sources serve only pins with a ``go_module``: the
file is read out of that module's zip at the pinned tag (the zip holds the repository's files
byte for byte; the path inside it is the URL's path after the commit), and a zip is downloaded at
most once per run, into a temporary folder removed at the end. A file is kept only if its SHA-256
is the pinned one, and it appears under its name only once complete (written beside it, then
renamed). Files already there with the right digest are left alone, so running it again is cheap.
Standard library only, so that it needs nothing but Python. See docs/schemas.md.
"""
from __future__ import annotations

import argparse
import hashlib
import http.client
import os
import shutil
import sys
import tempfile
import tomllib
import urllib.error
import urllib.request
import zipfile
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

REPO = Path(__file__).resolve().parent.parent
PINS_FILE = REPO / "tests" / "upstream-crds.toml"
UPSTREAM = "https://raw.githubusercontent.com"
GO_PROXY = "https://proxy.golang.org"
TIMEOUT_SECONDS = 30  # per connection attempt and per read, not for the whole file
CHUNK = 1 << 16


@dataclass(frozen=True)
class Pin:
    """One pinned CRD file: where it goes under the CRD directory, where it comes from, its digest.

    ``go_module``: the Go module whose repository the URL points into (its root), when the Go
    module proxy serves it at ``tag``; then the file can also come out of that module's zip.
    """

    path: str
    url: str
    tag: str
    sha256: str
    go_module: str | None = None

    @property
    def repo_path(self) -> str:
        """The file's path in its repository: the URL's path after the commit."""
        parts = self.url.removeprefix(UPSTREAM + "/").split("/", 3)
        if len(parts) < 4:
            raise ValueError(f"{self.path}: url {self.url} is not {UPSTREAM}/<owner>/<repo>/<commit>/<path>")
        return parts[3]


def load_pins(pins_file: Path = PINS_FILE) -> list[Pin]:
    with open(pins_file, "rb") as fh:
        return [Pin(**entry) for entry in tomllib.load(fh)["crd"]]


def cache_dir(env: Mapping[str, str] = os.environ) -> Path:
    """Where the fetched CRDs live (the test helper looks here after ../shared/k8s-crds)."""
    if env.get("MODELPLANE_CRD_CACHE"):
        return Path(env["MODELPLANE_CRD_CACHE"]).expanduser()
    return Path(env.get("XDG_CACHE_HOME") or "~/.cache").expanduser() / "modelplane" / "k8s-crds"


def go_proxy_url(env: Mapping[str, str] = os.environ) -> str | None:
    """$GOPROXY's first proxy (``direct`` entries skipped), else proxy.golang.org; None for ``off``."""
    for entry in env.get("GOPROXY", "").replace("|", ",").split(","):
        entry = entry.strip()
        if entry == "off":
            return None
        if entry and entry != "direct":
            return entry.rstrip("/")
    return GO_PROXY


def go_mod_cache(env: Mapping[str, str] = os.environ) -> Path:
    """The local Go module cache: $GOMODCACHE, else the first $GOPATH entry's pkg/mod, else ~/go/pkg/mod."""
    if env.get("GOMODCACHE"):
        return Path(env["GOMODCACHE"]).expanduser()
    gopath = (env.get("GOPATH") or "").split(os.pathsep)[0]
    return Path(gopath or "~/go").expanduser() / "pkg" / "mod"


def go_escape(path: str) -> str:
    """A module path or version as the proxy protocol and the module cache spell it (``A`` -> ``!a``)."""
    return "".join(f"!{c.lower()}" if c.isupper() else c for c in path)


def sha256_of(path: Path) -> str:
    with open(path, "rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


class DigestMismatch(Exception):
    pass


class Offline(Exception):
    """The download host cannot be reached: every other file would fail the same way."""

    ADVICE = "Offline? Copy the CRDs from a machine that has them and run: scripts/fetch_crds.py --from DIR"

    def __init__(self, url: str, reason: object) -> None:
        self.short = f"cannot download {url}: {reason}"
        super().__init__(f"{self.short}. {self.ADVICE}")


class NotThere(Exception):
    """This source does not have the file; not a problem in itself, the next source is tried."""


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


def _open_url(url: str):
    """``urlopen``, with its failures as OSError (this file is not there) or Offline (nothing will be)."""
    try:
        return urllib.request.urlopen(url, timeout=TIMEOUT_SECONDS)
    except urllib.error.HTTPError as error:
        raise OSError(f"{url}: HTTP {error.code} {error.reason}") from None
    except (urllib.error.URLError, TimeoutError, ConnectionError) as error:
        reason = getattr(error, "reason", None) or error
        if isinstance(reason, FileNotFoundError):  # a file:// proxy without this module version
            raise OSError(f"{url}: not found") from None
        raise Offline(url, reason) from None


# --- sources: each puts one pinned file at ``target``, verified, or raises -------------------

class Source:
    """Where files can come from. ``outcome`` names what happened in the per-file line."""

    name = "?"
    outcome = "fetched"

    def serves(self, pin: Pin) -> bool:
        return True

    def put(self, pin: Pin, target: Path) -> str:
        """Put the file at ``target``, verified; return what to add to its line (where it came from)."""
        raise NotImplementedError


class FolderSource(Source):
    """A folder in the CRD-directory layout (a copy of the cache, ../shared/k8s-crds)."""

    outcome = "copied"

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.name = str(folder)

    def put(self, pin: Pin, target: Path) -> str:
        source = self.folder / pin.path
        if not source.is_file():
            raise NotThere(f"{source}: not there")
        with open(source, "rb") as fh:
            try:
                _write_verified(_read_chunks(fh), pin, target)
            except DigestMismatch as error:
                raise DigestMismatch(f"{source}: {error}") from None
        return ""


class GitHubSource(Source):
    """raw.githubusercontent.com (or a mirror of it with the same paths) at the pinned commit."""

    name = "GitHub"

    def __init__(self, base_url: str = UPSTREAM) -> None:
        self.base_url = base_url.rstrip("/")
        if self.base_url != UPSTREAM:
            self.name = self.base_url

    def put(self, pin: Pin, target: Path) -> str:
        url = self.base_url + pin.url.removeprefix(UPSTREAM)
        with _open_url(url) as response:
            try:
                _write_verified(_read_chunks(response), pin, target)
            except DigestMismatch as error:
                raise DigestMismatch(f"{url}: {error}") from None
        return ""


def _from_module_zip(zip_path: Path, where: str, pin: Pin, target: Path) -> None:
    """The pinned file out of a module zip (``where``: the zip's origin, for messages)."""
    member = f"{pin.go_module}@{pin.tag}/{pin.repo_path}"
    try:
        with zipfile.ZipFile(zip_path) as archive:
            try:
                info = archive.getinfo(member)
            except KeyError:
                raise OSError(f"{where}: the module zip has no {member}") from None
            with archive.open(info) as fh:
                try:
                    _write_verified(_read_chunks(fh), pin, target)
                except DigestMismatch as error:
                    raise DigestMismatch(f"{where}: {member}: {error}") from None
    except zipfile.BadZipFile as error:
        raise OSError(f"{where}: not a zip ({error})") from None


class GoModCacheSource(Source):
    """A module zip that the Go tool already downloaded (``go mod download`` keeps it)."""

    outcome = "copied"

    def __init__(self, mod_cache: Path) -> None:
        self.mod_cache = mod_cache
        self.name = f"the Go module cache {mod_cache}"

    def serves(self, pin: Pin) -> bool:
        return bool(pin.go_module)

    def zip_path(self, pin: Pin) -> Path:
        return self.mod_cache / "cache" / "download" / go_escape(pin.go_module or "") / "@v" / f"{go_escape(pin.tag)}.zip"

    def put(self, pin: Pin, target: Path) -> str:
        zip_path = self.zip_path(pin)
        if not zip_path.is_file():
            raise NotThere(f"{zip_path}: not there")
        _from_module_zip(zip_path, str(zip_path), pin, target)
        return f" from the Go module cache ({pin.go_module}@{pin.tag})"


class GoProxySource(Source):
    """The Go module proxy: ``<proxy>/<module>/@v/<tag>.zip``, each zip downloaded once per run."""

    def __init__(self, proxy_url: str, workdir: Path) -> None:
        self.proxy_url = proxy_url.rstrip("/")
        self.workdir = workdir
        self.name = f"the Go module proxy {self.proxy_url}"
        self.zips: dict[tuple[str, str], Path | Exception] = {}

    def serves(self, pin: Pin) -> bool:
        return bool(pin.go_module)

    def zip_url(self, module: str, version: str) -> str:
        return f"{self.proxy_url}/{go_escape(module)}/@v/{go_escape(version)}.zip"

    def module_zip(self, module: str, version: str) -> Path:
        key = (module, version)
        if key not in self.zips:
            url = self.zip_url(module, version)
            path = self.workdir / f"{len(self.zips)}.zip"
            try:
                with _open_url(url) as response, open(path, "wb") as fh:
                    shutil.copyfileobj(response, fh, CHUNK)
                self.zips[key] = path
            except Offline:
                raise  # the source is given up for the rest of the run anyway
            except OSError as error:
                path.unlink(missing_ok=True)
                self.zips[key] = error  # a module version the proxy lacks: do not ask again
        cached = self.zips[key]
        if isinstance(cached, Exception):
            raise OSError(str(cached))
        return cached

    def put(self, pin: Pin, target: Path) -> str:
        assert pin.go_module
        _from_module_zip(self.module_zip(pin.go_module, pin.tag), self.zip_url(pin.go_module, pin.tag), pin, target)
        return f" from the Go module proxy ({pin.go_module}@{pin.tag})"


def fetch(pins: list[Pin], dest: Path, *, source_dir: Path | None = None, base_url: str = UPSTREAM,
          use: Iterable[str] = ("github", "go"), go_proxy: str | None = GO_PROXY,
          go_cache: Path | None = None, say: Callable[[str], None] = print,
          complain: Callable[[str], None] | None = None) -> bool:
    """Put every pinned file under ``dest``, verified; one line per file, then a summary. True: all there.

    Sources, in order: ``source_dir``; then, of ``use``, "go" the local Go module cache zip
    (``go_cache``), "github" GitHub (``base_url``), "go" the Go module proxy (``go_proxy``).
    A source that cannot be reached is reported once and not asked again.
    """
    complain = complain or (lambda line: print(line, file=sys.stderr))
    use = set(use)
    for pin in pins:
        if not pin.url.startswith(UPSTREAM + "/"):
            raise ValueError(f"{pin.path}: url must start with {UPSTREAM}/ (got {pin.url})")
    counts = {"present": 0, "copied": 0, "fetched": 0, "failed": 0}
    with tempfile.TemporaryDirectory(prefix="fetch-crds-") as workdir:
        sources: list[Source] = [FolderSource(source_dir)] if source_dir else []
        if "go" in use and go_cache is not None:
            sources.append(GoModCacheSource(go_cache))
        if "github" in use:
            sources.append(GitHubSource(base_url))
        if "go" in use and go_proxy:
            sources.append(GoProxySource(go_proxy, Path(workdir)))
        unreachable: dict[str, str] = {}  # source name -> why
        for pin in pins:
            target = dest / pin.path
            if target.is_file() and sha256_of(target) == pin.sha256:
                counts["present"] += 1
                say(f"{'present':<8} {pin.path} ({pin.tag})")
                continue
            serving = [s for s in sources if s.serves(pin)]
            problems: list[str | Offline] = []
            done: tuple[Source, str] | None = None
            for source in serving:
                if source.name in unreachable:
                    continue
                try:
                    done = (source, source.put(pin, target))
                    break
                except NotThere:
                    continue
                except Offline as error:
                    unreachable[source.name] = str(error)
                    problems.append(error)
                except (OSError, http.client.HTTPException, DigestMismatch) as error:
                    problems.append(str(error))  # each names the file, URL or zip it is about
            if done is None:
                counts["failed"] += 1
                if not problems:
                    dead = [s.name for s in serving if s.name in unreachable]
                    problems = [f"not tried: {' and '.join(dead)} unreachable (see above). {Offline.ADVICE}" if dead else
                                f"in none of {', '.join(s.name for s in serving) or 'the sources'}"]
                complain(f"{'FAILED':<8} {pin.path}: {'; '.join(map(str, problems))}")
                continue
            for problem in problems:  # an earlier source failed, a later one had it: say so, but it is fine
                if isinstance(problem, Offline):
                    problem = f"{problem.short}; using the other sources from now on"
                complain(f"{'note':<8} {pin.path}: {problem}")
            counts[done[0].outcome] += 1
            say(f"{done[0].outcome:<8} {pin.path} ({pin.tag}){done[1]}")
    summary = ", ".join(f"{n} {'already present' if k == 'present' else k}" for k, n in counts.items() if n)
    (complain if counts["failed"] else say)(f"{len(pins)} pinned CRD files in {dest}: {summary}")
    return not counts["failed"]


def main(argv: list[str] | None = None, env: Mapping[str, str] = os.environ) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     epilog=f"Destination: {cache_dir(env)} (set MODELPLANE_CRD_CACHE to change it).")
    parser.add_argument("--from", dest="source_dir", type=Path, metavar="DIR",
                        help="first copy from a local folder with the same layout (e.g. a copy of the cache, "
                             "../shared/k8s-crds); what it lacks is fetched (unless --offline)")
    parser.add_argument("--offline", action="store_true",
                        help="no downloads: only the --from folder and the local Go module cache")
    parser.add_argument("--source", choices=("auto", "github", "go"), default="auto",
                        help="auto (default): GitHub, and for pins with a go_module the Go module cache and "
                             "proxy; github: only GitHub; go: only the Go module cache and proxy")
    parser.add_argument("--base-url", default=UPSTREAM, metavar="URL",
                        help=f"download from a mirror of {UPSTREAM} (same paths) instead")
    parser.add_argument("--go-proxy", default=go_proxy_url(env), metavar="URL",
                        help=f"the Go module proxy (default: $GOPROXY's first proxy, else {GO_PROXY})")
    args = parser.parse_args(argv)
    if args.source_dir and not args.source_dir.is_dir():
        parser.error(f"--from {args.source_dir}: not a directory")
    use = {"auto": ("github", "go"), "github": ("github",), "go": ("go",)}[args.source]
    if args.offline:
        use = tuple(u for u in use if u == "go")
    return 0 if fetch(load_pins(), cache_dir(env), source_dir=args.source_dir, base_url=args.base_url, use=use,
                      go_proxy=None if args.offline else args.go_proxy, go_cache=go_mod_cache(env)) else 1


if __name__ == "__main__":
    sys.exit(main())
