"""The packing-vs-allocator cases (tests/e2e/packing_cases.py) without binaries: our plans are what the cases
claim, and the objects sent to the cluster are valid Kubernetes 1.34 objects."""
from __future__ import annotations

import pytest

from e2e import packing_cases as pc
from k8s_validation import assert_valid


@pytest.mark.parametrize("case, placed, short, summary", [
    ("eight-on-one", 8, 1, "one-gpu: 0/1 clusters are available: 1 insufficient capacity (needs 1 gpu, 0 free)"),
    ("mixed", 4, 0, None),
    ("fragmented", 3, 1, "reasoning: 0/1 clusters are available: 1 insufficient capacity (needs 2 gpu, 3 free, "
                         "fragmented)"),
])
def test_our_plan_for_each_case(case, placed, short, summary):
    [found] = [c for c in pc.CASES if c.name == case]
    plan = pc.our_plan(found)
    assert (len(plan.placed), len(plan.short)) == (placed, short)
    assert plan.summaries == ((summary,) if summary else ())
    assert sum(count for _, _, count in plan.placed) <= found.per_node * found.nodes


def test_manifests_are_valid_kubernetes_objects():
    assert_valid([pc.claim_manifest("mixed-four-0", 4), pc.pod_manifest("mixed-four-0", "mixed")])


def test_agreement_needs_every_planned_pod_bound_and_every_short_one_pending():
    plan = pc.Planned((("a", 0, 1), ("a", 1, 1)), (("a", 2, 1),), ())
    assert pc.CaseResult("c", plan, {"c-a-0": "n", "c-a-1": "n"}, {"c-a-2": "0/1 nodes"}).agree
    assert not pc.CaseResult("c", plan, {"c-a-0": "n"}, {"c-a-2": "0/1 nodes"}).agree
    assert not pc.CaseResult("c", plan, {"c-a-0": "n", "c-a-1": "n"}, {}).agree
