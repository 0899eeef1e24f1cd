"""Core CEL semantics checked against Google's C++ CEL (cel-expr-python) as an oracle.

Random well-typed expressions (ints, doubles, strings, bools, lists, macros, errors such as
division by zero, overflow, missing keys) must give the same value, or an error in both. The
oracle's default environment lacks two Kubernetes options (cross-type numeric comparison,
homogeneous literals), so the generator stays within what both accept.
"""
from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from modelplane.cel import SelectorCompileError, SelectorEvaluationError
from modelplane.devices import evaluate

cel = pytest.importorskip("cel_expr_python.cel")
ORACLE = cel.NewEnv()
NO_DEVICE = {"driver": "x"}


def oracle(expression: str) -> object:
    """True / False, or 'error' (compile or runtime)."""
    try:
        value = ORACLE.compile(expression).eval()
    except Exception:  # noqa: BLE001 - any refusal is an error outcome
        return "error"
    plain = value.plain_value()
    return plain if isinstance(plain, bool) else "error"


def ours(expression: str) -> object:
    try:
        return evaluate(expression, NO_DEVICE)
    except (SelectorCompileError, SelectorEvaluationError):
        return "error"


def _ints(depth: int) -> st.SearchStrategy[str]:
    leaf = st.sampled_from(["0", "1", "2", "-3", "7", "9223372036854775807", "-9223372036854775807"])
    if depth == 0:
        return leaf
    sub = _ints(depth - 1)
    return st.one_of(
        leaf,
        st.tuples(sub, st.sampled_from(["+", "-", "*", "/", "%"]), sub).map(lambda t: f"({t[0]} {t[1]} {t[2]})"),
        sub.map(lambda a: f"(-{a})"),
        _strings(depth - 1).map(lambda s: f"size({s})"),
        _int_lists(depth - 1).map(lambda xs: f"size({xs})"),
        st.tuples(_bools(depth - 1), sub, sub).map(lambda t: f"({t[0]} ? {t[1]} : {t[2]})"),
        st.tuples(_int_lists(depth - 1), sub).map(lambda t: f"{t[0]}[{t[1]}]"),
    )


def _doubles(depth: int) -> st.SearchStrategy[str]:
    leaf = st.sampled_from(["0.0", "1.5", "-2.25", "1e300"])
    if depth == 0:
        return leaf
    sub = _doubles(depth - 1)
    return st.one_of(leaf, st.tuples(sub, st.sampled_from(["+", "-", "*", "/"]), sub)
                     .map(lambda t: f"({t[0]} {t[1]} {t[2]})"), _ints(depth - 1).map(lambda i: f"double({i})"))


def _strings(depth: int) -> st.SearchStrategy[str]:
    leaf = st.sampled_from(["''", "'a'", "'abc'", "'b,a'", "'\\u00e9t\\u00e9'"])
    if depth == 0:
        return leaf
    sub = _strings(depth - 1)
    return st.one_of(leaf, st.tuples(sub, sub).map(lambda t: f"({t[0]} + {t[1]})"),
                     _ints(depth - 1).map(lambda i: f"string({i})"),
                     st.tuples(_bools(depth - 1), sub, sub).map(lambda t: f"({t[0]} ? {t[1]} : {t[2]})"))


def _int_lists(depth: int) -> st.SearchStrategy[str]:
    if depth == 0:
        return st.sampled_from(["[]", "[1]", "[1, 2, 3]", "[0, -1]"])
    sub = _ints(depth - 1)
    return st.one_of(
        st.lists(sub, max_size=3).map(lambda xs: f"[{', '.join(xs)}]"),
        st.tuples(_int_lists(depth - 1), _int_lists(depth - 1)).map(lambda t: f"({t[0]} + {t[1]})"),
        _int_lists(depth - 1).map(lambda xs: f"{xs}.map(v, v * 2)"),
        _int_lists(depth - 1).map(lambda xs: f"{xs}.filter(v, 10 / v > 1)"),
    )


def _bools(depth: int) -> st.SearchStrategy[str]:
    leaf = st.sampled_from(["true", "false"])
    if depth == 0:
        return leaf
    sub = _bools(depth - 1)
    compare = st.sampled_from(["<", "<=", ">", ">=", "==", "!="])
    same_typed = st.one_of(*(st.tuples(gen(depth - 1), compare, gen(depth - 1)) for gen in (_ints, _doubles, _strings)))
    return st.one_of(
        leaf,
        sub.map(lambda b: f"!{b}"),
        st.tuples(sub, st.sampled_from(["&&", "||"]), sub).map(lambda t: f"({t[0]} {t[1]} {t[2]})"),
        same_typed.map(lambda t: f"({t[0]} {t[1]} {t[2]})"),
        st.tuples(_ints(depth - 1), _int_lists(depth - 1)).map(lambda t: f"({t[0]} in {t[1]})"),
        st.tuples(st.sampled_from(["exists", "all", "exists_one"]), _int_lists(depth - 1), _ints(depth - 1))
        .map(lambda t: f"{t[1]}.{t[0]}(v, 100 / v > {t[2]})"),
        st.tuples(_strings(depth - 1), st.sampled_from(["startsWith", "endsWith", "contains"]), _strings(depth - 1))
        .map(lambda t: f"{t[0]}.{t[1]}({t[2]})"),
        st.tuples(_ints(depth - 1), _strings(depth - 1)).map(lambda t: f"(dyn({t[0]}) == dyn({t[1]}))"),
        st.tuples(_int_lists(depth - 1), _int_lists(depth - 1)).map(lambda t: f"({t[0]} == {t[1]})"),
        st.tuples(_strings(depth - 1), _ints(depth - 1)).map(lambda t: f"({{'a': 1, 'abc': 2}}[{t[0]}] == {t[1]})"),
    )


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_bools(3))
def test_agrees_with_cel_cpp(expression):
    assert ours(expression) == oracle(expression), expression


@pytest.mark.parametrize("expression", [
    "dyn(1) == dyn(1.0)", "dyn(true) == dyn(1)", "dyn(1) == dyn('a')", "2u == dyn(2)", "[1, 2] == dyn([1.0, 2.0])",
    "{'a': 1} == dyn({'a': 1.0})", "-9223372036854775807 - 1 < 0", "-(-9223372036854775807 - 1) < 0",
    "-7 / 2 == -3 && -7 % 2 == -1", "1.0 / 0.0 > 1e308", "'é'.size() == 1 && b'\\xc3\\xa9'.size() == 2",
    "[1, 2, 3].exists(x, 1 / (x - 2) == 5)", "[1, 2, 3].all(x, 1 / (x - 2) == 5)",
    "[1, 2, 3].exists_one(x, 1 / (x - 2) == 1)", "'\\x41\\101\\u0041' == 'AAA'", "r'\\d' == '\\\\d'",
    "'''a\nb''' == 'a\\nb'", "0x1F == 31", "null == null", "[] == []",
])
def test_core_semantics_agree(expression):
    assert ours(expression) == oracle(expression)
