"""Kubernetes' own DRA CEL test table (k8s.io/dynamic-resource-allocation cel/compile_test.go), every
case with scalar attributes: `evaluate` must give the same match, compile error or runtime error.

Environment: the scheduler's (StoredExpressions), so macros over a scalar attribute are runtime
errors, as in those cases. Some cases are gate-dependent: Kubernetes runs them with alpha feature gates
on, but a stock 1.34 cluster has them off and its API server refuses such a selector (measured on
kube-apiserver v1.34.3: 422 "undefined field 'allowMultipleAllocations'"). modelplane targets the stock
cluster, so for those cases it must give our gate-naming compile error; Kubernetes' answer is still
checked with the gate turned on explicitly, to keep the evaluator right for when the gate goes GA.
"""
from __future__ import annotations

import pytest

from modelplane.cel import SelectorCompileError, SelectorEvaluationError, selector_problem
from modelplane.cel.checker import CONSUMABLE_CAPACITY, LIST_TYPE_ATTRIBUTES
from modelplane.devices import evaluate

DRA = "dra.example.com"
COMPILE, RUNTIME = "compile error", "runtime error"


def device(attributes=None, capacity=None, driver=DRA, **extra):
    return {"driver": driver, "attributes": attributes or {}, "capacity": capacity or {}, **extra}


FISH = device({"name": {"string": "fish"}})
EXPENSIVE = ("[1, 2, 3, 4, 5, 6, 7, 8, 9, 10].all(x, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10].all(y, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]"
             ".all(z, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10].all(z2, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10].all(z3, [1, 2, 3, 4, 5, 6, "
             "7, 8, 9, 10].all(z4, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10].all(z5, int('1'.find('[0-9]*')) < 100)))))))")
ALL = """
device.capacity["dra.example.com"].quantity.isGreaterThan(quantity("1Ki")) &&
device.attributes["dra.example.com"].bool &&
device.attributes["dra.example.com"].int > 0 &&
device.attributes["dra.example.com"].string == "fish" &&
device.attributes["dra.example.com"].version.isGreaterThan(semver("0.0.1")) &&
device.capacity["dra.example.com"]["quantity"].isGreaterThan(quantity("1Ki")) &&
device.attributes["dra.example.com"]["bool"] &&
device.attributes["dra.example.com"]["int"] > 0 &&
device.attributes["dra.example.com"]["string"] == "fish" &&
device.attributes["dra.example.com"]["version"].isGreaterThan(semver("0.0.1"))
"""

CASES = {
    "true": ("true", device(driver=""), True, ""),
    "false": ("false", device(driver=""), False, ""),
    "syntax-error": ("?!", device(driver=""), COMPILE, "Syntax error"),
    "type-error": ("1", device(driver=""), COMPILE, "must evaluate to bool or the unknown type, not int"),
    "runtime-error-lookup-identifier": (
        'device.attributes["no-such-domain"].noSuchAttr.isGreaterThan(quantity("0"))', device(driver=""),
        RUNTIME, "no such key: noSuchAttr"),
    "runtime-error-lookup-map": (
        'device.attributes["no-such-domain"]["noSuchAttr"].isGreaterThan(quantity("0"))', device(driver=""),
        RUNTIME, "no such key: noSuchAttr"),
    "domain-check-negative": ('"no-such-domain" in device.attributes', device(driver=""), False, ""),
    "domain-check-positive": ('"dra.example.com" in device.attributes',
                              device({"dra.example.com/something": {"bool": True}}, driver=""), True, ""),
    "empty-driver-name": ('device.driver == ""', device(driver=""), True, ""),
    "real-driver-name": ('device.driver == "dra.example.com"', device(), True, ""),
    "driver-name-qualifier": ('device.attributes["dra.example.com"].name', device({"name": {"bool": True}}), True, ""),
    "driver-name-qualifier-map-lookup": ('device.attributes["dra.example.com"]["name"]',
                                         device({"name": {"bool": True}}), True, ""),
    "bind": ('cel.bind(dra, device.attributes["dra.example.com"], dra.name)', device({"name": {"bool": True}}), True, ""),
    "qualified-attribute-name": ('device.attributes["other.example.com"].name',
                                 device({"other.example.com/name": {"bool": True}}), True, ""),
    "bool": ('device.attributes["dra.example.com"].name', device({"name": {"bool": True}}), True, ""),
    "int": ('device.attributes["dra.example.com"].name > 0', device({"name": {"int": 1}}), True, ""),
    "string": ('device.attributes["dra.example.com"].name == "fish"', FISH, True, ""),
    "macro-exists-on-int": ('device.attributes["dra.example.com"].name.exists(x, x > 0)', device({"name": {"int": 1}}),
                            RUNTIME, "got 'types.Int', expected iterable type"),
    "macro-exists-on-bool": ('device.attributes["dra.example.com"].name.exists(x, x == true)',
                             device({"name": {"bool": True}}), RUNTIME, "got 'types.Bool', expected iterable type"),
    "macro-exists-on-string": ('device.attributes["dra.example.com"].name.exists(x, x == "fish")', FISH,
                               RUNTIME, "got 'types.String', expected iterable type"),
    "includes-function-on-bool-scalar-positive": ('device.attributes["dra.example.com"].name.includes(true)',
                                                  device({"name": {"bool": True}}), True, ""),
    "includes-function-on-bool-scalar-negative": ('device.attributes["dra.example.com"].name.includes(true)',
                                                  device({"name": {"bool": False}}), False, ""),
    "includes-function-on-int-scalar-positive": ('device.attributes["dra.example.com"].name.includes(1)',
                                                 device({"name": {"int": 1}}), True, ""),
    "includes-function-on-int-scalar-negative": ('device.attributes["dra.example.com"].name.includes(1)',
                                                 device({"name": {"int": 2}}), False, ""),
    "includes-function-on-string-scalar-positive": ('device.attributes["dra.example.com"].name.includes("fish")',
                                                    FISH, True, ""),
    "includes-function-on-string-scalar-negative": ('device.attributes["dra.example.com"].name.includes("bird")',
                                                    FISH, False, ""),
    "includes-function-on-semver-scalar-positive": (
        'device.attributes["dra.example.com"].name.includes(semver("1.0.0"))', device({"name": {"version": "1.0.0"}}),
        True, ""),
    "includes-function-on-semver-scalar-negative": (
        'device.attributes["dra.example.com"].name.includes(semver("2.0.0"))', device({"name": {"version": "1.0.0"}}),
        False, ""),
    "version": ('device.attributes["dra.example.com"].name.isGreaterThan(semver("0.0.1"))',
                device({"name": {"version": "1.0.0"}}), True, ""),
    "version_v": ('device.attributes["dra.example.com"].name.isGreaterThan(semver("v0.0.1", true)) && '
                  'isSemver("v1.0.0", true)', device({"name": {"version": "1.0.0"}}), True, ""),
    "macro-exists-on-version": ('device.attributes["dra.example.com"].name.exists(x, x.isGreaterThan(semver("0.0.1")))',
                                device({"name": {"version": "1.0.0"}}), RUNTIME, "got 'cel.Semver', expected iterable type"),
    "quantity": ('device.capacity["dra.example.com"].name.isGreaterThan(quantity("1Ki"))',
                 device(capacity={"name": {"value": "1Mi"}}), True, ""),
    "check-positive": ('"name" in device.capacity["dra.example.com"] && '
                       'device.capacity["dra.example.com"].name.isGreaterThan(quantity("1Ki"))',
                       device(capacity={"name": {"value": "1Mi"}}), True, ""),
    "check-negative": ('!("name" in device.capacity["dra.example.com"]) || '
                       'device.capacity["dra.example.com"].name.isGreaterThan(quantity("1Ki"))', device(driver=""), True, ""),
    "all": (ALL, device({"bool": {"bool": True}, "int": {"int": 1}, "string": {"string": "fish"},
                         "version": {"version": "1.0.0"}}, {"quantity": {"value": "1Mi"}}), True, ""),
    "many": ('device.attributes["dra.example.com"].a && device.attributes["dra.example.com"].b && '
             'device.attributes["dra.example.com"].c',
             device({"a": {"bool": True}, "b": {"bool": True}, "c": {"bool": True}}), True, ""),
    "check_attribute_domains": ('device.attributes.exists_one(x, x == "dra.example.com")',
                                device({"services": {"string": "some_example_value"}}), True, ""),
    "check_attribute_ids": ('device.attributes["dra.example.com"].exists_one(x, x == "services")',
                            device({"services": {"string": "some_example_value"}}), True, ""),
    "split_attribute": ('device.attributes["dra.example.com"].services.split("example").size() >= 2',
                        device({"services": {"string": "some_example_value"}}), True, ""),
    "regexp_attribute": ('device.attributes["dra.example.com"].services.matches("[^a]?sym")',
                         device({"services": {"string": "asymetric"}}), True, ""),
    "check_capacity_domains": ('device.capacity.exists_one(x, x == "dra.example.com")',
                               device(capacity={"memory": {"value": "1Mi"}}), True, ""),
    "check_capacity_ids": ('device.capacity["dra.example.com"].exists_one(x, x == "memory")',
                           device(capacity={"memory": {"value": "1Mi"}}), True, ""),
    "expensive": (EXPENSIVE, device(), RUNTIME, "actual cost limit exceeded"),
    "allow_multiple_allocations": ("device.allowMultipleAllocations == true",
                                   device(allowMultipleAllocations=True), True, ""),
    "allow_multiple_allocations_default": ("device.allowMultipleAllocations == false", device(), True, ""),
    "allow_multiple_allocations_false": ("device.allowMultipleAllocations == false",
                                         device(allowMultipleAllocations=False), True, ""),
}


# Gate-dependent cases: what in the expression needs which alpha gate, and our refusal without it.
GATED = {
    "device.allowMultipleAllocations": (
        CONSUMABLE_CAPACITY, "undefined field 'allowMultipleAllocations': device.allowMultipleAllocations needs the "
                             "DRAConsumableCapacity feature gate (alpha in Kubernetes 1.34, off by default), so the "
                             "API server would refuse this selector; remove it"),
    ".includes(": (
        LIST_TYPE_ATTRIBUTES, "undeclared reference to 'includes': includes() needs the DRAListTypeAttributes "
                              "feature gate (alpha since Kubernetes 1.36, off by default)"),
}


def gate_of(expression: str) -> tuple[str, str] | None:
    return next((gated for needle, gated in GATED.items() if needle in expression), None)


GATED_CASES = {name: case for name, case in CASES.items() if gate_of(case[0])}


@pytest.mark.parametrize("expression, dev, expected, message", CASES.values(), ids=CASES.keys())
def test_agrees_with_kubernetes(expression, dev, expected, message):
    """Kubernetes' answer, with the alpha gate on for gate-dependent cases (as Kubernetes runs them)."""
    gates = frozenset([gate_of(expression)[0]]) if gate_of(expression) else frozenset()
    if expected == COMPILE:
        with pytest.raises(SelectorCompileError, match=message):
            evaluate(expression, dev, gates=gates)
    elif expected == RUNTIME:
        with pytest.raises(SelectorEvaluationError, match=message):
            evaluate(expression, dev, gates=gates)
    else:
        assert evaluate(expression, dev, gates=gates) is expected


@pytest.mark.parametrize("expression, dev", [c[:2] for c in GATED_CASES.values()], ids=GATED_CASES.keys())
def test_gate_dependent_cases_are_refused_like_a_default_api_server(expression, dev):
    """With default gates (the stock 1.34 API server and scheduler) these selectors do not compile:
    neither the config path (selector_problem) nor evaluation (the scheduler) may accept them."""
    _, message = gate_of(expression)
    assert message in selector_problem(expression)
    with pytest.raises(SelectorCompileError) as refused:
        evaluate(expression, dev)
    assert message in str(refused.value)


def test_gated_cases_exist():
    assert {gate_of(c[0])[0] for c in GATED_CASES.values()} == {CONSUMABLE_CAPACITY, LIST_TYPE_ATTRIBUTES}
    assert len(GATED_CASES) == 11  # 8 includes, 3 allowMultipleAllocations


def test_the_expensive_case_is_refused_at_validation_by_its_estimated_cost():
    assert "too complex" in selector_problem(EXPENSIVE)
    for name, (expression, *_) in CASES.items():
        if expression not in (EXPENSIVE, "?!", "1") and name not in GATED_CASES:
            assert selector_problem(expression) is None, expression
