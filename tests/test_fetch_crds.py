"""scripts/fetch_crds.py: pinned CRDs into the user cache, verified, atomically, offline-testable.

Downloads are served by http.server on 127.0.0.1 from a temporary folder laid out like
raw.githubusercontent.com (``--base-url``), with made-up pins: no internet, no real CRDs needed.
"""
from __future__ import annotations

import contextlib
import functools
import hashlib
import http.server
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import fetch_crds
import k8s_validation as kv
import pytest

CONTENT = {"a/example.com_apples.yaml": b"kind: CustomResourceDefinition # apples\n",
           "b/example.com_bananas.yaml": b"kind: CustomResourceDefinition # bananas\n"}
PINS = [fetch_crds.Pin(path, f"{fetch_crds.UPSTREAM}/org/repo/{'ab' * 20}/config/{Path(path).name}", "v1.2.3",
                       hashlib.sha256(content).hexdigest()) for path, content in CONTENT.items()]


def upstream_layout(root: Path, content: dict[str, bytes]) -> Path:
    """``content`` where each pin's URL path points, under ``root``."""
    for pin in PINS:
        target = root / pin.url.removeprefix(fetch_crds.UPSTREAM + "/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(content[pin.path])
    return root


def mirror_layout(root: Path, content: dict[str, bytes]) -> Path:
    """``content`` in the CRD-directory layout (what ``--from`` reads)."""
    for path, data in content.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_bytes(data)
    return root


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(fetch_crds, "load_pins", lambda: PINS)
    monkeypatch.setenv("MODELPLANE_CRD_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


@contextlib.contextmanager
def serve(folder: Path) -> Iterator[str]:
    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args) -> None:
            pass
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(folder)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def upstream(tmp_path: Path) -> Iterator[str]:
    with serve(upstream_layout(tmp_path / "upstream", CONTENT)) as url:
        yield url


@pytest.fixture
def tampered_upstream(tmp_path: Path) -> Iterator[str]:
    with serve(upstream_layout(tmp_path / "tampered", {**CONTENT, PINS[1].path: b"kind: Evil\n"})) as url:
        yield url


def closed_port_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"


def files_under(folder: Path) -> set[str]:
    return {str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file()}


def test_fetches_every_pinned_file_then_finds_them_present(cache: Path, upstream: str, capsys) -> None:
    assert fetch_crds.main(["--base-url", upstream]) == 0
    assert files_under(cache) == set(CONTENT)
    assert all((cache / path).read_bytes() == data for path, data in CONTENT.items())
    assert capsys.readouterr().out.splitlines() == [
        "fetched  a/example.com_apples.yaml (v1.2.3)", "fetched  b/example.com_bananas.yaml (v1.2.3)",
        f"2 pinned CRD files in {cache}: 2 fetched"]
    # Again, with nothing to download from: files with the right digest are not fetched twice.
    assert fetch_crds.main(["--base-url", closed_port_url()]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == f"2 pinned CRD files in {cache}: 2 already present"


def test_a_digest_mismatch_is_refused_and_leaves_nothing_behind(cache: Path, tampered_upstream: str, capsys) -> None:
    assert fetch_crds.main(["--base-url", tampered_upstream]) == 1
    assert files_under(cache) == {PINS[0].path}  # the good one is kept, no partial file of the bad one
    err = capsys.readouterr().err
    got = hashlib.sha256(b"kind: Evil\n").hexdigest()
    assert f"FAILED   {PINS[1].path}: SHA-256 mismatch: expected {PINS[1].sha256}, got {got}; not kept" in err
    assert f"2 pinned CRD files in {cache}: 1 fetched, 1 failed" in err


def test_a_wrong_file_in_the_cache_is_replaced(cache: Path, upstream: str) -> None:
    mirror_layout(cache, {**CONTENT, PINS[0].path: b"stale\n"})
    assert fetch_crds.main(["--base-url", upstream]) == 0
    assert (cache / PINS[0].path).read_bytes() == CONTENT[PINS[0].path]


def test_offline_is_one_clear_error_not_one_per_file(cache: Path, capsys) -> None:
    assert fetch_crds.main(["--base-url", closed_port_url()]) == 1
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 2 and "Offline?" in err[0] and "--from DIR" in err[0]
    assert err[1] == f"2 pinned CRD files in {cache}: 2 failed"
    assert not cache.exists() or files_under(cache) == set()


def test_a_missing_upstream_file_names_its_url_and_the_others_still_come(cache: Path, tmp_path: Path, capsys) -> None:
    folder = upstream_layout(tmp_path / "upstream", CONTENT)
    (folder / PINS[0].url.removeprefix(fetch_crds.UPSTREAM + "/")).unlink()
    with serve(folder) as url:
        assert fetch_crds.main(["--base-url", url]) == 1
    assert "HTTP 404" in capsys.readouterr().err
    assert files_under(cache) == {PINS[1].path}


def test_from_a_local_folder_copies_and_verifies(cache: Path, tmp_path: Path, capsys) -> None:
    mirror = mirror_layout(tmp_path / "mirror", CONTENT)
    assert fetch_crds.main(["--from", str(mirror)]) == 0
    assert files_under(cache) == set(CONTENT)
    assert "copied   a/example.com_apples.yaml (v1.2.3)" in capsys.readouterr().out
    tampered = mirror_layout(tmp_path / "tampered", {**CONTENT, PINS[0].path: b"edited\n"})
    (cache / PINS[0].path).unlink()
    assert fetch_crds.main(["--from", str(tampered)]) == 1
    assert files_under(cache) == {PINS[1].path}
    assert "SHA-256 mismatch" in capsys.readouterr().err


def test_the_cache_location(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    assert fetch_crds.cache_dir({}) == tmp_path / ".cache" / "modelplane" / "k8s-crds"
    assert fetch_crds.cache_dir({"XDG_CACHE_HOME": "/xdg"}) == Path("/xdg/modelplane/k8s-crds")
    assert fetch_crds.cache_dir({"XDG_CACHE_HOME": "/xdg", "MODELPLANE_CRD_CACHE": "/mine"}) == Path("/mine")


def test_the_command_fills_a_cache_that_the_tests_then_use(tmp_path: Path) -> None:
    """End to end, with the real pins: `fetch_crds.py --from <the CRDs found>` makes a usable cache."""
    kv.load_crds()  # skips without CRDs
    env = {"MODELPLANE_CRD_CACHE": str(tmp_path / "cache"), "PATH": "/usr/bin:/bin"}
    done = subprocess.run([sys.executable, str(fetch_crds.REPO / "scripts" / "fetch_crds.py"), "--from", str(kv.CRD_DIR)],
                          env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == f"12 pinned CRD files in {tmp_path / 'cache'}: 12 copied"
    found = kv.find_crd_dir(env, repo=tmp_path / "lone-clone")
    assert (found.path, found.origin) == (tmp_path / "cache", "user cache")
    assert kv.load_crds(found.path).keys() == kv.load_crds().keys()
