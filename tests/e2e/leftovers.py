"""After an end-to-end run: every file outside its scratch folder that holds one of the run's fleet tokens.

`python -m tests.e2e.leftovers --work DIR --since FILE` (scripts/e2e.sh runs it before removing DIR):
reads the admin token of every control plane the run started (`DIR/**/clusters/<name>/tokens.csv`,
written by `controlplane.LocalFleet`, fresh random tokens each run, so another run's files never
match), walks the system's temporary folders and $HOME for regular files modified since FILE was
(the tokens did not exist before) and prints the path of each file holding one, never the token.
Exit 1 if any file does. The Kubernetes provider writes each cluster's kubeconfig to its TMPDIR and
never removes it (docs/your-own-cluster.md, "Credentials on disk"): this is the check that the run
left none behind.
"""
from __future__ import annotations

import argparse
import csv
import os
import stat
import sys
import tempfile
from pathlib import Path
from typing import Iterable, Iterator, Mapping

CHUNK = 1 << 20


def fleet_tokens(work: Path) -> set[str]:
    """The first field of every row of every control plane's token file (`controlplane.token_auth_line`)."""
    tokens = set()
    for path in sorted(work.glob("**/clusters/*/tokens.csv")):
        with path.open(newline="") as rows:
            tokens |= {row[0] for row in csv.reader(rows) if row and row[0]}
    return tokens


def scan_roots(environ: Mapping[str, str]) -> list[Path]:
    """The system's temporary folders (TMPDIR, Python's and Go's default, /var/tmp, /dev/shm) and $HOME, existing
    ones once each, outermost first."""
    candidates = [environ.get("TMPDIR"), tempfile.gettempdir(), "/tmp", "/var/tmp", "/dev/shm", environ.get("HOME")]
    found: list[Path] = []
    for candidate in candidates:
        if candidate and os.path.isdir(candidate):
            path = Path(candidate).resolve()
            if path not in found:
                found.append(path)
    return sorted(found, key=lambda p: len(p.parts))


def recent_files(roots: Iterable[Path], exclude: Path, since: float) -> Iterator[Path]:
    """Regular files under `roots` (symbolic links not followed), outside `exclude`, modified at or after `since`;
    each once, even where roots nest."""
    seen: set[Path] = set()
    exclude = exclude.resolve()
    for root in roots:
        for folder, dirs, files in os.walk(root, onerror=lambda error: None):
            here = Path(folder)
            if here in seen:  # an inner root, already walked from an outer one
                dirs[:] = []
                continue
            seen.add(here)
            dirs[:] = [d for d in dirs if here / d != exclude]
            for name in files:
                path = here / name
                try:
                    info = path.lstat()
                except OSError:
                    continue
                if stat.S_ISREG(info.st_mode) and info.st_mtime >= since:
                    yield path


def holds_any(path: Path, tokens: list[bytes]) -> bool:
    """Whether the file's bytes contain one of `tokens` (read in chunks that overlap by the longest token)."""
    overlap = max(map(len, tokens)) - 1
    tail = b""
    try:
        with path.open("rb") as file:
            while chunk := file.read(CHUNK):
                window = tail + chunk
                if any(token in window for token in tokens):
                    return True
                tail = window[-overlap:] if overlap else b""
    except OSError:
        return False
    return False


def files_holding(tokens: Iterable[str], roots: Iterable[Path], exclude: Path, since: float) -> tuple[list[Path], int]:
    """The files holding a token, sorted, and how many files were read."""
    needles = [token.encode() for token in sorted(set(tokens))]
    if not needles:
        return [], 0
    read, found = 0, []
    for path in recent_files(roots, exclude, since):
        read += 1
        if holds_any(path, needles):
            found.append(path)
    return sorted(found), read


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work", type=Path, required=True, help="the run's scratch folder (not searched)")
    parser.add_argument("--since", type=Path, required=True, help="a file made when the run began")
    args = parser.parse_args(argv)
    tokens = fleet_tokens(args.work)
    if not tokens:
        print("[e2e] no fleet token to look for: no control plane was started", flush=True)
        return 0
    roots = scan_roots(os.environ)
    found, read = files_holding(tokens, roots, args.work, args.since.stat().st_mtime)
    where = ", ".join(map(str, roots))
    if not found:
        print(f"[e2e] no file outside the scratch folder holds one of the run's {len(tokens)} fleet tokens "
              f"({read} files written during the run read, under {where})", flush=True)
        return 0
    print(f"[e2e] FAILED: {len(found)} files outside the scratch folder hold one of the run's fleet tokens "
          f"(searched {where}):", flush=True)
    for path in found:
        print(f"[e2e]   {path}", flush=True)
    return 1


if __name__ == "__main__":
    sys.exit(main())
