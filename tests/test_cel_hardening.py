"""Hardening of DRA selectors (issue 11, classes 5 and 6).

Regexes follow Go's RE2 as Kubernetes does: linear time, the same syntax (no backreferences, no
lookaround), a constant pattern RE2 refuses fails validation. Deep nesting evaluates when flat
(`&&`/`||` chains) and is a clear error past MAX_NESTING, never a RecursionError or a hang.
"""
from __future__ import annotations

import re
import subprocess
import sys
import time

import pytest

from modelplane.cel import SelectorCompileError, SelectorEvaluationError, compile_selector, regex, selector_problem
from modelplane.cel.syntax import MAX_NESTING, nesting, parse_cel
from modelplane.devices import SelectorCache, evaluate

FAKE = {"name": "gpu", "driver": "gpu.example.com", "deviceClassName": "gpu.example.com",
        "attributes": {"model": {"string": "H100"}, "pattern": {"string": "(a)\\1"}, "good": {"string": "H1.0"}},
        "capacity": {"memory": {"value": "80Gi"}}}
ATTR = 'device.attributes["gpu.example.com"]'
SEED = 'device.capacity["gpu.example.com"].memory.compareTo(quantity("20Gi")) >= 0'


def cel_string(text: str) -> str:
    """A CEL double-quoted literal for `text`."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


# ---- class 5: RE2 semantics ------------------------------------------------------------------------

@pytest.mark.parametrize("text, pattern, expected", [
    ("a\n", "a$", False),  # Go: $ is the end of text; Python's re would also match before the final newline
    ("a\n", "(?m)a$", True),
    ("a\n", "a\\z", False),
    ("ab", "a\\z", False),
    ("A", "(?i)a", True),
    ("ab", "(?P<x>a)b", True),
    ("ab", "(?<x>a)b", True),  # Go 1.22+ accepts this form too
    ("a{,3}", "^a{,3}$", True),  # {,n} is literal text in RE2 and Go
    ("aaa", "^a{,3}$", False),
    ("\u0660", "\\d", False),  # \d \s \w are ASCII-only
    ("\v", "\\s", False),
    ("é", "^.$", True),  # one character, not one byte
    ("NVIDIA H100 80GB", "H1[0-9]{2}", True),
])
def test_matches_follows_go_re2(text, pattern, expected):
    assert evaluate(f"{cel_string(text)}.matches({cel_string(pattern)})", FAKE) is expected
    assert evaluate(f"matches({cel_string(text)}, {cel_string(pattern)})", FAKE) is expected


@pytest.mark.parametrize("expression", [
    '"abc123def45".find("[0-9]+") == "123"',
    '"abc".find("z") == ""',
    '"baaa".findAll("a*") == ["", "aaa"]',  # Go drops the empty match right after "aaa"; Python keeps it
    '"baaa".findAll("a*", 1) == [""]',
    '"abc".findAll("") == ["", "", "", ""]',
    '"abc".findAll("[a-z]", 0) == []',
    '"abc".findAll("[a-z]", -1) == ["a", "b", "c"]',
    '"ab cd".findAll("\\\\b").size() == 4',
    '"日本語".findAll("本*") == ["", "本", ""]',
    '"héllo wörld".findAll("[^ ]+") == ["héllo", "wörld"]',
])
def test_find_and_find_all_follow_kubernetes(expression):
    assert evaluate(expression, FAKE) is True


@pytest.mark.parametrize("text, pattern", [
    ("a" * 32 + "!", "(a+)+$"),
    ("a" * 32 + "!", "(a|aa)+$"),
    ("a" * 32 + "!", "(a*)*b"),
    ("x" * 5000, "(x+x+)+y"),
])
def test_catastrophic_backtracking_pattern_returns_quickly(text, pattern):
    start = time.perf_counter()
    assert evaluate(f"{cel_string(text)}.matches({cel_string(pattern)})", FAKE) is False
    assert evaluate(f"{cel_string(text)}.find({cel_string(pattern)}) == ''", FAKE) is True
    assert regex.matches(text * 20, pattern) is False
    assert time.perf_counter() - start < 2


def test_find_all_is_linear_in_the_number_of_matches():
    start = time.perf_counter()
    assert len(regex.find_all("ab" * 20_000, "a")) == 20_000
    assert time.perf_counter() - start < 2


REFUSED = [
    ("(a)\\1", "invalid escape sequence: \\1"),  # backreference
    ("(?=x)", "invalid perl operator: (?="),  # lookahead
    ("(?!x)", "invalid perl operator: (?!"),
    ("(?<=x)", "invalid perl operator: (?<="),  # lookbehind
    ("(?<!x)", "invalid perl operator: (?<!"),
    ("[", "missing ]: ["),
    ("\\Z", "invalid escape sequence: \\Z"),  # Go has \z only
    ("a*+", "bad repetition operator: *+"),  # possessive
    ("a++", "bad repetition operator: ++"),
    ("(?x)a b", "invalid perl operator: (?x"),  # no verbose flag in Go
    ("\\C", "invalid escape sequence: \\C"),  # RE2 C++ has it, Go does not
    ("a{1001}", "invalid repetition size: {1001}"),
    ("(?P=n)", "invalid perl operator: (?P"),
]


def test_backreference_is_refused_at_validation():
    problem = selector_problem(f'{ATTR}.model.matches("(a)\\\\1")')
    assert problem is not None and problem.startswith("CEL compile error: invalid matches argument '(a)\\1': "
                                                      "error parsing regexp: invalid escape sequence: \\1")


@pytest.mark.parametrize("call", ["{text}.matches({p})", "matches({text}, {p})", "{text}.find({p}) == ''",
                                  "{text}.findAll({p}).size() == 0", "{text}.findAll({p}, 2).size() == 0"])
@pytest.mark.parametrize("pattern, reason", REFUSED)
def test_constant_pattern_re2_refuses_is_refused_at_validation(call, pattern, reason):
    expression = call.format(text=f"{ATTR}.model", p=cel_string(pattern))
    problem = selector_problem(expression)
    assert problem is not None and "CEL compile error: invalid " in problem and reason in problem
    with pytest.raises(SelectorCompileError, match="error parsing regexp"):
        evaluate(expression, FAKE)


def test_refused_pattern_prints_nothing_to_stderr(capfd):
    regex.compile_regex.cache_clear()
    assert selector_problem(f'{ATTR}.model.matches("(?=x)[")') is not None
    assert capfd.readouterr().err == ""  # RE2 C++ logs refused patterns unless told not to


@pytest.mark.parametrize("pattern_attribute, expected", [("pattern", SelectorEvaluationError), ("good", True)])
def test_non_constant_pattern_is_checked_at_evaluation(pattern_attribute, expected):
    expression = f"{ATTR}.model.matches({ATTR}.{pattern_attribute})"
    assert selector_problem(expression) is None  # nothing constant to check
    if expected is True:
        assert evaluate(expression, FAKE) is True
    else:
        with pytest.raises(SelectorEvaluationError, match="CEL runtime error: error parsing regexp: invalid escape"):
            evaluate(expression, FAKE)
        assert isinstance(SelectorCache().matches(expression, FAKE), SelectorEvaluationError)


@pytest.mark.parametrize("text, pattern", [
    ("a\n", "a$"), ("a\n", "(?m)a$"), ("ab", "(?P<x>a)b"), ("A", "(?i)a"), ("a{,3}", "^a{,3}$"), ("\u0660", "\\d"),
    ("ab", "(a)\\1"), ("x", "(?=x)"), ("x", "["), ("x", "\\Z"), ("aa", "a*+"), ("é", "^.$"),
    ("a" * 40 + "!", "(a+)+$"),
])
def test_matches_agrees_with_the_cpp_re2_oracle(text, pattern):
    cel = pytest.importorskip("cel_expr_python.cel")
    expression = f"{cel_string(text)}.matches({cel_string(pattern)})"
    try:
        expected = cel.NewEnv().compile(expression).eval().plain_value()
    except Exception:  # noqa: BLE001 - refused by the oracle
        expected = "error"
    expected = expected if isinstance(expected, bool) else "error"  # an error value
    try:
        ours = evaluate(expression, FAKE)
    except SelectorCompileError:
        ours = "error"
    assert ours == expected


# ---- class 6: deep nesting -------------------------------------------------------------------------

def test_500_chained_ands_evaluate():
    expression = " && ".join(["true"] * 499 + [SEED])
    assert len(expression) < 10 * 1024 and selector_problem(expression) is None
    assert evaluate(expression, FAKE) is True
    assert evaluate(" && ".join([SEED] * 500), FAKE) is True  # longer than the API allows: still no recursion
    assert evaluate(" || ".join([f'device.driver == "d{i}"' for i in range(2000)]), FAKE) is False


@pytest.mark.parametrize("terms, absorbed", [
    (["1/0 == 1"] + ["true"] * 300 + ["false"], False),  # false absorbs the error, wherever it is
    (["false"] + ["1/0 == 1"] * 300, False),
    (["true"] * 300 + ["1/0 == 1"], SelectorEvaluationError),
])
def test_long_chain_absorbs_errors_like_cel(terms, absorbed):
    expression = " && ".join(terms)
    if absorbed is False:
        assert evaluate(expression, FAKE) is False
    else:
        with pytest.raises(SelectorEvaluationError, match="division by zero"):
            evaluate(expression, FAKE)


def realistic_or_group(size: int = 2048) -> str:
    terms, i = [], 0
    while len(" || ".join(terms)) < size:
        terms.append(f'(device.driver == "gpu{i}.example.com" && has({ATTR}.model) && {ATTR}.model == "M{i}" '
                     f'&& device.capacity["gpu.example.com"].memory.compareTo(quantity("{i + 1}Gi")) >= 0)')
        i += 1
    last = [f'(has({ATTR}.model) && {ATTR}.model.matches("^H1[0-9]{{2}}$") && {SEED})', f"({SEED})"]
    return "(" + " || ".join(terms + last) + ")"


def test_realistic_2kb_or_group_evaluates():
    expression = realistic_or_group()
    assert len(expression) > 2048 and selector_problem(expression) is None
    assert evaluate(expression, FAKE) is True


@pytest.mark.parametrize("expression, expected", [
    ("(" * 44 + SEED + ")" * 44, True),
    ("!" * 300 + "true", True),  # cel-go folds a run of ! (and -) into at most one
    ("!" * 301 + "true", False),
    ("--1 == 1", True),
    ("!!1 == 1", True),  # as cel-go and cel-cpp: !! is dropped before type checking
])
def test_nesting_within_the_limit_evaluates(expression, expected):
    assert selector_problem(expression) is None
    assert evaluate(expression, FAKE) is expected


SHAPES = {  # n -> an expression nesting about n levels
    "parentheses": lambda n: "(" * n + "true" + ")" * n,
    "negations": lambda n: "!(" * n + ("false" if n % 2 else "true") + ")" * n,
    "additions": lambda n: "1" + " + 1" * n + " > 0",
    "lists": lambda n: "[" * n + "true" + "]" * n + "[0]" * n,
    "calls": lambda n: "int(" + "string(" * n + "1" + ")" * n + ") == 1",
    "conditionals": lambda n: "false ? true : " * n + "true",
    "macros": lambda n: "".join(f"[1].all(x{i}, " for i in range(n)) + "true" + ")" * n,
    "index": lambda n: "cel.bind(l, " + "[" * n + "1" + "]" * n + ", l" + "[0]" * n + " == 1)",
    "and groups": lambda n: "(true && " * n + "true" + ")" * n,
    "mixed": lambda n: "(false || !(" * n + ("false" if n % 2 else "true") + "))" * n,
}


def _deepest_accepted(shape) -> str:
    n = MAX_NESTING
    while (problem := selector_problem(shape(n))) is not None and "nests" in problem:
        n -= 1
    return shape(n)


@pytest.mark.parametrize("shape", SHAPES.values(), ids=SHAPES.keys())
def test_deepest_accepted_nesting_evaluates_with_little_stack_left(shape):
    expression = _deepest_accepted(shape)
    assert selector_problem(expression) is None and nesting(parse_cel(expression))[0] > MAX_NESTING - 4

    def with_stack_used(frames: int):  # as if called from deep inside Pulumi or a test runner
        return with_stack_used(frames - 1) if frames else evaluate(expression, FAKE)

    compile_selector.cache_clear()  # parse, check and compile again, with only 550 frames to spare
    assert with_stack_used(sys.getrecursionlimit() - 550) is True


@pytest.mark.slow  # deep nesting near the recursion limit, per case
@pytest.mark.parametrize("shape", SHAPES.values(), ids=SHAPES.keys())
@pytest.mark.parametrize("n", [MAX_NESTING + 1, 1000])
def test_deep_nesting_is_a_clear_error(shape, n):
    expression = shape(n)
    problem = selector_problem(expression)
    assert problem is not None and problem.startswith("CEL syntax error at line 1, column ")
    assert f"levels deep; at most {MAX_NESTING}" in problem.splitlines()[0]
    with pytest.raises(SelectorCompileError, match=f"expression nests [0-9]+ levels deep; at most {MAX_NESTING}"):
        evaluate(expression, FAKE)
    assert isinstance(SelectorCache().matches(expression, FAKE), SelectorEvaluationError)  # never raised


@pytest.mark.parametrize("n", [150, 5000])
def test_deep_nesting_message_counts_levels_and_points_at_the_first_one_too_deep(n):
    problem = selector_problem("(" * n + "true" + ")" * n)
    assert problem == f"CEL syntax error at line 1, column {MAX_NESTING + 1}: expression nests {n + 1} levels deep; " \
                      f"at most {MAX_NESTING}"


def test_huge_expression_is_refused_before_parsing():
    start = time.perf_counter()
    problem = selector_problem(" && ".join(["true"] * 30_000))
    assert problem == "CEL syntax error: expression code point size exceeds limit: size: 239996, limit 100000"
    assert time.perf_counter() - start < 1


# ---- the command line, end to end ------------------------------------------------------------------

CLI_CASES = [  # name, selector, exit code, what stderr must say, whether plan schedules every replica
    ("44 parentheses", "(" * 44 + SEED + ")" * 44, 0, "", True),
    ("500 ands", " && ".join(["true"] * 499 + [SEED]), 0, "", True),
    ("500 ands, false", " && ".join(["true"] * 499 + ["false"]), 0, "", False),
    ("2 KB or group", realistic_or_group(), 0, "", True),
    ("backtracking", f'!{cel_string("a" * 32 + "!")}.matches("(a+)+$") && {SEED}', 0, "", True),
    ("deep nesting", "(" * 300 + SEED + ")" * 300, 2, "column 101: expression nests 306 levels deep; at most 100",
     None),
    ("additions", "1" + " + 1" * 2000 + " > 0", 2, "levels deep; at most 100", None),
    ("backreference", f'{ATTR}.model.matches("(a)\\\\1")', 2,
     "invalid matches argument '(a)\\1': error parsing regexp: invalid escape sequence: \\1", None),
    ("lookahead", 'device.driver.find("(?=gpu)") == ""', 2, "invalid find argument '(?=gpu)'", None),
    ("bad constant", f'{ATTR}.model.matches("[")', 2, "invalid matches argument '[': error parsing regexp: missing ]",
     None),
]


def _stack_file(repo, tmp_path, selector: str):
    text = (repo / "stacks" / "Pulumi.demo.yaml").read_text()
    assert text.count(SEED) == 1
    path = tmp_path / "Pulumi.hardening.yaml"
    path.write_text(text.replace(SEED, "'" + selector.replace("'", "''") + "'"))
    return path


def _run(*args: str) -> tuple[subprocess.CompletedProcess, float]:
    start = time.perf_counter()
    result = subprocess.run([sys.executable, "-m", "modelplane", *args], capture_output=True, text=True, timeout=60)
    return result, time.perf_counter() - start


@pytest.mark.slow  # processes per case
@pytest.mark.parametrize("name, selector, code, message, scheduled", CLI_CASES, ids=[c[0] for c in CLI_CASES])
def test_cli_validate_and_plan_end_to_end(repo, tmp_path, name, selector, code, message, scheduled):
    path = _stack_file(repo, tmp_path, selector)
    for command in ("validate", "plan"):
        result, seconds = _run(command, "--config", str(path))
        assert seconds < 10, f"{command} took {seconds:.1f} s"
        assert "Traceback" not in result.stderr and "re2.cc" not in result.stderr
        assert result.returncode == code, result.stderr
        if code == 2:
            lines = [line for line in result.stderr.splitlines() if message in line]
            assert lines and "selectors[0].cel: CEL " in lines[0], result.stderr  # the config path and why, one line
        elif command == "plan":
            counts = re.search(r"Scheduled (\d+) of (\d+) replicas", result.stdout)
            assert counts and (counts[1] == counts[2] if scheduled else counts[1] == "0"), result.stdout


def test_cli_explain_with_a_deep_but_valid_selector(repo, tmp_path):
    path = _stack_file(repo, tmp_path, " && ".join(["true"] * 499 + ["false"]))
    result, seconds = _run("explain", "ml-team/mock-demo", "--config", str(path))
    assert seconds < 10 and result.returncode == 0 and "Traceback" not in result.stderr
    assert "Scheduled 0 of " in result.stdout and "no device matches" in result.stdout
