"""`modelplane scale | drain | undrain`: in-place stack file edits that change only the intended lines.

The commands run as a user runs them (a subprocess, on copies of the example stacks); the layouts
the examples do not have (flow mappings, CRLF, no final newline, ...) are covered on the pure
editing functions in `modelplane.runbook`.
"""
from __future__ import annotations

import difflib
import json
import os
import subprocess
import sys

import pytest
import yaml

from modelplane import runbook
from modelplane.api import locked_write
from modelplane.api import ConfigError, ModelplaneError

DRAIN = "modelplane.ai/drain"


def modelplane(repo, *args, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "modelplane", *map(str, args)], cwd=cwd or repo,
                          capture_output=True, text=True, timeout=60)


def copy_stack(repo, tmp_path, stack: str):
    path = tmp_path / f"Pulumi.{stack}.yaml"
    path.write_bytes((repo / "stacks" / f"Pulumi.{stack}.yaml").read_bytes())
    return path


def hunks(before: str, after: str) -> list[tuple[str, list[str], list[str], str]]:
    """Every changed region: (tag, old lines, new lines, the unchanged line just before it)."""
    old, new = before.splitlines(), after.splitlines()
    found = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(a=old, b=new, autojunk=False).get_opcodes():
        if tag != "equal":
            found.append((tag, old[i1:i2], new[j1:j2], old[i1 - 1] if i1 else ""))
    return found


def comments(text: str) -> list[str]:
    return [line for line in text.splitlines() if "#" in line]


# --- each command changes exactly its lines ------------------------------------------------------

NODE_POOL = "        - {name: gpu-eu-west, className: synthetic-gpu, nodeCount: 1}"
CASES = [
    ("demo", ["scale", "ml-team/mock-demo", "--replicas", "1"],
     [("replace", ["        replicas: 2"], ["        replicas: 1"], "      mock-demo:")]),
    ("demo", ["drain", "gpu-eu-west"],
     [("insert", [], ["      taints:", f"        - {{key: {DRAIN}, effect: NoSchedule}}"], NODE_POOL)]),
    ("demo", ["drain", "gpu-us-east", "--effect", "NoExecute", "--key", "example.com/maintenance"],
     [("insert", [], ["      taints:", "        - {key: example.com/maintenance, effect: NoExecute}"],
       "        - {name: gpu-us-east, className: synthetic-gpu, nodeCount: 1}")]),
    ("cloud", ["scale", "ml-team/qwen3-8b", "--replicas", "4"],
     [("replace", ["        replicas: 2"], ["        replicas: 4"], "      qwen3-8b:")]),
    ("cloud", ["scale", "ml-team/llama-70b", "--replicas", "2"],
     [("replace", ["        replicas: 1"], ["        replicas: 2"],
       "      llama-70b:                      # one replica = a leader and a worker node, 16 H100s")]),
    # after a flow mapping that spans two lines
    ("cloud", ["drain", "aws-us-east", "--effect", "NoExecute"],
     [("insert", [], ["      taints:", f"        - {{key: {DRAIN}, effect: NoExecute}}"],
       "           zones: [us-east-1a], fabric: {type: EFA}}")]),
    # the last cluster, before a blank line
    ("cloud", ["drain", "azure-eu-west"],
     [("insert", [], ["      taints:", f"        - {{key: {DRAIN}, effect: NoSchedule}}"],
       '        - {name: a100, className: a100-aks, nodeCount: 2, minNodeCount: 1, maxNodeCount: 3, zones: ["1", "2"]}')]),
]


@pytest.mark.slow  # processes per case
@pytest.mark.parametrize("stack, args, expected", CASES, ids=[" ".join([s, *a]) for s, a, _ in CASES])
def test_a_command_changes_only_its_lines(repo, tmp_path, stack, args, expected):
    path = copy_stack(repo, tmp_path, stack)
    before = path.read_text()
    result = modelplane(repo, *args, "--config", path)
    assert result.returncode == 0, result.stderr
    after = path.read_text()
    assert hunks(before, after) == expected
    assert comments(after) == comments(before)
    assert after.endswith("\n") and sorted(os.listdir(tmp_path)) == [path.name]  # no temporary file left behind
    assert modelplane(repo, "validate", "--config", path).returncode == 0


def test_scale_prints_the_change_the_pulumi_command_the_plan_and_the_next_step(repo, tmp_path):
    (tmp_path / "Pulumi.yaml").write_text((repo / "Pulumi.yaml").read_text())
    (tmp_path / "stacks").mkdir()
    copy_stack(repo, tmp_path / "stacks", "demo")
    result = modelplane(repo, "scale", "ml-team/mock-demo", "--replicas", "1", "--stack", "demo", cwd=tmp_path)
    assert (result.returncode, result.stderr) == (0, "")
    assert result.stdout.splitlines() == [
        "edited stacks/Pulumi.demo.yaml:",
        "  modelplane:modelDeployments.ml-team.mock-demo.replicas: 2 -> 1",
        "the same edit with the Pulumi CLI:",
        "  pulumi config set --stack demo --path 'modelplane:modelDeployments.ml-team.mock-demo.replicas' 1",
        "plan as a first deployment (no --previous placement given):",
        "  ml-team/mock-demo: Scheduled 1 of 1 replicas (ReplicasScheduled=True ReplicasCreated)",
        "    mock-demo-be445 on gpu-eu-west (new)",
        "next: pulumi up --stack demo  "
        "(to preview the placement offline: modelplane plan --stack demo --previous <placement.json>)",
    ]


@pytest.mark.slow  # processes per case
def test_secure_values_are_kept(repo, tmp_path):
    path = copy_stack(repo, tmp_path, "demo")
    text = path.read_text().replace(
        "        source: Kind\n        kind: {clusterName: modelplane-us-east}\n",
        "        source: Existing\n        existing:\n          kubeconfig:\n"
        "            secure: v1:Yk3n0aR7cGxQ2w==:AAABAJ7xqg1gnRfLcm3fJfbY8mX8J0sD\n")
    path.write_text(text)
    assert modelplane(repo, "validate", "--config", path).returncode == 0
    drained = modelplane(repo, "drain", "gpu-us-east", "--effect", "NoExecute", "--config", path)
    assert drained.returncode == 0, drained.stderr
    assert [h[0] for h in hunks(text, path.read_text())] == ["insert"]
    assert modelplane(repo, "undrain", "gpu-us-east", "--config", path).returncode == 0
    assert path.read_text() == text


# --- errors: exit 2, the file byte for byte as it was ---------------------------------------------

ERRORS = [
    (["scale", "ml-team/mock", "--replicas", "1"],
     "  modelplane:modelDeployments.ml-team.mock: no ModelDeployment ml-team/mock; did you mean mock-demo? "
     "(ModelDeployments in ml-team: mock-demo)  [{file}:47]"),
    (["scale", "ml-tem/mock-demo", "--replicas", "1"],
     "  modelplane:modelDeployments.ml-tem: no ModelDeployments in namespace ml-tem; did you mean ml-team? "
     "(namespaces: ml-team)  [{file}:46]"),
    (["scale", "ml-team/mock-demo", "--replicas", "-3"],  # 0 is allowed: it parks the model
     "  modelplane:modelDeployments.ml-team.mock-demo.replicas: must be at least 0 (got -3)  [{file}:48]"),
    (["scale", "ml-team/mock-demo", "--replicas", "11"],
     "  modelplane:modelDeployments.ml-team.mock-demo.replicas: must be at most 10 (got 11)  [{file}:48]"),
    (["drain", "gpu-eu-wst"],
     "  modelplane:inferenceClusters.gpu-eu-wst: no InferenceCluster gpu-eu-wst; did you mean gpu-eu-west? "
     "(InferenceClusters: gpu-eu-west, gpu-us-east)  [{file}:17]"),
    (["undrain", "control"],
     "  modelplane:inferenceClusters.control: no InferenceCluster control "
     "(InferenceClusters: gpu-eu-west, gpu-us-east)  [{file}:17]"),
    (["drain", "gpu-eu-west", "--key", "not a key"],
     "  modelplane:inferenceClusters.gpu-eu-west.taints[0].key: must be alphanumerics, '-', '_' or '.', starting and "
     "ending with an alphanumeric (optionally prefixed 'example.com/')  [{file}:18]"),
]


@pytest.mark.slow  # processes per case
@pytest.mark.parametrize("args, issue", ERRORS, ids=[" ".join(a) for a, _ in ERRORS])
def test_errors_exit_2_and_leave_the_file_alone(repo, tmp_path, args, issue):
    path = copy_stack(repo, tmp_path, "demo")
    before = path.read_bytes()
    result = modelplane(repo, *args, "--config", path)
    assert (result.returncode, result.stdout) == (2, "")
    lines = result.stderr.splitlines()
    assert lines[:2] == [f"error: 1 error in {path}:", issue.format(file=path)]
    assert "Traceback" not in result.stderr
    assert path.read_bytes() == before and os.listdir(tmp_path) == [path.name]


@pytest.mark.parametrize("args, message", [
    (["scale", "mock-demo", "--replicas", "1"],
     "error: write the deployment as NAMESPACE/NAME (got 'mock-demo'); did you mean ml-team/mock-demo?"),
    (["scale", "ml-team/mock-demo", "--replicas", "1", "--previous", "/nonexistent.json"],
     "error: previous placement /nonexistent.json does not exist"),
])
def test_bad_arguments_exit_2_and_leave_the_file_alone(repo, tmp_path, args, message):
    path = copy_stack(repo, tmp_path, "demo")
    before = path.read_bytes()
    result = modelplane(repo, *args, "--config", path)
    assert (result.returncode, result.stderr.strip()) == (2, message)
    assert path.read_bytes() == before


def test_an_invalid_edit_says_nothing_was_written(repo, tmp_path):
    path = copy_stack(repo, tmp_path, "demo")
    result = modelplane(repo, "scale", "ml-team/mock-demo", "--replicas", "-1", "--config", path)
    assert result.stderr.splitlines()[-1] == (f"nothing written: the edit would make the stack invalid; "
                                              f"{path} is unchanged")


# --- drain twice, undrain ------------------------------------------------------------------------

def taints(path) -> list | None:
    config = yaml.safe_load(path.read_text())["config"]
    return config["modelplane:inferenceClusters"]["gpu-eu-west"].get("taints")


@pytest.mark.slow  # processes per case
def test_drain_escalates_one_taint_and_undrain_restores_the_file(repo, tmp_path):
    path = copy_stack(repo, tmp_path, "demo")
    original = path.read_bytes()

    first = modelplane(repo, "drain", "gpu-eu-west", "--config", path)
    assert first.returncode == 0 and taints(path) == [{"key": DRAIN, "effect": "NoSchedule"}]

    second = modelplane(repo, "drain", "gpu-eu-west", "--effect", "NoExecute", "--config", path)
    assert second.returncode == 0 and taints(path) == [{"key": DRAIN, "effect": "NoExecute"}]
    assert "  modelplane:inferenceClusters.gpu-eu-west.taints[0].effect: NoSchedule -> NoExecute" in second.stdout
    assert (f"  pulumi config set --stack demo --config-file {path} "
            "--path 'modelplane:inferenceClusters.gpu-eu-west.taints[0].effect' NoExecute") in second.stdout

    again = modelplane(repo, "drain", "gpu-eu-west", "--effect", "NoExecute", "--config", path)
    assert again.returncode == 0 and again.stdout.strip() == (
        f"{path}: gpu-eu-west is already drained: modelplane:inferenceClusters.gpu-eu-west.taints[0] is "
        f"{DRAIN}:NoExecute; nothing changed")

    undrained = modelplane(repo, "undrain", "gpu-eu-west", "--config", path)
    assert undrained.returncode == 0 and taints(path) is None
    assert "  pulumi config rm --stack demo --config-file" in undrained.stdout
    assert path.read_bytes() == original

    noop = modelplane(repo, "undrain", "gpu-eu-west", "--config", path)
    assert (noop.returncode, noop.stdout.strip()) == (0, f"{path}: gpu-eu-west is not drained (it has no taints); "
                                                         "nothing changed")
    assert path.read_bytes() == original


# --- the seed's drain story, through the commands ---------------------------------------------------

class Story:
    def __init__(self, repo, tmp_path):
        self.repo, self.tmp = repo, tmp_path
        self.file = tmp_path / "Pulumi.story.yaml"
        self.file.write_text((repo / "stacks" / "Pulumi.demo.yaml").read_text())
        self.step = 0
        self.previous = None

    def run(self, *args) -> list[str]:
        extra = ["--previous", self.previous] if self.previous else []
        result = modelplane(self.repo, *args, "--config", self.file, *extra)
        assert result.returncode == 0, result.stderr
        return result.stdout.splitlines()

    def plan(self) -> dict:
        lines = self.run("plan", "--output", "json")
        self.step += 1
        self.previous = self.tmp / f"placement-{self.step}.json"
        self.previous.write_text("\n".join(lines) + "\n")
        return json.loads(self.previous.read_text())


def placed(document: dict) -> list[tuple[str, str, int]]:
    return sorted((r["name"], r["cluster"], r["index"]) for r in document["replicas"])


def condition(document: dict) -> dict:
    return document["deployments"][0]["conditions"][0]


@pytest.mark.slow  # processes per case
def test_drain_story_through_the_commands(repo, tmp_path):
    story = Story(repo, tmp_path)
    original = story.file.read_bytes()
    first = story.plan()
    assert placed(first) == [("mock-demo-49b71", "gpu-us-east", 0), ("mock-demo-be445", "gpu-eu-west", 0)]

    out = story.run("scale", "ml-team/mock-demo", "--replicas", "1")
    assert out[1] == "  modelplane:modelDeployments.ml-team.mock-demo.replicas: 2 -> 1"
    assert "  ml-team/mock-demo: Scheduled 1 of 1 replicas (ReplicasScheduled=True ReplicasCreated)" in out
    scaled = story.plan()
    assert placed(scaled) == [("mock-demo-be445", "gpu-eu-west", 0)]

    out = story.run("drain", "gpu-eu-west", "--effect", "NoExecute")
    assert out[1] == f"  modelplane:inferenceClusters.gpu-eu-west.taints: (none) -> [{{key: {DRAIN}, effect: NoExecute}}]"
    assert out[5:10] == [
        f"plan against {story.previous}:",
        "  ml-team/mock-demo: Scheduled 1 of 1 replicas (ReplicasScheduled=True ReplicasCreated)",
        "    mock-demo-49b71 on gpu-us-east (new)",
        f"    mock-demo-be445 leaves gpu-eu-west: evicted by taint {DRAIN} (NoExecute)",
        "  gpu-eu-west: 0 replicas (gpu-eu-west 0/1 devices)"]
    drained = story.plan()
    assert placed(drained) == [("mock-demo-49b71", "gpu-us-east", 0)]  # moved to us-east

    out = story.run("scale", "ml-team/mock-demo", "--replicas", "2")
    assert "  ml-team/mock-demo: Scheduled 1 of 2 replicas (ReplicasScheduled=False InsufficientCapacity)" in out
    assert ("    0/2 clusters are available: 1 insufficient capacity (needs 1 gpu, 0 free), "
            f"1 untolerated taint {DRAIN} (NoExecute)") in out
    short = story.plan()
    assert placed(short) == [("mock-demo-49b71", "gpu-us-east", 0)]
    assert condition(short) == {"type": "ReplicasScheduled", "status": "False", "reason": "InsufficientCapacity",
                                "message": "Scheduled 1 of 2 replicas"}

    out = story.run("undrain", "gpu-eu-west")
    assert "  gpu-eu-west: 1 replica (gpu-eu-west 1/1 devices)" in out
    refilled = story.plan()
    assert placed(refilled) == [("mock-demo-49b71", "gpu-us-east", 0), ("mock-demo-be445", "gpu-eu-west", 0)]
    assert set(placed(short)) <= set(placed(refilled))  # nothing that was running moved
    assert condition(refilled)["status"] == "True"
    assert story.file.read_bytes() == original  # scale 2 -> 1 -> 2 and drain/undrain: back to the same bytes


# --- layouts the example stacks do not have (the pure editing functions) ----------------------------

def cluster_file(body: str, newline: str = "\n") -> str:
    return ("config:\n  modelplane:inferenceClusters:\n" + body).replace("\n", newline)


LAYOUTS = [
    ("flow cluster", cluster_file("    a: {cluster: {source: Kind}}  # note\n"),
     [("replace", ["    a: {cluster: {source: Kind}}  # note"],
       [f"    a: {{cluster: {{source: Kind}}, taints: [{{key: {DRAIN}, effect: NoExecute}}]}}  # note"], "")]),
    ("flow taints", cluster_file("    a:\n      taints: [{key: other, effect: NoSchedule}]\n      cluster: {source: Kind}\n"),
     [("replace", ["      taints: [{key: other, effect: NoSchedule}]"],
       [f"      taints: [{{key: other, effect: NoSchedule}}, {{key: {DRAIN}, effect: NoExecute}}]"], "")]),
    ("indentless sequence", cluster_file("    a:\n      nodePools:\n      - {name: p, className: c}\n"),
     [("insert", [], ["      taints:", f"      - {{key: {DRAIN}, effect: NoExecute}}"], "")]),
    ("block taints, comments", cluster_file("    a:\n      taints:\n        # maintenance window\n"
                                            "        - key: other   # keep\n          effect: NoSchedule\n"
                                            "      cluster: {source: Kind}\n"),
     [("insert", [], [f"        - {{key: {DRAIN}, effect: NoExecute}}"], "")]),
    ("no final newline", cluster_file("    a:\n      cluster:\n        source: Kind").rstrip("\n"),
     [("insert", [], ["      taints:", f"        - {{key: {DRAIN}, effect: NoExecute}}"], "")]),
    ("CRLF", cluster_file("    a:\n      cluster: {source: Kind}\n\n  # tail\n", "\r\n"),
     [("insert", [], ["      taints:", f"        - {{key: {DRAIN}, effect: NoExecute}}"], "")]),
]


@pytest.mark.parametrize("text, expected", [(t, e) for _, t, e in LAYOUTS], ids=[n for n, _, _ in LAYOUTS])
def test_drain_and_undrain_keep_any_layout(text, expected):
    drained = runbook.drain(text, "a", "NoExecute")
    assert [(tag, old, new) for tag, old, new, _ in hunks(text, drained.text)] == [e[:3] for e in expected]
    assert drained.text.endswith("\r\n" if "\r\n" in text else "\n") == text.endswith("\n")
    assert ("\r\n" in text) == (drained.text.count("\n") == drained.text.count("\r\n"))
    assert runbook.undrain(drained.text, "a").text == text


def test_a_quoted_effect_stays_quoted():
    text = cluster_file('    a:\n      taints:\n        - {key: "modelplane.ai/drain", effect: "NoSchedule"}\n')
    edit = runbook.drain(text, "a", "NoExecute")
    assert edit.text == text.replace('"NoSchedule"', '"NoExecute"')
    assert [str(c) for c in edit.changes] == ["modelplane:inferenceClusters.a.taints[0].effect: NoSchedule -> NoExecute"]


def test_undrain_removes_only_its_taints():
    text = cluster_file(f"    a:\n      taints:\n        - {{key: {DRAIN}, effect: NoSchedule}}\n"
                        f"        - {{key: other, effect: NoSchedule}}\n        - {{key: {DRAIN}, effect: NoExecute}}\n")
    edit = runbook.undrain(text, "a")
    assert edit.text == cluster_file("    a:\n      taints:\n        - {key: other, effect: NoSchedule}\n")
    assert [" ".join(c.words()) for c in edit.commands] == [
        "rm --path modelplane:inferenceClusters.a.taints[2]", "rm --path modelplane:inferenceClusters.a.taints[0]"]
    assert runbook.undrain(edit.text, "a").note == f"a is not drained (no taint {DRAIN}; its taints: other:NoSchedule)"


def test_a_key_yaml_1_1_would_read_as_a_bool_is_quoted():
    edit = runbook.drain(cluster_file("    a:\n      cluster: {source: Kind}\n"), "a", key="on")
    assert '        - {key: "on", effect: NoSchedule}' in edit.text.splitlines()


def test_scale_adds_a_missing_replicas_key_in_the_file_style():
    text = "config:\n  modelplane:modelDeployments:\n    ns:\n      d:\n        template: {spec: {}}\n"
    edit = runbook.scale(text, "ns/d", 3)
    assert edit.text == text + "        replicas: 3\n"
    assert [str(c) for c in edit.changes] == ["modelplane:modelDeployments.ns.d.replicas: (none) -> 3"]


def test_an_edit_that_would_change_other_values_is_refused():
    text = ("config:\n  shared: &n 2\n  modelplane:modelDeployments:\n    ns:\n      d:\n        replicas: *n\n")
    with pytest.raises(ModelplaneError, match="nothing written"):
        runbook.scale(text, "ns/d", 3)


@pytest.mark.parametrize("call", [
    lambda text: runbook.scale(text, "ns/x", 1),
    lambda text: runbook.drain(text, "nope"),
    lambda text: runbook.undrain(text, "nope"),
])
def test_unknown_targets_are_config_errors(call):
    text = "config:\n  modelplane:modelDeployments:\n    ns:\n      d: {replicas: 1}\n"
    with pytest.raises(ConfigError) as error:
        call(text)
    assert len(error.value.issues) == 1


def test_write_atomically_leaves_the_file_alone_when_the_check_fails(tmp_path):
    path = tmp_path / "Pulumi.x.yaml"
    path.write_text("old\n")
    path.chmod(0o640)

    def refuse(temp):
        assert temp.read_text() == "new\n" and temp.parent == tmp_path
        raise ModelplaneError("no")

    with pytest.raises(ModelplaneError):
        locked_write.write_atomically(path, "new\n", "old\n", refuse)
    assert path.read_text() == "old\n" and os.listdir(tmp_path) == [path.name]
    assert locked_write.write_atomically(path, "new\n", "old\n", lambda temp: "ok") == "ok"
    assert path.read_text() == "new\n" and oct(path.stat().st_mode & 0o777) == "0o640"
    with pytest.raises(ModelplaneError, match="changed while it was being edited"):
        locked_write.write_atomically(path, "newer\n", "old\n", lambda temp: None)
    assert path.read_text() == "new\n" and os.listdir(tmp_path) == [path.name]


def test_runbook_stays_out_of_pulumi_and_infra():
    from source_imports import PACKAGE, imports_of

    for name in imports_of(PACKAGE / "runbook.py") | imports_of(PACKAGE / "yaml_splice.py"):
        assert not name.startswith(("pulumi", "modelplane.infra", "modelplane.cli")), name
