"""scripts/demo.sh: the prerequisite check says what is missing and how to install it."""
from __future__ import annotations

import os
import shutil
import subprocess

import pytest

TOOLS = {
    "docker": "exit 0",
    "kind": 'echo "kind v0.31.0 go1.25.5 linux/amd64"',
    "pulumi": "exit 0",
    "kubectl": "exit 0",
}


def run_check(repo, tmp_path, tools: dict[str, str]) -> subprocess.CompletedProcess:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, body in tools.items():
        path = bin_dir / name
        path.write_text(f"#!/bin/sh\n{body}\n")
        path.chmod(0o755)
    for name in ("python3", "sed", "sort", "head", "printf", "dirname"):
        if (found := shutil.which(name)) is not None:
            (bin_dir / name).symlink_to(found)
    env = {"PATH": str(bin_dir), "HOME": str(tmp_path)}
    return subprocess.run([shutil.which("bash"), str(repo / "scripts" / "demo.sh"), "check"], capture_output=True,
                          text=True, env=env, cwd=repo, timeout=60)


def test_all_prerequisites_present(repo, tmp_path):
    done = run_check(repo, tmp_path, TOOLS)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "prerequisites: ok" in done.stdout
    assert f"file://{tmp_path}/.modelplane-demo-state" in done.stdout  # a local backend, no Pulumi Cloud


@pytest.mark.parametrize("tool, hint", [
    ("docker", "https://docs.docker.com/engine/install/"),
    ("kind", "brew install kind"),
    ("pulumi", "https://get.pulumi.com"),
    ("kubectl", "brew install kubectl"),
])
def test_a_missing_tool_is_named_with_how_to_install_it(repo, tmp_path, tool, hint):
    tools = {name: body for name, body in TOOLS.items() if name != tool}
    done = run_check(repo, tmp_path, tools)
    assert done.returncode == 1
    assert f"missing: {tool}" in done.stdout and hint in done.stdout


def test_docker_without_a_running_engine(repo, tmp_path):
    done = run_check(repo, tmp_path, {**TOOLS, "docker": 'if [ "$1" = info ]; then exit 1; fi'})
    assert done.returncode == 1 and "the engine is not running" in done.stdout


def test_kind_too_old_for_the_pinned_node_image(repo, tmp_path):
    done = run_check(repo, tmp_path, {**TOOLS, "kind": 'echo "kind v0.29.0 go1.24.2 linux/amd64"'})
    assert done.returncode == 1 and "kind 0.29.0 is too old" in done.stdout


def test_the_script_is_valid_bash(repo):
    assert subprocess.run(["bash", "-n", str(repo / "scripts" / "demo.sh")]).returncode == 0
    assert os.access(repo / "scripts" / "demo.sh", os.X_OK)
