"""`PULUMI_SKIP_CHECKPOINTS` is taken for updates that only change replicas and refused for one that builds.

With the variable the engine saves state once, at the end: an interrupted `up` leaves the previous
state, and the next `up` applies again what the interrupted one created. Kubernetes objects are
adopted (server-side apply); a cluster or a Helm release would be created a second time. So the
program compares each cluster's infrastructure fingerprint (its source and rendered stack) with the
one the last `up` recorded (the `infrastructure` output), and stops before registering anything.
"""
from __future__ import annotations

import copy

import pulumi
import pytest

from program_run import deploy, set_stack_config, stack_config
from modelplane.api import load_fleet
from modelplane.infra import checkpoints, program
from modelplane.render.fingerprint import infrastructure_fingerprints


def _demo() -> dict:
    return copy.deepcopy(stack_config("demo"))


def _scale(config: dict) -> None:
    config["modelDeployments"]["ml-team"]["mock-demo"]["replicas"] = 1


def _drain(config: dict) -> None:
    cluster = config["inferenceClusters"]["gpu-eu-west"]
    cluster["taints"] = [*cluster.get("taints", []), {"key": "modelplane.ai/drain", "effect": "NoExecute"}]


def _label(config: dict) -> None:
    config["inferenceClusters"]["gpu-eu-west"].setdefault("labels", {})["tier"] = "spot"


def _serving_stack_version(config: dict) -> None:
    versions = config.setdefault("servingStack", {}).setdefault("versions", {})
    versions["envoyGateway"] = "v1.8.0"


def _node_pool_of_a_kind_cluster(config: dict) -> None:
    config["inferenceClusters"]["gpu-eu-west"]["nodePools"][0]["nodeCount"] = 2


def _new_cluster(config: dict) -> None:
    config["inferenceClusters"]["gpu-ap-south"] = copy.deepcopy(config["inferenceClusters"]["gpu-us-east"])
    config["inferenceClusters"]["gpu-ap-south"]["cluster"]["kind"]["clusterName"] = "modelplane-ap-south"


# (what the operator changed, the clusters whose fingerprint changes)
CASES = [
    (_scale, set()),
    (_drain, set()),
    (_label, set()),
    (_serving_stack_version, {"gpu-eu-west", "gpu-us-east", "control"}),
    (_node_pool_of_a_kind_cluster, {"gpu-eu-west"}),
    # a new kind cluster takes a slice of the kind network: the others' MetalLB ranges are re-cut
    (_new_cluster, {"gpu-ap-south", "gpu-eu-west", "gpu-us-east"}),
]


@pytest.mark.parametrize(("edit", "changed"), CASES, ids=[c[0].__name__.strip("_") for c in CASES])
def test_only_what_an_up_cannot_adopt_changes_a_fingerprint(edit, changed):
    before = infrastructure_fingerprints(load_fleet(_demo()))
    config = _demo()
    edit(config)
    after = infrastructure_fingerprints(load_fleet(config))
    assert {c for c in after if after[c] != before.get(c)} == changed


def test_an_existing_clusters_node_pools_and_kubeconfig_are_not_infrastructure():
    """An Existing cluster's pools only declare capacity, and a rotated kubeconfig builds nothing."""
    def rack(pool_nodes: int, kubeconfig: str) -> dict:
        config = _demo()
        cluster = config["inferenceClusters"]["gpu-eu-west"]
        cluster["cluster"] = {"source": "Existing", "existing": {"kubeconfig": kubeconfig}}
        cluster["nodePools"][0]["nodeCount"] = pool_nodes
        return config
    assert (infrastructure_fingerprints(load_fleet(rack(1, "apiVersion: v1\n")))
            == infrastructure_fingerprints(load_fleet(rack(4, "apiVersion: v1\n# rotated\n"))))


@pytest.mark.parametrize(("value", "skipping"), [("true", True), ("TRUE", True), ("1", True), ("", False),
                                                  ("false", False), ("0", False), ("yes", False)])
def test_the_variable_is_read_as_the_engine_reads_it(value, skipping):
    assert checkpoints.skipping({checkpoints.SKIP_CHECKPOINTS: value}) is skipping


def test_builds_names_each_cluster_and_why():
    assert list(map(str, checkpoints.builds({"a": "1", "b": "2", "c": "3"}, {"a": "1", "b": "9"}))) == [
        "b (its cluster or serving stack changed)", "c (new)"]
    assert list(map(str, checkpoints.builds({"a": "1"}, None))) == ["a (new)"]  # no record: a first up, or one from before


def test_an_up_that_builds_is_refused_before_anything_is_registered(mocks, monkeypatch, caplog):
    monkeypatch.setenv(checkpoints.SKIP_CHECKPOINTS, "true")
    set_stack_config(_demo())  # a first up: nothing recorded
    with pytest.raises(pulumi.RunError, match="PULUMI_SKIP_CHECKPOINTS refused for this update"):
        program.run()
    assert mocks.created == []
    [error] = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
    assert "control (new), gpu-eu-west (new), gpu-us-east (new)" in error and "env -u PULUMI_SKIP_CHECKPOINTS" in error


def test_an_up_that_only_changes_replicas_goes_ahead(monitor, mocks, monkeypatch):
    monkeypatch.setenv(checkpoints.SKIP_CHECKPOINTS, "true")
    before = _demo()
    after = _demo()
    _drain(after)
    deployed = deploy(monitor, mocks, after, previous=program.plan(load_fleet(before), None),
                      recorded={"infrastructure": infrastructure_fingerprints(load_fleet(before))})
    assert deployed.outputs["infrastructure"] == infrastructure_fingerprints(load_fleet(before))
    assert {r.cluster for r in deployed.result.replicas()} == {"gpu-us-east"}  # the drained cluster's replica moved


def test_without_the_variable_nothing_is_checked(monitor, mocks, monkeypatch):
    monkeypatch.delenv(checkpoints.SKIP_CHECKPOINTS, raising=False)
    deployed = deploy(monitor, mocks, _demo())  # a first up, nothing recorded: the default saves every step
    assert set(deployed.outputs["infrastructure"]) == {"control", "gpu-eu-west", "gpu-us-east"}


def test_a_preview_that_would_be_refused_warns_and_shows_everything(monitor, mocks, monkeypatch, caplog):
    monkeypatch.setenv(checkpoints.SKIP_CHECKPOINTS, "1")
    monkeypatch.setattr(pulumi.runtime, "is_dry_run", lambda: True)
    deployed = deploy(monitor, mocks, _demo())
    warned = [r.getMessage() for r in caplog.records if r.levelname == "WARNING" and "SKIP_CHECKPOINTS" in r.getMessage()]
    assert len(warned) == 1 and "gpu-eu-west (new)" in warned[0]
    assert len(deployed.result.replicas()) == 2 and mocks.created
