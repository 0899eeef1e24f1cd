"""The e2e runs every Pulumi command as users are told to: through scripts/private-tmpdir.sh (tests/e2e/pulumi_cli.py).

A stand-in `pulumi` on PATH does what the Kubernetes provider does under the engine (a kubeconfig<digits> file
in TMPDIR, never removed); afterwards the temporary folder the command started from is empty.
"""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from e2e import pulumi_cli
from e2e.pulumi_cli import PulumiProject

REPO = Path(__file__).resolve().parent.parent

STAND_IN = """#!/bin/sh
umask 077
echo "token: t0ken" > "$(mktemp "$TMPDIR/kubeconfigXXXXXXXX")"
echo "$TMPDIR $MODELPLANE_PRIVATE_TMPDIR"
[ "$1" = slow ] && exec sleep 30
exit 0
"""


@pytest.fixture
def project(tmp_path, monkeypatch) -> tuple[PulumiProject, Path]:
    bin_dir, base = tmp_path / "bin", tmp_path / "tmp"
    bin_dir.mkdir()
    base.mkdir()
    (bin_dir / "pulumi").write_text(STAND_IN)
    (bin_dir / "pulumi").chmod(0o755)
    monkeypatch.setenv("TMPDIR", str(base))
    return PulumiProject(REPO, tmp_path / "work", bin_dir, tmp_path / "venv"), base


def test_a_command_gets_a_private_tmpdir_that_is_gone_afterwards(project):
    project, base = project
    run = project.run("version")
    tmpdir, marker = run.stdout.split()
    assert run.ok, run.stderr
    assert Path(tmpdir).parent == base and marker == tmpdir
    assert list(base.iterdir()) == []


def test_a_command_that_times_out_is_stopped_with_its_group_and_leaves_no_folder(project, monkeypatch):
    project, base = project
    monkeypatch.setattr(pulumi_cli, "STOP_GRACE", 10.0)
    run = project.run("slow", timeout=2)
    assert not run.ok and "timed out after 2 s" in run.stderr
    assert list(base.iterdir()) == []
    assert not [p for p in os.listdir("/proc") if p.isdigit() and _cmdline(p).startswith("sleep 30")
                and str(base) in _environ(p)]


def _cmdline(pid: str) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def _environ(pid: str) -> str:
    try:
        return Path(f"/proc/{pid}/environ").read_bytes().decode(errors="replace")
    except OSError:
        return ""
