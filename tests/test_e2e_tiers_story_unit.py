"""The tiers story's pure parts (tests/e2e/tiers_story.py), without the e2e toolchain: its config edits, what
it reads from a placement, the checks' verdicts (each must be able to say no), and the story itself played
through the scheduler on the e2e stack, plan after plan, as the fleet's `pulumi up`s will."""
from __future__ import annotations

import copy
import tempfile
from pathlib import Path

import pytest
import yaml

from e2e import tiers_story as ts
from modelplane.cli import load_file
from modelplane.scheduling import document as placement_document
from modelplane.scheduling.scheduler import schedule

TEMPLATE = Path(__file__).parent / "e2e" / "Pulumi.e2e.yaml"
EU, US = ts.TIER_ONE, ts.TIER_TWO


def _plan(document: dict, previous: dict | None = None) -> dict:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "Pulumi.e2e.yaml"
        path.write_text(yaml.safe_dump(document, sort_keys=False))
        fleet = load_file(path)[1]
    result = schedule(fleet, placement_document.load_previous(previous) if previous else None)
    return {**result.document_data(), "capacity": result.capacity_data()}


def _tier_one_free(plan: dict) -> int:
    return plan["capacity"]["pools"][f"{EU}/{ts.TIER_POOLS[EU]}"]["free"]


def _split(plan: dict, deployment: str = ts.TIERED) -> ts.Split:
    return ts.split_of(plan["replicas"], deployment)


def _scale(document: dict, deployment: str, replicas: int) -> dict:
    document["config"]["modelplane:modelDeployments"][ts.NAMESPACE][deployment]["replicas"] = replicas
    return document


# --- the story through the scheduler ---------------------------------------------------------------------------
def test_the_story_plays_out_as_the_scenario_expects_it():
    template = yaml.safe_load(TEMPLATE.read_text())
    base = _plan(template)
    document = ts.add_story_deployments(copy.deepcopy(template))

    first = _plan(document, base)  # 1. overflow
    assert ts.counts(_split(first)) == {EU: 2, US: 3}
    assert ts.counts(_split(first, ts.FILLER)) == {EU: 2}
    assert _tier_one_free(first) == 0

    second = _plan(_scale(document, ts.TIERED, 4), first)  # 2. scale-in
    assert ts.scale_in_problems(_split(first), _split(second)) == []

    third = _plan(_scale(document, ts.FILLER, 0), second)  # 3. room, failback Never
    assert _split(third) == _split(second) and _tier_one_free(third) == 2

    ts.set_failback_when_room(document)
    fourth = _plan(document, third)  # 4. one move although there is room for two
    assert ts.failback_problems(_split(third), _split(fourth), ts.MAX_MOVES, expect_moves=1) == []
    fifth = _plan(document, fourth)  # 5. the last tier-2 replica
    assert ts.failback_problems(_split(fourth), _split(fifth), ts.MAX_MOVES, expect_moves=1) == []
    assert ts.counts(_split(fifth)) == {EU: 4}
    sixth = _plan(document, fifth)  # 6. nothing left to move
    assert _split(sixth) == _split(fifth)

    restored = _plan(ts.remove_story_deployments(document), sixth)  # 7. the fleet as before the story
    assert restored["replicas"] == base["replicas"]


def test_the_tier_pools_change_nothing_for_the_stack_s_own_deployments():
    """The tier pools' class matches none of the other deployments' selectors: their plan is the one without them."""
    template = yaml.safe_load(TEMPLATE.read_text())
    without = copy.deepcopy(template)
    for cluster in without["config"]["modelplane:inferenceClusters"].values():
        cluster["nodePools"] = [p for p in cluster["nodePools"] if p["className"] != "tier-gpu"]
    del without["config"]["modelplane:inferenceClasses"]["tier-gpu"]
    assert _plan(template)["replicas"] == _plan(without)["replicas"]
    assert _plan(template)["deployments"] == _plan(without)["deployments"]


def test_the_story_uses_the_labels_and_pools_of_the_e2e_stack():
    config = yaml.safe_load(TEMPLATE.read_text())["config"]
    clusters = config["modelplane:inferenceClusters"]
    for cluster, pool in ts.TIER_POOLS.items():
        assert clusters[cluster]["labels"][ts.REGION_LABEL] == cluster.removeprefix("gpu-")
        assert any(p["name"] == pool and p["className"] == "tier-gpu" for p in clusters[cluster]["nodePools"])


# --- the verdicts -------------------------------------------------------------------------------------------------
BEFORE = {EU: ["t-a", "t-b"], US: ["t-c", "t-d", "t-e"]}


def test_scale_in_from_tier_two_passes():
    assert ts.scale_in_problems(BEFORE, {EU: ["t-a", "t-b"], US: ["t-c", "t-d"]}) == []


@pytest.mark.parametrize("after, says", [
    ({EU: ["t-a"], US: ["t-c", "t-d", "t-e"]}, "not from tier 2"),
    ({EU: ["t-a", "t-b"], US: ["t-c"]}, "exactly one replica removed"),
    ({EU: ["t-a", "t-b"], US: ["t-c", "t-d", "t-f"]}, "exactly one replica removed"),
    (BEFORE, "exactly one replica removed"),
])
def test_a_wrong_scale_in_fails(after, says):
    problems = ts.scale_in_problems(BEFORE, after)
    assert problems and says in " ".join(problems)


def test_one_move_back_passes():
    after = {EU: ["t-a", "t-b", "t-f"], US: ["t-c", "t-d"]}
    assert ts.failback_problems(BEFORE, after, max_moves=1, expect_moves=1) == []


@pytest.mark.parametrize("after, says", [
    ({EU: ["t-a", "t-b", "t-f", "t-g"], US: ["t-c"]}, "maxMovesPerPlan is 1"),
    (BEFORE, "expected 1 move(s), got 0"),
    ({EU: ["t-a", "t-b"], US: ["t-c", "t-d", "t-f"]}, f"must go from {US} to {EU}"),
    ({EU: ["t-a", "t-b", "t-f"], US: ["t-c", "t-d", "t-e"]}, "0 replicas left but 1 arrived"),
    ({EU: ["t-a", "t-b"], US: ["t-c", "t-d"]}, "1 replicas left but 0 arrived"),
])
def test_a_wrong_failback_fails(after, says):
    problems = ts.failback_problems(BEFORE, after, max_moves=1, expect_moves=1)
    assert problems and says in " ".join(problems)


def _event(seq, kind, op, cluster, name, type_="kubernetes:apps/v1:Deployment"):
    return {"seq": seq, "kind": kind, "op": op, "type": type_,
            "urn": f"urn:pulumi:e2e::modelplane::{type_}::{cluster}/ml-team/{name}"}


def test_replacement_ready_before_removal_passes():
    events = [_event(1, "pre", "create", EU, "tiered-new-mock-1"), _event(2, "done", "create", EU, "tiered-new-epp"),
              _event(3, "done", "create", EU, "tiered-new-mock-1"),
              _event(4, "done", "delete", US, "tiered-old-mock-2"),
              _event(5, "done", "delete", "control", "tiered-old", "kubernetes:gateway.networking.k8s.io/v1:HTTPRoute")]
    ok, detail = ts.replacement_before_removal(events, "tiered-new", EU, "tiered-old")
    assert ok, detail


@pytest.mark.parametrize("events", [
    # the old replica's route goes before the replacement is ready
    [_event(1, "done", "delete", "control", "tiered-old", "kubernetes:gateway.networking.k8s.io/v1:HTTPRoute"),
     _event(2, "done", "create", EU, "tiered-new-mock-1"), _event(3, "done", "delete", US, "tiered-old-mock-2")],
    # no replacement at all (only its endpoint picker), or on the wrong cluster
    [_event(1, "done", "create", EU, "tiered-new-epp"), _event(2, "done", "delete", US, "tiered-old-mock-2")],
    [_event(1, "done", "create", US, "tiered-new-mock-1"), _event(2, "done", "delete", US, "tiered-old-mock-2")],
    # nothing deleted
    [_event(1, "done", "create", EU, "tiered-new-mock-1")],
    # only another replica whose name begins like the old one's is deleted
    [_event(1, "done", "create", EU, "tiered-new-mock-1"), _event(2, "done", "delete", US, "tiered-older-mock-2")],
])
def test_replacement_order_fails_when_it_is_wrong(events):
    ok, _ = ts.replacement_before_removal(events, "tiered-new", EU, "tiered-old")
    assert not ok


def test_allocated_devices_counts_only_the_pool_s_devices():
    pool = {("gpu.example.com", "n-0", "gpu-0"), ("gpu.example.com", "n-0", "gpu-1")}
    claims = [{"status": {"allocation": {"devices": {"results": [
                  {"driver": "gpu.example.com", "pool": "n-0", "device": "gpu-0", "request": "gpu"}]}}}},
              {"status": {"allocation": {"devices": {"results": [
                  {"driver": "gpu.example.com", "pool": "other", "device": "gpu-0", "request": "gpu"}]}}}},
              {"status": {}}]
    assert ts.allocated_devices(pool, claims) == 1


def test_split_and_change_read_a_placement():
    replicas = [{"namespace": "ml-team", "deployment": "tiered", "cluster": US, "name": "t-2"},
                {"namespace": "ml-team", "deployment": "tiered", "cluster": EU, "name": "t-1"},
                {"namespace": "ml-team", "deployment": "tier-filler", "cluster": EU, "name": "f-1"},
                {"namespace": "other", "deployment": "tiered", "cluster": EU, "name": "o-1"}]
    split = ts.split_of(replicas, "tiered")
    assert split == {EU: ["t-1"], US: ["t-2"]}
    moved = ts.change(split, {EU: ["t-1", "t-3"]})
    assert moved.gone == {"t-2": US} and moved.new == {"t-3": EU}
