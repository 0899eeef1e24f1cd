"""modelplane.cel.semver against the Go tables it ports.

Sources:
* blang/semver v4 `v4/semver_test.go` (formatTests, tolerantFormatTests, compareTests,
  wrongformatTests, wrongTolerantFormatTests);
* kubernetes `staging/src/k8s.io/apiserver/pkg/cel/library/semver_test.go` (TestSemver) and the
  doc-comment examples of `semverlib.go` in the same package;
* cases marked "derived" follow from reading `v4/semver.go` Parse and `semverlib.go`
  normalizeAndParse; they were not run against Go.
"""
from __future__ import annotations

from functools import cmp_to_key

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from modelplane.cel.semver import Semver, SemverError, is_semver


def fields(v: Semver) -> tuple:
    return (v.major, v.minor, v.patch, v.pre, v.build)


# --- blang/semver v4/semver_test.go: formatTests (TestStringer, TestParse) -------------------------
FORMAT_TESTS = [
    ((1, 2, 3, (), ()), "1.2.3"),
    ((0, 0, 1, (), ()), "0.0.1"),
    ((0, 0, 1, ("alpha", "preview"), ("123", "456")), "0.0.1-alpha.preview+123.456"),
    ((1, 2, 3, ("alpha", 1), ("123", "456")), "1.2.3-alpha.1+123.456"),
    ((1, 2, 3, ("alpha", 1), ()), "1.2.3-alpha.1"),
    ((1, 2, 3, (), ("123", "456")), "1.2.3+123.456"),
    # Prereleases and build metadata hyphens
    ((1, 2, 3, ("alpha", "b-eta"), ("123", "b-uild")), "1.2.3-alpha.b-eta+123.b-uild"),
    ((1, 2, 3, (), ("123", "b-uild")), "1.2.3+123.b-uild"),
    ((1, 2, 3, ("alpha", "b-eta"), ()), "1.2.3-alpha.b-eta"),
]


@pytest.mark.parametrize(("expected", "text"), FORMAT_TESTS)
def test_blang_parse_and_string(expected, text):
    v = Semver.parse(text)
    assert fields(v) == expected
    assert str(v) == text
    assert str(Semver(*expected)) == text
    assert repr(v) == f"Semver.parse({text!r})"


# --- blang/semver v4/semver_test.go: tolerantFormatTests (TestParseTolerant) ----------------------
# Kubernetes' normalizeAndParse is ParseTolerant without strings.TrimSpace, so the whitespace case
# that ParseTolerant accepts is an error here (Kubernetes wins).
TOLERANT_FORMAT_TESTS = [
    ((1, 2, 3), "v1.2.3"),
    ((1, 2, 0, ("alpha",)), "1.2.0-alpha"),
    ((1, 2, 0), "1.2.00"),
    (None, "\t1.2.3 "),  # blang: (1, 2, 3); normalizeAndParse does not trim
    ((1, 2, 3), "01.02.03"),
    ((0, 0, 3), "00.0.03"),
    ((0, 0, 3), "000.0.03"),
    ((1, 2, 0), "1.2"),
    ((1, 0, 0), "1"),
]


@pytest.mark.parametrize(("expected", "text"), TOLERANT_FORMAT_TESTS)
def test_blang_tolerant_under_normalize(expected, text):
    if expected is None:
        assert not is_semver(text, normalize=True)
        with pytest.raises(SemverError):
            Semver.parse(text, normalize=True)
        return
    major, minor, patch, *pre = expected
    v = Semver.parse(text, normalize=True)
    assert fields(v) == (major, minor, patch, tuple(pre[0]) if pre else (), ())


# --- blang/semver v4/semver_test.go: compareTests (TestCompare, both directions) ------------------
COMPARE_TESTS = [
    ("1.0.0", "1.0.0", 0),
    ("2.0.0", "1.0.0", 1),
    ("0.1.0", "0.1.0", 0),
    ("0.2.0", "0.1.0", 1),
    ("0.0.1", "0.0.1", 0),
    ("0.0.2", "0.0.1", 1),
    ("1.2.3", "1.2.3", 0),
    ("2.2.4", "1.2.4", 1),
    ("1.3.3", "1.2.3", 1),
    ("1.2.4", "1.2.3", 1),
    # Spec Examples #11
    ("1.0.0", "2.0.0", -1),
    ("2.0.0", "2.1.0", -1),
    ("2.1.0", "2.1.1", -1),
    # Spec Examples #9
    ("1.0.0", "1.0.0-alpha", 1),
    ("1.0.0-alpha", "1.0.0-alpha.1", -1),
    ("1.0.0-alpha.1", "1.0.0-alpha.beta", -1),
    ("1.0.0-alpha.beta", "1.0.0-beta", -1),
    ("1.0.0-beta", "1.0.0-beta.2", -1),
    ("1.0.0-beta.2", "1.0.0-beta.11", -1),
    ("1.0.0-beta.11", "1.0.0-rc.1", -1),
    ("1.0.0-rc.1", "1.0.0", -1),
    # Ignore Build metadata
    ("1.0.0+1.2.3", "1.0.0", 0),
    # derived: identifier rules of PRVersion.Compare, uint64 range
    ("1.0.0-1", "1.0.0-a", -1),
    ("1.0.0-0", "1.0.0--", -1),
    ("1.0.0-0a", "1.0.0-1", 1),
    ("1.0.0-2", "1.0.0-10", -1),
    ("1.0.0-B", "1.0.0-a", -1),
    ("1.0.0-Z", "1.0.0--", 1),
    ("1.0.0-alpha", "1.0.0-alpha-", -1),
    ("1.0.0-rc.1+a", "1.0.0-rc.1+b", 0),
    ("18446744073709551615.0.0", "18446744073709551614.0.0", 1),
    ("1.0.0-18446744073709551615", "1.0.0-9", 1),
]


@pytest.mark.parametrize(("a", "b", "expected"), COMPARE_TESTS)
def test_blang_compare(a, b, expected):
    va, vb = Semver.parse(a), Semver.parse(b)
    assert va.compare(vb) == expected
    assert vb.compare(va) == -expected


# --- blang/semver v4/semver_test.go: wrongformatTests (TestWrongFormat) ---------------------------
WRONG_FORMAT_TESTS = [
    "", ".", "1.", ".1", "a.b.c", "1.a.b", "1.1.a", "1.a.1", "a.1.1", "..", "1..", "1.1.", "1..1",
    "1.1.+123", "1.1.-beta", "-1.1.1", "1.-1.1", "1.1.-1",
    # giant numbers
    "20000000000000000000.1.1", "1.20000000000000000000.1", "1.1.20000000000000000000",
    "1.1.1-20000000000000000000",
    # Leading zeroes
    "01.1.1", "001.1.1", "1.01.1", "1.001.1", "1.1.01", "1.1.001", "1.1.1-01", "1.1.1-001",
    "1.1.1-beta.01", "1.1.1-beta.001",
    "0.0.0-!", "0.0.0+!",
    # empty prversion
    "0.0.0-.alpha",
    # empty build meta data
    "0.0.0-alpha+", "0.0.0-alpha+test.",
]
# derived: more strict rejections
WRONG_FORMAT_TESTS += [
    "1.2.3.4", "+1.0.0", "1_0.0.0", "\u0661.0.0", "1.0.0-\u00e4", "1.0.0-a+b+c", "1.0.0-rc..1",
    "18446744073709551616.0.0", "1.0.0-18446744073709551616", "1.0.0-" + "9" * 5000, "V1.0.0", "1.0.0 ",
]


@pytest.mark.parametrize("text", WRONG_FORMAT_TESTS)
def test_blang_wrong_format(text):
    assert not is_semver(text)
    with pytest.raises(SemverError):
        Semver.parse(text)


# --- blang/semver v4/semver_test.go: wrongTolerantFormatTests (TestWrongTolerantFormat) -----------
# "1.0-rc.1" splits into three parts, so it fails in Parse (minor "0-rc"), not on the short-form check.
@pytest.mark.parametrize(("text", "message"), [
    ("1.0+abc", "short version cannot contain PreRelease/Build meta data"),
    ("1.0-rc.1", 'Invalid character(s) found in minor number "0-rc"'),
])
def test_blang_wrong_tolerant_format(text, message):
    with pytest.raises(SemverError) as info:
        Semver.parse(text, normalize=True)
    assert str(info.value) == message


# derived: valid strict inputs beyond formatTests
@pytest.mark.parametrize(("text", "expected"), [
    ("0.0.0", (0, 0, 0, (), ())),
    ("1.0.0-a-b", (1, 0, 0, ("a-b",), ())),
    ("1.0.0+b-c", (1, 0, 0, (), ("b-c",))),
    ("1.0.0--", (1, 0, 0, ("-",), ())),
    ("1.0.0-00a.0", (1, 0, 0, ("00a", 0), ())),
    ("1.0.0+001.-", (1, 0, 0, (), ("001", "-"))),
    ("18446744073709551615.18446744073709551615.18446744073709551615-18446744073709551615",
     (2**64 - 1, 2**64 - 1, 2**64 - 1, (2**64 - 1,), ())),
])
def test_strict_valid_extra(text, expected):
    v = Semver.parse(text)
    assert fields(v) == expected
    assert str(v) == text


# --- blang v4/semver.go and semverlib.go error texts (derived; %q follows strconv.Quote) ----------
@pytest.mark.parametrize(("text", "normalize", "message"), [
    ("", False, "Version string empty"),
    ("1.2", False, "No Major.Minor.Patch elements found"),
    ("a.1.1", False, 'Invalid character(s) found in major number "a"'),
    ("01.1.1", False, 'Major number must not contain leading zeroes "01"'),
    ("1.a.1", False, 'Invalid character(s) found in minor number "a"'),
    ("1.01.1", False, 'Minor number must not contain leading zeroes "01"'),
    ("1.1.a", False, 'Invalid character(s) found in patch number "a"'),
    ("1.1.01", False, 'Patch number must not contain leading zeroes "01"'),
    ("1..1", False, 'strconv.ParseUint: parsing "": invalid syntax'),
    ("1.1.1-20000000000000000000", False, 'strconv.ParseUint: parsing "20000000000000000000": value out of range'),
    ("1.1.1-01", False, 'Numeric PreRelease version must not contain leading zeroes "01"'),
    ("0.0.0-!", False, 'Invalid character(s) found in prerelease "!"'),
    ("0.0.0+!", False, 'Invalid character(s) found in build meta data "!"'),
    ("0.0.0-.alpha", False, "Prerelease is empty"),
    ("0.0.0-alpha+", False, "Build meta data is empty"),
    ("1.0.0\n", False, 'Invalid character(s) found in patch number "0\\n"'),
    ("1.0.0-b\x00", False, 'Invalid character(s) found in prerelease "b\\x00"'),
    ("", True, 'strconv.ParseUint: parsing "": invalid syntax'),
    (" 1.0.0", True, 'Invalid character(s) found in major number "0 1"'),  # " 1" gets a "0" prefix
    ("1-rc", True, "short version cannot contain PreRelease/Build meta data"),
    ("1.2.3-01", True, 'Numeric PreRelease version must not contain leading zeroes "01"'),
])
def test_error_messages(text, normalize, message):
    with pytest.raises(SemverError) as info:
        Semver.parse(text, normalize=normalize)
    assert str(info.value) == message
    assert type(info.value) is SemverError


# --- normalizeAndParse edge cases (derived from semverlib.go) -------------------------------------
@pytest.mark.parametrize(("text", "expected"), [
    ("v1", "1.0.0"),
    ("0", "0.0.0"),
    ("00", "0.0.0"),
    ("01.01", "1.1.0"),
    ("v01.01", "1.1.0"),
    ("1.2.03-rc.1", "1.2.3-rc.1"),
    ("1.2.003+build.01", "1.2.3+build.01"),
    ("1.2.00-0a", "1.2.0-0a"),
    ("1.0.0-rc.1+build", "1.0.0-rc.1+build"),
    ("v0.0.0", "0.0.0"),
    ("1", "1.0.0"),
    ("v", None), ("vv1.0.0", None), ("V1.0.0", None), ("1.", None), ("1.x", None), ("1.-2", None),
    ("1+", None), ("1.02-rc", None), ("1.2.3.4", None), ("1.0.0 ", None), ("1.2.3-01", None),
])
def test_normalize_edge_cases(text, expected):
    if expected is None:
        assert not is_semver(text, normalize=True)
        with pytest.raises(SemverError):
            Semver.parse(text, normalize=True)
    else:
        assert str(Semver.parse(text, normalize=True)) == expected


# --- kubernetes apiserver pkg/cel/library/semver_test.go: TestSemver ------------------------------
# (isSemver_noOverload is a CEL compile error, not a parser case: left to the CEL layer's tests.)
def test_k8s_parse():
    assert Semver.parse("1.2.3").compare(Semver.parse("1.2.3")) == 0
    assert str(Semver.parse("1.2.3")) == "1.2.3"


def test_k8s_parse_invalid_version():
    with pytest.raises(SemverError, match="No Major.Minor.Patch elements found"):
        Semver.parse("v1.0")


@pytest.mark.parametrize(("text", "normalize", "expected"), [
    ("1.2.3-beta.1+build.1", False, True),
    ("", False, False),
    ("v1.0.0", False, False),
    (" 1.0.0", False, False),
    ("1. 0.0", False, False),
    ("1.0.0 ", False, False),
    ("01.01.01", False, False),
    ("1", False, False),
    ("1.1", False, False),
    ("", True, False),
    (" 1.0.0", True, False),
    ("1. 0.0", True, False),
    ("1.0.0 ", True, False),
    ("v1.0.0", True, True),
    ("01.01.01", True, True),
    ("1", True, True),
    ("1.1", True, True),
    # semverlib.go doc comment
    ("1.0.0", False, True),
    ("hello", False, False),
    ("v1.0", False, False),
    ("v1.0", True, True),
    ("1.0", True, True),
])
def test_k8s_is_semver(text, normalize, expected):
    assert is_semver(text, normalize) is expected


# Each row: receiver, operand, CEL function, expected result.  `==` is cel.Semver.Equal, i.e.
# Version.EQ, i.e. Compare == 0.
def _cel(op: str, a: Semver, b: Semver):
    result = a.compare(b)
    return {"==": result == 0, "isLessThan": result == -1, "isGreaterThan": result == 1, "compareTo": result}[op]


@pytest.mark.parametrize(("a", "b", "op", "expected"), [
    (("v01.01", True), ("1.1.0", False), "==", True),  # equality_normalize
    (("1.2.3", False), ("1.2.3", False), "==", True),  # equality_reflexivity
    (("1.2.3", False), ("1.0.0", False), "==", False),  # inequality
    (("1.0.0", False), ("1.2.3", False), "isLessThan", True),
    (("1.0.0", False), ("1.0.0", False), "isLessThan", False),
    (("1.2.3", False), ("1.0.0", False), "isGreaterThan", True),
    (("1.0.0", False), ("1.0.0", False), "isGreaterThan", False),
    (("1.2.3", False), ("1.2.3", False), "compareTo", 0),
    (("1.0.0", False), ("1.2.3", False), "compareTo", -1),
    (("1.2.3", False), ("1.0.0", False), "compareTo", 1),
    # semverlib.go doc comment
    (("1.2.3", False), ("2.0.0", False), "compareTo", -1),
    (("1.2.3", False), ("0.1.2", False), "compareTo", 1),
])
def test_k8s_comparisons(a, b, op, expected):
    assert _cel(op, Semver.parse(*a), Semver.parse(*b)) == expected


def test_k8s_major_minor_patch():
    v = Semver.parse("1.2.3")
    assert (v.major, v.minor, v.patch) == (1, 2, 3)


# semverlib.go doc comment: semver(...) results
@pytest.mark.parametrize(("text", "normalize", "expected"), [
    ("1.0.0", False, "1.0.0"),
    ("0.1.0-alpha.1", False, "0.1.0-alpha.1"),
    ("200K", False, None),
    ("Three", False, None),
    ("Mi", False, None),
    ("v1.0.0", True, "1.0.0"),
    ("1.0", True, "1.0.0"),
    ("01.01.01", True, "1.1.1"),
])
def test_k8s_doc_examples(text, normalize, expected):
    if expected is None:
        with pytest.raises(SemverError):
            Semver.parse(text, normalize)
    else:
        assert str(Semver.parse(text, normalize)) == expected


def test_no_rich_comparisons():
    for name in ("__eq__", "__ne__", "__lt__", "__le__", "__gt__", "__ge__", "__hash__"):
        assert name not in vars(Semver)


# --- properties ---------------------------------------------------------------------------------
_NUMBER = st.one_of(st.integers(0, 3), st.integers(0, 2**64 - 1))
_ALNUM_ID = st.text("019azAZ-", min_size=1, max_size=4).filter(lambda s: not s.isdigit())
_BUILD_ID = st.text("019aZ-", min_size=1, max_size=3)


@st.composite
def version_texts(draw) -> str:
    text = ".".join(str(draw(_NUMBER)) for _ in range(3))
    pre = draw(st.lists(st.one_of(_NUMBER, _ALNUM_ID), max_size=3))
    build = draw(st.lists(_BUILD_ID, max_size=2))
    if pre:
        text += "-" + ".".join(map(str, pre))
    if build:
        text += "+" + ".".join(build)
    return text


def _oracle_key(v: Semver) -> tuple:
    """semver.org precedence as a sort key: a longer identifier list wins on an equal prefix."""
    pre = tuple((0, x, "") if isinstance(x, int) else (1, 0, x) for x in v.pre)
    return (v.major, v.minor, v.patch, not v.pre, pre)


_PROPS = settings(max_examples=300, deadline=None, database=None)


@_PROPS
@given(version_texts())
def test_roundtrip(text):
    v = Semver.parse(text)
    assert str(v) == text
    assert Semver.parse(str(v)).compare(v) == 0
    assert str(Semver.parse(text, normalize=True)) == text  # strict-valid text is a normalize fixed point


@_PROPS
@given(version_texts(), version_texts())
def test_compare_antisymmetric(x, y):
    a, b = Semver.parse(x), Semver.parse(y)
    assert a.compare(a) == 0
    assert a.compare(b) == -b.compare(a)
    key_a, key_b = _oracle_key(a), _oracle_key(b)
    assert a.compare(b) == (key_a > key_b) - (key_a < key_b)


@_PROPS
@given(version_texts(), version_texts(), version_texts())
def test_compare_transitive(x, y, z):
    a, b, c = sorted((Semver.parse(t) for t in (x, y, z)), key=cmp_to_key(Semver.compare))
    ab, bc, ac = a.compare(b), b.compare(c), a.compare(c)
    assert ab <= 0 and bc <= 0 and ac <= 0
    assert ac == min(ab, bc)  # equal only if both steps are equal, otherwise strictly less


@_PROPS
@given(st.text("0123456789.+-vaZ !\u00e4", max_size=16), st.booleans())
def test_arbitrary_text_parses_or_raises_semver_error(text, normalize):
    try:
        v = Semver.parse(text, normalize)
    except SemverError as error:
        assert type(error) is SemverError
        assert not is_semver(text, normalize)
    else:
        assert is_semver(text, normalize)
        assert Semver.parse(str(v)).compare(v) == 0
