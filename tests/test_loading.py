"""Loading stack config into a Fleet: every problem reported, each at its path, nothing else raised."""
from __future__ import annotations

import json

import pytest

from builders import demo_cluster, demo_deployment, demo_member, fleet_config
from modelplane.api import ConfigError, NamespacedName, SecretValue, load_fleet
from modelplane.api.stackfile import read_stack_file


def issues_of(config: dict) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        load_fleet(config)
    return [str(issue) for issue in caught.value.issues]


def test_a_valid_fleet_loads_with_namespaced_identity():
    config = fleet_config()
    config["modelDeployments"]["research"] = {"mock-demo": demo_deployment(replicas=1)}
    fleet = load_fleet(config)
    assert set(fleet.model_deployments) == {NamespacedName("ml-team", "mock-demo"), NamespacedName("research", "mock-demo")}
    assert fleet.counts()["ModelDeployment"] == 2
    assert fleet.summary().endswith("; 3 replicas requested")


def test_every_bad_entity_is_reported_not_only_the_first():
    config = fleet_config()
    config["modelDeployments"]["ml-team"]["second"] = demo_deployment(replicas=-1)
    config["modelDeployments"]["ml-team"]["mock-demo"]["replicas"] = 11
    config["inferenceClusters"]["gpu-eu-west"]["nodePools"][0]["className"] = "synthetic-gpus"
    found = issues_of(config)
    assert "modelplane:modelDeployments.ml-team.mock-demo.replicas: must be at most 10 (got 11)" in found
    assert "modelplane:modelDeployments.ml-team.second.replicas: must be at least 0 (got -1)" in found
    assert any(f.startswith("modelplane:inferenceClusters.gpu-eu-west.nodePools[0].className: InferenceClass "
                            "'synthetic-gpus' is not defined") and "did you mean 'synthetic-gpu'?" in f for f in found)
    assert len(found) == 3


def test_rule_violations_point_at_the_field_inside_the_object():
    config = fleet_config(modelDeployments={"ml-team": {"mock-demo": demo_deployment(members=[demo_member(worker={"nodes": 2})])}})
    assert issues_of(config) == ["modelplane:modelDeployments.ml-team.mock-demo.template.spec.engines[0].members[0].worker: "
                                 "is only allowed on a member with role Worker"]


def test_label_keys_with_dots_are_quoted_like_pulumi_config_paths():
    config = fleet_config()
    config["modelDeployments"]["ml-team"]["mock-demo"]["template"]["metadata"] = {"labels": {"modelplane.ai/team": "x"}}
    [found] = issues_of(config)
    assert found.startswith('modelplane:modelDeployments.ml-team.mock-demo.template.metadata.labels["modelplane.ai/team"]: ')


def test_unknown_fields_suggest_the_right_name():
    config = fleet_config()
    config["modelDeployments"]["ml-team"]["mock-demo"]["replica"] = 2
    assert "modelplane:modelDeployments.ml-team.mock-demo.replica: unknown field 'replica'; did you mean 'replicas'?" in issues_of(config)


def test_unknown_top_level_key_suggests_the_right_one():
    assert issues_of(fleet_config(modelDeployment={})) == [
        "modelplane:modelDeployment: unknown config key; did you mean 'modelDeployments'?"]


def test_owned_container_fields_explain_why():
    config = fleet_config()
    body = config["modelDeployments"]["ml-team"]["mock-demo"]["template"]["spec"]["engines"][0]["members"][0]
    body["template"]["spec"]["containers"][0]["ports"] = [{"containerPort": 8000}]
    [found] = issues_of(config)
    assert found.endswith("containers[0].ports: unknown field 'ports': the engine listens on port 8000; modelplane declares the port")


def test_cel_that_does_not_parse_is_reported_with_position():
    config = fleet_config(modelDeployments={"ml-team": {"mock-demo": demo_deployment(members=[demo_member(cel="device.driver ==")])}})
    [found] = issues_of(config)
    assert found.startswith("modelplane:modelDeployments.ml-team.mock-demo.template.spec.engines[0].members[0]"
                            ".nodeSelector.devices[0].selectors[0].cel: CEL syntax error at line 1, column 15")


def test_model_service_must_be_able_to_select_something():
    config = fleet_config(
        inferenceGateway={"cluster": {"source": "Kind"}, "traefik": {"version": "40.2.0"}},
        modelServices={"ml-team": {
            "ok": {"endpoints": [{"selector": {"matchLabels": {"modelplane.ai/deployment": "mock-demo"}}}]},
            "by-cluster": {"endpoints": [{"selector": {"matchLabels": {"modelplane.ai/cluster": "gpu-us-east",
                                                                         "modelplane.ai/replica-index": "1"}}}]},
            "wrong-ns": {"endpoints": [{"selector": {"matchLabels": {"modelplane.ai/deployment": "other"}}}]},
            "no-index": {"endpoints": [{"selector": {"matchLabels": {"modelplane.ai/replica-index": "2"}}}]},
        }})
    found = issues_of(config)
    assert [f.split(":")[1].split(".")[2] for f in found] == ["no-index", "wrong-ns"]


def test_services_need_a_front_door():
    config = fleet_config(modelServices={"ml-team": {"s": {"endpoints": [
        {"selector": {"matchLabels": {"modelplane.ai/deployment": "mock-demo"}}}]}}})
    assert issues_of(config) == ["modelplane:modelServices.ml-team.s: a ModelService needs the front door: set "
                                 "modelplane:inferenceGateway (the cluster it runs on)"]


def test_warnings_do_not_fail_validation():
    config = fleet_config()
    config["modelDeployments"]["ml-team"]["mock-demo"]["template"]["spec"]["clusterSelector"] = {
        "matchLabels": {"modelplane.ai/region": "mars"}}
    fleet = load_fleet(config)
    assert [str(w) for w in fleet.warnings] == [
        "modelplane:modelDeployments.ml-team.mock-demo.template.spec.clusterSelector: no InferenceCluster has the "
        "labels modelplane.ai/region=mars (with the ModelCache's selector, if any): nothing will be scheduled"]


def test_top_level_json_strings_are_decoded_like_pulumi_does():
    config = {key: json.dumps(value) for key, value in fleet_config().items()}
    assert load_fleet(config, origin="pulumi").counts()["InferenceCluster"] == 2


def test_secrets_stay_opaque_from_a_stack_file(tmp_path):
    stack = tmp_path / "Pulumi.x.yaml"
    stack.write_text("""config:
  modelplane:inferenceClusters:
    rack:
      cluster:
        source: Existing
        existing:
          kubeconfig:
            secure: v1:abc:def
""")
    stack_file = read_stack_file(stack)
    fleet = load_fleet(stack_file.config)
    secret = fleet.inference_clusters["rack"].cluster.existing.kubeconfig
    assert isinstance(secret, SecretValue) and secret.plaintext is None and secret.ciphertext == "v1:abc:def"
    assert "abc" not in repr(fleet.inference_clusters["rack"])
    assert fleet.warnings == ()


def test_plaintext_secrets_in_a_stack_file_are_flagged():
    config = {"inferenceClusters": {"rack": {"cluster": {"source": "Existing", "existing": {"kubeconfig": "apiVersion: v1"}}}}}
    fleet = load_fleet(config)
    assert [str(w).split(": ")[0] for w in fleet.warnings] == ["modelplane:inferenceClusters.rack.cluster.existing.kubeconfig"]
    assert load_fleet(config, origin="pulumi").warnings == ()  # the program sees decrypted values, by design


def test_whole_key_encrypted_is_explained():
    assert issues_of({"inferenceClusters": SecretValue(ciphertext="v1:x")})[0].startswith(
        "modelplane:inferenceClusters: is encrypted as a whole")


def test_duplicate_yaml_keys_are_caught_with_their_line(tmp_path):
    stack = tmp_path / "Pulumi.x.yaml"
    stack.write_text("config:\n  modelplane:inferenceClasses:\n    a: {devices: []}\n    a: {devices: []}\n")
    stack_file = read_stack_file(stack)
    assert [str(i) for i in stack_file.issues] == [
        "modelplane:inferenceClasses.a: is defined twice (line 4); YAML keeps only the last, so merge the two or rename one"]
    assert stack_file.line_of(("inferenceClasses", "a", "devices")) == 4


def test_same_named_cluster_and_gateway_cluster_clash():
    config = fleet_config(inferenceGateway={"clusterName": "gpu-eu-west", "cluster": {"source": "Kind"},
                                            "traefik": {"version": "40.2.0"}})
    found = issues_of(config)
    assert any(f.startswith("modelplane:inferenceGateway.clusterName: 'gpu-eu-west' is also an InferenceCluster") for f in found)


def test_cloud_pools_need_a_class_that_provisions_on_that_cloud():
    config = fleet_config(inferenceClusters={"aws": demo_cluster(
        cluster={"source": "EKS", "eks": {"region": "us-east-1"}}, nodePools=[
            {"name": "gpu", "className": "synthetic-gpu", "zones": ["us-east-1a"]}])})
    [found] = issues_of(config)
    assert "cannot provision node pools on EKS (it has no provisioning block)" in found


def test_a_pasted_kubernetes_manifest_is_explained():
    manifest = {"apiVersion": "modelplane.ai/v1alpha1", "kind": "ModelDeployment",
                "metadata": {"name": "mock-demo", "namespace": "ml-team"}, "spec": demo_deployment()}
    [found] = issues_of(fleet_config(modelDeployments={"ml-team": {"mock-demo": manifest}}))
    assert found.startswith("modelplane:modelDeployments.ml-team.mock-demo: looks like a Kubernetes manifest; "
                            "in stack config write only what is under its `spec:` here")


def test_yaml_booleans_are_not_numbers():
    config = fleet_config()
    config["modelDeployments"]["ml-team"]["mock-demo"]["replicas"] = True
    assert issues_of(config) == ["modelplane:modelDeployments.ml-team.mock-demo.replicas: must be a whole number (got true)"]
