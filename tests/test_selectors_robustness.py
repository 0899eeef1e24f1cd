"""Whatever text a user writes as a selector, and whatever device it meets, the only outcomes are
True, False, SelectorCompileError or SelectorEvaluationError: never a crash, never a hang."""
from __future__ import annotations

from hypothesis import HealthCheck, given, settings, strategies as st

from modelplane.cel import SelectorCompileError, SelectorEvaluationError, selector_problem
from modelplane.devices import evaluate

DEVICE = {"driver": "gpu.example.com", "attributes": {"a": {"int": 1}, "s": {"string": "x"}, "v": {"version": "1.2.3"},
                                                     "b": {"bool": True}},
          "capacity": {"memory": {"value": "80Gi"}}}
TOKENS = ["device", ".", "attributes", "capacity", "driver", '["gpu.example.com"]', "a", "s", "v", "b", "memory",
          "(", ")", "[", "]", "{", "}", ",", ":", "?", "!", "-", "+", "*", "/", "%", "==", "!=", "<", ">=", "&&", "||",
          " in ", "1", "0", "2u", "1.5", "'x'", "true", "null", "quantity", "semver", "'1Gi'", "'1.0.0'", "size",
          "exists", "all", "map", "filter", "x", "has", "cel.bind", "compareTo", "isGreaterThan", "matches", "'['",
          "split", "sets.contains", "int", "string", "dyn", "type", "lists.range", "9223372036854775807"]


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(TOKENS), min_size=1, max_size=14).map("".join))
def test_token_soup_never_crashes(expression):
    try:
        evaluate(expression, DEVICE)
    except (SelectorCompileError, SelectorEvaluationError):
        pass
    problem = selector_problem(expression)
    assert problem is None or isinstance(problem, str)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=40))
def test_arbitrary_text_never_crashes(expression):
    try:
        result = evaluate(expression, DEVICE)
    except (SelectorCompileError, SelectorEvaluationError) as error:
        assert str(error)  # a refusal says why
        assert selector_problem(expression) is not None or isinstance(error, SelectorEvaluationError)
        return
    assert type(result) is bool  # a selector is a predicate: nothing else ever comes back
    assert selector_problem(expression) is None  # what `validate` accepts is what evaluates
