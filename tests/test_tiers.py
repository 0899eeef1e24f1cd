"""Preference tiers with overflow, scale-in from the last tier, and failback (`placement`): the cases a
platform team notices, then properties over random tiered fleets and edit sequences:

- tiers are filled in order: on a fresh plan a replica sits in tier t only if no usable cluster of a
  better tier could take one more;
- tiers are emptied in reverse: a scale-in removes replicas of the last tier before any of a better one;
- failback moves at most `maxMovesPerPlan` replicas per plan, each to a strictly better tier, never under
  `Never`, and never evicts: every pod, including the ones of the replicas being replaced (make-before-
  break), still fits its pool's nodes (the brute force of tests/scheduler_oracle.py);
- and every invariant test_scheduler_properties checks for untiered fleets.
"""
from __future__ import annotations

import copy

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from builders import RANDOM_CLASSES, apply_edit, cluster, deployment, plan, random_deployments, random_edits, where
from doc_examples import REPO, doc_block, modelplane
from modelplane import views
from modelplane.api import NamespacedName, load_fleet
from modelplane.scheduling import PlacementDocument, schedule
from scheduler_oracle import check, node_of, packable, replica_pods

RACK, RESERVED = {"site": "rack"}, {"capacity": "reserved"}
PREFERENCES = [{"clusterSelector": {"matchLabels": RACK}}, {"clusterSelector": {"matchLabels": RESERVED}}, {}]


def tiered(replicas: int, failback: str = "Never", moves: int | None = None) -> dict:
    body = deployment(replicas=replicas)
    body["placement"] = {"preferences": PREFERENCES, "failback": failback}
    if moves is not None:
        body["placement"]["maxMovesPerPlan"] = moves
    return body


def fleet_of(own: int, reserved: int = 2, ondemand: int = 4) -> dict:
    return {"own": cluster(("p", "small", own), site="rack"), "res": cluster(("p", "small", reserved), capacity="reserved"),
            "od": cluster(("p", "small", ondemand), capacity="ondemand")}


def clusters_of(result, name: str = "d") -> list[str]:
    return [c for c, _, _ in where(result, name=name)]


def test_fill_takes_the_first_tier_until_full_then_overflows():
    result = plan(fleet_of(own=1), {"ml": {"d": tiered(4)}})
    assert sorted(clusters_of(result)) == ["od", "own", "res", "res"]


def test_scale_in_removes_from_the_last_tier_first():
    first = plan(fleet_of(own=1), {"ml": {"d": tiered(4)}})
    smaller = plan(fleet_of(own=1), {"ml": {"d": tiered(2)}}, previous=first)
    assert sorted(clusters_of(smaller)) == ["own", "res"]
    assert sorted(r.replica.cluster for r in smaller.removed()) == ["od", "res"]


@pytest.mark.parametrize("failback, moves, after_one, after_two", [
    ("Never", None, ["od", "own", "res", "res"], ["od", "own", "res", "res"]),  # stays where it is
    ("WhenRoom", None, ["own", "own", "res", "res"], ["own", "own", "own", "res"]),  # one move per plan
    ("WhenRoom", 3, ["own", "own", "own", "own"], ["own", "own", "own", "own"]),
])
def test_failback_moves_back_when_there_is_room_at_most_max_moves_per_plan(failback, moves, after_one, after_two):
    first = plan(fleet_of(own=1), {"ml": {"d": tiered(4, failback, moves)}})
    # The rack grows: room for every replica there.
    grown = plan(fleet_of(own=4), {"ml": {"d": tiered(4, failback, moves)}}, previous=first)
    assert sorted(clusters_of(grown)) == after_one
    assert all(r.reason.code == "FailedBack" for r in grown.removed())
    again = plan(fleet_of(own=4), {"ml": {"d": tiered(4, failback, moves)}}, previous=grown)
    assert sorted(clusters_of(again)) == after_two


def test_failback_never_takes_room_from_another_deployment():
    first = plan(fleet_of(own=1), {"ml": {"a": tiered(2, "WhenRoom", 2), "b": tiered(1)}})
    assert sorted(clusters_of(first, "a")) == ["own", "res"] and clusters_of(first, "b") == ["res"]
    # The rack gets one more node and b one more replica: b's missing replica fills first and takes it;
    # a's replica on res then has nowhere better to go.
    grown = plan(fleet_of(own=2), {"ml": {"a": tiered(2, "WhenRoom", 2), "b": tiered(2)}}, previous=first)
    assert sorted(clusters_of(grown, "a")) == ["own", "res"] and sorted(clusters_of(grown, "b")) == ["own", "res"]
    assert not any(r.reason.code == "FailedBack" for r in grown.removed())


def test_failback_waits_a_plan_for_room_another_deployment_frees_in_the_same_plan():
    """Pulumi deletes a removed replica only after every create has rolled out: a replacement counting on its room
    would wait for ever. The move comes with the next plan, once the room is really free."""
    first = plan(fleet_of(own=1), {"ml": {"d": tiered(2, "WhenRoom"), "a": tiered(1)}})
    assert clusters_of(first, "a") == ["own"] and sorted(clusters_of(first, "d")) == ["res", "res"]
    freed = plan(fleet_of(own=1), {"ml": {"d": tiered(2, "WhenRoom"), "a": tiered(0)}}, previous=first)
    assert [r.replica.cluster for r in freed.removed()] == ["own"]  # the a's replica goes: nothing moves in
    assert sorted(clusters_of(freed, "d")) == ["res", "res"]
    after = plan(fleet_of(own=1), {"ml": {"d": tiered(2, "WhenRoom"), "a": tiered(0)}}, previous=freed)
    assert sorted(clusters_of(after, "d")) == ["own", "res"]
    assert [r.reason.code for r in after.removed()] == ["FailedBack"]


def test_a_cluster_in_no_tier_is_not_used_and_explain_says_why():
    body = deployment(replicas=2)
    body["placement"] = {"preferences": [{"clusterSelector": {"matchLabels": RACK}}]}
    result = plan(fleet_of(own=1), {"ml": {"d": body}})
    assert clusters_of(result) == ["own"]
    table = views.explain_table(result.explain(NamespacedName("ml", "d")))
    assert "the cluster matches none of the deployment's 1 placement preferences" in table


def test_explain_names_each_replicas_tier_and_why_not_a_better_one():
    result = plan(fleet_of(own=1), {"ml": {"d": tiered(3)}}, scheduling={"packing": "DeviceGranular"})
    lines = views.explain_table(result.explain(NamespacedName("ml", "d"))).splitlines()
    assert lines[1].split() == ["CLUSTER", "TIER", "HOSTS", "VERDICT", "FOR", "ONE", "MORE", "REPLICA"]
    tiers_at = lines.index("Replicas by preference tier (failback: Never):")
    by_tier = lines[tiers_at + 1:]
    assert by_tier[0].endswith("on own: tier 1 (the most preferred)")
    assert by_tier[1].endswith("on res: tier 2")
    assert by_tier[2] == "    tier 1 own: pool p: needs 1 gpu, 0 free across 1 node"


def test_fleet_default_and_deployment_override():
    default = {"placement": {"preferences": PREFERENCES}}
    plain = deployment(replicas=1)
    own_only = deployment(replicas=1)
    own_only["placement"] = {"preferences": [{"clusterSelector": {"matchLabels": {"capacity": "ondemand"}}}]}
    result = plan(fleet_of(own=1), {"ml": {"a": plain, "b": own_only}}, scheduling={"packing": "WholeNode", **default})
    assert where(result, name="a") == [("own", 0, ("p",))]
    assert where(result, name="b") == [("od", 0, ("p",))]


# --- properties ------------------------------------------------------------------------------

tiered_clusters = st.dictionaries(
    st.sampled_from(["c1", "c2", "c3", "c4"]),
    st.fixed_dictionaries({
        "labels": st.sampled_from([{"region": "eu", **RACK}, {"region": "eu", **RESERVED}, {"region": "us", **RESERVED},
                                   {"region": "us"}]),
        "cluster": st.just({"source": "Kind"}),
        "taints": st.lists(st.fixed_dictionaries({"key": st.sampled_from(["gpu", "drain"]),
                                                  "effect": st.sampled_from(["NoSchedule", "NoExecute"])}), max_size=1),
        "nodePools": st.lists(st.fixed_dictionaries({"name": st.sampled_from(["p", "q"]),
                                                     "className": st.sampled_from(["small", "big", "mid"]),
                                                     "nodeCount": st.integers(0, 3)}),
                              min_size=1, max_size=2, unique_by=lambda p: p["name"]),
    }), min_size=1, max_size=4)


@st.composite
def tiered_deployments(draw) -> dict:
    body = draw(random_deployments())
    body["placement"] = {"preferences": PREFERENCES, "failback": draw(st.sampled_from(["Never", "WhenRoom"]))}
    if body["placement"]["failback"] == "WhenRoom":
        body["placement"]["maxMovesPerPlan"] = draw(st.integers(1, 2))
    return body


tiered_fleets = st.fixed_dictionaries({"inferenceClusters": tiered_clusters, "modelDeployments": st.fixed_dictionaries(
    {"ml": st.dictionaries(st.sampled_from(["a", "b", "c"]), tiered_deployments(), min_size=1, max_size=3)})})


def tier_of(config: dict, cluster: str) -> int:
    labels = config["inferenceClusters"][cluster]["labels"]
    return 0 if labels.get("site") == "rack" else 1 if labels.get("capacity") == "reserved" else 2


def check_tiers(result, previous: PlacementDocument, config: dict) -> None:
    stamped = {(r.namespace, r.deployment, r.cluster, r.index) for r in previous.replicas}
    for key, plan_ in result.deployments.items():
        policy = config["modelDeployments"][key.namespace][key.name]["placement"]
        removed = plan_.removed
        if not stamped:  # fresh: filled in tier order
            explanation = result.explain(key)
            for replica in plan_.replicas:
                for verdict in explanation.verdicts:
                    if verdict.cluster in (explanation.tiers or {}) and \
                            tier_of(config, verdict.cluster) < tier_of(config, replica.cluster):
                        assert not verdict.available, f"{key}: {replica.cluster} used while {verdict.cluster} has room"
        scaled = [tier_of(config, r.replica.cluster) for r in removed if r.reason.code == "ScaledDown"
                  and r.replica.cluster in config["inferenceClusters"]]
        kept = [tier_of(config, r.cluster) for r in plan_.replicas if r.status == "retained"]
        if scaled and kept:
            assert min(scaled) >= max(kept), f"{key}: scaled in tier {min(scaled) + 1} before tier {max(kept) + 1}"
        moved = [r for r in removed if r.reason.code == "FailedBack"]
        if policy["failback"] == "Never":
            assert not moved
        else:
            assert len(moved) <= policy["maxMovesPerPlan"]
    # Never evicts: the pods of every planned replica and of every replica being replaced fit together.
    pods: dict[tuple[str, str], list[int]] = {}
    leaving = [r.replica for r in result.removed() if r.reason.code == "FailedBack"]
    for replica in result.replicas() + leaving:
        spec = config["modelDeployments"][replica.key.namespace][replica.key.name]
        pool = replica.engines[0].members[0].node_pool
        pods.setdefault((replica.cluster, pool), []).extend(
            replica_pods(config, spec, node_of(config, replica.cluster, pool)[0]))
    for (cluster, pool), sizes in pods.items():
        per_node, nodes = node_of(config, cluster, pool)
        assert packable(per_node, nodes, sizes), f"failback overcommits {cluster}/{pool}"


@pytest.mark.parametrize("packing", ["DeviceGranular", "WholeNode"])
@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(config=tiered_fleets, steps=random_edits, rack=st.integers(0, 1), keep=st.integers(1, 3), grow=st.integers(1, 4))
def test_tiers_fill_in_order_empty_in_reverse_and_fail_back_within_bounds(packing, config, steps, rack, keep, grow):
    config = {"inferenceClasses": RANDOM_CLASSES, "scheduling": {"packing": packing}, **config}
    # An own rack of at most one node, so that growing it later gives failback somewhere to go.
    config["inferenceClusters"]["c1"] = {"labels": {"region": "eu", **RACK}, "cluster": {"source": "Kind"},
                                         "nodePools": [{"name": "p", "className": "big", "nodeCount": rack}]}
    result = schedule(load_fleet(copy.deepcopy(config)))
    previous = PlacementDocument()
    check(result, previous, None, config)
    check_tiers(result, previous, config)
    # Every edit, then every deployment scales in to `keep`, the rack grows (room for failback), and every
    # deployment scales in to one replica.
    for edit in [*steps, ("scale-in", None, keep), ("grow", None, grow), ("scale-in", None, 1)]:
        if edit[0] == "scale-in":
            for body in config["modelDeployments"]["ml"].values():
                body["replicas"] = min(body["replicas"], keep)
        elif edit[0] == "grow":
            for body in config["inferenceClusters"].values():
                for pool in body["nodePools"]:
                    pool["nodeCount"] += edit[2] if body["labels"].get("site") == "rack" else 0
        else:
            apply_edit(config, edit)
        previous = PlacementDocument.model_validate(result.document().model_dump(by_alias=True))
        fleet = load_fleet(copy.deepcopy(config))
        result = schedule(fleet, previous)
        check(result, previous, fleet, config)
        check_tiers(result, previous, config)
        assert schedule(fleet, previous).document() == result.document(), "same input, different output"


@pytest.mark.parametrize("command", ["plan", "explain ml-team/chat"])
def test_the_worked_example_in_placement_md_is_what_the_command_prints(command):
    line, shown = doc_block("docs/placement.md", f"venv/bin/modelplane {command} --config stacks/examples/Pulumi.tiers.yaml")
    done = modelplane(*line.split()[1:], cwd=REPO)
    assert (done.returncode, done.stderr, done.stdout) == (0, "", shown)
