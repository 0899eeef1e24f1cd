"""scripts/fetch_crds.py: pinned CRDs into the user cache, verified, atomically, offline-testable.

Downloads are served by http.server on 127.0.0.1 from a temporary folder laid out like
raw.githubusercontent.com (``--base-url``), with made-up pins: no internet, no real CRDs needed.
"""
from __future__ import annotations

import contextlib
import functools
import hashlib
import http.server
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import zipfile
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
    monkeypatch.setenv("GOMODCACHE", str(tmp_path / "gomodcache"))  # never the machine's Go module cache
    monkeypatch.setenv("GOPROXY", "off")
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
    assert f"FAILED   {PINS[1].path}: {tampered_upstream}/{PINS[1].url.removeprefix(fetch_crds.UPSTREAM + '/')}: SHA-256 mismatch: expected {PINS[1].sha256}, got {got}; not kept" in err
    assert f"2 pinned CRD files in {cache}: 1 fetched, 1 failed" in err


def test_a_wrong_file_in_the_cache_is_replaced(cache: Path, upstream: str) -> None:
    mirror_layout(cache, {**CONTENT, PINS[0].path: b"stale\n"})
    assert fetch_crds.main(["--base-url", upstream]) == 0
    assert (cache / PINS[0].path).read_bytes() == CONTENT[PINS[0].path]


def test_offline_is_one_clear_error_not_one_per_file(cache: Path, capsys) -> None:
    url = closed_port_url()
    assert fetch_crds.main(["--base-url", url]) == 1
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 3 and "Offline?" in err[0] and "--from DIR" in err[0]
    assert err[0].startswith(f"FAILED   {PINS[0].path}: cannot download {url}/")
    assert err[1].startswith(f"FAILED   {PINS[1].path}: not tried: {url} unreachable (see above).")
    assert sum(url in line for line in err) == 2  # the host once per file, its error only once
    assert err[2] == f"2 pinned CRD files in {cache}: 2 failed"
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
    assert fetch_crds.main(["--from", str(mirror), "--offline"]) == 0
    assert files_under(cache) == set(CONTENT)
    assert "copied   a/example.com_apples.yaml (v1.2.3)" in capsys.readouterr().out
    tampered = mirror_layout(tmp_path / "tampered", {**CONTENT, PINS[0].path: b"edited\n"})
    (cache / PINS[0].path).unlink()
    assert fetch_crds.main(["--from", str(tampered), "--offline"]) == 1
    assert files_under(cache) == {PINS[1].path}
    assert f"FAILED   {PINS[0].path}: {tampered / PINS[0].path}: SHA-256 mismatch" in capsys.readouterr().err


def test_from_a_mirror_copies_what_it_has_and_fetches_the_rest(cache: Path, tmp_path: Path, upstream: str, capsys) -> None:
    """What .ci/run does with ../shared/k8s-crds: an incomplete (or partly edited) mirror is topped up."""
    mirror = mirror_layout(tmp_path / "mirror", {PINS[0].path: CONTENT[PINS[0].path]})
    assert fetch_crds.main(["--from", str(mirror), "--base-url", upstream]) == 0
    assert capsys.readouterr().out.splitlines() == [
        f"copied   {PINS[0].path} (v1.2.3)", f"fetched  {PINS[1].path} (v1.2.3)", f"2 pinned CRD files in {cache}: 1 copied, 1 fetched"]
    (cache / PINS[0].path).unlink()
    edited = mirror_layout(tmp_path / "edited", {PINS[0].path: b"edited\n"})
    assert fetch_crds.main(["--from", str(edited), "--base-url", upstream]) == 0
    out, err = capsys.readouterr()
    assert f"fetched  {PINS[0].path} (v1.2.3)" in out.splitlines()
    assert err.startswith(f"note     {PINS[0].path}: {edited / PINS[0].path}: SHA-256 mismatch")
    assert files_under(cache) == set(CONTENT)
    # --offline: the mirror only, nothing downloaded although the upstream is there
    (cache / PINS[1].path).unlink()
    assert fetch_crds.main(["--from", str(mirror), "--base-url", upstream, "--offline"]) == 1
    assert f"FAILED   {PINS[1].path}: in none of {mirror}" in capsys.readouterr().err
    assert files_under(cache) == {PINS[0].path}


def test_the_cache_location(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    assert fetch_crds.cache_dir({}) == tmp_path / ".cache" / "modelplane" / "k8s-crds"
    assert fetch_crds.cache_dir({"XDG_CACHE_HOME": "/xdg"}) == Path("/xdg/modelplane/k8s-crds")
    assert fetch_crds.cache_dir({"XDG_CACHE_HOME": "/xdg", "MODELPLANE_CRD_CACHE": "/mine"}) == Path("/mine")


def test_the_command_fills_a_cache_that_the_tests_then_use(tmp_path: Path) -> None:
    """End to end, with the real pins: `fetch_crds.py --from <the CRDs found> --offline` makes a usable cache."""
    kv.require_all_crds()
    env = {"MODELPLANE_CRD_CACHE": str(tmp_path / "cache"), "PATH": "/usr/bin:/bin", "GOMODCACHE": str(tmp_path / "none")}
    done = subprocess.run([sys.executable, str(fetch_crds.REPO / "scripts" / "fetch_crds.py"), "--from", str(kv.CRD_DIR), "--offline"],
                          env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    n = len(kv.PINS)
    assert done.stdout.splitlines()[-1] == f"{n} pinned CRD files in {tmp_path / 'cache'}: {n} copied"
    found = kv.find_crd_dir(env, repo=tmp_path / "lone-clone")
    assert (found.path, found.origin) == (tmp_path / "cache", "user cache")
    assert kv.load_crds(found.path).keys() == kv.load_crds().keys()


# --- the Go module proxy and the local Go module cache -----------------------------------------

MODULE, TAG = "example.com/Org/crds", "v1.2.3"  # an upper-case letter: the proxy spells it "!org"
GO_PINS = [fetch_crds.Pin(pin.path, pin.url, TAG, pin.sha256, go_module=MODULE) for pin in PINS]


def module_zip(path: Path, content: dict[str, bytes], module: str = MODULE, tag: str = TAG) -> Path:
    """A module zip as the proxy serves it: every file under ``<module>@<tag>/``, at its repository path."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr(f"{module}@{tag}/go.mod", f"module {module}\n")
        for pin in GO_PINS:
            if pin.path in content:
                archive.writestr(f"{module}@{tag}/{pin.repo_path}", content[pin.path])
    return path


def proxy_layout(root: Path, content: dict[str, bytes]) -> Path:
    module_zip(root / "example.com" / "!org" / "crds" / "@v" / f"{TAG}.zip", content)
    return root


@contextlib.contextmanager
def counting_server(folder: Path) -> Iterator[tuple[str, list[str]]]:
    """``serve``, also recording each request's path."""
    requests: list[str] = []

    class Counting(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args) -> None:
            pass

        def do_GET(self) -> None:
            requests.append(self.path)
            super().do_GET()
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Counting, directory=str(folder)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", requests
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def go_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The user cache, with the pins that have a go_module, and no trace left in the temporary folder."""
    monkeypatch.setattr(fetch_crds, "load_pins", lambda: GO_PINS)
    monkeypatch.setenv("MODELPLANE_CRD_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("GOMODCACHE", str(tmp_path / "gomodcache"))
    monkeypatch.setenv("GOPROXY", "off")
    (tmp_path / "tmp").mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    yield tmp_path / "cache"
    assert list((tmp_path / "tmp").iterdir()) == [], "the downloaded module zips must be removed"
    assert not list((tmp_path / "cache").rglob(".*.part")), "no partial file may be left behind"


def test_without_github_the_files_come_out_of_the_module_zip_downloaded_once(go_cache: Path, tmp_path: Path, capsys) -> None:
    with counting_server(proxy_layout(tmp_path / "proxy", CONTENT)) as (proxy, requests):
        github = closed_port_url()
        assert fetch_crds.main(["--base-url", github, "--go-proxy", proxy]) == 0
    assert requests == [f"/example.com/!org/crds/@v/{TAG}.zip"]  # one download for both files
    assert all((go_cache / path).read_bytes() == data for path, data in CONTENT.items())
    out, err = capsys.readouterr()
    assert out.splitlines() == [
        f"fetched  {pin.path} ({TAG}) from the Go module proxy ({MODULE}@{TAG})" for pin in GO_PINS
    ] + [f"2 pinned CRD files in {go_cache}: 2 fetched"]
    [note] = err.splitlines()  # GitHub's being unreachable is said once, as a note: nothing failed
    assert note.startswith(f"note     {PINS[0].path}: cannot download {github}/") and "using the other sources" in note


def test_a_module_zip_with_other_bytes_is_refused_and_leaves_nothing_behind(go_cache: Path, tmp_path: Path, capsys) -> None:
    tampered = {**CONTENT, PINS[1].path: b"kind: Evil\n"}
    with counting_server(proxy_layout(tmp_path / "proxy", tampered)) as (proxy, _):
        assert fetch_crds.main(["--source", "go", "--go-proxy", proxy]) == 1
    assert files_under(go_cache) == {PINS[0].path}
    err = capsys.readouterr().err
    got = hashlib.sha256(b"kind: Evil\n").hexdigest()
    member = f"{MODULE}@{TAG}/{GO_PINS[1].repo_path}"
    assert f"FAILED   {PINS[1].path}: {proxy}/example.com/!org/crds/@v/{TAG}.zip: {member}: SHA-256 mismatch: " \
           f"expected {PINS[1].sha256}, got {got}; not kept" in err


def test_a_module_version_the_proxy_lacks_is_asked_for_once(go_cache: Path, tmp_path: Path, capsys) -> None:
    (tmp_path / "proxy").mkdir()
    with counting_server(tmp_path / "proxy") as (proxy, requests):
        assert fetch_crds.main(["--source", "go", "--go-proxy", proxy]) == 1
    assert len(requests) == 1
    err = capsys.readouterr().err.splitlines()
    assert [line.split(":")[0] for line in err[:2]] == [f"FAILED   {pin.path}" for pin in GO_PINS]
    assert all("HTTP 404" in line for line in err[:2])


def test_a_zip_without_the_file_names_the_missing_member(go_cache: Path, tmp_path: Path, capsys) -> None:
    with counting_server(proxy_layout(tmp_path / "proxy", {PINS[0].path: CONTENT[PINS[0].path]})) as (proxy, _):
        assert fetch_crds.main(["--source", "go", "--go-proxy", proxy]) == 1
    assert f"the module zip has no {MODULE}@{TAG}/{GO_PINS[1].repo_path}" in capsys.readouterr().err
    assert files_under(go_cache) == {PINS[0].path}


def test_the_local_go_module_cache_is_used_without_any_download(go_cache: Path, tmp_path: Path, capsys) -> None:
    module_zip(tmp_path / "gomodcache" / "cache" / "download" / "example.com" / "!org" / "crds" / "@v" / f"{TAG}.zip", CONTENT)
    assert fetch_crds.main(["--base-url", closed_port_url(), "--go-proxy", closed_port_url()]) == 0
    out, err = capsys.readouterr()
    assert f"copied   {PINS[0].path} ({TAG}) from the Go module cache ({MODULE}@{TAG})" in out.splitlines()
    assert err == ""  # nothing else was even tried
    assert files_under(go_cache) == set(CONTENT)
    (go_cache / PINS[0].path).unlink()
    assert fetch_crds.main(["--offline"]) == 0  # the module cache is local: allowed offline


def test_explicit_sources(go_cache: Path, tmp_path: Path, upstream: str, capsys) -> None:
    with counting_server(proxy_layout(tmp_path / "proxy", CONTENT)) as (proxy, requests):
        assert fetch_crds.main(["--source", "github", "--base-url", upstream, "--go-proxy", proxy]) == 0
        assert requests == [] and "Go module" not in capsys.readouterr().out
        shutil.rmtree(go_cache)
        assert fetch_crds.main(["--source", "go", "--base-url", upstream, "--go-proxy", proxy]) == 0
        assert len(requests) == 1 and "from the Go module proxy" in capsys.readouterr().out
        shutil.rmtree(go_cache)
        assert fetch_crds.main(["--base-url", upstream, "--go-proxy", proxy]) == 0  # auto: GitHub first
        assert len(requests) == 1 and "Go module" not in capsys.readouterr().out
        shutil.rmtree(go_cache)
        assert fetch_crds.main(["--base-url", upstream, "--go-proxy", proxy, "--offline"]) == 1
        assert len(requests) == 1 and (not go_cache.exists() or files_under(go_cache) == set())


def test_go_names_and_places() -> None:
    assert fetch_crds.go_escape("github.com/BurntSushi/toml") == "github.com/!burnt!sushi/toml"
    assert fetch_crds.go_proxy_url({}) == "https://proxy.golang.org"
    assert fetch_crds.go_proxy_url({"GOPROXY": "https://goproxy.internal/,direct"}) == "https://goproxy.internal"
    assert fetch_crds.go_proxy_url({"GOPROXY": "direct|file:///srv/mods"}) == "file:///srv/mods"
    assert fetch_crds.go_proxy_url({"GOPROXY": "off"}) is None
    assert fetch_crds.go_mod_cache({"GOMODCACHE": "/m"}) == Path("/m")
    assert fetch_crds.go_mod_cache({"GOPATH": f"/g{os.pathsep}/h"}) == Path("/g/pkg/mod")
    assert GO_PINS[0].repo_path == f"config/{Path(PINS[0].path).name}"
    real = {pin.path: pin for pin in fetch_crds.load_pins()}["envoy-gateway/gateway.envoyproxy.io_backends.yaml"]
    assert (real.go_module, real.tag) == ("github.com/envoyproxy/gateway", "v1.8.1")
    assert real.repo_path == "charts/gateway-helm/charts/crds/crds/generated/gateway.envoyproxy.io_backends.yaml"


def test_a_file_go_proxy_works(go_cache: Path, tmp_path: Path) -> None:
    """GOPROXY=file:///... (a folder in the proxy layout) is a proxy too."""
    proxy = proxy_layout(tmp_path / "proxy", CONTENT)
    assert fetch_crds.main(["--source", "go", "--go-proxy", proxy.as_uri()]) == 0
    assert files_under(go_cache) == set(CONTENT)


def test_ci_fills_the_cache_before_the_readme_test_command() -> None:
    """.ci/run fetches (../shared/k8s-crds as a mirror) before the tests, and a failure cannot hide their results."""
    lines = (fetch_crds.REPO / ".ci" / "run").read_text().splitlines()
    assert "set -euo pipefail" in lines
    tests = lines.index("venv/bin/pip install -r requirements-test.txt && venv/bin/python -m pytest")
    [fetch] = [i for i, line in enumerate(lines) if line.startswith("venv/bin/python scripts/fetch_crds.py")]
    assert fetch < tests and lines[fetch].endswith("|| crds=$?")  # recorded, reported after the tests
    assert any("--from ../shared/k8s-crds" in line for line in lines[:fetch])
    assert any('exit "$crds"' in line for line in lines[tests:])
