"""The scheduler's rules (spec §4, with DESIGN.md's improvements), one table row or case each."""
from __future__ import annotations

import pytest

from builders import MEM, cluster, deployment, member, plan, status, where
from modelplane.api import NamespacedName

TWO = {"a": cluster(("p", "small", 4)), "b": cluster(("p", "small", 4))}


def test_spread_before_pack_ties_by_name():
    result = plan(TWO, {"ml": {"d": deployment(replicas=3)}})
    assert where(result) == [("a", 0, ("p",)), ("a", 1, ("p",)), ("b", 0, ("p",))]
    assert status(result) == ("True", "ReplicasCreated", "Scheduled 3 of 3 replicas")


def test_shortfall_is_false_with_the_count():
    result = plan({"a": cluster(("p", "small", 1))}, {"ml": {"d": deployment(replicas=2)}})
    assert where(result) == [("a", 0, ("p",))]
    assert status(result) == ("False", "InsufficientCapacity", "Scheduled 1 of 2 replicas")
    assert result.explain(NamespacedName("ml", "d")).summary == \
        "0/1 clusters are available: 1 insufficient capacity (needs 1 node, 0 free)"


def test_no_candidate_cluster():
    result = plan(TWO, {"ml": {"d": deployment(clusterSelector={"matchLabels": {"region": "mars"}})}})
    assert where(result) == [] and status(result)[:2] == ("False", "NoClusters")


@pytest.mark.parametrize("memory, expected", [("20Gi", [("a", 0, ("small",))]), ("70Gi", [("a", 0, ("big",))]),
                                              ("100Gi", [])])
def test_pools_in_declared_order_first_that_matches(memory, expected):
    clusters = {"a": cluster(("small", "small", 1), ("big", "big", 1))}
    assert where(plan(clusters, {"ml": {"d": deployment(members=[member(memory=memory)])}})) == expected


def test_device_counts_are_consumed_per_node():
    clusters = {"a": cluster(("small", "small", 5), ("big", "big", 5))}
    asks_two = deployment(members=[member(memory="20Gi", count=2)])
    assert where(plan(clusters, {"ml": {"d": asks_two}})) == [("a", 0, ("big",))]  # small has 1 device a node


def test_gang_never_splits_across_pools():
    gang = deployment(members=[member("Leader"), member("Worker", worker={"nodes": 2})])  # 3 nodes
    split = {"a": cluster(("p1", "small", 2), ("p2", "small", 2))}
    assert where(plan(split, {"ml": {"d": gang}})) == []
    whole = {"a": cluster(("p1", "small", 2), ("p2", "small", 3))}
    result = plan(whole, {"ml": {"d": gang}})
    assert where(result) == [("a", 0, ("p2",))]
    assert result.deployments[NamespacedName("ml", "d")].replicas[0].node_cost() == 3


def test_claimless_members_ride_along_for_free():
    gang = deployment(members=[member("Leader", memory=None), member("Worker", worker={"nodes": 2})], copies=2)
    result = plan({"a": cluster(("p", "small", 4))}, {"ml": {"d": gang}})
    assert result.deployments[NamespacedName("ml", "d")].replicas[0].node_cost() == 4  # 2 workers x 2 copies


def test_synthetic_devices_count_for_placement_but_are_never_claimed():
    infiniband = member(extra=('device.attributes["nic.example.com"].linkType == "infiniband"',))
    ib = {"name": "main", "members": [{**infiniband, "nodeSelector": {"devices": [
        {"name": "gpu", "selectors": [{"cel": MEM.format("20Gi")}]},
        {"name": "ib", "selectors": [{"cel": 'device.attributes["nic.example.com"].linkType == "infiniband"'}]}]}}]}
    result = plan({"a": cluster(("small", "small", 1), ("big", "big", 1))}, {"ml": {"d": deployment(engines=[ib])}})
    replica = result.deployments[NamespacedName("ml", "d")].replicas[0]
    assert replica.pools == ["big"]
    assert [r.name for r in replica.engines[0].members[0].device_requests] == ["gpu"]  # the NIC is not claimed


def test_an_engine_matching_only_synthetic_devices_is_rejected():
    nic_only = {"name": "main", "members": [{**member(memory=None), "nodeSelector": {"devices": [
        {"name": "ib", "selectors": [{"cel": 'device.attributes["nic.example.com"].linkType == "infiniband"'}]}]}}]}
    result = plan({"a": cluster(("n", "nic-only", 3))}, {"ml": {"d": deployment(engines=[nic_only])}})
    assert where(result) == []
    assert "matches only Synthetic devices" in result.explain(NamespacedName("ml", "d")).summary


def test_a_selector_error_keeps_the_replica_off_that_pool_and_says_why():
    risky = member(memory="1Gi", extra=('device.attributes["gpu.example.com"].model == "x"',))
    result = plan({"a": cluster(("small", "small", 1), ("odd", "odd", 1))}, {"ml": {"d": deployment(members=[risky])}})
    assert where(result) == [("a", 0, ("odd",))]  # 'model' is missing on small: a runtime error there
    result = plan({"a": cluster(("small", "small", 1))}, {"ml": {"d": deployment(members=[risky])}})
    verdict = result.explain(NamespacedName("ml", "d")).verdicts[0]
    assert verdict.primary.code == "SelectorError" and "no such key: model" in verdict.primary.detail


@pytest.mark.parametrize("effect, tolerated, placed", [
    ("NoSchedule", False, ["b"]), ("NoExecute", False, ["b"]), ("NoSchedule", True, ["a", "b"]),
])
def test_taints_repel_new_replicas_unless_tolerated(effect, tolerated, placed):
    clusters = {"a": cluster(("p", "small", 4), taints=[("drain", effect)]), "b": cluster(("p", "small", 4))}
    spec = {"tolerations": [{"key": "drain", "operator": "Exists"}]} if tolerated else {}
    result = plan(clusters, {"ml": {"d": deployment(replicas=2, **spec)}})
    assert sorted({c for c, _, _ in where(result)}) == placed


@pytest.mark.parametrize("effect, stays", [("NoSchedule", True), ("NoExecute", False)])
def test_existing_replicas_stay_under_noschedule_and_leave_under_noexecute(effect, stays):
    first = plan(TWO, {"ml": {"d": deployment(replicas=2)}})
    drained = {**TWO, "a": cluster(("p", "small", 4), taints=[("drain", effect)])}
    result = plan(drained, {"ml": {"d": deployment(replicas=2)}}, previous=first)
    assert [c for c, _, _ in where(result)] == (["a", "b"] if stays else ["b", "b"])
    if not stays:
        [removed] = result.deployments[NamespacedName("ml", "d")].removed
        assert removed.reason.code == "Evicted" and removed.replica.cluster == "a"


def test_scale_down_takes_most_loaded_then_later_name_then_highest_index():
    first = plan(TWO, {"ml": {"d": deployment(replicas=5)}})
    assert where(first) == [("a", 0, ("p",)), ("a", 1, ("p",)), ("a", 2, ("p",)), ("b", 0, ("p",)), ("b", 1, ("p",))]
    second = plan(TWO, {"ml": {"d": deployment(replicas=3)}}, previous=first)
    assert where(second) == [("a", 0, ("p",)), ("a", 1, ("p",)), ("b", 0, ("p",))]
    third = plan(TWO, {"ml": {"d": deployment(replicas=1)}}, previous=second)
    assert where(third) == [("a", 0, ("p",))]


def test_lowest_free_index_is_reused():
    first = plan(TWO, {"ml": {"d": deployment(replicas=4)}})
    scaled = plan(TWO, {"ml": {"d": deployment(replicas=3)}}, previous=first)  # b index 1 goes
    again = plan(TWO, {"ml": {"d": deployment(replicas=4)}}, previous=scaled)
    assert where(again) == where(first)
    names = [r.name for r in again.deployments[NamespacedName("ml", "d")].replicas]
    assert names == [r.name for r in first.deployments[NamespacedName("ml", "d")].replicas]


def test_other_deployments_are_charged_first():
    one = {"a": cluster(("p", "small", 1)), "b": cluster(("p", "small", 1))}
    first = plan(one, {"ml": {"z": deployment(replicas=1)}})  # z takes a
    second = plan(one, {"ml": {"a-first": deployment(replicas=2), "z": deployment(replicas=1)}}, previous=first)
    assert where(second, name="z") == [("a", 0, ("p",))]  # retained, charged before a-first fills
    assert where(second, name="a-first") == [("b", 0, ("p",))]
    assert status(second, name="a-first")[:2] == ("False", "InsufficientCapacity")


def test_template_edits_keep_the_replica_selector_edits_re_place_it():
    clusters = {"a": cluster(("small", "small", 1), ("big", "big", 1))}
    first = plan(clusters, {"ml": {"d": deployment(members=[member(memory="20Gi")])}})
    image = plan(clusters, {"ml": {"d": deployment(members=[member(memory="20Gi", image="engine:2")])}}, previous=first)
    assert [r.status for r in image.deployments[NamespacedName("ml", "d")].replicas] == ["retained"]
    edited = plan(clusters, {"ml": {"d": deployment(members=[member(memory="70Gi")])}}, previous=first)
    assert where(edited) == [("a", 0, ("big",))]
    [removed] = edited.deployments[NamespacedName("ml", "d")].removed
    assert removed.reason.code == "NoLongerFits"


def test_cluster_selector_and_cache_footprint():
    clusters = {"a": cluster(("p", "small", 4), rwx="nfs", region="eu", tier="gold"),
                "b": cluster(("p", "small", 4), rwx="nfs", region="eu"), "c": cluster(("p", "small", 4), rwx="nfs", region="us")}
    caches = {"ml": {"w": {"source": "HuggingFace", "huggingFace": {"repo": "org/m", "sizeGiB": 1},
                           "clusterSelector": {"matchLabels": {"tier": "gold"}}}}}
    d = deployment(replicas=2, clusterSelector={"matchLabels": {"region": "eu"}}, modelCacheRef={"name": "w"})
    result = plan(clusters, {"ml": {"d": d}}, modelCaches=caches)
    assert where(result) == [("a", 0, ("p",)), ("a", 1, ("p",))]  # b is selected but holds no copy of the cache
    explanation = result.explain(NamespacedName("ml", "d"))
    verdicts = {v.cluster: (v.available, v.hosts, v.primary and v.primary.code) for v in explanation.verdicts}
    assert verdicts == {"a": (True, 2, None), "b": (False, 0, "OutsideCacheFootprint"), "c": (False, 0, "NotSelected")}
    assert explanation.summary == \
        "1/3 clusters are available: 1 not matched by clusterSelector, 1 outside the ModelCache footprint"


def test_identity_includes_the_namespace():
    first = plan(TWO, {"ml": {"d": deployment(replicas=1)}, "research": {"d": deployment(replicas=1)}})
    assert where(first, "ml") == [("a", 0, ("p",))] and where(first, "research") == [("a", 0, ("p",))]
    second = plan(TWO, {"ml": {"d": deployment(replicas=1)}}, previous=first)  # research/d deleted
    assert where(second, "ml") == [("a", 0, ("p",))]
    assert [r.reason.code for r in second.orphans] == ["DeploymentRemoved"]


def test_a_removed_cluster_re_places_its_replicas():
    first = plan(TWO, {"ml": {"d": deployment(replicas=2)}})
    result = plan({"b": TWO["b"]}, {"ml": {"d": deployment(replicas=2)}}, previous=first)
    assert where(result) == [("b", 0, ("p",)), ("b", 1, ("p",))]


def test_same_input_same_output():
    clusters = {name: cluster(("p", "small", 3), ("q", "big", 1)) for name in ("c", "a", "b")}
    deployments = {"ml": {f"d{i}": deployment(replicas=i % 3 + 1) for i in range(6)}}
    assert plan(clusters, deployments).document().to_json() == plan(clusters, deployments).document().to_json()
