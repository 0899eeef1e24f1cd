"""scripts/fetch_crds.py: pinned CRDs into the user cache, verified, atomically, offline-testable.

Downloads are served by http.server on 127.0.0.1 from a temporary folder laid out like
raw.githubusercontent.com (``--base-url``), with made-up pins: no internet, no real CRDs needed.
"""
from __future__ import annotations

import base64
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
import time
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
    """What .ci/run does with a mirror: an incomplete (or partly edited) one is topped up."""
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
    env = {"MODELPLANE_CRD_CACHE": str(tmp_path / "cache"), "PATH": "/usr/bin:/bin"}
    done = subprocess.run([sys.executable, str(fetch_crds.REPO / "scripts" / "fetch_crds.py"), "--from", str(kv.CRD_DIR), "--offline"],
                          env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    n = len(kv.PINS)
    assert done.stdout.splitlines()[-1] == f"{n} pinned CRD files in {tmp_path / 'cache'}: {n} copied"
    found = kv.find_crd_dir(env, repo=tmp_path / "lone-clone")
    assert (found.path, found.origin) == (tmp_path / "cache", "user cache")
    assert kv.load_crds(found.path).keys() == kv.load_crds().keys()


# --- what the pins are, and which sources there are ----------------------------------------------

def test_the_pins_are_the_versions_the_stack_installs() -> None:
    """Each pinned CRD is from the release that `pulumi up` installs by default, in a `<project>-<tag>` folder."""
    from modelplane.api.inference_gateway import MetalLB
    from modelplane.api.serving_stack import ServingStackVersions
    from modelplane.render.metallb import METALLB_VERSION

    versions = ServingStackVersions()
    installed = {"gateway-api": versions.gateway_api, "gateway-api-inference-extension": versions.inference_extension,
                 "lws": versions.leader_worker_set, "ai-gateway": versions.envoy_ai_gateway,
                 "envoy-gateway": versions.envoy_gateway, "metallb": "v" + METALLB_VERSION}
    assert MetalLB.model_fields["version"].default == METALLB_VERSION
    pins = fetch_crds.load_pins()
    for pin in pins:
        folder = pin.path.split("/")[0]
        if folder == "traefik":  # the chart version is the stack's own (inferenceGateway.traefik.version)
            continue
        project, _, tag = folder.rpartition("-")
        assert (tag, pin.tag) == (installed[project], installed[project]), pin.path
    assert {pin.path.split("/")[0].rpartition("-")[0] for pin in pins} >= set(installed)


def test_no_go_module_source_is_left() -> None:
    """Upstream URL, a mirror (--from, --base-url) or the cache: the Go module proxy serves Go builds, not CRDs."""
    script = (fetch_crds.REPO / "scripts" / "fetch_crds.py").read_text()
    assert "proxy.golang.org" not in script and "zipfile" not in script and "GOPROXY" not in script
    assert "go_module" not in (fetch_crds.REPO / "tests" / "upstream-crds.toml").read_text()
    done = subprocess.run([sys.executable, str(fetch_crds.REPO / "scripts" / "fetch_crds.py"), "--source", "go"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "unrecognized arguments: --source go" in done.stderr


def test_the_skip_line_names_no_folder_a_user_cannot_know() -> None:
    assert "../shared" not in kv.MISSING_CRDS and "shared/k8s-crds" not in kv.MISSING_CRDS
    assert "scripts/fetch_crds.py" in kv.MISSING_CRDS


# --- bounded downloads: a slow or endless server, credentials, a bad URL --------------------------

@contextlib.contextmanager
def raw_server(answer) -> Iterator[str]:
    """A loopback server whose every connection is handed to ``answer(conn, stop)``; all stopped at exit."""
    stop = threading.Event()
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.2)

    def accept() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                continue
            threading.Thread(target=answer, args=(conn, stop), daemon=True).start()

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        stop.set()
        thread.join(timeout=5)
        listener.close()


def _read_request(conn: socket.socket) -> bytes:
    conn.settimeout(5)
    data = b""
    while b"\r\n\r\n" not in data:
        more = conn.recv(4096)
        if not more:
            break
        data += more
    return data


def endless(conn: socket.socket, stop: threading.Event) -> None:
    """A body without end, as fast as the client takes it."""
    with conn:
        _read_request(conn)
        try:
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\n")
            while not stop.is_set():
                conn.sendall(b"x" * 65536)
        except OSError:
            pass


def dripping(conn: socket.socket, stop: threading.Event) -> None:
    """One byte every 50 ms: never silent long enough for a read timeout."""
    with conn:
        _read_request(conn)
        try:
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 1000000\r\n\r\n")
            while not stop.wait(0.05):
                conn.sendall(b"x")
        except OSError:
            pass


def test_an_endless_body_stops_at_the_size_cap_and_leaves_nothing(cache: Path, monkeypatch, capsys) -> None:
    monkeypatch.setattr(fetch_crds, "MAX_BYTES", 1 << 20)
    with raw_server(endless) as url:
        started = time.monotonic()
        assert fetch_crds.main(["--base-url", url]) == 1
        assert time.monotonic() - started < 20
    err = capsys.readouterr().err
    assert f"more than the {1 << 20}-byte limit; not kept" in err
    assert not cache.exists() or files_under(cache) == set()  # no partial file either


def test_a_dripping_server_is_cut_at_the_deadline(cache: Path, monkeypatch, capsys) -> None:
    monkeypatch.setattr(fetch_crds, "DEADLINE_SECONDS", 1)
    with raw_server(dripping) as url:
        started = time.monotonic()
        assert fetch_crds.main(["--base-url", url]) == 1
        took = time.monotonic() - started
    assert took < 10, took  # two files, one second each, not 1,000,000 x 50 ms
    err = capsys.readouterr().err
    assert err.count("not complete within 1 s; not kept") == 2
    assert not cache.exists() or files_under(cache) == set()


def test_an_announced_oversize_body_is_refused_before_reading(cache: Path, monkeypatch, capsys) -> None:
    monkeypatch.setattr(fetch_crds, "MAX_BYTES", 1000)
    with raw_server(dripping) as url:  # announces 1,000,000 bytes
        started = time.monotonic()
        assert fetch_crds.main(["--base-url", url]) == 1
        assert time.monotonic() - started < 5
    assert "1000000 bytes announced, more than the 1000-byte limit" in capsys.readouterr().err


def test_credentials_in_the_base_url_are_sent_but_never_printed(cache: Path, tmp_path: Path, capfd) -> None:
    folder = upstream_layout(tmp_path / "upstream", CONTENT)
    expected = "Basic " + base64.b64encode(b"robot:s3cr%t-token").decode()
    seen: list[str | None] = []

    class NeedsAuth(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args) -> None:
            pass

        def do_GET(self) -> None:
            seen.append(self.headers.get("Authorization"))
            if self.headers.get("Authorization") != expected:
                self.send_error(401)
                return
            super().do_GET()

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(NeedsAuth, directory=str(folder)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        port = server.server_address[1]
        assert fetch_crds.main(["--base-url", f"http://robot:s3cr%25t-token@127.0.0.1:{port}/"]) == 0
        assert seen == [expected, expected] and files_under(cache) == set(CONTENT)
        shutil.rmtree(cache)
        assert fetch_crds.main(["--base-url", f"http://robot:wrong-token@127.0.0.1:{port}"]) == 1
    finally:
        server.shutdown()
        server.server_close()
    out, err = capfd.readouterr()
    assert "s3cr" not in out + err and "wrong-token" not in out + err
    assert f"http://robot:***@127.0.0.1:{port}/org/repo/" in err and "HTTP 401" in err
    # unreachable, with a password: the one "cannot download" line hides it too
    assert fetch_crds.main(["--base-url", closed_port_url().replace("//", "//robot:hunter2@")]) == 1
    out, err = capfd.readouterr()
    assert "hunter2" not in out + err and "robot:***@" in err


@pytest.mark.parametrize("url, why", [
    ("http://[::1/", "not a valid URL (Invalid IPv6 URL)"),
    ("http://127.0.0.1:99999", "not a valid URL (Port out of range 0-65535)"),
    ("ftp://mirror.example", "not an http:// or https:// URL with a host"),
    ("mirror.example/crds", "not an http:// or https:// URL with a host"),
    ("https://user:pa55@[::1", "not a valid URL (Invalid IPv6 URL)"),
])
def test_a_bad_base_url_is_a_clear_error(url: str, why: str, tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, str(fetch_crds.REPO / "scripts" / "fetch_crds.py"), "--base-url", url],
                          env={**os.environ, "MODELPLANE_CRD_CACHE": str(tmp_path / "cache")},
                          capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr.splitlines()[-1] == f"fetch_crds.py: error: --base-url: {why}"
    assert "Traceback" not in done.stderr and "pa55" not in done.stderr
    assert not (tmp_path / "cache").exists()


def test_ci_runs_the_readme_test_command_as_a_users_shell_and_fails_when_pytest_does(tmp_path: Path) -> None:
    """.ci/run on a stand-in toolchain: pytest sees no PYTHONDONTWRITEBYTECODE/PYTHONUNBUFFERED, its failure fails CI."""
    clone = tmp_path / "clone"
    (clone / ".ci").mkdir(parents=True)
    shutil.copy(fetch_crds.REPO / ".ci" / "run", clone / ".ci" / "run")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "log"
    stub = ("#!/bin/sh\n"
            f'echo "$(basename "$0") $* B=${{PYTHONDONTWRITEBYTECODE-unset}} U=${{PYTHONUNBUFFERED-unset}}" >> {log}\n'
            'case "$*" in *"-m pytest"*) exit "${PYTEST_EXIT:-0}";; esac\n'
            'case "$(basename "$0")" in ruff|mypy) exit "${GATE_EXIT:-0}";; esac\n')
    fake_python3 = ("#!/bin/sh\n"  # `python3 -m venv venv`: a venv of stubs
                    'mkdir -p venv/bin\n'
                    f'for tool in pip modelplane python ruff mypy; do printf \'%s\' \'{stub}\' > venv/bin/$tool; '
                    'chmod +x venv/bin/$tool; done\n')
    (bin_dir / "python3").write_text(fake_python3)
    (bin_dir / "python3").chmod(0o755)
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "HOME": str(tmp_path), "PYTHONDONTWRITEBYTECODE": "1",
           "PYTHONUNBUFFERED": "1"}
    for pytest_exit, ci_exit in ((0, 0), (1, 1), (5, 5)):
        log.write_text("")
        done = subprocess.run(["bash", str(clone / ".ci" / "run")], env={**env, "PYTEST_EXIT": str(pytest_exit)},
                              capture_output=True, text=True, timeout=60)
        assert done.returncode == ci_exit, done.stderr
        [pytest_line] = [line for line in log.read_text().splitlines() if "-m pytest" in line]
        assert pytest_line == "python -m pytest B=unset U=unset"
        [fetch_line] = [line for line in log.read_text().splitlines() if "fetch_crds.py" in line]
        assert fetch_line.startswith("python scripts/fetch_crds.py") and "--from" not in fetch_line  # no mirror beside
        gate = [line.split(" B=")[0] for line in log.read_text().splitlines() if line.startswith(("ruff", "mypy"))]
        assert gate == ["ruff check modelplane scripts", "ruff format --check modelplane scripts", "mypy "]
    log.write_text("")  # a lint or type finding fails CI before the tests run
    done = subprocess.run(["bash", str(clone / ".ci" / "run")], env={**env, "GATE_EXIT": "1"},
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 1 and "-m pytest" not in log.read_text()


def test_ci_fills_the_cache_before_the_readme_test_command() -> None:
    """.ci/run fetches (a mirror beside the clone, if any) before the tests, and a failure cannot hide their results."""
    lines = (fetch_crds.REPO / ".ci" / "run").read_text().splitlines()
    assert "set -euo pipefail" in lines
    tests = lines.index("venv/bin/pip install -r requirements-test.txt && "
                        "env -u PYTHONDONTWRITEBYTECODE -u PYTHONUNBUFFERED venv/bin/python -m pytest")
    [fetch] = [i for i, line in enumerate(lines) if line.startswith("venv/bin/python scripts/fetch_crds.py")]
    assert fetch < tests and lines[fetch].endswith("|| crds=$?")  # recorded, reported after the tests
    assert any("if [[ -d ../shared/k8s-crds ]]; then crd_mirror=(--from ../shared/k8s-crds); fi" == line
               for line in lines[:fetch])  # only when it is there
    assert any('exit "$crds"' in line for line in lines[tests:])
