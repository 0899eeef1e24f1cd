"""`modelplane up` leaves the unchanged workload clusters out of an update (modelplane/unchanged_clusters.py,
modelplane/infra/skip.py): what it decides from the stack's history and state, and what the program then
registers, under the suite's recording mocks."""
from __future__ import annotations

import copy
import json
import sys
from pathlib import Path

import pulumi
import pytest

from modelplane.api import load_fleet
from modelplane.cli_up import fleet_from_config
from modelplane.code_digest import code_digest
from modelplane.infra import program, skip
from modelplane.render.fingerprint import skippable_clusters, workload_fingerprints
from modelplane.unchanged_clusters import OUTPUT, SECRET_SIG, decide, glob_matcher, revealed, root_outputs, update_message
from program_run import deploy, set_stack_config
from pulumi.runtime.settings import get_root_resource
from pulumi.runtime.sync_await import _sync_await

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from bench_scheduler import synthetic_fleet  # noqa: E402

STACK_PREFIX = "urn:pulumi:stack::project::"
NONCE = "0123456789ab"
ENDED = "2026-12-05T18:00:10.000Z"


def fleet_config(clusters: int = 3, deployments: int = 6) -> dict:
    """Existing workload clusters, a front door on a cluster of its own, a ModelService per deployment."""
    config = json.loads(json.dumps(synthetic_fleet(clusters, deployments)).replace("gpu.nvidia.com", "gpu.example.com"))
    for name, cluster in config["inferenceClusters"].items():
        cluster["cluster"] = {"source": "Existing", "existing": {"kubeconfig": f"kubeconfig of {name}"}}
    config["inferenceGateway"] = {
        "clusterName": "control",
        "cluster": {"source": "Existing", "existing": {"kubeconfig": "kubeconfig of control"}},
        "backend": "EnvoyGateway",
    }
    config["modelServices"] = {
        ns: {name: {"endpoints": [{"selector": {"matchLabels": {"modelplane.ai/deployment": name}}}]} for name in names}
        for ns, names in config["modelDeployments"].items()
    }
    return config


def fingerprints(config: dict, previous=None) -> dict[str, str]:
    fleet = load_fleet(config)
    return workload_fingerprints(fleet, program.plan(fleet, previous), code_digest())


def secret(value) -> dict:
    """A secret as `pulumi stack export --show-secrets` writes it."""
    return {SECRET_SIG: "1b47061264138c4ac30d75fd1eb44270", "plaintext": json.dumps(value)}


def export_of(deployed, outputs: dict) -> dict:
    """What `pulumi stack export --show-secrets` would show after that update: every registration, the root's
    outputs (the secret ones as the CLI writes them)."""
    shown = {key: secret(value) if key in (OUTPUT, "kubeconfigs") else value for key, value in outputs.items()}
    resources = [{"urn": f"{STACK_PREFIX}pulumi:pulumi:Stack::project-stack", "type": "pulumi:pulumi:Stack",
                  "outputs": shown}]
    for r in deployed.seen.all:  # a component keeps no provider in state (a remote one, yaml/v2's ConfigFile, neither)
        provider = _in_stack(r.provider or "") if r.custom else ""
        resources.append({"urn": _in_stack(r.urn), "type": r.type, "custom": r.custom, "provider": provider,
                          "parent": _in_stack(r.parent or "")})
    return {"deployment": {"manifest": {"time": "2026-12-05T18:00:09.5Z"}, "resources": resources}}


def _in_stack(urn: str) -> str:
    """A mock's URN as the engine writes it: this test's stack and project, no root stack in the type chain."""
    if not urn:
        return urn
    _, _, rest = urn.split("::", 2)
    return STACK_PREFIX + rest.removeprefix("pulumi:pulumi:Stack$")


READ_PREVIOUS_OUTPUTS = program.previous_outputs
LAST_UPDATE = {"kind": "update", "result": "succeeded", "message": update_message(NONCE), "endTime": ENDED}


# --- the fingerprints -----------------------------------------------------------------------------------------


def test_each_cluster_has_its_own_fingerprint_and_the_front_door_none():
    config = fleet_config()
    prints = fingerprints(config)
    assert set(prints) == {"cluster-0000", "cluster-0001", "cluster-0002"}  # the front door's cluster is never left out
    assert len(set(prints.values())) == 3
    assert prints == fingerprints(copy.deepcopy(config))  # the same config, the same fingerprints


@pytest.mark.parametrize("edit, changed", [
    (lambda c: c["inferenceClusters"]["cluster-0001"]["cluster"]["existing"].update(kubeconfig="rotated"),
     {"cluster-0001"}),
    (lambda c: c["inferenceClusters"]["cluster-0002"].setdefault("labels", {}).update(team="a"), {"cluster-0002"}),
    (lambda c: c["inferenceGateway"].update(backend="EnvoyGateway"), set()),
])
def test_a_change_to_one_cluster_changes_only_its_fingerprint(edit, changed):
    config = fleet_config()
    before = fingerprints(config)
    edit(config)
    after = fingerprints(config)
    assert {name for name in before if before[name] != after[name]} == changed


def test_a_replica_that_moves_changes_both_clusters(monkeypatch):
    config = fleet_config()
    fleet = load_fleet(config)
    placed = program.plan(fleet, None)
    cluster = sorted({r.cluster for r in placed.replicas()})[0]
    config["inferenceClusters"][cluster]["taints"] = [
        {"key": "modelplane.ai/drain", "value": "true", "effect": "NoExecute"}]
    before, after = fingerprints(fleet_config(), None), fingerprints(config, placed.document_data())
    moved = {name for name in before if before[name] != after[name]}
    assert cluster in moved and len(moved) >= 2


def test_the_fleet_modelplane_up_reads_is_the_programs():
    config = fleet_config()
    entries = {f"modelplane:{key}": {"value": json.dumps(value), "secret": key == "inferenceClusters"}
               for key, value in config.items()}
    from_cli = fleet_from_config(entries)
    assert workload_fingerprints(from_cli, program.plan(from_cli, None), "x") == workload_fingerprints(
        load_fleet(config), program.plan(load_fleet(config), None), "x")


# --- the decision ----------------------------------------------------------------------------------------------


def _state(recorded: dict[str, str], update: str = NONCE, **deployment) -> dict:
    root = {"urn": f"{STACK_PREFIX}pulumi:pulumi:Stack::project-stack", "type": "pulumi:pulumi:Stack",
            "outputs": {OUTPUT: secret({"update": update, "clusters": recorded})}}
    return {"deployment": {"manifest": {"time": "2026-12-05T18:00:09.9Z"}, "resources": [root], **deployment}}


@pytest.mark.parametrize("last, state, why", [
    (None, _state({"a": "1"}), "no update yet"),
    ({**LAST_UPDATE, "message": "by hand"}, _state({"a": "1"}), "not made by `modelplane up`"),
    ({**LAST_UPDATE, "kind": "refresh"}, _state({"a": "1"}), "not made by `modelplane up`"),
    ({**LAST_UPDATE, "result": "failed"}, _state({"a": "1"}), "the last update failed"),
    (LAST_UPDATE, _state({"a": "1"}, pending_operations=[{"type": "updating"}]), "pending operations"),
    (LAST_UPDATE, {"deployment": {**_state({"a": "1"})["deployment"], "manifest": {"time": "2026-12-05T18:05:00Z"}}},
     "written after the last update"),
    (LAST_UPDATE, _state({"a": "1"}, update="ffffffffffff"), "not the last update's"),
])
def test_fingerprints_are_trusted_only_after_a_clean_modelplane_up(last, state, why):
    decision = decide({"a": "1"}, {}, last, state)
    assert decision.skip == {} and decision.exclude == []
    assert why in decision.notes[0]


def test_an_unchanged_cluster_is_left_out_and_a_changed_one_is_not():
    decision = decide({"a": "1", "b": "2", "c": "3"}, {"a": ["ml/r-0"]}, LAST_UPDATE,
                      _state({"a": "1", "b": "changed"}))
    assert decision.skip == {"a": "1"}
    assert f"{STACK_PREFIX}**::a/**" in decision.exclude
    assert f"{STACK_PREFIX}modelplane:index:ModelReplica::ml/r-0" in decision.exclude
    assert "1 unchanged clusters left out of this update: a" in decision.summary()


def _resource(urn_tail: str, provider: str = "", parent: str = "") -> dict:
    return {"urn": STACK_PREFIX + urn_tail, "provider": provider and STACK_PREFIX + provider + "::id",
            "parent": parent and STACK_PREFIX + parent}


CLUSTER_A = [
    _resource("modelplane:index:InferenceCluster::a"),
    _resource("modelplane:index:InferenceCluster$pulumi:providers:kubernetes::a",
              parent="modelplane:index:InferenceCluster::a"),
    _resource("modelplane:index:InferenceCluster$modelplane:index:ServingStack::a",
              parent="modelplane:index:InferenceCluster::a"),
    _resource("modelplane:index:InferenceCluster$modelplane:index:ServingStack$kubernetes:yaml/v2:ConfigFile::a/crds",
              parent="modelplane:index:InferenceCluster$modelplane:index:ServingStack::a"),
    _resource("modelplane:index:InferenceCluster$modelplane:index:ServingStack$kubernetes:yaml/v2:ConfigFile"
              "$kubernetes:apiextensions.k8s.io/v1:CustomResourceDefinition::a:pools.example.com",
              provider="modelplane:index:InferenceCluster$pulumi:providers:kubernetes::a",
              parent="modelplane:index:InferenceCluster$modelplane:index:ServingStack$kubernetes:yaml/v2:ConfigFile::a/crds"),
    _resource("modelplane:index:ModelReplica::ml/r-0"),
    _resource("modelplane:index:ModelReplica$kubernetes:apps/v1:Deployment::a/apps/v1/Deployment/ml/r-0",
              provider="modelplane:index:InferenceCluster$pulumi:providers:kubernetes::a",
              parent="modelplane:index:ModelReplica::ml/r-0"),
]


@pytest.mark.parametrize("extra, skipped, note", [
    ([], {"a": "1"}, None),
    # managed through the cluster's provider, but named otherwise: the engine would delete it if it were left out
    ([_resource("modelplane:index:ModelCache$kubernetes:core/v1:PersistentVolumeClaim::cache-volume",
                provider="modelplane:index:InferenceCluster$pulumi:providers:kubernetes::a")], {}, "is not named after"),
    # another cluster's replica in a namespace named like the cluster: excluding it would hide its changes
    ([_resource("modelplane:index:ModelReplica::a/r-1"),
      _resource("modelplane:index:ModelReplica$kubernetes:apps/v1:Deployment::b/apps/v1/Deployment/a/r-1",
                provider="modelplane:index:InferenceCluster$pulumi:providers:kubernetes::b",
                parent="modelplane:index:ModelReplica::a/r-1")], {}, "is named like the cluster's resources"),
])
def test_a_cluster_is_left_out_only_when_the_exclusions_name_exactly_its_resources(extra, skipped, note):
    state = _state({"a": "1"})
    state["deployment"]["resources"] += CLUSTER_A + extra
    decision = decide({"a": "1"}, {"a": ["ml/r-0"]}, LAST_UPDATE, state)
    assert decision.skip == skipped
    assert (note is None and not decision.notes) or note in decision.notes[0]
    if skipped:  # every resource of the cluster is excluded, the CRD named `<cluster>:<name>` included
        matchers = [glob_matcher(p) for p in decision.exclude]
        assert all(any(m.match(r["urn"]) for m in matchers) for r in CLUSTER_A)


@pytest.mark.parametrize("pattern, urn, matches", [
    ("urn:pulumi:s::p::**::a/**", "urn:pulumi:s::p::x$y::a/ns/name", True),
    ("urn:pulumi:s::p::**::a/**", "urn:pulumi:s::p::x$y::ab/ns/name", False),
    ("urn:pulumi:s::p::*::a", "urn:pulumi:s::p::x$y::a", True),
    ("urn:pulumi:s::p::*::a", "urn:pulumi:s::p::x::y::a", False),  # '*' stops at ':'
])
def test_globs_read_as_the_engine_reads_them(pattern, urn, matches):
    assert bool(glob_matcher(pattern).match(urn)) is matches


# --- the program under mocks -------------------------------------------------------------------------------------


def _up(monitor, mocks, monkeypatch, config, run: skip.UpRun | None, previous=None, recorded=None):
    # As the engine reports them: the outputs are secret as a whole once one of them is (`kubeconfigs`).
    monkeypatch.setattr(program, "previous_outputs", lambda: pulumi.Output.secret(READ_PREVIOUS_OUTPUTS()))
    if run is None:
        monkeypatch.delenv(skip.ENV, raising=False)
    else:
        monkeypatch.setenv(skip.ENV, run.to_env())
    return deploy(monitor, mocks, config, previous=previous, recorded=recorded)


def test_a_plain_pulumi_up_records_no_fingerprints(monitor, mocks, monkeypatch):
    deployed = _up(monitor, mocks, monkeypatch, fleet_config(), None)
    assert OUTPUT not in deployed.outputs


def test_modelplane_up_leaves_out_exactly_what_it_excludes(monitor, mocks, monkeypatch):
    config = fleet_config()
    full = _up(monitor, mocks, monkeypatch, config, skip.UpRun(NONCE))
    recorded = full.outputs[OUTPUT]
    assert recorded == {"update": NONCE, "clusters": fingerprints(config)}
    state = export_of(full, {**full.outputs})
    replicas: dict[str, list[str]] = {}
    for r in full.result.replicas():
        replicas.setdefault(r.cluster, []).append(f"{r.key.namespace}/{r.name}")
    decision = decide(fingerprints(config, full.result.document_data()), replicas, LAST_UPDATE, state)
    assert sorted(decision.skip) == skippable_clusters(load_fleet(config)), decision.notes

    assert decision.trusted == NONCE
    previous_outputs = {key: value for key, value in full.outputs.items() if key != "placement"}
    left_out = _up(monitor, mocks, monkeypatch, config, skip.UpRun("ba9876543210", decision.skip, decision.trusted),
                   previous=full.result, recorded=previous_outputs)
    assert not _sync_await(get_root_resource().outputs["placement"].is_secret())  # the plan stays readable
    now = {_in_stack(r.urn) for r in left_out.seen.all}
    before = {_in_stack(r.urn) for r in full.seen.all}
    matchers = [glob_matcher(p) for p in decision.exclude]
    # what the program no longer registers, the engine keeps: every one of them is excluded
    assert {urn for urn in before - now if not any(m.match(urn) for m in matchers)} == set()
    # and nothing it registers is new: the front door's endpoints and routes are the same resources
    assert now <= before
    assert not any(m.match(urn) for m in matchers for urn in now if "ModelCache::" not in urn)
    assert left_out.outputs["clusters"] == full.outputs["clusters"]
    assert left_out.outputs["kubeconfigs"] == full.outputs["kubeconfigs"]
    assert left_out.outputs[OUTPUT] == {"update": "ba9876543210", "clusters": recorded["clusters"]}


@pytest.mark.parametrize("stale", ["fingerprint", "another update"])
def test_a_cluster_that_changed_after_the_decision_stops_the_update(monitor, mocks, monkeypatch, stale):
    config = fleet_config()
    full = _up(monitor, mocks, monkeypatch, config, skip.UpRun(NONCE))
    decided = dict(full.outputs[OUTPUT]["clusters"])
    if stale == "fingerprint":  # the config changed between the decision and the engine's start
        decided = {name: "0" * 64 for name in decided}
    else:  # another update ran in between: the engine reports what it recorded, not what the decision read
        full.outputs[OUTPUT] = {**full.outputs[OUTPUT], "update": "fedcba987654"}
    monkeypatch.setenv(skip.ENV, skip.UpRun("ba9876543210", decided, NONCE).to_env())
    mocks.created.clear()
    mocks.stack_outputs = {**full.outputs, "placement": full.outputs["placement"]}
    set_stack_config(config)
    with pytest.raises(pulumi.RunError, match="changed after `modelplane up` decided"):
        program.run()
    assert not [c for c in mocks.created if c.startswith("kubernetes:")]


def test_secrets_in_the_exported_state_are_read_decoded():
    state = {"deployment": {"resources": [{"type": "pulumi:pulumi:Stack", "outputs": {
        "placement": {"replicas": []}, OUTPUT: secret({"update": NONCE, "clusters": {"a": "1"}}),
        "kubeconfigs": {"a": secret("text")}}}]}}
    assert root_outputs(state) == {"placement": {"replicas": []}, OUTPUT: {"update": NONCE, "clusters": {"a": "1"}},
                                   "kubeconfigs": {"a": "text"}}
    assert revealed([secret(1), {SECRET_SIG: "x"}]) == [1, None]  # a secret export did not reveal reads as absent


def test_the_variable_must_be_what_modelplane_up_sets():
    with pytest.raises(pulumi.RunError, match="MODELPLANE_UP is not what"):
        skip.from_environment({skip.ENV: "{not json"})
    assert skip.from_environment({}) is None
    run = skip.UpRun("n", {"a": "1"}, "t")
    assert skip.from_environment({skip.ENV: run.to_env()}) == run


# --- the command ------------------------------------------------------------------------------------------------

FAKE_PULUMI = """#!/usr/bin/env python3
import json, os, sys
folder = os.path.dirname(os.path.abspath(__file__))
args = sys.argv[1:]
with open(os.path.join(folder, "calls"), "a") as calls:
    calls.write(json.dumps(args) + "\\n")
for name, words in (("history", ["stack", "history"]), ("state", ["stack", "export"]), ("config", ["config"])):
    if args[:len(words)] == words:
        sys.stdout.write(open(os.path.join(folder, name + ".json")).read())
        sys.exit(0)
sys.exit(3)  # `up`: what the real CLI would have returned, passed on
"""


def _project(tmp_path: Path, config: dict, state: dict, last_update: dict) -> tuple[Path, Path]:
    project = tmp_path / "project"
    (project / "stacks").mkdir(parents=True)
    (project / "Pulumi.yaml").write_text("name: modelplane\nruntime: python\nstackConfigDir: stacks\n")
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "pulumi").write_text(FAKE_PULUMI)
    (fake / "pulumi").chmod(0o755)
    (fake / "history.json").write_text(json.dumps([last_update]))
    (fake / "state.json").write_text(json.dumps(state))
    entries = {f"modelplane:{key}": {"value": json.dumps(value), "secret": key == "inferenceClusters"}
               for key, value in config.items()}
    (fake / "config.json").write_text(json.dumps(entries))
    return project, fake


def _modelplane(project: Path, fake: Path, *args: str):
    import subprocess

    env = {**__import__("os").environ, "MODELPLANE_PULUMI": str(fake / "pulumi")}
    return subprocess.run([sys.executable, "-m", "modelplane", *args], cwd=project, env=env, capture_output=True,
                          text=True, timeout=120)


def test_modelplane_up_runs_pulumi_up_with_the_exclusions_and_the_users_flags(tmp_path):
    config = fleet_config()
    state = _state(fingerprints(config))
    project, fake = _project(tmp_path, config, state, LAST_UPDATE)
    result = _modelplane(project, fake, "up", "-s", "prod", "-m", "scale up", "--", "--yes", "--parallel", "16")
    assert result.returncode == 3, result.stderr  # pulumi's own exit code
    calls = [json.loads(line) for line in (fake / "calls").read_text().splitlines()]
    up = next(call for call in calls if call[0] == "up")
    assert up[:5] == ["up", "--stack", "prod", "--exec-kind", "auto.inline"]
    assert up[-3:] == ["--yes", "--parallel", "16"] and up[-4].startswith("--client=127.0.0.1:")
    message = up[up.index("--message") + 1]
    assert message.startswith("scale up [modelplane up ") and message.endswith("]")
    excluded = [up[i + 1] for i, word in enumerate(up) if word == "--exclude"]
    assert f"{STACK_PREFIX}**::cluster-0001/**" in excluded
    assert "3 unchanged clusters left out of this update: cluster-0000, cluster-0001, cluster-0002" in result.stderr
    reads = [call for call in calls if call[0] != "up"]
    assert all("--stack" in call and "prod" in call for call in reads)


@pytest.mark.parametrize("flags, note", [
    (["--full"], "--full given: no cluster is left out"),
    (["--", "--target", "urn:x"], "--target given: no cluster is left out"),
    (["--", "--config=modelplane:token=s3cret"], "--config given: no cluster is left out"),
])
def test_a_full_update_excludes_nothing_and_reads_nothing(tmp_path, flags, note):
    config = fleet_config()
    project, fake = _project(tmp_path, config, _state(fingerprints(config)), LAST_UPDATE)
    result = _modelplane(project, fake, "up", "-s", "prod", *flags)
    calls = [json.loads(line) for line in (fake / "calls").read_text().splitlines()]
    assert [call[0] for call in calls] == ["up"] and "--exclude" not in calls[0]
    assert note in result.stderr and "every cluster is in this update" in result.stderr
    assert "s3cret" not in result.stdout + result.stderr


def test_the_message_goes_through_modelplane_so_that_it_keeps_its_mark(tmp_path):
    config = fleet_config()
    project, fake = _project(tmp_path, config, _state(fingerprints(config)), LAST_UPDATE)
    result = _modelplane(project, fake, "up", "-s", "prod", "--", "--message", "mine")
    assert result.returncode == 2 and "`modelplane up -m MESSAGE`" in result.stderr
    assert not (fake / "calls").exists()


def test_without_the_pulumi_sdk_the_command_says_what_to_install(monkeypatch):
    from modelplane import cli_up
    from modelplane.unchanged_clusters import Decision

    monkeypatch.setitem(sys.modules, "modelplane.infra.serve", None)  # an import of it fails, as without pulumi
    with pytest.raises(cli_up.UpError, match=r"needs the Pulumi SDK .*pip install \."):
        cli_up.run_pulumi("pulumi", "up", "prod", Path("."), Decision(), [], None)


def test_a_stack_that_cannot_be_read_changes_nothing(tmp_path):
    config = fleet_config()
    project, fake = _project(tmp_path, config, _state(fingerprints(config)), LAST_UPDATE)
    (fake / "state.json").write_text("not json")
    result = _modelplane(project, fake, "up", "-s", "prod")
    assert result.returncode == 2
    assert "`pulumi stack export --stack prod` printed something that is not JSON; nothing was changed" in result.stderr
    calls = [json.loads(line) for line in (fake / "calls").read_text().splitlines()]
    assert "up" not in [call[0] for call in calls]
