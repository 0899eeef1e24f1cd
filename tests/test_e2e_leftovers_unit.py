"""The e2e's leftover-credential check (tests/e2e/leftovers.py), on folders made here: it finds a file holding a
fleet token outside the scratch folder, wherever the token sits in the file, and never prints the token."""
from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from e2e import leftovers
from e2e.controlplane import kubeconfig_text, token_auth_line

TOKEN = "4f" * 24  # as `secrets.token_hex(24)` makes them


def scratch(tmp_path: Path, tokens: list[str]) -> tuple[Path, Path]:
    """A scratch folder as scripts/e2e.sh makes it: the run's start marker, then one token file per cluster."""
    work = tmp_path / "tmp" / "modelplane-e2e.abc"
    marker = work / ".started"
    marker.parent.mkdir(parents=True)
    marker.touch()
    for index, token in enumerate(tokens):
        folder = work / "fleet" / "clusters" / f"c{index}"
        folder.mkdir(parents=True)
        (folder / "tokens.csv").write_text(token_auth_line(token))
        (folder / "kubeconfig").write_text(kubeconfig_text(f"c{index}", "https://127.0.0.1:1", token))
    return work, marker


def test_fleet_tokens_are_read_from_every_control_plane(tmp_path):
    work, _ = scratch(tmp_path, [TOKEN, "ab" * 24])
    assert leftovers.fleet_tokens(work) == {TOKEN, "ab" * 24}


def test_a_provider_kubeconfig_left_in_the_temporary_folder_is_found_and_the_scratch_folder_is_not(tmp_path):
    work, marker = scratch(tmp_path, [TOKEN])
    left = tmp_path / "tmp" / "kubeconfig1234567"  # what writeKubeconfigToFile leaves
    left.write_text(kubeconfig_text("c0", "https://127.0.0.1:1", TOKEN))
    (tmp_path / "tmp" / "unrelated").write_text("users: [{user: {token: " + "cd" * 24 + "}}]")
    found, read = leftovers.files_holding(leftovers.fleet_tokens(work), [tmp_path / "tmp"], work,
                                          marker.stat().st_mtime)
    assert found == [left] and read == 2


def test_a_token_split_across_read_chunks_is_found(tmp_path, monkeypatch):
    monkeypatch.setattr(leftovers, "CHUNK", 16)
    path = tmp_path / "log"
    path.write_bytes(b"x" * 37 + TOKEN.encode() + b"y" * 50)
    assert leftovers.holds_any(path, [TOKEN.encode()])
    assert not leftovers.holds_any(path, [("ab" * 24).encode()])


def test_files_older_than_the_run_are_not_read(tmp_path):
    work, marker = scratch(tmp_path, [TOKEN])
    old = tmp_path / "tmp" / "kubeconfig-old"
    old.write_text(TOKEN)
    an_hour_ago = time.time() - 3600
    os.utime(old, (an_hour_ago, an_hour_ago))
    assert leftovers.files_holding([TOKEN], [tmp_path / "tmp"], work, marker.stat().st_mtime) == ([], 0)


def test_nested_roots_report_a_file_once(tmp_path):
    work, marker = scratch(tmp_path, [TOKEN])
    inner = tmp_path / "tmp" / "inner"
    inner.mkdir()
    (inner / "kubeconfig9").write_text(TOKEN)
    found, _ = leftovers.files_holding([TOKEN], [tmp_path / "tmp", inner], work, marker.stat().st_mtime)
    assert found == [inner / "kubeconfig9"]


def test_scan_roots_are_the_temporary_folders_and_home_once_each(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    roots = leftovers.scan_roots({"TMPDIR": "/tmp", "HOME": str(home)})
    assert Path("/tmp").resolve() in roots and home in roots and len(roots) == len(set(roots))


@pytest.mark.parametrize("leave", [True, False])
def test_the_command_prints_paths_never_tokens_and_fails_when_one_is_left(tmp_path, monkeypatch, capsys, leave):
    work, marker = scratch(tmp_path, [TOKEN])
    base = tmp_path / "tmp"
    if leave:
        (base / "kubeconfig42").write_text(kubeconfig_text("c0", "https://127.0.0.1:1", TOKEN))
    monkeypatch.setattr(leftovers, "scan_roots", lambda environ: [base])
    code = leftovers.main(["--work", str(work), "--since", str(marker)])
    out = capsys.readouterr().out
    assert TOKEN not in out
    if leave:
        assert code == 1 and f"{base / 'kubeconfig42'}" in out and "FAILED: 1 files" in out
    else:
        assert code == 0 and "no file outside the scratch folder holds one of the run's 1 fleet tokens" in out
