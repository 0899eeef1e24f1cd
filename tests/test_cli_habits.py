"""The CLI's habits from kubectl and pulumi, as a user meets them: real subprocesses, exact exit codes.

-s/-o, --output yaml, the stack `pulumi stack select` chose, fully-qualified stack names, --dry-run,
scale to 0, plan --detailed-exitcode, per-command help, shell completion, the mock-engine command,
quiet exits on a closed pipe (141) and Ctrl-C (130), progress only on a terminal.
"""
from __future__ import annotations

import copy
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
import yaml

from modelplane.api import locked_write
from terminal import run_with_terminal_stderr

REPO = Path(__file__).resolve().parent.parent
# A user's shell: no PYTHONDONTWRITEBYTECODE / PYTHONUNBUFFERED unless a test sets them; -P and
# PYTHONPATH: the checkout's code, whatever folder the command runs in.
BASE_ENV = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONUNBUFFERED")}
BASE_ENV["PYTHONPATH"] = str(REPO)


def command(*args: str) -> list[str]:
    return [sys.executable, "-P", "-m", "modelplane", *args]


def modelplane(*args: str, cwd: Path = REPO, env: dict | None = None, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(command(*args), cwd=cwd, capture_output=True, text=True, timeout=120,
                          env={**BASE_ENV, **(env or {})}, **kwargs)


def stack_copy(tmp_path: Path, edit=lambda text: text, name: str = "demo") -> Path:
    """A project folder holding a copy of the demo stack (edited), so that edits never touch the checkout."""
    project = tmp_path / "project"
    (project / "stacks").mkdir(parents=True, exist_ok=True)
    shutil.copy(REPO / "Pulumi.yaml", project / "Pulumi.yaml")
    path = project / "stacks" / f"Pulumi.{name}.yaml"
    path.write_text(edit((REPO / "stacks" / "Pulumi.demo.yaml").read_text()))
    return path


# --- -s / -o, yaml, fully-qualified stack names -----------------------------------------------------

def test_short_flags_and_yaml_output_say_what_json_says() -> None:
    as_json = modelplane("plan", "--stack", "demo", "--output", "json")
    as_yaml = modelplane("plan", "-s", "demo", "-o", "yaml")
    assert (as_json.returncode, as_yaml.returncode) == (0, 0)
    assert yaml.safe_load(as_yaml.stdout) == json.loads(as_json.stdout)
    sources_json = modelplane("sources", "-s", "demo", "-o", "json")
    sources_yaml = modelplane("sources", "-s", "demo", "-o", "yaml")
    assert (sources_json.returncode, sources_yaml.returncode) == (0, 0)
    assert yaml.safe_load(sources_yaml.stdout) == json.loads(sources_json.stdout)


@pytest.mark.parametrize("name", ["org/demo", "my-org/modelplane/demo"])
def test_a_fully_qualified_stack_name_reads_the_stack_file_of_its_last_part(name: str) -> None:
    plain = modelplane("validate", "--stack", "demo")
    qualified = modelplane("validate", "-s", name)
    assert (qualified.returncode, qualified.stdout, qualified.stderr) == (0, plain.stdout, "")
    assert qualified.stdout.startswith("valid: stacks/Pulumi.demo.yaml: ")


# --- the stack `pulumi stack select` chose ------------------------------------------------------------

def workspace_file(pulumi_home: Path, project: Path) -> Path:
    """Where the Pulumi CLI keeps a project's selected stack (sdk/go/common/workspace: settingsPath)."""
    digest = hashlib.sha1(str(project / "Pulumi.yaml").encode()).hexdigest()
    return pulumi_home / "workspaces" / f"modelplane-{digest}-workspace.json"


def test_without_stack_the_selected_stack_is_used(tmp_path: Path) -> None:
    path = stack_copy(tmp_path, name="staging")
    project = path.parent.parent
    home = tmp_path / "pulumi-home"
    selected = workspace_file(home, project)
    selected.parent.mkdir(parents=True)
    selected.write_text(json.dumps({"stack": "organization/modelplane/staging"}))
    result = modelplane("validate", cwd=project / "stacks", env={"PULUMI_HOME": str(home), "PWD": str(project / "stacks")})
    assert (result.returncode, result.stderr) == (0, "")
    assert result.stdout.startswith("valid: Pulumi.staging.yaml: ")
    # --stack still wins over the selection
    assert modelplane("validate", "-s", "demo", cwd=project, env={"PULUMI_HOME": str(home)}).returncode == 2


def test_without_stack_and_no_selection_exit_2_saying_how(tmp_path: Path) -> None:
    project = stack_copy(tmp_path).parent.parent
    home = tmp_path / "pulumi-home"
    result = modelplane("plan", cwd=project, env={"PULUMI_HOME": str(home), "PWD": str(project)})
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr == (
        "error: no stack given and none selected: pass -s/--stack NAME or --config FILE, or select one with "
        f"`pulumi stack select NAME` (recorded in {workspace_file(home, project)})\n")


# --- edits: --dry-run, scale to 0 ---------------------------------------------------------------------

def test_dry_run_prints_the_diff_and_changes_nothing(tmp_path: Path) -> None:
    path = stack_copy(tmp_path)
    before = path.read_bytes()
    result = modelplane("scale", "ml-team/mock-demo", "--replicas", "3", "-s", "demo", "--dry-run", cwd=path.parent.parent)
    assert (result.returncode, result.stderr) == (0, "")
    assert path.read_bytes() == before and sorted(os.listdir(path.parent)) == [path.name]
    lines = result.stdout.splitlines()
    assert lines[:3] == ["dry run: stacks/Pulumi.demo.yaml would change as follows; nothing written",
                         "--- stacks/Pulumi.demo.yaml", "+++ stacks/Pulumi.demo.yaml (edited)"]
    assert "-        replicas: 2" in lines and "+        replicas: 3" in lines
    assert lines[-1] == "next: the same command without --dry-run writes it"
    # drain too; and an edit that would be invalid is refused the same way as without --dry-run
    drain = modelplane("drain", "gpu-eu-west", "-s", "demo", "--dry-run", cwd=path.parent.parent)
    assert drain.returncode == 0 and "+        - {key: modelplane.ai/drain, effect: NoSchedule}" in drain.stdout.splitlines()
    bad = modelplane("scale", "ml-team/mock-demo", "--replicas", "11", "-s", "demo", "--dry-run", cwd=path.parent.parent)
    assert (bad.returncode, bad.stdout) == (2, "") and "must be at most 10 (got 11)" in bad.stderr
    assert path.read_bytes() == before


def test_scale_to_zero_parks_a_model(tmp_path: Path) -> None:
    path = stack_copy(tmp_path)
    result = modelplane("scale", "ml-team/mock-demo", "--replicas", "0", "-s", "demo", cwd=path.parent.parent)
    assert (result.returncode, result.stderr) == (0, "")
    assert "        replicas: 0\n" in path.read_text()
    assert "  ml-team/mock-demo: Scheduled 0 of 0 replicas (ReplicasScheduled=True ReplicasCreated)" in result.stdout
    plan = modelplane("plan", "-s", "demo", "--detailed-exitcode", cwd=path.parent.parent)
    assert plan.returncode == 0 and "Scheduled 0 of 0 replicas" in plan.stdout


# --- plan --detailed-exitcode -------------------------------------------------------------------------

def test_plan_detailed_exitcode(tmp_path: Path) -> None:
    short = stack_copy(tmp_path, lambda text: text.replace("        replicas: 2", "        replicas: 3"))
    assert modelplane("plan", "-s", "demo", "--detailed-exitcode").returncode == 0  # every replica placed
    without = modelplane("plan", "--config", str(short))
    assert without.returncode == 0 and "warning: " in without.stderr  # short, and plan alone still exits 0
    detailed = modelplane("plan", "--config", str(short), "--detailed-exitcode")
    assert (detailed.returncode, detailed.stdout, detailed.stderr) == (3, without.stdout, without.stderr)
    invalid = stack_copy(tmp_path, lambda text: text.replace("        replicas: 2", "        replicas: 12"), name="bad")
    assert modelplane("plan", "--config", str(invalid), "--detailed-exitcode").returncode == 2


# --- help, completion ---------------------------------------------------------------------------------

COMMANDS = ["validate", "plan", "explain", "render", "sources", "status", "scale", "drain", "undrain", "up", "preview",
            "mock-engine", "completion"]


@pytest.mark.parametrize("name", COMMANDS)
def test_every_command_has_a_description_examples_and_a_docs_page(name: str) -> None:
    result = modelplane(name, "--help")
    assert (result.returncode, result.stderr) == (0, "")
    text = result.stdout
    assert "\nexamples:\n  modelplane " in text or "\nexamples:\n  source <(modelplane" in text \
        or "\nexamples:\n  HOSTNAME=laptop modelplane" in text \
        or "\nexamples:\n  scripts/private-tmpdir.sh modelplane " in text  # the engine's kubeconfigs in a private folder
    docs = text.rstrip().splitlines()[-1]
    assert docs.startswith("docs: ") and docs.endswith(" in the modelplane checkout")
    assert (REPO / docs.split()[1]).is_file(), docs
    description = text.split("\n\n")[1]
    assert description and not description.startswith(("positional", "options")), text


def test_status_help_lists_every_kubeconfig_name_status_reads() -> None:
    from modelplane.status.command import KUBECONFIG_NAMES

    text = " ".join(modelplane("status", "--help").stdout.split())
    for pattern in KUBECONFIG_NAMES:
        assert pattern.format("<cluster>") in text


def bash_complete(script: Path, words: list[str], cwd: Path = REPO) -> list[str]:
    line = " ".join(f"'{w}'" for w in words)
    done = subprocess.run(["bash", "--norc", "--noprofile", "-c",
                           f'source {script}; COMP_WORDS=({line}); COMP_CWORD={len(words) - 1}; _modelplane; '
                           'printf "%s\\n" "${COMPREPLY[@]}"'],
                          cwd=cwd, capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


def test_bash_completion_completes_commands_options_values_and_stacks(tmp_path: Path) -> None:
    result = modelplane("completion", "bash")
    assert (result.returncode, result.stderr) == (0, "")
    script = tmp_path / "modelplane.bash"
    script.write_text(result.stdout)
    assert bash_complete(script, ["modelplane", "pl"]) == ["plan"]
    assert bash_complete(script, ["modelplane", ""]) == [*COMMANDS, "-h", "--help", "--version"]
    assert bash_complete(script, ["modelplane", "plan", "-o", ""]) == ["table", "json", "yaml"]
    assert bash_complete(script, ["modelplane", "status", "--output", ""]) == ["table", "json"]
    assert bash_complete(script, ["modelplane", "scale", "--dr"]) == ["--dry-run"]
    assert bash_complete(script, ["modelplane", "plan", "--detailed"]) == ["--detailed-exitcode"]
    assert bash_complete(script, ["modelplane", "completion", "f"]) == ["fish"]
    assert bash_complete(script, ["modelplane", "plan", "-s", ""]) == ["cloud", "demo"]
    assert bash_complete(script, ["modelplane", "plan", "-s", ""], cwd=REPO / "docs") == ["cloud", "demo"]
    assert bash_complete(script, ["modelplane", "plan", "-s", ""], cwd=tmp_path) == []  # no project here


def test_zsh_and_fish_completion_scripts() -> None:
    zsh = modelplane("completion", "zsh")
    assert zsh.returncode == 0 and zsh.stdout.startswith("#compdef modelplane\n")
    assert "bashcompinit" in zsh.stdout and "complete -o default -F _modelplane modelplane" in zsh.stdout
    fish = modelplane("completion", "fish")
    assert fish.returncode == 0
    lines = fish.stdout.splitlines()
    for name in COMMANDS:
        assert any(line.startswith("complete -c modelplane -n 'not __fish_seen_subcommand_from ")
                   and f" -a {name} -d " in line for line in lines), name
    assert ("complete -c modelplane -n '__fish_seen_subcommand_from plan' -s o -l output -x -a 'table json yaml' "
            "-d ''") in lines
    assert modelplane("completion", "tcsh").returncode == 2


# --- the mock engine as a subcommand; its start line through a pipe -----------------------------------

@pytest.mark.parametrize("args", [["mock-engine"], None], ids=["modelplane mock-engine", "python -m modelplane.mock_engine"])
def test_the_mock_engine_start_line_arrives_through_a_pipe(args) -> None:
    argv = (command(*args) if args else [sys.executable, "-P", "-m", "modelplane.mock_engine"]) + [
        "--host", "127.0.0.1", "--port", "0"]
    process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               env={**BASE_ENV, "HOSTNAME": "laptop", "MODEL_NAME": "mock"})
    try:
        deadline = time.monotonic() + 30
        import selectors
        with selectors.DefaultSelector() as selector:
            selector.register(process.stdout, selectors.EVENT_READ)
            assert selector.select(timeout=max(0.1, deadline - time.monotonic())), "no start line"
        line = process.stdout.readline()
        assert line.startswith("mock engine 'mock' on 127.0.0.1:") and line.endswith(" as pod laptop\n"), line
        port = int(line.split("127.0.0.1:")[1].split()[0])
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=10) as response:
            assert response.status == 200
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=30)
        finally:
            process.kill()
    assert process.returncode == 0 and "Traceback" not in process.stderr.read()


# --- a reader that left (141) and Ctrl-C (130): quiet --------------------------------------------------

@pytest.mark.parametrize("args, unbuffered", [
    (["plan", "-s", "demo"], False), (["plan", "-s", "demo"], True),
    (["sources", "-s", "demo", "-o", "json"], False), (["sources", "-s", "demo", "-o", "json"], True),
    (["plan", "--help"], False),  # unbuffered, argparse drops the failed write itself (exit 0, also quiet)
])
def test_a_closed_pipe_exits_141_quietly(args: list[str], unbuffered: bool) -> None:
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before the first byte, as with `| head -0`
    try:
        result = subprocess.run(command(*args), stdout=write_end, stderr=subprocess.PIPE, text=True, timeout=120,
                                env={**BASE_ENV, **({"PYTHONUNBUFFERED": "1"} if unbuffered else {})})
    finally:
        os.close(write_end)
    assert (result.returncode, result.stderr) == (141, "")


@pytest.mark.parametrize("unbuffered", [False, True], ids=["buffered", "PYTHONUNBUFFERED=1"])
def test_a_shell_pipeline_whose_reader_left_exits_141_quietly(tmp_path: Path, unbuffered: bool) -> None:
    """`modelplane ... | head -1`, with the reader gone by the time the command writes (the shell's own pipe)."""
    env = {**BASE_ENV, **({"PYTHONUNBUFFERED": "1"} if unbuffered else {})}
    for args in (["plan", "-s", "demo"], ["sources", "-s", "demo", "-o", "json"]):
        shell = f"{' '.join(command(*args))} 2>{tmp_path / 'err'} | head -c 0; echo ${{PIPESTATUS[0]}}"
        done = subprocess.run(["bash", "-c", shell], cwd=REPO, capture_output=True, text=True, timeout=120, env=env)
        assert done.stdout == "141\n" and done.stderr == ""
        assert (tmp_path / "err").read_text() == ""


def _has_open(pid: int, folder: Path) -> bool:
    try:
        return any(os.readlink(f"/proc/{pid}/fd/{fd}") == str(folder) for fd in os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return False


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc to see the command wait for the lock")
def test_ctrl_c_exits_130_quietly_and_changes_nothing(tmp_path: Path) -> None:
    path = stack_copy(tmp_path)
    before = path.read_bytes()
    with locked_write.locked(path):  # another edit is under way: the command waits for it
        process = subprocess.Popen(command("scale", "ml-team/mock-demo", "--replicas", "3", "--config", str(path)),
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=BASE_ENV)
        deadline = time.monotonic() + 60
        while not _has_open(process.pid, path.parent.resolve()) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _has_open(process.pid, path.parent.resolve()), "the command never waited for the lock"
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=60)
    assert (process.returncode, out, err) == (130, "", "")
    assert path.read_bytes() == before


# --- progress on a terminal only ---------------------------------------------------------------------

def test_render_shows_progress_on_a_terminal_and_nothing_otherwise(tmp_path: Path) -> None:
    quiet = modelplane("render", "-s", "demo", "--out", str(tmp_path / "a"))
    assert (quiet.returncode, quiet.stderr) == (0, "")
    done, text = run_with_terminal_stderr(command("render", "-s", "demo", "--out", str(tmp_path / "b")), cwd=REPO,
                                          timeout=120, env=BASE_ENV)
    assert done.returncode == 0 and done.stdout == quiet.stdout.replace(str(tmp_path / "a"), str(tmp_path / "b"))
    assert "render: reading and validating the stack..." in text and "render: rendering 2 workload clusters..." in text
    assert text.endswith("\r\x1b[K")  # the line is cleared before the result is printed


# --- a stack file importing Pulumi ESC environments ---------------------------------------------------

def test_an_esc_environment_import_is_named_as_not_seen(tmp_path: Path) -> None:
    path = stack_copy(tmp_path, lambda text: "environment:\n  - my-org/prod-secrets\n  - shared-tags\n" + text)
    result = modelplane("validate", "--config", str(path))
    assert result.returncode == 0 and result.stdout.startswith("valid: ")
    assert result.stderr == (
        f"warning: {path} imports Pulumi ESC environments (my-org/prod-secrets, shared-tags); modelplane reads only "
        "the file's own config:, so values those environments set are not seen here (`pulumi up` sees them): to "
        "check them, `pulumi config --show-secrets --json` shows the merged config\n")
    assert modelplane("validate", "-s", "demo").stderr == ""  # no import, no note
