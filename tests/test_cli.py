"""The command line as a user runs it: a real subprocess, exit codes, and what it prints."""
from __future__ import annotations

import subprocess
import sys

import pytest


def modelplane(repo, *args: str, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "modelplane", *args], cwd=cwd or repo,
                          capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("stack, summary", [
    ("demo", "valid: stacks/Pulumi.demo.yaml: 1 InferenceClass, 2 InferenceClusters, 1 InferenceGateway, "
             "1 ModelDeployment, 1 ModelService, 0 ModelCaches, 0 ModelEndpoints; 2 replicas requested"),
    ("cloud", "valid: stacks/Pulumi.cloud.yaml: 3 InferenceClasses, 3 InferenceClusters, 1 InferenceGateway, "
              "2 ModelDeployments, 2 ModelServices, 1 ModelCache, 1 ModelEndpoint; 3 replicas requested"),
])
def test_example_stacks_are_valid(repo, stack, summary):
    result = modelplane(repo, "validate", "--stack", stack)
    assert (result.returncode, result.stdout.strip(), result.stderr) == (0, summary, "")


def test_config_file_from_anywhere(repo, tmp_path):
    result = modelplane(repo, "validate", "--config", str(repo / "stacks" / "Pulumi.demo.yaml"), cwd=tmp_path)
    assert result.returncode == 0 and "2 replicas requested" in result.stdout


def test_errors_carry_path_line_and_exit_2(repo, tmp_path):
    bad = tmp_path / "Pulumi.bad.yaml"
    text = (repo / "stacks" / "Pulumi.demo.yaml").read_text().replace("replicas: 2", "replicas: 12")
    bad.write_text(text)
    line = next(i for i, l in enumerate(text.splitlines(), 1) if "replicas: 12" in l)
    result = modelplane(repo, "validate", "--config", str(bad))
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.splitlines() == [
        f"error: 1 error in {bad}:",
        f"  modelplane:modelDeployments.ml-team.mock-demo.replicas: must be at most 10 (got 12)  [{bad}:{line}]"]


@pytest.mark.parametrize("args, message", [
    (["validate", "--stack", "nope"], "error: stack file "),
    (["validate", "--config", "/nonexistent/Pulumi.x.yaml"], "error: stack file /nonexistent/Pulumi.x.yaml does not exist"),
])
def test_missing_stack_is_a_clear_error(repo, args, message):
    result = modelplane(repo, *args)
    assert result.returncode == 2 and result.stderr.startswith(message) and "Traceback" not in result.stderr


def test_stack_outside_a_project_needs_config(repo, tmp_path):
    result = modelplane(repo, "validate", "--stack", "demo", cwd=tmp_path)
    assert result.returncode == 2 and "no Pulumi.yaml here or above" in result.stderr


def test_invalid_yaml_names_the_line(repo, tmp_path):
    bad = tmp_path / "Pulumi.bad.yaml"
    bad.write_text("config:\n  modelplane:inferenceClasses: {a: [\n")
    result = modelplane(repo, "validate", "--config", str(bad))
    assert result.returncode == 2 and "is not valid YAML at line" in result.stderr and "Traceback" not in result.stderr


def test_warnings_go_to_stderr_and_keep_exit_0(repo, tmp_path):
    stack = tmp_path / "Pulumi.w.yaml"
    stack.write_text((repo / "stacks" / "Pulumi.demo.yaml").read_text().replace(
        "replicas: 2\n        template:\n          spec:\n",
        "replicas: 2\n        template:\n          spec:\n            clusterSelector: {matchLabels: {tier: gold}}\n"))
    result = modelplane(repo, "validate", "--config", str(stack))
    assert result.returncode == 0
    assert result.stderr.startswith("warning: modelplane:modelDeployments.ml-team.mock-demo.template.spec.clusterSelector: "
                                    "no InferenceCluster has the labels tier=gold")


def test_console_script_is_installed(repo):
    script = subprocess.run([sys.executable, "-c", "import shutil, sys, os; "
                             "print(shutil.which('modelplane', path=os.path.dirname(sys.executable)))"],
                            capture_output=True, text=True).stdout.strip()
    assert script != "None", "pip install -r requirements.txt installs the `modelplane` command"
    result = subprocess.run([script, "validate", "--stack", "demo"], cwd=repo, capture_output=True, text=True)
    assert result.returncode == 0


def test_plan_demo_places_one_replica_per_region(repo):
    result = modelplane(repo, "plan", "--stack", "demo")
    assert result.returncode == 0 and result.stderr == ""
    lines = result.stdout.splitlines()
    assert lines[0] == "ml-team/mock-demo: Scheduled 2 of 2 replicas (ReplicasScheduled=True ReplicasCreated)"
    assert lines[2].split() == ["mock-demo-be445", "gpu-eu-west", "0", "gpu-eu-west", "1", "new"]
    assert lines[3].split() == ["mock-demo-49b71", "gpu-us-east", "0", "gpu-us-east", "1", "new"]


def test_plan_json_round_trips_through_previous(repo, tmp_path):
    first = modelplane(repo, "plan", "--stack", "demo", "--output", "json")
    previous = tmp_path / "prev.json"
    previous.write_text(first.stdout)
    second = modelplane(repo, "plan", "--stack", "demo", "--output", "json", "--previous", str(previous))
    assert first.returncode == second.returncode == 0 and first.stdout == second.stdout


def test_explain_gives_a_verdict_per_cluster(repo):
    result = modelplane(repo, "explain", "ml-team/mock-demo", "--stack", "demo")
    assert result.returncode == 0
    assert result.stdout.splitlines()[-1] == "0/2 clusters are available: 2 insufficient capacity (needs 1 gpu, 0 free)"


@pytest.mark.parametrize("args, message", [
    (["explain", "ml-team/mock", "--stack", "demo"], "error: no ModelDeployment ml-team/mock (write NAMESPACE/NAME); "
                                                      "did you mean ml-team/mock-demo?"),
    (["plan", "--stack", "demo", "--previous", "/nonexistent.json"], "error: previous placement /nonexistent.json does not exist"),
])
def test_plan_and_explain_bad_input(repo, args, message):
    result = modelplane(repo, *args)
    assert result.returncode == 2 and result.stderr.strip() == message


def test_previous_that_is_not_a_placement(repo, tmp_path):
    bad = tmp_path / "prev.json"
    bad.write_text('{"replicas": [{"cluster": 3}]}')
    result = modelplane(repo, "plan", "--stack", "demo", "--previous", str(bad))
    assert result.returncode == 2 and "is not a placement document" in result.stderr and "Traceback" not in result.stderr
    bad.write_text("not json")
    result = modelplane(repo, "plan", "--stack", "demo", "--previous", str(bad))
    assert result.returncode == 2 and "is not JSON" in result.stderr


DEMO_SELECTOR = 'device.capacity["gpu.example.com"].memory.compareTo(quantity("20Gi")) >= 0'
SELECTOR_PATH = ("modelplane:modelDeployments.ml-team.mock-demo.template.spec.engines[0].members[0].nodeSelector"
                 ".devices[0].selectors[0].cel")


# A stock Kubernetes 1.34 API server refuses these new selectors (alpha gates off by default; measured on
# v1.34.3: 422 "undefined field 'allowMultipleAllocations'"), so validate/plan/explain must refuse them
# before `pulumi up` does.
@pytest.mark.parametrize("command, selector, refused", [
    ("validate", "device.allowMultipleAllocations == false", "undefined field 'allowMultipleAllocations'"),
    ("validate", f"{DEMO_SELECTOR} && !device.allowMultipleAllocations", "undefined field 'allowMultipleAllocations'"),
    ("validate", "has(device.allowMultipleAllocations)", "undefined field 'allowMultipleAllocations'"),
    ("validate", 'device.attributes["gpu.example.com"].model.includes("h100")', "undeclared reference to 'includes'"),
    ("plan", "device.allowMultipleAllocations", "undefined field 'allowMultipleAllocations'"),
    ("explain", "device.allowMultipleAllocations", "undefined field 'allowMultipleAllocations'"),
])
def test_selector_needing_an_alpha_gate_is_a_config_error(repo, tmp_path, command, selector, refused):
    gate = "DRAListTypeAttributes" if "includes" in refused else "DRAConsumableCapacity"
    stack = tmp_path / "Pulumi.gated.yaml"
    text = (repo / "stacks" / "Pulumi.demo.yaml").read_text()
    assert f"cel: {DEMO_SELECTOR}\n" in text
    text = text.replace(f"cel: {DEMO_SELECTOR}\n", f"cel: '{selector}'\n")
    stack.write_text(text)
    line = next(i for i, l in enumerate(text.splitlines(), 1) if f"cel: '{selector}'" in l)
    args = ["explain", "ml-team/mock-demo"] if command == "explain" else [command]
    result = modelplane(repo, *args, "--config", str(stack))
    assert result.returncode == 2 and result.stdout == "" and "Traceback" not in result.stderr, result.stderr
    lines = result.stderr.splitlines()
    assert lines[0] == f"error: 1 error in {stack}:"
    assert lines[1].startswith(f"  {SELECTOR_PATH}: CEL compile error: {refused}: ")
    assert f"needs the {gate} feature gate" in lines[1] and "off by default" in lines[1]
    assert lines[2:] == [f"      {selector}  [{stack}:{line}]"]
