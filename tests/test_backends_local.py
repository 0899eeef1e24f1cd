"""The kind and Existing cluster backends: what a user on a laptop with Docker + kind would see.

Pure parts (kind config, commands, subnet parsing, MetalLB ranges) are checked directly; the
create script also runs against a fake `kind` on PATH; the wiring runs under the suite's mocks.
"""
from __future__ import annotations

import ipaddress
import json
import os
import shlex
import stat
import subprocess

import pulumi
import pytest
import yaml

import pulumi_recording
from modelplane.api import load_fleet
from modelplane.api.common import SecretValue
from modelplane.api.inference_cluster import DEFAULT_KIND_NODE_IMAGE, ClusterSource, NodePool
from modelplane.api.stackfile import read_stack_file
from modelplane.infra import backends
from modelplane.infra.backends import kind
from modelplane.infra.backends.base import POOL_LABEL, ClusterRequest, GpuPool
from modelplane.render import render_fleet
from modelplane.render.metallb import KIND_NETWORK, kind_address_pools, kind_cluster_names
from modelplane.scheduling import schedule

KUBECONFIG = "apiVersion: v1\nkind: Config\nclusters:\n- cluster: {server: 'https://127.0.0.1:40123'}\n  name: kind\n"
IPV6 = {"Subnet": "fc00:f853:ccd:e793::/64", "Gateway": "fc00:f853:ccd:e793::1"}
IPV4 = {"Subnet": "172.18.0.0/16", "Gateway": "172.18.0.1"}


@pytest.fixture
def demo(repo) -> dict[str, ClusterRequest]:
    """The demo stack's three kind clusters as the program would request them."""
    fleet = load_fleet(read_stack_file(repo / "stacks" / "Pulumi.demo.yaml").config)
    gateway = fleet.inference_gateway
    every_kind = tuple(sorted([*fleet.inference_clusters, gateway.cluster_name]))
    requests = {name: ClusterRequest(name, cluster.cluster,
                                     tuple(GpuPool(p, fleet.inference_classes[p.class_name]) for p in cluster.node_pools),
                                     every_kind)
                for name, cluster in fleet.inference_clusters.items()}
    requests[gateway.cluster_name] = ClusterRequest(gateway.cluster_name, gateway.cluster, (), every_kind)
    return requests


@pytest.fixture
def command_outputs(monkeypatch):
    """What the commands print on a laptop; `ipam` is what Docker reports for the kind network."""
    state = {"ipam": [IPV6, IPV4]}

    def stdout(inputs: dict) -> dict:
        create = inputs.get("create", "")
        if create.startswith("kind get kubeconfig"):
            return {"stdout": KUBECONFIG, "stderr": ""}
        if create.startswith("docker network inspect"):
            return {"stdout": json.dumps(state["ipam"]), "stderr": ""}
        return {"stdout": "", "stderr": "Creating cluster ..."}

    monkeypatch.setitem(pulumi_recording.OUTPUT_HOOKS, "command:local:Command", stdout)
    return state


@pytest.fixture
def requests_seen(monitor, monkeypatch) -> dict:
    """The raw RegisterResource requests by name (resource options the Registration leaves out)."""
    seen = {}
    register = monitor.RegisterResource

    def record(request):
        seen[request.name] = request
        return register(request)

    monkeypatch.setattr(monitor, "RegisterResource", record)
    return seen


def kind_request(name="rack", pools=(), **kind_block) -> ClusterRequest:
    source = ClusterSource.model_validate({"source": "Kind", "kind": kind_block})
    return ClusterRequest(name, source, pools, (name,))


def component(name: str) -> pulumi.ComponentResource:
    return pulumi.ComponentResource("modelplane:index:InferenceCluster", name)


def by_name(monitor) -> dict:
    return {r.name: r for r in monitor.registrations}


# --- the kind config and commands (pure) ---------------------------------------------------------

def test_kind_cluster_name_is_the_block_name_or_the_cluster_name(demo):
    assert kind.kind_cluster_name(demo["gpu-eu-west"]) == "modelplane-eu-west"
    assert kind.kind_cluster_name(demo["control"]) == "modelplane-control"
    assert kind.kind_cluster_name(kind_request("rack")) == "rack"


def test_pool_workers_carry_the_pool_label_and_a_system_worker_runs_the_stack(demo):
    config = kind.kind_config(demo["gpu-eu-west"])
    assert config["apiVersion"] == "kind.x-k8s.io/v1alpha4" and config["kind"] == "Cluster"
    assert config["nodes"] == [
        {"role": "control-plane"},
        {"role": "worker", "labels": {POOL_LABEL: "gpu-eu-west"}},
        {"role": "worker", "labels": {POOL_LABEL: "system"}},
    ]
    assert "containerdConfigPatches" not in config  # CDI is on by default in the image's containerd 2.2


def test_the_front_door_cluster_is_one_untainted_control_plane(demo):
    assert kind.kind_config(demo["control"])["nodes"] == [{"role": "control-plane", "labels": {POOL_LABEL: "system"}}]


def test_node_count_is_the_number_of_labelled_workers(demo):
    pool = demo["gpu-eu-west"].pools[0]
    three = GpuPool(NodePool(name="big", class_name="synthetic-gpu", node_count=3), pool.inference_class)
    empty = GpuPool(NodePool(name="none", class_name="synthetic-gpu", node_count=0), pool.inference_class)
    nodes = kind.kind_config(kind_request(pools=(three, empty)))["nodes"]
    assert [n.get("labels", {}).get(POOL_LABEL) for n in nodes] == [None, "big", "big", "big", "system"]
    assert len(kind.kind_config(kind_request(pools=(empty,)))["nodes"]) == 1


def test_create_command_pins_the_image_and_reads_the_config_on_stdin(demo):
    script = kind.create_command(demo["gpu-eu-west"])
    assert script.startswith("set -eu\n")
    assert shlex.split(script.splitlines()[-1]) == [
        "kind", "create", "cluster", "--name", "modelplane-eu-west", "--image", DEFAULT_KIND_NODE_IMAGE,
        "--config", "-", "--wait", kind.CREATE_WAIT]
    assert "@sha256:" in DEFAULT_KIND_NODE_IMAGE and "v1.34.3" in DEFAULT_KIND_NODE_IMAGE
    custom = kind.create_command(kind_request(node_image="kindest/node:v1.35.0"))
    assert "--image kindest/node:v1.35.0 " in custom


def fake_kind(tmp_path, existing: str) -> dict:
    """A `kind` on PATH that logs each call (and the stdin of `create`) and lists `existing`."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "calls"
    script = bin_dir / "kind"
    script.write_text(f"""#!/bin/sh
echo "$*" >> {log}
case "$1 $2" in
  "get clusters") [ -n {shlex.quote(existing)} ] && echo {shlex.quote(existing)} || echo "No kind clusters found." >&2 ;;
  "create cluster") cat > {tmp_path / 'stdin'} ;;
esac
""")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}


@pytest.mark.parametrize("existing, deleted", [("", False), ("modelplane-eu-west", True), ("modelplane-eu-west2", False)])
def test_create_script_recreates_a_cluster_left_by_an_interrupted_run(tmp_path, demo, existing, deleted):
    request = demo["gpu-eu-west"]
    config = yaml.safe_dump(kind.kind_config(request), sort_keys=False)
    run = subprocess.run(["/bin/sh", "-c", kind.create_command(request)], input=config, text=True,
                         env=fake_kind(tmp_path, existing), capture_output=True)
    assert run.returncode == 0, run.stderr
    calls = (tmp_path / "calls").read_text().splitlines()
    expected = ["get clusters", *(["delete cluster --name modelplane-eu-west"] if deleted else []),
                f"create cluster --name modelplane-eu-west --image {DEFAULT_KIND_NODE_IMAGE} --config - --wait 5m"]
    assert calls == expected
    assert yaml.safe_load((tmp_path / "stdin").read_text()) == kind.kind_config(request)
    assert ("not in the Pulumi state" in run.stderr) is deleted


def test_create_script_fails_when_kind_is_missing(tmp_path, demo):
    run = subprocess.run(["/bin/sh", "-c", kind.create_command(demo["control"])], input="", text=True,
                         env={"PATH": str(tmp_path)}, capture_output=True)
    assert run.returncode != 0


# --- the kind network and MetalLB ranges (pure) --------------------------------------------------

@pytest.mark.parametrize("ipam", [
    [IPV4],
    [IPV6, IPV4],
    [{"Subnet": "172.18.0.0/16"}, IPV6],
    [{"Name": "kind", "IPAM": {"Driver": "default", "Config": [IPV6, IPV4]}}],  # a whole `network inspect`
])
def test_ipv4_subnet_is_found_among_the_ipam_configs(ipam):
    assert kind.ipv4_subnet(json.dumps(ipam), "kind") == "172.18.0.0/16"


@pytest.mark.parametrize("output", [json.dumps([IPV6]), "null", "[]", "Error: No such network: kind", ""])
def test_a_network_without_ipv4_is_a_clear_error(output):
    with pytest.raises(kind.KindNetworkError, match="Docker network 'kind'"):
        kind.ipv4_subnet(output, "kind")


def test_metallb_ranges_of_the_demo_are_inside_the_subnet_and_disjoint(demo):
    ranges = {name: kind.metallb_pool(request, "172.19.0.0/16") for name, request in demo.items()}
    assert_disjoint_inside(ranges, "172.19.0.0/16")


def test_the_kind_backend_and_render_compute_the_range_one_way(repo, demo):
    """On kind's default network the program deploys the ranges `modelplane render` shows; elsewhere
    both come from the same rule (render.metallb.kind_address_pools) over the network given."""
    fleet = load_fleet(read_stack_file(repo / "stacks" / "Pulumi.demo.yaml").config)
    rendered = {p.name.split(".")[0]: p.token for c in render_fleet(fleet, schedule(fleet)) for p in c.placeholders
                if p.name.endswith(".metallbAddressPool")}
    assert rendered == {name: kind.metallb_pool(request, KIND_NETWORK) for name, request in demo.items()}
    assert all(request.kind_clusters == kind_cluster_names(fleet) for request in demo.values())
    assert {name: kind.metallb_pool(request, "10.0.0.0/8") for name, request in demo.items()} == \
        kind_address_pools(kind_cluster_names(fleet), "10.0.0.0/8")


def test_a_network_too_small_for_the_ranges_is_a_clear_error(demo):
    with pytest.raises(kind.KindNetworkError, match="too small for 3 MetalLB ranges"):
        kind.metallb_pool(demo["control"], "172.18.0.0/26")


def assert_disjoint_inside(ranges: dict[str, str], subnet: str) -> None:
    net = ipaddress.ip_network(subnet)
    spans = []
    for text in ranges.values():
        first, last = (ipaddress.ip_address(a) for a in text.split("-"))
        assert first in net and last in net and first <= last
        spans.append((first, last))
    spans.sort()
    assert all(a[1] < b[0] for a, b in zip(spans, spans[1:])), ranges


def test_the_network_is_kinds_own_switch(monkeypatch):
    monkeypatch.delenv(kind.NETWORK_ENV, raising=False)
    assert kind.kind_network() == "kind"
    monkeypatch.setenv(kind.NETWORK_ENV, "lab")
    assert kind.network_command(kind.kind_network()) == "docker network inspect lab --format '{{json .IPAM.Config}}'"


# --- wiring under mocks --------------------------------------------------------------------------

@pulumi.runtime.test
def test_kind_cluster_commands(demo, monitor, command_outputs, requests_seen, monkeypatch):
    monkeypatch.delenv(kind.NETWORK_ENV, raising=False)
    access = backends.provision(demo["gpu-eu-west"], component("gpu-eu-west"))

    def check(args):
        ready_urns, _ = args
        seen = by_name(monitor)
        parent = seen["gpu-eu-west"].urn
        cluster, kubeconfig, network = (seen[f"gpu-eu-west-{n}"] for n in ("kind", "kubeconfig", "kind-network"))
        for command in (cluster, kubeconfig, network):
            assert command.type == "command:local:Command" and command.parent == parent
        assert cluster.inputs["create"] == kind.create_command(demo["gpu-eu-west"])
        assert DEFAULT_KIND_NODE_IMAGE in cluster.inputs["create"]
        assert yaml.safe_load(cluster.inputs["stdin"])["nodes"][1]["labels"] == {POOL_LABEL: "gpu-eu-west"}
        assert cluster.inputs["delete"] == "kind delete cluster --name modelplane-eu-west"
        assert cluster.inputs["triggers"] == [cluster.inputs["create"], cluster.inputs["stdin"], "kind"]
        assert requests_seen["gpu-eu-west-kind"].deleteBeforeReplace is True
        assert kubeconfig.inputs["create"] == "kind get kubeconfig --name modelplane-eu-west"
        assert cluster.urn in kubeconfig.dependencies and cluster.urn in network.dependencies
        assert kubeconfig.inputs["logging"] == "stderr"
        assert list(requests_seen["gpu-eu-west-kubeconfig"].additionalSecretOutputs) == ["stdout"]
        assert network.inputs["create"].startswith("docker network inspect kind ")
        assert ready_urns == [cluster.urn, kubeconfig.urn]

    urns = pulumi.Output.all(*[r.urn for r in access.ready])
    return pulumi.Output.all(urns, access.metallb_pool).apply(check)


@pulumi.runtime.test
def test_kind_kubeconfig_is_a_secret(demo, monitor, command_outputs):
    access = backends.provision(demo["control"], component("control"))

    def check(args):
        value, is_secret = args
        assert value == KUBECONFIG and is_secret is True
        assert access.context is None

    return pulumi.Output.all(access.kubeconfig, pulumi.Output.from_input(access.kubeconfig.is_secret())).apply(check)


@pulumi.runtime.test
def test_each_kind_cluster_gets_its_own_range_of_the_real_subnet(demo, monitor, command_outputs):
    command_outputs["ipam"] = [IPV6, {"Subnet": "192.168.96.0/20", "Gateway": "192.168.96.1"}]
    pools = {name: backends.provision(request, component(name)).metallb_pool for name, request in demo.items()}

    def check(values):
        ranges = dict(zip(pools, values))
        assert sorted(ranges) == ["control", "gpu-eu-west", "gpu-us-east"]
        assert_disjoint_inside(ranges, "192.168.96.0/20")
        assert ranges["control"] == "192.168.111.239-192.168.111.254"  # the top of the network, names sorted

    return pulumi.Output.all(*pools.values()).apply(check)


# --- existing ------------------------------------------------------------------------------------

@pulumi.runtime.test
def test_existing_cluster_passes_context_and_keeps_the_kubeconfig_secret(monitor):
    source = ClusterSource(source="Existing", existing={"kubeconfig": SecretValue("apiVersion: v1\nkind: Config\n"),
                                                        "context": "rack-admin"})
    parent = component("rack")
    access = backends.provision(ClusterRequest("rack", source), parent)

    def check(args):
        value, is_secret, _ = args
        assert value.startswith("apiVersion: v1") and is_secret is True
        assert access.context == "rack-admin"
        assert access.ready == [] and access.metallb_pool is None
        assert [r.type for r in monitor.registrations] == ["modelplane:index:InferenceCluster"]  # nothing created

    return pulumi.Output.all(access.kubeconfig, pulumi.Output.from_input(access.kubeconfig.is_secret()),
                             parent.urn).apply(check)
