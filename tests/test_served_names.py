"""Which model name each engine answers, the one name per ModelService the front door sends, and what
`validate` refuses: a routed engine whose name cannot be read, or a service whose engines answer different names."""
from __future__ import annotations

import copy
import re
import subprocess
import sys

import pytest
import yaml

from builders import demo_deployment, demo_member, fleet_config
from builders import REPO
from modelplane.api import ConfigError, NamespacedName, load_fleet
from modelplane.api.served_names import engine_model_name, service_engine_names
from modelplane.api.stackfile import read_stack_file
from modelplane.render import render_fleet
from modelplane.scheduling import schedule

MOCK_SOURCE = (REPO / "modelplane" / "mock_engine.py").read_text()
GATEWAY = {"clusterName": "control", "cluster": {"source": "Kind"}}
ENGINE0 = "modelplane:modelDeployments.ml-team.{}.template.spec.engines[0].members[{}].template.spec.containers[0].args"


@pytest.mark.parametrize("command, args, name", [
    # vLLM's --served-model-name: one name or several (it answers all and reports the first); SGLang's takes one
    (None, ["--served-model-name=qwen3-8b", "--max-model-len=16384"], "qwen3-8b"),
    (None, ["--served-model-name", "qwen3-8b", "--max-model-len=16384"], "qwen3-8b"),
    (None, ["--served-model-name", "first", "second", "--port", "8000"], "first"),
    (None, ["--model=meta-llama/Llama-3.3-70B-Instruct", "--served-model-name=llama"], "llama"),
    # else the model the engine loads: --model (vLLM), --model-path (SGLang), the positional of `vllm serve`
    (None, ["--model=meta-llama/Llama-3.3-70B-Instruct", "--tensor-parallel-size=8"], "meta-llama/Llama-3.3-70B-Instruct"),
    (None, ["--model", "Qwen/Qwen3-8B"], "Qwen/Qwen3-8B"),
    (["python3", "-m", "sglang.launch_server"], ["--model-path", "Qwen/Qwen3-8B", "--port", "8000"], "Qwen/Qwen3-8B"),
    (["python3", "-m", "sglang.launch_server"], ["--model-path=Qwen/Qwen3-8B", "--served-model-name=qwen"], "qwen"),
    (["vllm", "serve", "Qwen/Qwen3-8B"], ["--tensor-parallel-size=2"], "Qwen/Qwen3-8B"),
    (["/usr/local/bin/vllm", "serve"], ["Qwen/Qwen3-8B"], "Qwen/Qwen3-8B"),
    (["vllm", "serve", "Qwen/Qwen3-8B"], ["--model=other"], "Qwen/Qwen3-8B"),  # vLLM: the positional wins
    (["vllm", "serve", "Qwen/Qwen3-8B"], ["--served-model-name", "chat"], "chat"),
    (None, ["--model=a", "--model=b"], "b"),  # argparse: the last of a repeated flag
    (None, ["--served-model-name=a", "--served-model-name", "b", "c"], "b"),
    # the demo: a program's source after `python -c` (it mentions the flag, but not as an argument of its own)
    (["python", "-u", "-c"], [MOCK_SOURCE, "--served-model-name", "mock"], "mock"),
    # nothing to read: the image's own default, a shell, a flag without its value
    (None, None, None),
    (None, ["--tensor-parallel-size=8"], None),
    (["python", "-m", "http.server", "8000"], None, None),
    (["python", "-u", "-c"], [MOCK_SOURCE], None),
    # a shell runs the engine: its script is the command line
    (["sh", "-c"], ["exec vllm serve Qwen/Qwen3-8B --served-model-name 'qwen 3'  # comment"], "qwen 3"),
    (["/bin/bash", "-ec", "python3 -m sglang.launch_server --model-path Qwen/Qwen3-8B"], None, "Qwen/Qwen3-8B"),
    (["sh", "-c", "vllm serve Qwen/Qwen3-8B"], ["--served-model-name=not-the-engines"], "Qwen/Qwen3-8B"),
    (["sh", "-c", "vllm serve 'unbalanced"], None, None),
    (["sh", "-c", "vllm serve $MODEL"], None, None),
    # a name the kubelet or the shell would substitute is not the name
    (None, ["--served-model-name=$(MODEL_NAME)"], None),
    (["vllm", "serve", "--port", "8000"], None, None),
    (None, ["--served-model-name="], None),
    (None, ["--served-model-name", "--port", "8000"], None),
    (None, ["--model"], None),
])
def test_engine_model_name(command, args, name):
    assert engine_model_name(command, args) == name


def engine(args=None, command=None, **extra) -> dict:
    body = demo_member(**extra)
    container = body["template"]["spec"]["containers"][0]
    container.pop("args", None)
    if args is not None:
        container["args"] = args
    if command is not None:
        container["command"] = command
    return body


def served(*members, replicas=1, **spec) -> dict:
    return demo_deployment(replicas=replicas, members=list(members), **spec)


def fleet_with(deployments: dict, services: dict | None = None, **more) -> dict:
    """The builders' fleet with a front door, `deployments` in ml-team and a service per deployment unless given."""
    services = services if services is not None else {
        name: {"endpoints": [{"selector": {"matchLabels": {"modelplane.ai/deployment": name}}}]} for name in deployments}
    return fleet_config(inferenceGateway=copy.deepcopy(GATEWAY), modelDeployments={"ml-team": deployments},
                        modelServices={"ml-team": services}, **more)


def issues_of(config: dict) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        load_fleet(config)
    return [str(issue) for issue in caught.value.issues]


CACHE = {"modelCaches": {"ml-team": {"weights": {"source": "HuggingFace", "huggingFace": {"repo": "Qwen/Qwen3-8B", "sizeGiB": 20}}}}}


def gang(leader_args=None, worker_args=None, worker_first=False) -> list[dict]:
    leader, worker = engine(leader_args, role="Leader"), engine(worker_args, role="Worker", worker={"nodes": 1})
    return [worker, leader] if worker_first else [leader, worker]


@pytest.mark.parametrize("deployments, more, expected", [
    ({"chat": served(engine(["--served-model-name=qwen3-8b"]))}, {}, {"chat": "qwen3-8b"}),
    # a ModelCache with no --model of the user's: the engine loads (and answers) the cache's mount, as rendered
    ({"chat": served(engine([]), modelCacheRef={"name": "weights"})}, CACHE, {"chat": "/mnt/models"}),
    ({"chat": served(engine(["--served-model-name=qwen"]), modelCacheRef={"name": "weights"})}, CACHE, {"chat": "qwen"}),
    ({"chat": served(engine(["--model=Qwen/Qwen3-8B"]), modelCacheRef={"name": "weights"})}, CACHE,
     {"chat": "Qwen/Qwen3-8B"}),
    # a Leader + Worker gang: the leader's pod serves HTTP, whichever member comes first
    ({"llama": served(*gang(["--model=meta-llama/Llama-3.3-70B-Instruct"]))}, {},
     {"llama": "meta-llama/Llama-3.3-70B-Instruct"}),
    ({"llama": served(*gang(["--model=meta-llama/Llama-3.3-70B-Instruct"], worker_first=True))}, {},
     {"llama": "meta-llama/Llama-3.3-70B-Instruct"}),
])
def test_service_engine_names(deployments, more, expected):
    fleet = load_fleet(fleet_with(deployments, **more))
    assert service_engine_names(fleet) == {NamespacedName("ml-team", k): v for k, v in expected.items()}


def test_a_service_reaching_several_deployments_by_a_shared_label_gets_their_one_name():
    labelled = {"template": {"metadata": {"labels": {"app.example.com/model": "qwen"}}}}
    deployments = {name: served(engine(["--served-model-name=qwen"])) for name in ("eu", "us")}
    for body in deployments.values():
        body["template"]["metadata"] = copy.deepcopy(labelled["template"]["metadata"])
    services = {"chat": {"endpoints": [{"selector": {"matchLabels": {"app.example.com/model": "qwen"}}}]},
                "only-eu": {"endpoints": [{"selector": {"matchLabels": {"modelplane.ai/deployment": "eu"}}}]}}
    fleet = load_fleet(fleet_with(deployments, services))
    assert service_engine_names(fleet) == {NamespacedName("ml-team", "chat"): "qwen",
                                           NamespacedName("ml-team", "only-eu"): "qwen"}


def test_a_service_of_only_hand_made_endpoints_has_no_engine_name():
    config = fleet_with({"chat": served(engine())}, {"saas": {"endpoints": [
        {"selector": {"matchLabels": {"provider": "saas"}}}]}})
    config["modelEndpoints"] = {"ml-team": {"saas": {"url": "https://api.example.com/", "labels": {"provider": "saas"}}}}
    assert service_engine_names(load_fleet(config)) == {}  # and the engine nobody routes to needs no name


def unnamed(deployment: str, member: int, services: str, suggestion: str) -> str:
    return (f"{ENGINE0.format(deployment, member)}: the front door sends this engine the requests for ModelService "
            f"{services}, but the model name it answers cannot be read from its command and args (no "
            "--served-model-name, --model or `vllm serve <model>` with a literal name); add "
            f"--served-model-name={suggestion} to the engine's command line (the name it answers; the front door "
            "rewrites each request's `model` to it)")


@pytest.mark.parametrize("deployments, services, expected", [
    ({"x": served(engine())}, None, [unnamed("x", 0, "ml-team/x", "x")]),
    ({"x": served(engine(command=["python", "-m", "http.server", "8000"]))},
     {"chat": {"alias": "qwen", "endpoints": [{"selector": {"matchLabels": {"modelplane.ai/deployment": "x"}}}]}},
     [unnamed("x", 0, "ml-team/chat", "qwen")]),
    # the gang's leader names no model (the worker's flags are not what answers)
    ({"x": served(*gang(None, ["--model=meta-llama/Llama-3.3-70B-Instruct"], worker_first=True))}, None,
     [unnamed("x", 1, "ml-team/x", "x")]),
])
def test_validate_refuses_a_routed_engine_without_a_name(deployments, services, expected):
    assert issues_of(fleet_with(deployments, services)) == expected


def test_validate_refuses_a_service_whose_engines_answer_different_names():
    deployments = {"eu": served(engine(["--served-model-name=qwen3-8b"])), "us": served(engine(["--model=Qwen/Qwen3-8B"]))}
    for body in deployments.values():
        body["template"]["metadata"] = {"labels": {"app.example.com/model": "qwen"}}
    services = {"chat": {"endpoints": [{"selector": {"matchLabels": {"app.example.com/model": "qwen"}}}]}}
    assert issues_of(fleet_with(deployments, services)) == [
        "modelplane:modelServices.ml-team.chat: routes to engines that answer different model names (ModelDeployment "
        "ml-team/eu answers 'qwen3-8b', ModelDeployment ml-team/us answers 'Qwen/Qwen3-8B'); the front door rewrites "
        "a request's `model` to one name per service: start these engines with one --served-model-name (vLLM and "
        "SGLang take it besides --model)"]


def test_engines_of_one_deployment_must_answer_one_name_too():
    config = fleet_with({"pd": served(engine(["--served-model-name=a"]), serving={"mode": "PrefillDecode"})})
    engines = config["modelDeployments"]["ml-team"]["pd"]["template"]["spec"]["engines"]
    engines[0]["phase"] = "Prefill"
    engines.append({"name": "decode", "phase": "Decode", "members": [engine(["--served-model-name=b"])]})
    [issue] = issues_of(config)
    assert issue.startswith("modelplane:modelServices.ml-team.pd: routes to engines that answer different model names "
                            "(ModelDeployment ml-team/pd (engine 'main') answers 'a', ModelDeployment ml-team/pd "
                            "(engine 'decode') answers 'b'); ")


def test_one_engine_without_a_name_is_reported_once_naming_every_service():
    services = {name: {"endpoints": [{"selector": {"matchLabels": {"modelplane.ai/deployment": "x"}}}]}
                for name in ("a", "b")}
    assert issues_of(fleet_with({"x": served(engine())}, services)) == [unnamed("x", 0, "ml-team/a, ml-team/b", "a")]


@pytest.mark.parametrize("stack, expected", [
    ("demo", {"ml-team/mock": "mock"}),
    ("cloud", {"ml-team/chat": "qwen3-8b", "ml-team/llama": "meta-llama/Llama-3.3-70B-Instruct"}),
])
def test_every_routed_name_of_the_shipped_stacks_reaches_an_engine(stack, expected):
    fleet = load_fleet(read_stack_file(REPO / "stacks" / f"Pulumi.{stack}.yaml").config)
    assert {str(k): v for k, v in service_engine_names(fleet).items()} == expected
    assert set(map(str, service_engine_names(fleet))) == {str(k) for k in fleet.model_services}


@pytest.mark.parametrize("stack", ["demo", "cloud"])
def test_the_name_is_read_from_the_containers_as_rendered(stack):
    """The serving container of every rendered replica answers the name the front door sends its service."""
    fleet = load_fleet(read_stack_file(REPO / "stacks" / f"Pulumi.{stack}.yaml").config)
    names = {key.name: name for key, name in service_engine_names(fleet).items()}
    by_deployment = {"mock-demo": names.get("mock"), "qwen3-8b": names.get("chat"), "llama-70b": names.get("llama")}
    seen = set()
    for cluster in render_fleet(fleet, schedule(fleet)):
        for obj in cluster.objects:
            if obj["kind"] == "Deployment" and "modelplane.ai/serving" in obj["spec"]["template"]["metadata"]["labels"]:
                pod = obj["spec"]["template"]["spec"]
            elif obj["kind"] == "LeaderWorkerSet":
                pod = obj["spec"]["leaderWorkerTemplate"]["leaderTemplate"]["spec"]
            else:
                continue
            deployment_name = obj["metadata"]["labels"]["modelplane.ai/deployment"]
            container = pod["containers"][0]
            assert engine_model_name(container.get("command"), container.get("args")) == by_deployment[deployment_name]
            seen.add(deployment_name)
    assert seen == {k for k in by_deployment if NamespacedName("ml-team", k) in fleet.model_deployments}


# --- through the command line, as a user runs it ----------------------------------------------------------------

def validate(path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "modelplane", "validate", "--config", str(path)], cwd=REPO,
                          capture_output=True, text=True, timeout=60)


def without_line_suffix(stderr: str) -> list[str]:
    return [re.sub(r"  \[[^\]]*:\d+\]$", "", line) for line in stderr.splitlines()]


def test_the_demo_engine_without_its_name_is_refused_with_exit_2(tmp_path):
    text = (REPO / "stacks" / "Pulumi.demo.yaml").read_text()
    assert text.count("- --served-model-name\n") == 1
    bad = tmp_path / "Pulumi.bad.yaml"
    bad.write_text(text.replace("- --served-model-name\n", "").replace("                              - mock\n", ""))
    result = validate(bad)
    assert (result.returncode, result.stdout) == (2, "")
    assert without_line_suffix(result.stderr) == [f"error: 1 error in {bad}:",
                                                  "  " + unnamed("mock-demo", 0, "ml-team/mock", "mock")]


def test_the_cloud_stack_with_engines_of_two_names_is_refused_with_exit_2(tmp_path):
    document = yaml.safe_load((REPO / "stacks" / "Pulumi.cloud.yaml").read_text())
    deployments = document["config"]["modelplane:modelDeployments"]["ml-team"]
    deployments["llama-70b"]["template"]["metadata"]["labels"]["app.example.com/model"] = "qwen3-8b"  # chat reaches it
    document["config"]["modelplane:modelServices"]["ml-team"]["chat"]["endpoints"][0]["selector"]["matchLabels"] = {
        "app.example.com/model": "qwen3-8b"}
    del document["config"]["modelplane:modelServices"]["ml-team"]["llama"]
    bad = tmp_path / "Pulumi.bad.yaml"
    bad.write_text(yaml.safe_dump(document, sort_keys=False))
    result = validate(bad)
    assert (result.returncode, result.stdout) == (2, "")
    assert without_line_suffix(result.stderr) == [
        f"error: 1 error in {bad}:",
        "  modelplane:modelServices.ml-team.chat: routes to engines that answer different model names (ModelDeployment "
        "ml-team/llama-70b answers 'meta-llama/Llama-3.3-70B-Instruct', ModelDeployment ml-team/qwen3-8b answers "
        "'qwen3-8b'); the front door rewrites a request's `model` to one name per service: start these engines with "
        "one --served-model-name (vLLM and SGLang take it besides --model)"]
