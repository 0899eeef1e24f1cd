"""No cluster credential left on disk: the private TMPDIR wrapper, and the program's warning when a run lacks it.

The Kubernetes provider writes each kubeconfig to `$TMPDIR/kubeconfig<digits>` and never removes it
(docs/your-own-cluster.md, "Credentials on disk"). `scripts/private-tmpdir.sh` gives the command a
fresh private TMPDIR and removes it when the command ends; the program warns when it runs without one.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pulumi
import pytest

from modelplane.infra import program
from modelplane.infra.provider_tmpdir import MARKER, Folder, folder_facts, temp_folder_warning
from modelplane.api.stackfile import read_stack_file
from program_run import set_stack_config

REPO = Path(__file__).resolve().parent.parent
WRAPPER = REPO / "scripts" / "private-tmpdir.sh"
UID = 1000
PRIVATE = Folder(owner=UID, mode=0o700)

# What the provider does on each Configure (pkg/provider/util.go writeKubeconfigToFile): a kubeconfig<digits>
# file in the temporary folder, never removed; here Python's mkstemp, which reads TMPDIR as Go's os.TempDir does.
PROVIDER = """
import os, sys, tempfile, time
fd, path = tempfile.mkstemp(prefix="kubeconfig")
os.write(fd, b"users: [{name: rack, user: {token: t0ken}}]\\n")
print(os.environ["TMPDIR"], os.environ.get("MODELPLANE_PRIVATE_TMPDIR"), path, oct(os.stat(os.environ["TMPDIR"]).st_mode & 0o777), flush=True)
time.sleep(float(sys.argv[1]))
sys.exit(int(sys.argv[2]))
"""


@pytest.mark.parametrize("environ, folder, warns", [
    ({}, None, "to /tmp/kubeconfig<digits> and never removes it"),
    ({"TMPDIR": "/tmp"}, Folder(0, 0o1777), "to /tmp/kubeconfig<digits> and never removes it"),
    # a private folder the wrapper did not make (macOS's per-user TMPDIR): private, but nothing removes it
    ({"TMPDIR": "/var/folders/x/T"}, PRIVATE, "to /var/folders/x/T/kubeconfig<digits> and never removes it"),
    ({"TMPDIR": "/run/a", MARKER: "/run/b"}, PRIVATE, "to /run/a/kubeconfig<digits>"),
    ({"TMPDIR": "/run/a", MARKER: "/run/a"}, Folder(UID, 0o755), "TMPDIR /run/a is not a folder only this user can open"),
    ({"TMPDIR": "/run/a", MARKER: "/run/a"}, Folder(0, 0o700), "TMPDIR /run/a is not a folder only this user can open"),
    ({"TMPDIR": "/run/a", MARKER: "/run/a"}, None, "TMPDIR /run/a is not a folder only this user can open"),
    ({"TMPDIR": "/run/a", MARKER: "/run/a"}, PRIVATE, None),
    ({"TMPDIR": "/run/a/", MARKER: "/run/a"}, PRIVATE, None),
])
def test_the_warning_names_the_folder_and_the_wrapper_unless_the_run_is_covered(environ, folder, warns):
    message = temp_folder_warning(environ, folder, UID)
    if warns is None:
        assert message is None
    else:
        assert warns in message and "scripts/private-tmpdir.sh" in message


def test_folder_facts_reads_owner_and_mode(tmp_path):
    folder = tmp_path / "private"
    folder.mkdir(mode=0o700)
    assert folder_facts(str(folder)) == Folder(owner=os.getuid(), mode=0o700)
    assert folder_facts(str(tmp_path / "missing")) is None
    (tmp_path / "file").write_text("")
    assert folder_facts(str(tmp_path / "file")) is None


@pytest.fixture
def pulumi_warnings(monkeypatch) -> list[str]:
    warned: list[str] = []
    monkeypatch.setattr(pulumi.log, "warn", lambda message, *args, **kwargs: warned.append(message))
    return warned


@pulumi.runtime.test
def test_a_pulumi_up_without_the_wrapper_warns_once(repo, mocks, monkeypatch, pulumi_warnings):
    monkeypatch.delenv(MARKER, raising=False)
    monkeypatch.setenv("TMPDIR", "/tmp")
    set_stack_config(read_stack_file(repo / "stacks" / "Pulumi.demo.yaml").config)
    result = program.run().result

    def check(_):
        about = [w for w in pulumi_warnings if "kubeconfig<digits>" in w]
        assert about == [pulumi_warnings[0]] and "/tmp/kubeconfig<digits>" in about[0]

    return result.apply(check)


@pulumi.runtime.test
def test_a_pulumi_up_through_the_wrapper_does_not_warn(repo, mocks, monkeypatch, pulumi_warnings, tmp_path):
    private = tmp_path / "run"
    private.mkdir(mode=0o700)
    monkeypatch.setenv("TMPDIR", str(private))
    monkeypatch.setenv(MARKER, str(private))
    set_stack_config(read_stack_file(repo / "stacks" / "Pulumi.demo.yaml").config)
    result = program.run().result

    def check(_):
        assert not [w for w in pulumi_warnings if "TMPDIR" in w or "kubeconfig<digits>" in w]

    return result.apply(check)


def wrapped(base: Path, *args: str, **kwargs) -> subprocess.Popen:
    return subprocess.Popen(["bash", str(WRAPPER), sys.executable, "-c", PROVIDER, *args], text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env={**os.environ, "TMPDIR": str(base)},
                            **kwargs)


@pytest.mark.parametrize("exit_code", [0, 3])
def test_the_wrapper_gives_a_private_folder_and_removes_it_with_the_kubeconfig(tmp_path, exit_code):
    base = tmp_path / "tmp"
    base.mkdir()
    process = wrapped(base, "0", str(exit_code))
    out, err = process.communicate(timeout=60)
    tmpdir, marker, written, mode = out.split()
    assert process.returncode == exit_code, err
    assert Path(tmpdir).parent == base and marker == tmpdir and mode == "0o700"
    assert Path(written).parent == Path(tmpdir) and Path(written).name.startswith("kubeconfig")
    assert list(base.iterdir()) == []  # the folder, and the kubeconfig in it, are gone


@pytest.mark.parametrize("sig, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_an_interrupted_run_leaves_no_folder(tmp_path, sig, code):
    """Ctrl-C (or a CI runner's SIGTERM) reaches the whole foreground group; the folder goes once the command ends."""
    base = tmp_path / "tmp"
    base.mkdir()
    process = wrapped(base, "30", "0", start_new_session=True)
    line = process.stdout.readline()  # the kubeconfig is written
    assert Path(line.split()[2]).exists()
    os.killpg(process.pid, sig)
    process.communicate(timeout=30)
    assert process.returncode == code
    assert list(base.iterdir()) == []


def test_the_wrapper_without_a_command_says_how_to_use_it():
    done = subprocess.run(["bash", str(WRAPPER)], capture_output=True, text=True, timeout=30)
    assert done.returncode == 2 and "usage: scripts/private-tmpdir.sh COMMAND" in done.stderr


@pytest.mark.parametrize(("given", "seen"), [(None, "true"), ("false", "false")])
def test_the_wrapper_lets_the_provider_take_over_objects_an_interrupted_up_created(given, seen):
    """An object a killed `up` created is under another field manager; forcing takes it over (docs/runbook.md)."""
    env = {k: v for k, v in os.environ.items() if k != "PULUMI_K8S_ENABLE_PATCH_FORCE"}
    if given is not None:
        env["PULUMI_K8S_ENABLE_PATCH_FORCE"] = given
    done = subprocess.run(["bash", str(WRAPPER), "bash", "-c", 'echo "$PULUMI_K8S_ENABLE_PATCH_FORCE"'],
                          capture_output=True, text=True, env=env, timeout=30)
    assert done.returncode == 0 and done.stdout.strip() == seen


@pytest.mark.parametrize(("variable", "given", "seen"), [
    ("PULUMI_PARALLEL", None, "64"), ("PULUMI_PARALLEL", "16", "16"),
    ("PULUMI_PARALLEL_DIFF", None, ""),  # measured slower at fleet size (docs/e2e.md, 'At fleet size'): not set
])
def test_the_wrapper_runs_a_fleets_awaits_in_parallel(variable, given, seen):
    """Pulumi's default of 4 operations per CPU brought a fleet's replicas up 8 at a time on a 2-core machine
    (docs/pulumi.md, 'At fleet size'); a value the user set is kept."""
    env = {k: v for k, v in os.environ.items() if k != variable}
    if given is not None:
        env[variable] = given
    done = subprocess.run(["bash", str(WRAPPER), "bash", "-c", f'echo "${variable}"'],
                          capture_output=True, text=True, env=env, timeout=30)
    assert done.returncode == 0 and done.stdout.strip() == seen
