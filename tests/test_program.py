"""The Pulumi program under mocks: same Fleet as the CLI, bad config stops before any resource."""
from __future__ import annotations

import json

import pulumi
import pytest

from builders import fleet_config
from modelplane.api import load_fleet
from modelplane.api.stackfile import read_stack_file
from modelplane.infra import program
from modelplane.infra.config import load_fleet_from_pulumi, secret_output


def set_stack_config(config: dict, secret_keys: tuple[str, ...] = ()) -> None:
    """What the engine hands the program: `modelplane:` keys, structured values as JSON text."""
    pulumi.runtime.set_all_config({f"modelplane:{k}": json.dumps(v) for k, v in config.items()},
                                  [f"modelplane:{k}" for k in secret_keys])


@pytest.mark.parametrize("stack", ["demo", "cloud"])
def test_program_reads_the_same_fleet_as_the_cli(repo, stack):
    stack_file = read_stack_file(repo / "stacks" / f"Pulumi.{stack}.yaml")
    set_stack_config(stack_file.config)
    assert load_fleet_from_pulumi() == load_fleet(stack_file.config)


def test_invalid_config_fails_before_any_resource(mocks):
    config = fleet_config()
    config["modelDeployments"]["ml-team"]["mock-demo"]["replicas"] = 0
    set_stack_config(config)
    with pytest.raises(pulumi.RunError, match="1 error in the modelplane stack config"):
        program.run()
    assert mocks.created == []


def test_unknown_keys_in_pulumi_config_are_rejected():
    pulumi.runtime.set_all_config({"modelplane:modelDeploymnets": "{}", "aws:region": "us-east-1"})
    with pytest.raises(pulumi.RunError):
        program.run()


@pulumi.runtime.test
def test_kubeconfig_from_config_stays_a_secret():
    config = {"inferenceClusters": {"rack": {"cluster": {"source": "Existing",
                                                         "existing": {"kubeconfig": "apiVersion: v1\nkind: Config\n"}}}}}
    set_stack_config(config, secret_keys=("inferenceClusters",))
    fleet = program.run()
    kubeconfig = secret_output(fleet.inference_clusters["rack"].cluster.existing.kubeconfig)
    assert "apiVersion" not in repr(fleet)

    def check(args):
        value, is_secret = args
        assert value.startswith("apiVersion: v1") and is_secret is True

    return pulumi.Output.all(kubeconfig, pulumi.Output.from_input(kubeconfig.is_secret())).apply(check)
