"""Device selectors beyond Kubernetes' own table: every function and lookup rule, CEL's core
semantics where cel-python gets them wrong, both call styles only where Kubernetes accepts them,
and the selectors users actually write (the seed, the spec's examples)."""
from __future__ import annotations

import re

import pytest

from modelplane.api import InferenceClass
from modelplane.cel import SelectorCompileError, SelectorEvaluationError, selector_problem
from modelplane.devices import SelectorCache, evaluate

H100 = {
    "name": "gpu", "driver": "gpu.nvidia.com", "deviceClassName": "gpu.nvidia.com", "count": 8,
    "attributes": {"architecture": {"string": "Hopper"}, "productName": {"string": "NVIDIA H100 80GB HBM3"},
                   "cudaComputeCapability": {"version": "9.0.0"}, "index": {"int": 3}, "mig": {"bool": False},
                   "resource.kubernetes.io/pcieRoot": {"string": "pci0000:00"}},
    "capacity": {"memory": {"value": "81559Mi"}},
}
FAKE = {"name": "gpu", "driver": "gpu.example.com", "deviceClassName": "gpu.example.com",
        "capacity": {"memory": {"value": "80Gi"}}}
NIC = {"name": "nic", "claim": "Synthetic", "driver": "nic.nvidia.com", "attributes": {"linkType": {"string": "infiniband"}}}
GPU = 'device.attributes["gpu.nvidia.com"]'
MEM = 'device.capacity["gpu.nvidia.com"].memory'

MATCHES = [
    # the seed and spec section 5.5
    ('device.capacity["gpu.example.com"].memory.compareTo(quantity("20Gi")) >= 0', FAKE, True),
    ('device.capacity["gpu.example.com"].memory.compareTo(quantity("81Gi")) >= 0', FAKE, False),
    ('device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("141Gi")) >= 0', H100, False),
    (f"{MEM}.compareTo(quantity(\"80Gi\")) >= 0", H100, False),  # 81559Mi is 79.6Gi: usable, not marketing
    (f"{MEM}.compareTo(quantity(\"70Gi\")) >= 0", H100, True),
    (f'{GPU}.cudaComputeCapability.isGreaterThan(semver("8.9.0"))', H100, True),
    (f'{GPU}.architecture == "Hopper"', H100, True),
    ('device.attributes["nic.nvidia.com"].linkType == "infiniband"', NIC, True),
    ('device.driver == "gpu.nvidia.com"', H100, True),
    ('"gpu.nvidia.com" in device.attributes', H100, True),
    ('"gpu.nvidia.com" in device.attributes', FAKE, False),
    # qualified names live under their own domain
    ('device.attributes["resource.kubernetes.io"].pcieRoot == "pci0000:00"', H100, True),
    ('"pcieRoot" in device.attributes["gpu.nvidia.com"]', H100, False),
    # heterogeneous equality: different types are unequal, never an error (built-in on the left)
    (f"{GPU}.index == \"3\"", H100, False),
    (f"{GPU}.architecture == 3", H100, False),
    (f"{GPU}.mig == 0", H100, False),
    ("dyn(1) == dyn(1.0)", FAKE, True),
    ("dyn(true) == dyn(1)", FAKE, False),
    ("1 < 1.5 && 2u > 1 && 1.0 <= 1", FAKE, True),
    ("[1, 2] == [1, 2] && {'a': 1} == {'a': 1} && [1] != [2]", FAKE, True),
    (f"{MEM} == quantity(\"81559Mi\") && quantity(\"1Gi\") == quantity(\"1024Mi\")", H100, True),
    ("dyn(1) == quantity('1')", FAKE, False),  # a built-in on the left: unequal, not an error
    ('semver("1.0.0+build1") == semver("1.0.0+build2")', FAKE, True),
    # error absorption: false && error is false, true || error is true (both orders)
    (f"{GPU}.missing == 1 || true", H100, True),
    (f"true || {GPU}.missing == 1", H100, True),
    (f"{GPU}.missing == 1 && false", H100, False),
    (f"has({GPU}.missing) && {GPU}.missing == 1", H100, False),
    (f"has({GPU}.index)", H100, True),
    ('has(device.attributes["nope.example.com"].x)', H100, False),
    ("[1, 2, 3].exists(x, x == 2) && [1, 2].all(x, x > 0) && [1, 2].exists_one(x, x == 1)", FAKE, True),
    ("[0, 1].all(x, 1 / x > 0 || x == 0)", FAKE, True),
    ("[1, 2].map(x, x * 2) == [2, 4] && [1, 2, 3].filter(x, x > 1) == [2, 3]", FAKE, True),
    ("[1, 2, 3].map(x, x > 1, x * 10) == [20, 30]", FAKE, True),
    ("{'a': 1, 'b': 2}.all(k, k.size() == 1)", FAKE, True),
    ("cel.bind(m, device.capacity['gpu.nvidia.com'].memory, m.isGreaterThan(quantity('1Gi')))", H100, True),
    # strings extension and regex
    (f"{GPU}.productName.startsWith('NVIDIA') && {GPU}.productName.contains('H100')", H100, True),
    (f"{GPU}.productName.lowerAscii().endsWith('hbm3')", H100, True),
    (f"{GPU}.productName.split(' ')[1] == 'H100'", H100, True),
    (f"{GPU}.productName.matches('H1[0-9]{{2}}')", H100, True),
    (f"matches({GPU}.productName, '^NVIDIA')", H100, True),
    (f"{GPU}.productName.find('[0-9]+GB') == '80GB'", H100, True),
    ("'a,b,c'.split(',').join('-') == 'a-b-c' && ' x '.trim() == 'x' && 'abc'.substring(1, 2) == 'b'", FAKE, True),
    ("'hello'.indexOf('l') == 2 && 'hello'.lastIndexOf('l') == 3 && 'hello'.charAt(1) == 'e'", FAKE, True),
    ("'aXbX'.replace('X', '-') == 'a-b-' && 'abc'.upperAscii() == 'ABC' && size('héllo') == 5", FAKE, True),
    # lists and sets
    ("[3, 1, 2].sort() == [1, 2, 3] && [1, 2, 3].isSorted() && [1, 2, 3].sum() == 6", FAKE, True),
    ("[1, 5, 2].max() == 5 && [1, 5, 2].min() == 1 && [1, 2, 1].distinct() == [1, 2]", FAKE, True),
    ("[[1], [2, 3]].flatten() == [1, 2, 3] && [1, 2, 3].slice(1, 3) == [2, 3] && [1, 2].reverse() == [2, 1]", FAKE, True),
    ("sets.contains([1, 2, 3], [1, 2]) && sets.intersects([1], [1, 4]) && sets.equivalent([1, 2], [2, 1])", FAKE, True),
    ("lists.range(3) == [0, 1, 2] && [1, 2, 3].indexOf(2) == 1", FAKE, True),
    # quantity library
    ('quantity("50M").isLessThan(quantity("50Mi"))', FAKE, True),
    ('quantity("200M").compareTo(quantity("0.2G")) == 0', FAKE, True),
    ('quantity("50k").add(20) == quantity("50020")', FAKE, True),
    ('quantity("50k").sub(quantity("20k")) == quantity("30k")', FAKE, True),
    ('sign(quantity("-50k")) == -1', FAKE, True),
    ('quantity("256e3") == quantity("256000")', FAKE, True),
    ('quantity("8Ei") == quantity("10Ei")', FAKE, True),  # binary values saturate at 2^63-1
    ('quantity("1Ki").asInteger() == 1024 && quantity("1.5").asApproximateFloat() == 1.5', FAKE, True),
    ('quantity("1000m").isInteger()', FAKE, False),
    ('isQuantity("10Mo")', FAKE, False),
    ('isQuantity("200K")', FAKE, False),
    # semver library
    ('semver("1.2.3").major() == 1 && semver("1.2.3").minor() == 2 && semver("1.2.3").patch() == 3', FAKE, True),
    ('semver("1.0.0-alpha").isLessThan(semver("1.0.0"))', FAKE, True),
    ('semver("1.0.0-alpha.1").isLessThan(semver("1.0.0-alpha.beta"))', FAKE, True),
    ('semver("v1.2", true) == semver("1.2.0")', FAKE, True),
    ('isSemver("1.2") || isSemver("01.2.3")', FAKE, False),
    # optional syntax, as Kubernetes' own error hint recommends for attributes that may be missing
    (f"{GPU}.?missing.orValue(5) == 5", H100, True),
    (f"{GPU}.?index.orValue(0) == 3", H100, True),
    ('device.attributes["nope.example.com"].?x.hasValue()', H100, False),
    ('device.attributes[?"gpu.nvidia.com"].hasValue() && !device.attributes[?"nope.example.com"].hasValue()', H100, True),
    ('device.capacity["gpu.nvidia.com"].?memory.orValue(quantity("0")).isGreaterThan(quantity("70Gi"))', H100, True),
    ("optional.of(1).value() == 1 && optional.none().orValue(2) == 2 && [1, 2][?5].orValue(9) == 9", FAKE, True),
]


@pytest.mark.parametrize("expression, device, expected", MATCHES, ids=[m[0][:60] for m in MATCHES])
def test_selector_answers(expression, device, expected):
    assert evaluate(expression, device) is expected


RUNTIME_ERRORS = [
    (f"{GPU}.missing == 1", H100, "no such key: missing"),
    (f"{GPU}.missing == 1 || false", H100, "no such key: missing"),
    (f"{GPU}.architecture", H100, "CEL result of type string could not be converted to bool"),
    (f"{GPU}.architecture.startsWith('H') && {GPU}.index.startsWith('1')", H100, "no such overload"),
    (f"{GPU}.architecture.isGreaterThan(semver('1.0.0'))", H100, "no such overload"),
    (f"{MEM} == dyn(1)", H100, "no such overload"),  # a Quantity on the left of another type: error
    ("quantity('bogus').isInteger()", FAKE, "quantities must match"),
    ("semver('1.2').major() == 1", FAKE, "No Major.Minor.Patch elements found"),
    ("quantity('1.5').asInteger() == 1", FAKE, "cannot convert value to integer"),
    ("1 / 0 == 1", FAKE, "division by zero"),
    ("9223372036854775807 + 1 > 0", FAKE, "overflow"),
    ("[1].exists_one(x, x / 0 == 1)", FAKE, "division by zero"),
    ("{'a': 1}['b'] == 1", FAKE, "no such key: b"),
    ("[1][3] == 1", FAKE, "index out of bounds"),
    ("optional.none().value() == 1", FAKE, "optional.none() dereference"),
]


@pytest.mark.parametrize("expression, device, message", RUNTIME_ERRORS, ids=[e[0][:60] for e in RUNTIME_ERRORS])
def test_runtime_errors_are_reported_not_coerced(expression, device, message):
    with pytest.raises(SelectorEvaluationError, match=re.escape(message)):
        evaluate(expression, device)


COMPILE_ERRORS = [
    ("device.driver ==", "Syntax error"),
    ("device.foo == 1", "undefined field 'foo'"),
    ("nosuchvar == 1", "undeclared reference to 'nosuchvar'"),
    ("nosuchfunction(1)", "undeclared reference to 'nosuchfunction'"),
    ("device.driver", "must evaluate to bool or the unknown type, not string"),
    ("quantity('1')", "not kubernetes.Quantity"),
    ('"a" in "abc"', "no matching overload for '@in'"),  # CEL has no substring `in`
    ("device.driver > 1", "no matching overload for '_>_'"),
    ("quantity(1) == quantity('1')", "no matching overload for 'quantity'"),
    (f"{MEM} > quantity('1')", "no matching overload for '_>_'"),  # quantities have no operators
    (f"{GPU}.index > quantity('1')", "no matching overload for '_>_'"),
    (f"{MEM} == 1", "no matching overload for '_==_'"),
    ("[1, 'a'] == [1]", "homogeneous"),
    # call styles: only as Kubernetes declares each function
    (f"isGreaterThan({MEM}, quantity('1'))", "declared only as a member function"),
    (f"{MEM}.sign() == 1", "declared only as a global function"),
    ("'1Gi'.quantity().sign() == 1", "declared only as a global function"),
    ("has(device.attributes['x'])", "invalid argument to has() macro"),
    ("device.driver.exists(x, true)", "cannot be range of a comprehension"),
    ("device.attributes['x'].y.z()", "undeclared reference to 'z'"),
    # Gate-dependent: with DRAConsumableCapacity on (Kubernetes' own tests) this is true, as the field
    # defaults to false; a stock 1.34 API server has the gate off and refuses the selector with 422
    # "undefined field 'allowMultipleAllocations'" (measured on v1.34.3), so we refuse it too.
    ("device.allowMultipleAllocations == false", "undefined field 'allowMultipleAllocations': "
     "device.allowMultipleAllocations needs the DRAConsumableCapacity feature gate (alpha in Kubernetes 1.34, "
     "off by default), so the API server would refuse this selector; remove it"),
    ("has(device.allowMultipleAllocations)", "needs the DRAConsumableCapacity feature gate"),
    ("device.?allowMultipleAllocations.orValue(false)", "needs the DRAConsumableCapacity feature gate"),
    ("cel.bind(d, device, !d.allowMultipleAllocations)", "needs the DRAConsumableCapacity feature gate"),
    (f"{MEM}.isInteger() && device.allowMultipleAllocations", "needs the DRAConsumableCapacity feature gate"),
]


@pytest.mark.parametrize("expression, message", COMPILE_ERRORS, ids=[e[0][:60] for e in COMPILE_ERRORS])
def test_compile_errors(expression, message):
    with pytest.raises(SelectorCompileError, match=re.escape(message)):
        evaluate(expression, FAKE)


def test_size_both_styles():
    assert evaluate("size('abc') == 3 && 'abc'.size() == 3 && size([1]) == 1 && {'a': 1}.size() == 1", FAKE)


def test_validation_limits():
    assert selector_problem("true") is None
    assert "10240" in selector_problem("true && " * 1300 + "true")
    problem = selector_problem("device.foo == 1")
    assert problem.startswith("CEL compile error: undefined field 'foo'") and problem.endswith("device.foo == 1")
    assert selector_problem("device.driver ==").startswith("CEL syntax error at line 1, column 15")


def test_device_spec_and_dict_agree():
    spec = InferenceClass.model_validate({"devices": [H100]}).devices[0]
    assert evaluate(f'{GPU}.architecture == "Hopper"', spec) is evaluate(f'{GPU}.architecture == "Hopper"', H100) is True


def test_cache_evaluates_each_pair_once():
    cache = SelectorCache()
    other_count = {**FAKE, "name": "other", "count": 4}  # count and name are invisible to selectors
    for _ in range(10):
        assert cache.matches('device.capacity["gpu.example.com"].memory.compareTo(quantity("20Gi")) >= 0', FAKE) is True
        assert cache.matches('device.capacity["gpu.example.com"].memory.compareTo(quantity("20Gi")) >= 0', other_count) is True
        assert isinstance(cache.matches("device.attributes['gpu.example.com'].x", FAKE), SelectorEvaluationError)
    assert (cache.lookups, cache.evaluations) == (30, 2)


@pytest.mark.parametrize("published, integer", [("1.5Gi", True), ("1000m", True), ("1.5", False), ("80Gi", True)])
def test_capacities_are_seen_in_canonical_form(published, integer):
    """The API server stores 1.5Gi as 1536Mi and 1000m as 1, so isInteger() sees the canonical value."""
    device = {"driver": "gpu.example.com", "capacity": {"memory": {"value": published}}}
    assert evaluate('device.capacity["gpu.example.com"].memory.isInteger()', device) is integer


def test_short_and_qualified_names_meet_under_the_driver_domain():
    device = {"driver": "gpu.example.com", "attributes": {"gpu.example.com/model": {"string": "x"}}}
    assert evaluate('device.attributes["gpu.example.com"].model == "x"', device)


def test_only_the_gated_device_field_is_refused():
    """device.allowMultipleAllocations needs an alpha gate; an attribute of that name is a plain map lookup."""
    device = {**FAKE, "attributes": {"allowMultipleAllocations": {"bool": True}}}
    attribute = 'device.attributes["gpu.example.com"].allowMultipleAllocations'
    assert selector_problem(attribute) is None and evaluate(attribute, device) is True
    # the scheduler's path: a refused selector is an error answer, never a match
    answer = SelectorCache().matches("device.allowMultipleAllocations == false", FAKE)
    assert isinstance(answer, SelectorEvaluationError) and "DRAConsumableCapacity" in str(answer)
    # with the gate on (as Kubernetes' own tests run) the evaluator reads the field; unset is false
    assert evaluate("device.allowMultipleAllocations == false", FAKE, gates={"DRAConsumableCapacity"}) is True
    assert evaluate("device.allowMultipleAllocations", {**FAKE, "allowMultipleAllocations": True},
                    gates={"DRAConsumableCapacity"}) is True
