"""The Pulumi program under mocks: same Fleet as the CLI, bad config stops before any resource."""
from __future__ import annotations


import pulumi
import pytest

from builders import fleet_config, floats
from program_run import set_stack_config
from modelplane.api import load_fleet
from modelplane.api.stackfile import read_stack_file
from modelplane.infra import program
from modelplane.infra.config import load_fleet_from_pulumi


@pytest.mark.parametrize("stack", ["demo", "cloud"])
def test_program_reads_the_same_fleet_as_the_cli(repo, stack):
    stack_file = read_stack_file(repo / "stacks" / f"Pulumi.{stack}.yaml")
    set_stack_config(stack_file.config)
    assert load_fleet_from_pulumi() == load_fleet(stack_file.config)


def test_invalid_config_fails_before_any_resource(mocks):
    config = fleet_config()
    config["modelDeployments"]["ml-team"]["mock-demo"]["replicas"] = -1
    set_stack_config(config)
    with pytest.raises(pulumi.RunError, match="1 error in the modelplane stack config"):
        program.run()
    assert mocks.created == []


def test_unknown_keys_in_pulumi_config_are_rejected(mocks, caplog):
    pulumi.runtime.set_all_config({"modelplane:modelDeploymnets": "{}", "aws:region": "us-east-1"})
    with pytest.raises(pulumi.RunError, match="^1 error in the modelplane stack config"):
        program.run()
    errors = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
    assert errors == ["modelplane:modelDeploymnets: unknown config key; did you mean 'modelDeployments'?"]
    assert mocks.created == []  # another program's keys (aws:region) are not this program's business


def test_kubeconfig_from_config_stays_a_secret(monitor):
    """The kubeconfig the engine hands over as a secret reaches the cluster's provider as a secret."""
    kubeconfig = "apiVersion: v1\nkind: Config\n"
    config = {"inferenceClusters": {"rack": {"cluster": {"source": "Existing", "existing": {"kubeconfig": kubeconfig}}}}}
    set_stack_config(config, secret_keys=("inferenceClusters",))
    ran = {}

    @pulumi.runtime.test
    def up():
        ran["fleet"] = program.run().fleet

    up()
    assert kubeconfig not in repr(ran["fleet"])
    [provider] = [r for r in monitor.registrations if r.type == "pulumi:providers:kubernetes"]
    assert provider.inputs["kubeconfig"] == kubeconfig and "kubeconfig" in provider.secret_inputs


@pulumi.runtime.test
def test_program_plans_and_the_second_run_keeps_every_replica(repo, mocks):
    set_stack_config(read_stack_file(repo / "stacks" / "Pulumi.demo.yaml").config)
    first = program.run()

    def second_run(result):
        placed = [(r.name, r.cluster, r.index) for r in result.replicas()]
        assert placed == [("mock-demo-be445", "gpu-eu-west", 0), ("mock-demo-49b71", "gpu-us-east", 0)]
        mocks.stack_outputs = {"placement": floats(result.document_data())}
        return program.run().result.apply(lambda again: (placed, again))

    def check(pair):
        placed, again = pair
        assert [(r.name, r.cluster, r.index, r.status) for r in again.replicas()] == [p + ("retained",) for p in placed]

    return first.result.apply(second_run).apply(check)


@pulumi.runtime.test
def test_shortfall_is_visible_in_the_status_output(repo, mocks):
    config = read_stack_file(repo / "stacks" / "Pulumi.demo.yaml").config
    config["modelDeployments"]["ml-team"]["mock-demo"]["replicas"] = 3
    set_stack_config(config)

    def check(status):
        assert status["ml-team/mock-demo"]["conditions"][0] == {
            "type": "ReplicasScheduled", "status": "False", "reason": "InsufficientCapacity",
            "message": "Scheduled 2 of 3 replicas"}

    return program.run().result.apply(program.deployment_status).apply(check)


def test_an_unreadable_previous_placement_stops_the_run(repo, mocks):
    set_stack_config(read_stack_file(repo / "stacks" / "Pulumi.demo.yaml").config)
    with pytest.raises(pulumi.RunError, match="cannot plan without the previous placement"):
        program.plan(load_fleet_from_pulumi(), {"kind": "Placement", "replicas": [{"cluster": 1}]})
