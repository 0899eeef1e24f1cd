"""`scale | drain | undrain` on one stack file at the same time, and writes that fail or must not happen.

Concurrent commands queue on the stack file's edit lock (flock on its folder) instead of losing an
edit; a read-only, immutable or un-ownable file is refused (exit 2) without a byte written; a write
that fails part way (or is interrupted) leaves no temporary file and the original byte-identical.
"""
from __future__ import annotations

import copy
import errno
import os
import shutil
import stat
import subprocess
import sys
import time

import pytest
import yaml

from modelplane import cli
from modelplane.api import locked_write
from modelplane.api import ModelplaneError

N = 8
DRAIN = "modelplane.ai/drain"


def modelplane(repo, *args, **kwargs) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "modelplane", *map(str, args)], cwd=repo, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kwargs)


def run(repo, *args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "modelplane", *map(str, args)], cwd=repo, capture_output=True,
                          text=True, timeout=60)


def many_stack(repo, tmp_path, n: int = N):
    """The demo stack with n more clusters (gpu-0..) and n more deployments (ml-team/mock-0..)."""
    document = yaml.safe_load((repo / "stacks" / "Pulumi.demo.yaml").read_text())
    config = document["config"]
    clusters = config["modelplane:inferenceClusters"]
    deployments = config["modelplane:modelDeployments"]["ml-team"]
    engine = deployments["mock-demo"]["template"]["spec"]["engines"][0]["members"][0]["template"]["spec"]
    engine["containers"][0]["args"] = ["import time; time.sleep(3600)",  # not the mock engine's source: small and fast
                                       "--served-model-name", "mock"]
    for i in range(n):
        cluster = copy.deepcopy(clusters["gpu-eu-west"])
        cluster["cluster"]["kind"]["clusterName"] = f"modelplane-c{i}"
        cluster["nodePools"][0]["name"] = f"pool-{i}"
        clusters[f"gpu-{i}"] = cluster
        deployments[f"mock-{i}"] = copy.deepcopy(deployments["mock-demo"])
    path = tmp_path / "Pulumi.many.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


def config_of(path) -> dict:
    return yaml.safe_load(path.read_text())["config"]


def start_together(repo, commands: list[list]) -> list[subprocess.CompletedProcess]:
    """Start every command at once: each imports modelplane, says it is ready, and waits for one gate."""
    gate_read, gate_write = os.pipe()
    ready_read, ready_write = os.pipe()
    script = ("import os, sys; from modelplane import cli; os.write(int(sys.argv[2]), b'r'); "
              "os.read(int(sys.argv[1]), 1); raise SystemExit(cli.main(sys.argv[3:]))")
    processes = [subprocess.Popen([sys.executable, "-c", script, str(gate_read), str(ready_write), *map(str, args)],
                                  cwd=repo, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  pass_fds=(gate_read, ready_write))
                 for args in commands]
    os.close(ready_write)
    ready = b""
    while len(ready) < len(processes):
        chunk = os.read(ready_read, 64)
        assert chunk, "a command exited before it was ready"
        ready += chunk
    os.write(gate_write, b"x" * len(processes))  # all of them go
    for fd in (gate_read, gate_write, ready_read):
        os.close(fd)
    results = []
    for process, args in zip(processes, commands):
        stdout, stderr = process.communicate(timeout=120)
        results.append(subprocess.CompletedProcess(args, process.returncode, stdout, stderr))
    return results


# --- no edit is lost --------------------------------------------------------------------------------

def test_concurrent_scales_lose_no_edit(repo, tmp_path):
    path = many_stack(repo, tmp_path)
    results = start_together(repo, [["scale", f"ml-team/mock-{i}", "--replicas", i % 3 + 3, "--config", path]
                                    for i in range(N)])
    for result in results:
        assert result.returncode == 0, result.stderr
        assert result.stdout.startswith("edited "), result.stdout
    deployments = config_of(path)["modelplane:modelDeployments"]["ml-team"]
    assert {i: deployments[f"mock-{i}"]["replicas"] for i in range(N)} == {i: i % 3 + 3 for i in range(N)}
    assert deployments["mock-demo"]["replicas"] == 2
    assert sorted(os.listdir(tmp_path)) == [path.name]  # no temporary or lock file left behind


def test_concurrent_drains_scales_and_undrains_lose_no_edit(repo, tmp_path):
    path = many_stack(repo, tmp_path)
    assert run(repo, "drain", "gpu-0", "--config", path).returncode == 0  # undrained below, concurrently
    commands = [["drain", f"gpu-{i}", "--effect", "NoExecute" if i % 2 else "NoSchedule", "--config", path]
                for i in range(1, N)]
    commands += [["undrain", "gpu-0", "--config", path], ["scale", "ml-team/mock-0", "--replicas", 5, "--config", path]]
    for result in start_together(repo, commands):
        assert result.returncode == 0, result.stderr
        assert result.stdout.startswith("edited "), result.stdout
    config = config_of(path)
    clusters = config["modelplane:inferenceClusters"]
    assert "taints" not in clusters["gpu-0"]
    for i in range(1, N):
        assert clusters[f"gpu-{i}"]["taints"] == [{"key": DRAIN, "effect": "NoExecute" if i % 2 else "NoSchedule"}]
    assert config["modelplane:modelDeployments"]["ml-team"]["mock-0"]["replicas"] == 5
    assert sorted(os.listdir(tmp_path)) == [path.name]


# --- the lock: waited for, with a bound -----------------------------------------------------------

def test_an_edit_waits_for_another_edit_of_the_same_file(repo, tmp_path):
    path = many_stack(repo, tmp_path, 1)
    with locked_write.locked(path):  # as another command would hold it
        process = modelplane(repo, "scale", "ml-team/mock-0", "--replicas", 3, "--config", path)
        time.sleep(2.0)
        assert process.poll() is None  # still waiting
        assert config_of(path)["modelplane:modelDeployments"]["ml-team"]["mock-0"]["replicas"] == 2
    stdout, stderr = process.communicate(timeout=60)
    assert process.returncode == 0, stderr
    assert config_of(path)["modelplane:modelDeployments"]["ml-team"]["mock-0"]["replicas"] == 3


def test_an_edit_gives_up_waiting_with_a_clear_error(repo, tmp_path, monkeypatch, capsys):
    path = many_stack(repo, tmp_path, 1)
    before = path.read_bytes()
    monkeypatch.setattr(locked_write, "LOCK_TIMEOUT", 0.3)
    with locked_write.locked(path):  # flock: a second open file description in the same process is refused too
        started = time.monotonic()
        code = cli.main(["drain", "gpu-0", "--config", str(path)])
        waited = time.monotonic() - started
    assert code == 2 and 0.3 <= waited < 5
    assert capsys.readouterr().err == (f"error: another modelplane command is editing {path} (waited 0.3s for it); "
                                       "nothing changed: run this command again once it has finished\n")
    assert path.read_bytes() == before and sorted(os.listdir(tmp_path)) == [path.name]


def test_the_lock_follows_a_symlinked_stack_file_to_its_folder(repo, tmp_path, monkeypatch):
    real = tmp_path / "real"
    real.mkdir()
    path = many_stack(repo, real, 1)
    link = tmp_path / "Pulumi.link.yaml"
    link.symlink_to(path)
    monkeypatch.setattr(locked_write, "LOCK_TIMEOUT", 0.2)
    with locked_write.locked(link):
        with pytest.raises(ModelplaneError, match="another modelplane command is editing"):
            with locked_write.locked(path):
                pass


# --- files an edit must not replace ---------------------------------------------------------------

def scale_once(repo, path) -> subprocess.CompletedProcess:
    return run(repo, "scale", "ml-team/mock-demo", "--replicas", 1, "--config", path)


def copy_demo(repo, folder):
    path = folder / "Pulumi.demo.yaml"
    shutil.copyfile(repo / "stacks" / "Pulumi.demo.yaml", path)
    return path


def test_read_only_stack_file_exits_2_and_is_unchanged(repo, tmp_path):
    path = copy_demo(repo, tmp_path)
    path.chmod(0o444)
    before = path.read_bytes()
    result = scale_once(repo, path)
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr == (f"error: {path} is read-only (mode 0444); nothing written: make it writable "
                             f"(chmod u+w {path}) and run the command again, or edit it by hand\n")
    assert path.read_bytes() == before and stat.S_IMODE(path.stat().st_mode) == 0o444
    assert sorted(os.listdir(tmp_path)) == [path.name]


def test_a_command_that_changes_nothing_does_not_mind_a_read_only_file(repo, tmp_path):
    path = copy_demo(repo, tmp_path)
    path.chmod(0o444)
    result = run(repo, "scale", "ml-team/mock-demo", "--replicas", 2, "--config", path)
    assert result.returncode == 0 and "already has replicas: 2; nothing changed" in result.stdout


def test_stack_file_in_a_read_only_folder_exits_2_and_is_unchanged(repo, tmp_path):
    folder = tmp_path / "stacks"
    folder.mkdir()
    path = copy_demo(repo, folder)
    before = path.read_bytes()
    folder.chmod(0o555)
    try:
        result = scale_once(repo, path)
        assert result.returncode == 2 and "Traceback" not in result.stderr
        assert result.stderr.startswith(f"error: the folder {folder} is read-only; nothing written to {path}: ")
        assert f"chmod u+w {folder}" in result.stderr
        assert path.read_bytes() == before and sorted(os.listdir(folder)) == [path.name]
    finally:
        folder.chmod(0o755)


def test_immutable_stack_file_exits_2_and_is_unchanged(repo, tmp_path):
    path = copy_demo(repo, tmp_path)
    before = path.read_bytes()
    if shutil.which("chattr") is None or subprocess.run(["chattr", "+i", path], capture_output=True).returncode:
        pytest.skip("cannot make a file immutable here (chattr +i needs CAP_LINUX_IMMUTABLE and ext4/xfs/btrfs)")
    try:
        result = scale_once(repo, path)
        assert result.returncode == 2 and "Traceback" not in result.stderr
        assert result.stderr.startswith(f"error: {path} is not writable by this user")
        assert "immutable" in result.stderr
        assert path.read_bytes() == before and sorted(os.listdir(tmp_path)) == [path.name]
    finally:
        subprocess.run(["chattr", "-i", path], check=True)


# --- owner, group and mode are kept -----------------------------------------------------------------

def test_owner_group_and_mode_are_kept(repo, tmp_path):
    path = copy_demo(repo, tmp_path)
    path.chmod(0o640)
    owner = (1234, 5678) if os.geteuid() == 0 else (os.getuid(), os.getgid())
    if os.geteuid() == 0:
        os.chown(path, *owner)
    result = scale_once(repo, path)
    assert result.returncode == 0, result.stderr
    info = path.stat()
    assert (info.st_uid, info.st_gid, stat.S_IMODE(info.st_mode)) == (*owner, 0o640)
    assert config_of(path)["modelplane:modelDeployments"]["ml-team"]["mock-demo"]["replicas"] == 1


def test_an_owner_that_cannot_be_kept_is_refused(repo, tmp_path, monkeypatch, capsys):
    path = copy_demo(repo, tmp_path)
    if os.geteuid() != 0:
        pytest.skip("needs root to give the file another owner")
    os.chown(path, 1234, 5678)
    before = path.read_bytes()

    def refuse(fd, uid, gid):
        raise PermissionError(errno.EPERM, "Operation not permitted")

    monkeypatch.setattr(os, "fchown", refuse)  # as for a user who may write the file but does not own it
    assert cli.main(["scale", "ml-team/mock-demo", "--replicas", "1", "--config", str(path)]) == 2
    assert capsys.readouterr().err.startswith(f"error: cannot keep the owner and group of {path} (uid 1234, gid 5678)")
    assert path.read_bytes() == before and sorted(os.listdir(tmp_path)) == [path.name]


# --- a write that fails leaves nothing behind --------------------------------------------------------

def failing(error: BaseException):
    def fail(*args, **kwargs):
        raise error
    return fail


@pytest.mark.parametrize("function", ["write", "fsync", "fchmod", "replace"])
def test_a_failing_write_leaves_no_temp_file_and_the_original_intact(repo, tmp_path, monkeypatch, capsys, function):
    path = copy_demo(repo, tmp_path)
    path.chmod(0o640)
    before = path.read_bytes()
    monkeypatch.setattr(os, function, failing(OSError(errno.ENOSPC, "No space left on device")))
    code = cli.main(["scale", "ml-team/mock-demo", "--replicas", "1", "--config", str(path)])
    monkeypatch.undo()
    assert code == 2
    err = capsys.readouterr().err
    assert err.startswith("error: cannot ") and f"{path}: No space left on device; nothing changed" in err
    assert path.read_bytes() == before and stat.S_IMODE(path.stat().st_mode) == 0o640
    assert sorted(os.listdir(tmp_path)) == [path.name]


@pytest.mark.parametrize("function", ["fsync", "replace"])
def test_an_interrupted_write_leaves_no_temp_file_and_the_original_intact(repo, tmp_path, monkeypatch, function):
    path = copy_demo(repo, tmp_path)
    before = path.read_bytes()
    monkeypatch.setattr(os, function, failing(KeyboardInterrupt()))
    with pytest.raises(KeyboardInterrupt):
        cli.main(["scale", "ml-team/mock-demo", "--replicas", "1", "--config", str(path)])
    monkeypatch.undo()
    assert path.read_bytes() == before and sorted(os.listdir(tmp_path)) == [path.name]


def test_an_interrupted_check_leaves_no_temp_file(tmp_path):
    path = tmp_path / "Pulumi.x.yaml"
    path.write_text("old\n")
    with pytest.raises(KeyboardInterrupt):
        locked_write.write_atomically(path, "new\n", "old\n", failing(KeyboardInterrupt()))
    assert path.read_text() == "old\n" and os.listdir(tmp_path) == [path.name]


def test_where_a_folder_cannot_be_locked_a_lock_file_beside_the_stack_file_is(tmp_path, monkeypatch):
    """NFS emulates flock with write locks, which a folder (opened read-only) cannot take."""
    import fcntl

    path = tmp_path / "Pulumi.x.yaml"
    path.write_text("old\n")
    flock = fcntl.flock

    def no_folder_locks(fd, operation):
        if stat.S_ISDIR(os.fstat(fd).st_mode):
            raise OSError(errno.EBADF, "Bad file descriptor")
        return flock(fd, operation)

    monkeypatch.setattr(fcntl, "flock", no_folder_locks)
    monkeypatch.setattr(locked_write, "LOCK_TIMEOUT", 0.2)
    with locked_write.locked(path):
        assert sorted(os.listdir(tmp_path)) == [".Pulumi.x.yaml.lock", path.name]
        with pytest.raises(ModelplaneError, match=f"another modelplane command is editing {path}"):
            with locked_write.locked(path):
                pass
    with locked_write.locked(path):  # released, and the lock file stays (deleting it would race with a waiter)
        assert sorted(os.listdir(tmp_path)) == [".Pulumi.x.yaml.lock", path.name]
