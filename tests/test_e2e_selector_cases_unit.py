"""The selector-vs-allocator cases (tests/e2e/selector_cases.py) without binaries: our engine's answers are the table's."""
from __future__ import annotations

import re

import pytest

from e2e import selector_cases as sc
from modelplane.api import InferenceClass

DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")


@pytest.mark.parametrize("case", sc.CASES, ids=lambda c: c.name)
def test_our_engine_gives_the_tables_answer(case):
    ours = sc.our_answer(case)
    assert (ours if isinstance(case.expected, frozenset) else sc.kind(ours)) == case.expected, ours


def test_cases_are_distinct_dns_labels():
    names = [c.name for c in sc.CASES + (sc.CANARY,)]
    assert len(set(names)) == len(names) and all(DNS_LABEL.match(n) for n in names)


def test_devices_are_valid_config_devices():
    """The same devices are accepted as an InferenceClass would declare them (no bare/qualified duplicates)."""
    InferenceClass.model_validate({"devices": [
        {"name": d["name"], "driver": sc.DRIVER, "deviceClassName": sc.DEVICE_CLASS, **{
            k: d[k] for k in ("attributes", "capacity")}} for d in sc.DEVICES]})


def test_cases_cover_every_device_and_answer_kind():
    kinds = {sc.kind(c.expected) if not isinstance(c.expected, frozenset) else "match" for c in sc.CASES}
    assert kinds == {"match", "error", "rejected"}
    assert frozenset() in {c.expected for c in sc.CASES}


def test_allocator_answers_are_read_from_claim_and_pod():
    names = {"node-1-gpu-a": "gpu-a"}
    claim = {"status": {"allocation": {"devices": {"results": [
        {"request": "req", "driver": sc.DRIVER, "pool": "p", "device": "node-1-gpu-a"}]}}}}
    assert sc._answer_now(claim, None, names) == frozenset({"gpu-a"})
    def pod(reason, message):
        return {"status": {"conditions": [{"type": "PodScheduled", "status": "False", "reason": reason,
                                           "message": message}]}}
    assert sc._answer_now({}, pod("Unschedulable", "0/3 nodes are available: 1 cannot allocate all claims."),
                          names) == frozenset()
    assert sc._answer_now({}, pod("Unschedulable", "0/1 nodes are available: 1 node(s) were unschedulable."),
                          names) is None
    assert sc.kind(sc._answer_now({}, pod("SchedulerError", "CEL runtime error: no such key: numa"), names)) == "error"
    assert sc.kind(sc._answer_now({}, pod("SchedulerError", "etcd timed out"), names)) == "scheduler error"


def test_agreement_compares_sets_exactly_and_errors_by_kind():
    assert sc.agrees(frozenset({"gpu-a"}), frozenset({"gpu-a"}))
    assert not sc.agrees(frozenset({"gpu-a"}), frozenset())
    assert sc.agrees("error: ours", "error: theirs")
    assert not sc.agrees("error: x", "rejected: y") and not sc.agrees("error: x", frozenset())
    assert not sc.agrees("error: x", "timeout: y")


def test_report_lists_every_case_and_disagreements():
    results = [sc.CaseResult("a", "true", frozenset({"gpu-a"}), frozenset({"gpu-a"}), True),
               sc.CaseResult("b", "x", "error: boom", frozenset(), False)]
    text = sc.report(results)
    assert "1/2 cases agree" in text and "DISAGREEMENT b: x" in text and "(none)" in text


def test_show_keeps_the_gist_of_each_engines_error():
    theirs = ('error: running "DynamicResources" filter plugin: claim ns/x: selector #0: CEL runtime error: '
              'no such key: numa')
    assert sc.show(theirs) == "error: no such key: numa"
    assert sc.show("error: device gpu-c: CEL runtime error: no such key: numa") == "error: no such key: numa"
    rejected = ('rejected: ResourceClaim.resource.k8s.io "q" is invalid: spec...expression: Invalid value: "x": '
                "compilation failed: ERROR: <input>:1:45: found no matching overload for '_>_' | x | ...^")
    assert sc.show(rejected) == "rejected: found no matching overload for '_>_'"
    assert sc.show(frozenset()) == "(none)" and sc.show(frozenset({"b", "a"})) == "a b"
