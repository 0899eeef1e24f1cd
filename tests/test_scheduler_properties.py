"""Scheduler invariants over random fleets and random edit sequences (scale, drain, undrain, cluster
removal, selector edits), each step planned with the previous step's placement:

- no pool is over capacity, counting every replica at its current shape (shape edits, shrunk pools):
  under WholeNode no more claiming pods than nodes; under DeviceGranular the pool's pods can be put on
  its nodes with never more devices on a node than it has (a brute-force bin packing, not the scheduler's);
- under DeviceGranular, a deployment is short only if no eligible cluster and pool could take one more
  replica on top of every pod the plan put there (the same brute force);
- every placed member's pool satisfies its selectors with enough devices, and taints are respected,
  checked against the config by an oracle that shares no code with the scheduler;
- (cluster, index) is unique within a deployment and names are unique within a namespace;
- the order of the previous document does not matter;
- no engine is split across pools;
- no previous replica disappears without a typed reason; kept replicas keep cluster, index and name;
- never more replicas than desired;
- spread when capacity allows (fresh plans: a cluster with two fewer replicas than another could not take one,
  by the same brute force);
- the same input gives the same output.

The random fleets and edits are `builders.random_*`; the oracles are tests/scheduler_oracle.py.
"""
from __future__ import annotations

import copy

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from builders import MEM, RANDOM_CLASSES, apply_edit, random_edits, random_fleets, stack_config
from modelplane.api import NamespacedName, load_fleet
from modelplane.scheduling import PlacementDocument, schedule
from scheduler_oracle import check, check_spread, spread_violations


@pytest.mark.parametrize("packing", ["DeviceGranular", "WholeNode"])
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(config=random_fleets, steps=random_edits)
def test_invariants_hold_through_edit_sequences(packing, config, steps):
    config = {"inferenceClasses": RANDOM_CLASSES, "scheduling": {"packing": packing}, **config}
    fleet = load_fleet(copy.deepcopy(config))
    result = schedule(fleet)
    check(result, PlacementDocument(), fleet, config)
    check_spread(result, config)
    assert schedule(fleet).document() == result.document()
    for edit in steps:
        apply_edit(config, edit)
        previous = PlacementDocument.model_validate(result.document().model_dump(by_alias=True))
        fleet = load_fleet(copy.deepcopy(config))
        result = schedule(fleet, previous)
        check(result, previous, fleet, config)
        assert schedule(fleet, previous).document() == result.document(), "same input, different output"
        reversed_previous = PlacementDocument.model_validate(
            {**previous.model_dump(by_alias=True), "replicas": list(previous.model_dump(by_alias=True)["replicas"])[::-1]})
        assert schedule(fleet, reversed_previous).document() == result.document(), "previous order changed the plan"
        again = schedule(fleet, PlacementDocument.model_validate(result.document().model_dump(by_alias=True)))
        assert [(r.cluster, r.index, r.name) for r in again.replicas()] == \
               [(r.cluster, r.index, r.name) for r in result.replicas()], "a stable placement moved on replan"


def test_the_spread_oracle_flags_a_cluster_left_with_room_and_only_that():
    """The oracle on its own, with no plan: two one-pool clusters of 4 single-GPU nodes, a deployment of 3."""
    spec = {"replicas": 3, "template": {"spec": {"engines": [{"name": "e", "members": [
        {"role": "Standalone", "nodeSelector": {"devices": [{"name": "gpu", "count": 1,
                                                             "selectors": [{"cel": MEM.format("20Gi")}]}]}}]}]}}}
    pools = [{"name": "p", "className": "small", "nodeCount": 4}]
    config = {"inferenceClasses": RANDOM_CLASSES, "modelDeployments": {"ml": {"d": spec}},
              "inferenceClusters": {c: {"labels": {"region": "eu"}, "nodePools": pools} for c in ("a", "b")}}
    three_on_a = {("a", "p"): [1, 1, 1]}
    assert spread_violations(config, {("ml", "d"): {"a": 3}}, three_on_a) == \
        ["ml/d: b holds 0 of {'a': 3}, yet takes one more"]
    assert spread_violations(config, {("ml", "d"): {"a": 2, "b": 1}}, {("a", "p"): [1, 1], ("b", "p"): [1]}) == []
    assert spread_violations(config, {("ml", "d"): {"a": 3}}, {**three_on_a, ("b", "p"): [1, 1, 1, 1]}) == []  # b is full
    config["inferenceClusters"]["b"]["taints"] = [{"key": "drain", "effect": "NoSchedule"}]
    assert spread_violations(config, {("ml", "d"): {"a": 3}}, three_on_a) == []  # b may not take it
    spec["template"]["spec"]["tolerations"] = [{"key": "drain", "operator": "Exists"}]
    assert spread_violations(config, {("ml", "d"): {"a": 3}}, three_on_a) != []
    spec["template"]["spec"]["clusterSelector"] = {"matchLabels": {"region": "us"}}
    assert spread_violations(config, {("ml", "d"): {"a": 3}}, three_on_a) == []  # neither is selected: no claim


def test_fresh_plans_spread_the_demo_fleet():
    result = schedule(load_fleet(stack_config("demo")))
    assert result.deployments[NamespacedName("ml-team", "mock-demo")].by_cluster() == {"gpu-eu-west": 1, "gpu-us-east": 1}


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(random_fleets, st.booleans())
def test_an_explanation_does_not_depend_on_what_was_explained_before(config, backwards):
    """A plan memoises verdicts across deployments that ask alike; each must read as if asked alone."""
    fleet = load_fleet({"inferenceClasses": RANDOM_CLASSES, **copy.deepcopy(config)})
    keys = sorted(schedule(fleet).deployments, reverse=backwards)
    shared = schedule(fleet)
    together = [shared.explain(key) for key in keys]
    alone = [schedule(fleet).explain(key) for key in keys]
    assert together == alone
    assert [e.summary for e in together] == [e.summary for e in alone]


@pytest.mark.parametrize("packing", ["DeviceGranular", "WholeNode"])
@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(random_fleets, st.lists(st.booleans(), max_size=12))
def test_a_summary_alone_is_the_explanations_summary(packing, config, explain_first):
    """A warning reads `summary` alone, which builds each cluster's first reason only (diagnosis.py): it
    must read as the full explanation's, whether or not deployments that ask alike were explained before."""
    fleet = load_fleet({"inferenceClasses": RANDOM_CLASSES, "scheduling": {"packing": packing}, **copy.deepcopy(config)})
    result = schedule(fleet)
    keys = list(result.deployments)
    for key, first in zip(keys, explain_first, strict=False):
        if first:
            result.explain(key)
    summaries = [result.summary(key) for key in keys]
    full = schedule(fleet)
    assert summaries == [full.explain(key).summary for key in keys]
