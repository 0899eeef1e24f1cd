"""Device-granular packing (modelplane:scheduling.packing): pods on a node's free devices, and the
reference's whole-node accounting one setting away. The packing rule is checked against a brute
force that shares no code with it; the scheduler's cases are the ones a user notices."""
from __future__ import annotations

import subprocess
import sys

import pytest
import yaml
from hypothesis import given, settings, strategies as st

from builders import CLASSES, cluster, deployment, member, plan, status, where
from doc_examples import REPO, doc_block, modelplane
from modelplane import views
from modelplane.api import NamespacedName
from modelplane.scheduling.packing import DevicePacking
from modelplane.scheduling.snapshot import DeviceKind, Pool
from scheduler_oracle import packable

EIGHT = {"name": "gpu", "driver": "gpu.example.com", "deviceClassName": "gpu.example.com", "count": 8,
         "capacity": {"memory": {"value": "80Gi"}}}
PACKING_CLASSES = {
    "eight": {"devices": [EIGHT]},
    "three": {"devices": [{**EIGHT, "count": 3}]},
    "eight-ib": {"devices": [EIGHT, {"name": "nic", "claim": "Synthetic", "driver": "nic.example.com",
                                     "attributes": {"linkType": {"string": "infiniband"}}}]},
}


def devices(clusters: dict, deployments: dict, previous=None, packing="DeviceGranular", **extra):
    classes = {**CLASSES, **PACKING_CLASSES}
    return plan(clusters, deployments, previous, inferenceClasses=classes, scheduling={"packing": packing}, **extra)


def solo(count: int, replicas: int = 1, copies: int = 1) -> dict:
    return deployment(replicas=replicas, copies=copies, members=[member(count=count)])


@st.composite
def pools_and_replicas(draw):
    per_node = draw(st.integers(1, 8))
    nodes = draw(st.integers(0, 3))
    replicas = draw(st.lists(st.lists(st.integers(1, per_node), min_size=1, max_size=3), max_size=8))
    return per_node, nodes, replicas


@settings(max_examples=300, deadline=None)
@given(pools_and_replicas())
def test_a_replica_is_refused_exactly_when_no_assignment_of_pods_to_nodes_exists(case):
    per_node, nodes, replicas = case
    gpu = DeviceKind("gpu", "DRA", "gpu.example.com", per_node, "k")
    state = DevicePacking.empty(Pool("p", "c", nodes, (gpu,)))
    placed: list[int] = []
    for pods in replicas:
        after = DevicePacking.take(state, DevicePacking.combine([tuple((n,) for n in pods)]))
        fits = packable(per_node, nodes, sorted(placed + pods, reverse=True))
        assert (after is not None) == fits, f"{placed} + {pods} on {nodes} x {per_node}"
        if after is not None:
            state, placed = after, placed + pods
            assert DevicePacking.amount(state) == per_node * nodes - sum(placed)
            assert all(0 <= free[0] <= per_node for free, _ in state.free), "a node holds more than it has"


@pytest.mark.parametrize("packing, scheduled, used", [
    ("DeviceGranular", "Scheduled 8 of 8 replicas", "p 8/8"),  # eight 1-GPU replicas share the node
    ("WholeNode", "Scheduled 1 of 8 replicas", "p 1/1"),  # the reference: the node is charged to the first
])
def test_eight_one_gpu_replicas_on_one_eight_gpu_node(packing, scheduled, used):
    result = devices({"a": cluster(("p", "eight", 1))}, {"ml": {f"d{i}": solo(1) for i in range(8)}}, packing=packing)
    assert [status(result, name=f"d{i}")[2] for i in range(8)].count("Scheduled 1 of 1 replicas") == \
        (8 if packing == "DeviceGranular" else 1)
    one = devices({"a": cluster(("p", "eight", 1))}, {"ml": {"d": solo(1, replicas=8)}}, packing=packing)
    assert status(one)[2] == scheduled
    assert views.plan_table(one).splitlines()[-1].split()[-2:] == used.split()


def test_mixed_shapes_pack_one_node():
    shapes = {"four": 4, "two": 2, "one-a": 1, "one-b": 1}
    result = devices({"a": cluster(("p", "eight", 1))}, {"ml": {name: solo(n) for name, n in shapes.items()}})
    assert all(status(result, name=name)[0] == "True" for name in shapes)
    assert result.free[("a", "p")] == 0
    table = views.plan_table(result)
    assert "Clusters (devices used/declared per pool):" in table and "p 8/8" in table


def test_a_fragmented_pool_is_short_and_says_so():
    # Three 3-GPU nodes, three 2-GPU replicas: one a node (2 + 2 > 3), 1 free on each; a 2-GPU pod fits nowhere.
    result = devices({"a": cluster(("p", "three", 3))}, {"ml": {"a": solo(2, replicas=3), "b": solo(2)}})
    assert status(result, name="a")[0] == "True"
    assert status(result, name="b") == ("False", "InsufficientCapacity", "Scheduled 0 of 1 replicas")
    explanation = result.explain(NamespacedName("ml", "b"))
    assert explanation.verdicts[0].reasons[0].detail == \
        "pool p: needs 2 gpu, 3 free across 3 nodes (fragmented: largest free block 1)"
    assert explanation.summary == "0/1 clusters are available: 1 insufficient capacity (needs 2 gpu, 3 free, fragmented)"


def test_pods_are_packed_again_when_the_nodes_as_packed_have_no_room():
    # Best fit puts a's two 1-GPU pods on one 3-GPU node; b's second 2-GPU pod then needs 1+2, 1+2.
    result = devices({"a": cluster(("p", "three", 2))}, {"ml": {"a": solo(1, replicas=2, copies=1),
                                                                 "b": solo(2, copies=2)}})
    assert status(result, name="a")[0] == "True" and status(result, name="b")[0] == "True"
    assert result.free[("a", "p")] == 0


def test_a_gang_takes_whole_nodes_and_synthetic_devices_are_not_consumed():
    gang = deployment(members=[member(role="Leader"), member(role="Worker", worker={"nodes": 1})])
    result = devices({"a": cluster(("p", "eight-ib", 2))}, {"ml": {"g": gang, "s": solo(1)}})
    assert status(result, name="g")[0] == "True"
    assert status(result, name="s") == ("False", "InsufficientCapacity", "Scheduled 0 of 1 replicas")
    assert result.explain(NamespacedName("ml", "s")).verdicts[0].reasons[0].detail == \
        "pool p: needs 1 gpu, 0 free across 2 nodes"


def test_copies_are_pods_on_nodes_not_nodes():
    result = devices({"a": cluster(("p", "eight", 1))}, {"ml": {"d": solo(2, copies=4)}})
    assert where(result) == [("a", 0, ("p",))]
    assert result.replicas()[0].device_count() == 8 and result.free[("a", "p")] == 0
    assert views.plan_table(result).splitlines()[1].split() == ["REPLICA", "CLUSTER", "INDEX", "POOLS", "DEVICES",
                                                                 "STATUS"]


def test_a_shrunk_pool_keeps_the_replicas_that_fit_and_never_pushes_out_another():
    first = devices({"a": cluster(("p", "eight", 2))}, {"ml": {"a": solo(4, replicas=2), "b": solo(4, replicas=2)}})
    assert first.free[("a", "p")] == 0
    # One node gone: 8 devices for four 4-GPU replicas. The lower indexes stay, the rest is short.
    shrunk = devices({"a": cluster(("p", "eight", 1))}, {"ml": {"a": solo(4, replicas=2), "b": solo(4, replicas=2)}},
                     previous=first)
    kept = [(r.key.name, r.index, r.status) for r in shrunk.replicas()]
    assert kept == [("a", 0, "retained"), ("b", 0, "retained")]
    gone = sorted((r.replica.key.name, r.reason.code) for r in shrunk.removed())
    assert gone == [("a", "NoLongerFits"), ("b", "NoLongerFits")]
    assert "the replica now needs 4 gpu, 0 of the pool's 8 devices free" in shrunk.removed()[0].reason.detail
    # Growing a's shape never pushes out b: a's grown replicas leave, b's stay.
    grown = devices({"a": cluster(("p", "eight", 2))}, {"ml": {"a": solo(6, replicas=2), "b": solo(4, replicas=2)}},
                    previous=first)
    assert [(r.key.name, r.status) for r in grown.replicas() if r.key.name == "b"] == [("b", "retained")] * 2


def test_the_worked_examples_in_placement_md_are_what_plan_prints(tmp_path):
    line, shown = doc_block("docs/placement.md", "venv/bin/modelplane plan --config stacks/examples/Pulumi.packing.yaml")
    done = modelplane(*line.split()[1:], cwd=REPO)
    assert (done.returncode, done.stderr, done.stdout) == (0, "", shown)
    whole = tmp_path / "Pulumi.packing-whole.yaml"
    whole.write_text((REPO / "stacks/examples/Pulumi.packing.yaml").read_text()
                     + "  modelplane:scheduling:\n    packing: WholeNode\n")
    line, shown = doc_block("docs/placement.md", "venv/bin/modelplane plan --config Pulumi.packing-whole.yaml")
    done = modelplane(*line.split()[1:], cwd=tmp_path)
    assert (done.returncode, done.stdout + done.stderr) == (0, shown)


def test_the_setting_is_validated_with_its_config_path(tmp_path):
    stack = tmp_path / "Pulumi.bad.yaml"
    stack.write_text(yaml.safe_dump({"config": {"modelplane:scheduling": {"packing": "Devices"}}}))
    done = subprocess.run([sys.executable, "-m", "modelplane", "plan", "--config", str(stack)],
                          capture_output=True, text=True)
    assert done.returncode == 2
    assert "modelplane:scheduling.packing: must be one of 'DeviceGranular' or 'WholeNode' (got 'Devices')" in done.stderr
