"""Tests for modelplane.cel.quantity, ported from the Kubernetes Go tests.

Go sources of the tables (published repositories):
* k8s.io/apimachinery pkg/api/resource/quantity_test.go: TestParseQuantityString, TestQuantityParse,
  TestQuantityParseZero, TestQuantityString, TestQuantityParseEmit, TestParseQuantity, TestQuantityCmp,
  TestQuantityCmpInt64AndDec, TestAdd, TestSub, TestNegAndSubAtMostNegative (and the tests after it),
  TestQuantityAddZeroPreservesSuffix, TestQuantitySubZeroPreservesSuffix, TestNewSet,
  TestQuantityAsApproximateFloat64, TestStringQuantityAsApproximateFloat64.
* k8s.io/apiserver pkg/cel/library/quantity_test.go (TestQuantity) and the examples in the doc
  comment of pkg/cel/library/quantity.go.

The Go tables build expected values with the internal helpers decQuantity (an inf.Dec) and intQuantity
(an int64Amount); `dec()` and `intq()` below are their counterparts. Go's String() can return the cached
parse input, so "canonical" checks call `_canonicalize()` (Go's CanonicalizeBytes) directly. Expected
strings were derived by hand from the Go code, not recorded from this implementation.
"""
from __future__ import annotations

import copy
import decimal
import math
import pickle

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from modelplane.cel.quantity import (
    BINARY_SI,
    DECIMAL_EXPONENT,
    DECIMAL_SI,
    ERR_FORMAT_WRONG,
    ERR_NUMERIC,
    ERR_SUFFIX,
    MAX_INT64,
    MIN_INT64,
    Quantity,
    QuantityError,
    _scan,
)

BSI, DSI, DE = BINARY_SI, DECIMAL_SI, DECIMAL_EXPONENT
Q = Quantity.parse


def dec(c: int, e: int, fmt: str) -> Quantity:
    """Go test helper decQuantity(c, e, fmt): an inf.Dec worth c * 10**e."""
    return Quantity._make(c, e, fmt, dec=True)


def intq(c: int, e: int, fmt: str) -> Quantity:
    """Go test helper intQuantity(c, e, fmt): an int64Amount worth c * 10**e."""
    return Quantity._make(c, e, fmt)


def canon(q: Quantity) -> str:
    """Go CanonicalizeBytes, i.e. String() without the parse cache."""
    return q._canonicalize()


# ---- quantity_test.go TestParseQuantityString ----------------------------------------------------

@pytest.mark.parametrize("text, expected", [
    ("0.025Ti", (True, "0.025", "0", "025", "Ti")),
    ("1.025Ti", (True, "1.025", "1", "025", "Ti")),
    ("-1.025Ti", (False, "-1.025", "1", "025", "Ti")),
    (".", (True, ".", "0", "", "")),
    ("-.", (False, "-.", "0", "", "")),
    ("1E-3", (True, "1", "1", "", "E-3")),
])
def test_scanner(text, expected):
    assert _scan(text) == expected


# ---- quantity_test.go TestQuantityParse: (input, expected value c*10**e, format, its String()) ----

PARSE_VALID = [
    ("0", 0, 0, DSI, "0"), ("0n", 0, 0, DSI, "0"), ("0u", 0, 0, DSI, "0"), ("0m", 0, 0, DSI, "0"),
    ("0Ki", 0, 0, BSI, "0"), ("0k", 0, 0, DSI, "0"), ("0Mi", 0, 0, BSI, "0"), ("0M", 0, 0, DSI, "0"),
    ("0Gi", 0, 0, BSI, "0"), ("0G", 0, 0, DSI, "0"), ("0Ti", 0, 0, BSI, "0"), ("0T", 0, 0, DSI, "0"),
    # Quantity less numbers are allowed
    ("1", 1, 0, DSI, "1"),
    # Binary suffixes
    ("1Ki", 1024, 0, BSI, "1Ki"), ("8Ki", 8 * 1024, 0, BSI, "8Ki"), ("7Mi", 7 * 2**20, 0, BSI, "7Mi"),
    ("6Gi", 6 * 2**30, 0, BSI, "6Gi"), ("5Ti", 5 * 2**40, 0, BSI, "5Ti"), ("4Pi", 4 * 2**50, 0, BSI, "4Pi"),
    ("3Ei", 3 * 2**60, 0, BSI, "3Ei"), ("10Ti", 10 * 2**40, 0, BSI, "10Ti"), ("100Ti", 100 * 2**40, 0, BSI, "100Ti"),
    # Decimal suffixes
    ("5n", 5, -9, DSI, "5n"), ("4u", 4, -6, DSI, "4u"), ("3m", 3, -3, DSI, "3m"), ("9", 9, 0, DSI, "9"),
    ("8k", 8, 3, DSI, "8k"), ("50k", 5, 4, DSI, "50k"), ("7M", 7, 6, DSI, "7M"), ("6G", 6, 9, DSI, "6G"),
    ("5T", 5, 12, DSI, "5T"), ("40T", 4, 13, DSI, "40T"), ("300T", 3, 14, DSI, "300T"), ("2P", 2, 15, DSI, "2P"),
    ("1E", 1, 18, DSI, "1E"),
    # Decimal exponents
    ("1E-3", 1, -3, DE, "1e-3"), ("1e3", 1, 3, DE, "1e3"), ("1E6", 1, 6, DE, "1e6"), ("1e9", 1, 9, DE, "1e9"),
    ("1E12", 1, 12, DE, "1e12"), ("1e15", 1, 15, DE, "1e15"), ("1E18", 1, 18, DE, "1e18"),
    # Nonstandard but still parsable
    ("1e14", 1, 14, DE, "100e12"), ("1e13", 1, 13, DE, "10e12"), ("1e3", 1, 3, DE, "1e3"),
    ("100.035k", 100035, 0, DSI, "100035"),
    # Things that look like floating point
    ("0.001", 1, -3, DSI, "1m"), ("0.0005k", 5, -1, DSI, "500m"), ("0.005", 5, -3, DSI, "5m"),
    ("0.05", 5, -2, DSI, "50m"), ("0.5", 5, -1, DSI, "500m"), ("0.00050k", 5, -1, DSI, "500m"),
    ("0.00500", 5, -3, DSI, "5m"), ("0.05000", 5, -2, DSI, "50m"), ("0.50000", 5, -1, DSI, "500m"),
    ("0.5e0", 5, -1, DE, "500e-3"), ("0.5e-1", 5, -2, DE, "50e-3"), ("0.5e-2", 5, -3, DE, "5e-3"),
    ("0.5e0", 5, -1, DE, "500e-3"), ("10.035M", 10035, 3, DSI, "10035k"),
    ("1.2e3", 12, 2, DE, "1200"), ("1.3E+6", 13, 5, DE, "1300e3"), ("1.40e9", 14, 8, DE, "1400e6"),
    ("1.53E12", 153, 10, DE, "1530e9"), ("1.6e15", 16, 14, DE, "1600e12"), ("1.7E18", 17, 17, DE, "1700e15"),
    ("9.01", 901, -2, DSI, "9010m"), ("8.1k", 81, 2, DSI, "8100"), ("7.123456M", 7123456, 0, DSI, "7123456"),
    ("6.987654321G", 6987654321, 0, DSI, "6987654321"), ("5.444T", 5444, 9, DSI, "5444G"),
    ("40.1T", 401, 11, DSI, "40100G"), ("300.2T", 3002, 11, DSI, "300200G"), ("2.5P", 25, 14, DSI, "2500T"),
    ("1.01E", 101, 16, DSI, "1010P"),
    # Things that saturate/round
    ("3.001n", 4, -9, DSI, "4n"), ("1.1E-9", 2, -9, DE, "2e-9"), ("0.0000000001", 1, -9, DSI, "1n"),
    ("0.0000000005", 1, -9, DSI, "1n"), ("0.00000000050", 1, -9, DSI, "1n"), ("0.5e-9", 1, -9, DE, "1e-9"),
    ("0.9n", 1, -9, DSI, "1n"), ("0.00000012345", 124, -9, DSI, "124n"), ("0.00000012354", 124, -9, DSI, "124n"),
    ("9Ei", MAX_INT64, 0, BSI, "9223372036854775807"),
    ("9223372036854775807Ki", MAX_INT64, 0, BSI, "9223372036854775807"),
    ("12E", 12, 18, DSI, "12E"),
    # We'll accept fractional binary stuff, too.
    ("100.035Ki", 10243584, -2, BSI, "102435840m"), ("0.5Mi", 524288, 0, BSI, "512Ki"),
    ("0.05Gi", 536870912, -1, BSI, "53687091200m"), ("0.025Ti", 274877906944, -1, BSI, "27487790694400m"),
    # Things written by trolls
    ("0.000000000001Ki", 2, -9, DSI, "2n"),  # rounds up, changes format
    (".001", 1, -3, DSI, "1m"), (".0001k", 100, -3, DSI, "100m"), ("1.", 1, 0, DSI, "1"), ("1.G", 1, 9, DSI, "1G"),
]
assert len(PARSE_VALID) == 96

# The Go test also parses "-"+input (value negated, same format) and "+"+input (unchanged).
PARSE_SIGNED = [(sign, *row) for row in PARSE_VALID for sign in ("", "-", "+")]


@pytest.mark.parametrize("sign, text, c, e, fmt, expected_str", PARSE_SIGNED)
def test_parse_valid(sign, text, c, e, fmt, expected_str):
    negative = sign == "-"
    expected = dec(-c if negative else c, e, fmt)
    got = Q(sign + text)
    assert got.compare(expected) == 0, (sign + text, repr(got))
    assert got._fmt == fmt
    assert canon(expected) == ("-" + expected_str if negative and c else expected_str)
    assert canon(got) == canon(expected)


# quantity_test.go TestQuantityParse `invalid` list (plus the empty string checked first), with the error
# each one gets: the scanner's regular-expression error or the suffix lookup error.
PARSE_INVALID = [
    ("", ERR_FORMAT_WRONG), ("1.1.M", ERR_FORMAT_WRONG), ("1+1.0M", ERR_FORMAT_WRONG), ("0.1mi", ERR_SUFFIX),
    ("0.1am", ERR_FORMAT_WRONG), ("aoeu", ERR_FORMAT_WRONG), (".5i", ERR_SUFFIX), ("1i", ERR_SUFFIX),
    ("-3.01i", ERR_SUFFIX), ("-3.01e-", ERR_SUFFIX),
    # trailing whitespace is forbidden
    (" 1", ERR_FORMAT_WRONG), ("1 ", ERR_FORMAT_WRONG),
]


@pytest.mark.parametrize("text, message", PARSE_INVALID)
def test_parse_invalid(text, message):
    with pytest.raises(QuantityError) as error:
        Q(text)
    assert str(error.value) == message


def test_parse_zero():  # quantity_test.go TestQuantityParseZero
    assert str(Q("0")) == "0"


# ---- quantity_test.go TestQuantityString: (value, format, String(), an alternate spelling) ---------

QUANTITY_STRING = [
    (dec(2**30, 0, BSI), "1Gi", "1024Mi"), (dec(300 * 2**20, 0, BSI), "300Mi", "307200Ki"),
    (dec(6 * 1024, 0, BSI), "6Ki", ""), (dec(1001 * 2**30, 0, BSI), "1001Gi", "1025024Mi"),
    (dec(2**40, 0, BSI), "1Ti", "1024Gi"), (dec(5, 0, BSI), "5", "5000m"), (dec(500, -3, BSI), "500m", "0.5"),
    (dec(1, 9, DSI), "1G", "1000M"), (dec(1000, 6, DSI), "1G", "0.001T"), (dec(1000000, 3, DSI), "1G", ""),
    (dec(1000000000, 0, DSI), "1G", ""), (dec(1, -3, DSI), "1m", "1000u"), (dec(80, -3, DSI), "80m", ""),
    (dec(1080, -3, DSI), "1080m", "1.08"), (dec(108, -2, DSI), "1080m", "1080000000n"),
    (dec(10800, -4, DSI), "1080m", ""), (dec(300, 6, DSI), "300M", ""), (dec(1, 12, DSI), "1T", ""),
    # DecimalSI has no suffix beyond "E": larger exponents fall back to exponent notation.
    (dec(1, 18, DSI), "1E", ""), (dec(1, 21, DSI), "1e21", "1000E"), (dec(5, 21, DSI), "5e21", "5000E"),
    (dec(1, 24, DSI), "1e24", "1000000E"),
    (dec(1234567, 6, DSI), "1234567M", ""), (dec(1234567, -3, BSI), "1234567m", ""), (dec(3, 3, DSI), "3k", ""),
    (dec(1025, 0, BSI), "1025", ""), (dec(0, 0, DSI), "0", ""), (dec(0, 0, BSI), "0", ""),
    (dec(1, 9, DE), "1e9", ".001e12"), (dec(1, -3, DE), "1e-3", "0.001e0"), (dec(1, -9, DE), "1e-9", "1000e-12"),
    (dec(80, -3, DE), "80e-3", ""), (dec(300, 6, DE), "300e6", ""), (dec(1, 12, DE), "1e12", ""),
    (dec(1, 3, DE), "1e3", ""), (dec(3, 3, DE), "3e3", ""), (dec(3, 3, DSI), "3k", ""), (dec(0, 0, DE), "0", "00"),
    (dec(1, -9, DSI), "1n", ""), (dec(80, -9, DSI), "80n", ""), (dec(1080, -9, DSI), "1080n", ""),
    (dec(108, -8, DSI), "1080n", ""), (dec(10800, -10, DSI), "1080n", ""), (dec(1, -6, DSI), "1u", ""),
    (dec(80, -6, DSI), "80u", ""), (dec(1080, -6, DSI), "1080u", ""),
]


@pytest.mark.parametrize("value, expected, alternate", QUANTITY_STRING)
def test_quantity_string(value, expected, alternate):
    assert str(value) == expected
    parsed = Q(expected)
    assert parsed._s == expected  # ParseQuantity caches a canonical input as its String()
    assert str(parsed) == expected
    if alternate:
        other = Q(alternate)
        assert other._s == ""  # a non-canonical spelling is not cached...
        assert str(other) == expected  # ...and String() computes the canonical form
    if value.sign():
        negated = dec(-value._c, value._e, value._fmt)
        assert str(negated) == "-" + expected


# ---- quantity_test.go TestQuantityParseEmit -------------------------------------------------------

@pytest.mark.parametrize("text, expected", [
    ("1Ki", "1Ki"), ("1Mi", "1Mi"), ("1Gi", "1Gi"), ("1024Mi", "1Gi"), ("1000M", "1G"), (".001Ki", "1024m"),
    (".000001Ki", "1024u"), (".000000001Ki", "1024n"), (".000000000001Ki", "2n"),
])
def test_parse_emit(text, expected):
    assert str(Q(text)) == expected
    assert str(Q("-" + text)) == "-" + expected


# ---- quantity_test.go TestParseQuantity: (input, AsInt64 or None, String() if not the input) -----

PARSE_QUANTITY = [
    # min/max 18 digits
    ("-999999999999999999", -999999999999999999, None), ("999999999999999999", 999999999999999999, None),
    ("-999999999999999999.0", None, "-999999999999999999"), ("999999999999999999.0", None, "999999999999999999"),
    ("-999999999999999999.1", None, "-999999999999999999100m"),
    ("999999999999999999.1", None, "999999999999999999100m"),
    # min/max 19 digits
    ("-9999999999999999999", None, None), ("9999999999999999999", None, None),
    ("-1E", -10**18, None), ("1E", 10**18, None),
    ("-1000000000000000000", None, "-1E"), ("1000000000000000000", None, "1E"),
    ("-9999999999999999999.0", None, "-9999999999999999999"), ("9999999999999999999.0", None, "9999999999999999999"),
    ("-1.0E", -10**18, "-1E"), ("1.0E", 10**18, "1E"),
    ("-1000000000000000000.0", None, "-1E"), ("1000000000000000000.0", None, "1E"),
    ("-9999999999999999999000m", None, "-9999999999999999999"),
    ("9999999999999999999000m", None, "9999999999999999999"),
    ("-9999999999999999999.1", None, "-9999999999999999999100m"),
    ("9999999999999999999.1", None, "9999999999999999999100m"),
    ("-1.0000000000000000001E", None, "-1000000000000000000100m"),
    ("1.0000000000000000001E", None, "1000000000000000000100m"),
    ("-1000000000000000000.1", None, "-1000000000000000000100m"),
    ("1000000000000000000.1", None, "1000000000000000000100m"),
    ("-1.000000000000000001E", None, "-1000000000000000001"), ("1.000000000000000001E", None, "1000000000000000001"),
    ("-1000000000000000001", None, None), ("1000000000000000001", None, None),
    # min/max 20 digits
    ("-10E", None, None), ("10E", None, None),
    ("-10000000000000000000", None, "-10E"), ("10000000000000000000", None, "10E"),
    ("-10.0E", None, "-10E"), ("10.0E", None, "10E"),
    ("-10000000000000000000.0", None, "-10E"), ("10000000000000000000.0", None, "10E"),
    ("-10000000000000000000000m", None, "-10E"), ("10000000000000000000000m", None, "10E"),
    ("-10.0000000000000000001E", None, "-10000000000000000000100m"),
    ("10.0000000000000000001E", None, "10000000000000000000100m"),
    ("-10000000000000000000.1", None, "-10000000000000000000100m"),
    ("10000000000000000000.1", None, "10000000000000000000100m"),
    ("-10.000000000000000001E", None, "-10000000000000000001"),
    ("10.000000000000000001E", None, "10000000000000000001"),
    ("-10000000000000000001", None, None), ("10000000000000000001", None, None),
    # min/max int64 - 1
    ("-9223372036854775809", None, None), ("9223372036854775806", None, None),
    ("-9223372036854775809.0", None, "-9223372036854775809"), ("9223372036854775806.0", None, "9223372036854775806"),
    ("-9223372036854775809000m", None, "-9223372036854775809"),
    ("9223372036854775806000m", None, "9223372036854775806"),
    ("-9223372036854775809.1", None, "-9223372036854775809100m"),
    ("9223372036854775806.1", None, "9223372036854775806100m"),
    # min/max int64
    ("-9223372036854775808", None, None), ("9223372036854775807", None, None),
    ("-9223372036854775808.0", None, "-9223372036854775808"), ("9223372036854775807.0", None, "9223372036854775807"),
    ("-9223372036854775808000m", None, "-9223372036854775808"),
    ("9223372036854775807000m", None, "9223372036854775807"),
    ("-9223372036854775808.1", None, "-9223372036854775808100m"),
    ("9223372036854775807.1", None, "9223372036854775807100m"),
    # min/max int64 + 1
    ("-9223372036854775807", None, None), ("9223372036854775808", None, None),
    ("-9223372036854775807.0", None, "-9223372036854775807"), ("9223372036854775808.0", None, "9223372036854775808"),
    ("-9223372036854775807000m", None, "-9223372036854775807"),
    ("9223372036854775808000m", None, "9223372036854775808"),
    ("-9223372036854775807.1", None, "-9223372036854775807100m"),
    ("9223372036854775808.1", None, "9223372036854775808100m"),
]


@pytest.mark.parametrize("text, as_int64, expected_str", PARSE_QUANTITY)
def test_parse_quantity_int64_boundaries(text, as_int64, expected_str):
    q = Q(text)
    assert q.is_integer() is (as_int64 is not None)
    if as_int64 is None:
        with pytest.raises(QuantityError, match="^cannot convert value to integer$"):
            q.as_integer()
    else:
        assert q.as_integer() == as_int64
    # wantAsDec: the exact decimal value (nothing here is finer than nano, so nothing is rounded)
    exact = decimal.Decimal(text.replace("E", "e18").replace("m", "e-3"))
    assert q.compare(Q(format(exact, "f"))) == 0
    assert str(q) == (expected_str or text)


# ---- quantity_test.go TestQuantityCmp and TestQuantityCmpInt64AndDec ------------------------------

@pytest.mark.parametrize("x, y, expected", [
    (Q("0"), Q("0"), 0), (Q("100m"), Q("50m"), 1), (Q("50m"), Q("100m"), -1), (Q("10000T"), Q("100Gi"), 1),
    (dec(0, 0, DSI), dec(0, 0, DSI), 0), (intq(0, 0, DSI), dec(0, 0, DSI), 0), (dec(0, 0, DSI), intq(0, 0, DSI), 0),
    (intq(0, 0, DSI), intq(0, 0, DSI), 0), (intq(0, 0, DSI), dec(10, 0, DSI), -1),
    (intq(0, 0, DSI), dec(-10, 0, DSI), 1), (dec(10, 0, DSI), intq(0, 0, DSI), 1),
    (dec(-10, 0, DSI), intq(0, 0, DSI), -1),
])
def test_cmp(x, y, expected):
    assert x.compare(y) == expected
    assert y.compare(x) == -expected


CMP_INT64_AND_DEC = [
    ((901, -2), (901, -2), 0), ((90, -1), (901, -2), -1), ((901, -2), (900, -2), 1), ((0, 0), (0, 0), 0),
    ((0, 1), (0, -1), 0), ((0, -1), (0, 1), 0), ((800, -3), (1, 0), -1), ((800, -3), (79, -2), 1),
    ((MAX_INT64, 0), (1, -1), 1), ((MAX_INT64, 1), (1, 0), 1), ((MAX_INT64, 1), (1, 1), 1),
    ((MAX_INT64, 1), (0, 1), 1), ((MAX_INT64, -16), (1, 3), -1),
    ((MIN_INT64, 0), (0, 0), -1), ((MIN_INT64, -18), (-1, 0), -1), ((MIN_INT64, -19), (-1, 0), 1),
    ((10**18, -17), (1, 1), 0), ((10**18, -17), (-10, 0), 1), ((-(10**18), -17), (-10, 0), 0),
    ((10**18, -17), (1, 0), 1), ((10**18 + 1, -17), (1, 1), 1), ((10**18 - 1, -17), (1, 1), -1),
]


@pytest.mark.parametrize("a_dec", [False, True])
@pytest.mark.parametrize("b_dec", [False, True])
@pytest.mark.parametrize("a, b, expected", CMP_INT64_AND_DEC)
def test_cmp_int64_and_dec(a, b, expected, a_dec, b_dec):
    x = (dec if a_dec else intq)(*a, DSI)
    y = (dec if b_dec else intq)(*b, DSI)
    assert x.compare(y) == expected
    assert y.compare(x) == -expected


# ---- quantity_test.go TestAdd / TestSub (+ the *ZeroPreservesSuffix tests) -------------------------

ZERO = intq(0, 0, DSI)  # Go: Quantity{Format: DecimalSI}


@pytest.mark.parametrize("a, b, expected", [
    (dec(10, 0, DSI), dec(1, 1, DSI), dec(20, 0, DSI)), (dec(10, 0, DSI), dec(1, 0, BSI), dec(11, 0, DSI)),
    (dec(10, 0, BSI), dec(1, 0, DSI), dec(11, 0, BSI)), (ZERO, dec(50, 0, DSI), dec(50, 0, DSI)),
    (dec(50, 0, DSI), ZERO, dec(50, 0, DSI)), (ZERO, ZERO, dec(0, 0, DSI)),
])
def test_add(a, b, expected):
    before = canon(a)
    got = a.add(b)
    assert got.compare(expected) == 0
    assert got._fmt == expected._fmt
    assert canon(a) == before  # the CEL library adds to a copy


@pytest.mark.parametrize("a, b, expected", [
    (dec(10, 0, DSI), dec(1, 1, DSI), dec(0, 0, DSI)), (dec(10, 0, DSI), dec(1, 0, BSI), dec(9, 0, DSI)),
    (dec(10, 0, BSI), dec(1, 0, DSI), dec(9, 0, BSI)), (ZERO, dec(50, 0, DSI), dec(-50, 0, DSI)),
    (dec(50, 0, DSI), ZERO, dec(50, 0, DSI)), (ZERO, ZERO, dec(0, 0, DSI)),
])
def test_sub(a, b, expected):
    assert a.sub(b).compare(expected) == 0


@pytest.mark.parametrize("text", ["100m", "1Gi"])
def test_zero_preserves_suffix(text):
    value, zero = Q(text), Q("0")
    assert str(value.add(zero)) == text  # non-zero + zero keeps the receiver's format
    assert str(zero.add(value)) == text  # a zero receiver takes the other operand's format
    assert str(value.sub(zero)) == text
    assert str(zero.sub(value)) == "-" + text


def test_sub_at_most_negative():
    """TestNegAndSubAtMostNegative and the mostNegative tests after it: -mostNegative needs inf.Dec."""
    most_negative = intq(MIN_INT64, 0, DSI)
    for got in (ZERO.sub(most_negative), Quantity.from_int(0).sub(MIN_INT64)):
        assert not got.is_integer() and got.sign() == 1
        assert str(got) == "9223372036854775808"
        assert got.compare(Q("9223372036854775808")) == 0
    one_sub = intq(1, 0, DSI).sub(most_negative)
    assert not one_sub.is_integer() and str(one_sub) == "9223372036854775809"
    neighbour = ZERO.sub(intq(MIN_INT64 + 1, 0, DSI))  # fits int64: stays on the fast path
    assert neighbour.as_integer() == MAX_INT64
    assert str(intq(1, -3, DSI).sub(intq(MIN_INT64, -3, DSI))) == "9223372036854775809m"
    assert str(ZERO.sub(intq(MIN_INT64, -3, DSI))) == "9223372036854775808m"
    cross_scale = intq(1, 1, DSI).sub(most_negative)  # TestSubMostNegativeCrossScale
    assert str(cross_scale) == "9223372036854775818" and not cross_scale.is_integer()
    binary = ZERO.sub(intq(MIN_INT64, 0, BSI))  # TestZeroSubMostNegativeInheritsFormat
    assert binary._fmt == BSI and str(binary) == "8Ei" and not binary.is_integer()
    assert binary.canonical().compare(Q("9223372036854775807")) == 0  # "8Ei" re-parses capped


# ---- quantity_test.go TestNewSet: NewQuantity(value, format), and from_int (DecimalExponent) ------

@pytest.mark.parametrize("value, fmt, expected", [
    (1, DSI, "1"), (1000, DSI, "1k"), (1234000, DSI, "1234k"), (1024, BSI, "1Ki"), (1000000, DE, "1e6"),
    (1024 * 1024, BSI, "1Mi"),
])
def test_new_set(value, fmt, expected):
    assert str(intq(value, 0, fmt)) == expected
    assert str(dec(value, 0, fmt)) == expected  # the asDec variant
    assert Q(expected).as_approximate_float() == value


def test_from_int():
    assert str(Quantity.from_int(5)) == "5"
    assert str(Quantity.from_int(1000)) == "1e3"  # DecimalExponent, as CEL add(int)/sub(int) builds it
    assert Quantity.from_int(MIN_INT64).as_integer() == MIN_INT64
    assert Quantity.from_int(MAX_INT64).as_integer() == MAX_INT64
    with pytest.raises(QuantityError):
        Quantity.from_int(MAX_INT64 + 1)
    with pytest.raises(TypeError):
        Quantity.from_int(True)
    with pytest.raises(TypeError):
        Quantity()


# ---- quantity_test.go TestQuantityAsApproximateFloat64 / TestStringQuantityAsApproximateFloat64 ---

M7 = 7 * 1024 * 1024
APPROX_FLOAT = [(dec(v, e, fmt), out) for fmt in (DSI, DE, BSI) for v, e, out in [
    (0, 0, 0.0), (1, 0, 1.0), (1024, 0, 1024.0), (8 * 1024, 0, 8 * 1024.0), (M7, 0, float(M7)),
    (M7, 1, M7 * 10.0), (M7, 4, M7 * 10000.0), (M7, 8, M7 * 100000000.0),
    (M7, -1, M7 * 0.1),  # Go: '* Pow10' and '/ float(10)' do not round the same way
    (M7, -8, M7 / 100000000.0),
]] + [
    (dec(MAX_INT64, 0, DSI), float(MAX_INT64)), (dec(MAX_INT64, 0, BSI), float(MAX_INT64)),
    (dec(12, 18, DSI), 1.2e19),
    # infinities caused due to float64 overflow
    (dec(12, 500, DSI), math.inf), (dec(-12, 500, DSI), -math.inf),
]


@pytest.mark.parametrize("value, expected", APPROX_FLOAT)
def test_as_approximate_float(value, expected):
    assert value.as_approximate_float() == expected


@pytest.mark.parametrize("text, expected", [
    ("2Ki", 2048.0), ("1.1Ki", 1126.4), ("1Mi", 1.048576e06), ("2Gi", 2.147483648e09),
])
def test_string_as_approximate_float(text, expected):
    assert Q(text).as_approximate_float() == expected


# ---- apiserver pkg/cel/library/quantity_test.go TestQuantity (and the library's doc comment) ------

def cel_quantity(text: str) -> Quantity:
    return Q(text)


def is_quantity(text: str) -> bool:
    try:
        Q(text)
        return True
    except QuantityError:
        return False


CEL_CASES = [
    ("parse", lambda: Q("12Mi").compare(Q("12Mi")) == 0),
    ("isQuantity", lambda: is_quantity("20")),
    ("isQuantity_megabytes", lambda: is_quantity("20M")),
    ("isQuantity_mebibytes", lambda: is_quantity("20Mi")),
    ("isQuantity_invalidSuffix", lambda: not is_quantity("20Mo")),
    ("isQuantity_passingRegex", lambda: not is_quantity("10Mm")),
    ("equality_reflexivity", lambda: Q("200M").compare(Q("200M")) == 0),
    ("equality_symmetry", lambda: Q("200M").compare(Q("0.2G")) == 0 and Q("0.2G").compare(Q("200M")) == 0),
    ("equality_transitivity", lambda: Q("2M").compare(Q("0.002G")) == 0 and Q("2000k").compare(Q("2M")) == 0
     and Q("0.002G").compare(Q("2000k")) == 0),
    ("inequality", lambda: Q("200M").compare(Q("0.3G")) != 0),
    ("quantity_less", lambda: Q("50M").compare(Q("50Mi")) == -1),
    ("quantity_less_obvious", lambda: Q("50M").compare(Q("100M")) == -1),
    ("quantity_less_false", lambda: Q("100M").compare(Q("50M")) != -1),
    ("quantity_greater", lambda: Q("50Mi").compare(Q("50M")) == 1),
    ("quantity_greater_obvious", lambda: Q("150Mi").compare(Q("100Mi")) == 1),
    ("quantity_greater_false", lambda: Q("50M").compare(Q("100M")) != 1),
    ("compare_equal", lambda: Q("200M").compare(Q("0.2G")) == 0),
    ("compare_less", lambda: Q("50M").compare(Q("50Mi")) == -1),
    ("compare_greater", lambda: Q("50Mi").compare(Q("50M")) == 1),
    ("add_quantity", lambda: Q("50k").add(Q("20")).compare(Q("50.02k")) == 0),
    ("add_int", lambda: Q("50k").add(20).compare(Q("50020")) != -1),
    ("sub_quantity", lambda: Q("50k").sub(Q("20")).compare(Q("49.98k")) == 0),
    ("sub_int", lambda: Q("50k").sub(20).compare(Q("49980")) == 0),
    ("arith_chain_1", lambda: Q("50k").add(20).sub(Q("100k")).as_integer() == -49980),
    ("arith_chain", lambda: Q("50k").add(20).sub(Q("100k")).sub(-50000).as_integer() == 20),
    ("as_integer", lambda: Q("50k").as_integer() == 50000),
    ("is_integer_big", lambda: not Q("9999999999999999999999999999999999999G").is_integer()),
    ("is_integer", lambda: Q("50").is_integer()),
    ("as_float", lambda: Q("50.703k").as_approximate_float() == 50703.0),
    # doc comment of library/quantity.go
    ("doc_parse", lambda: is_quantity("1.5G") and is_quantity("200k")),
    ("doc_isQuantity", lambda: is_quantity("1.3G") and is_quantity("1.3Gi") and is_quantity("10000k")),
    ("doc_not_quantity", lambda: not (is_quantity("1,3G") or is_quantity("200K") or is_quantity("Three"))),
    # The doc comment says quantity('Mi') is an error, but the Go code parses an empty number as 0
    # (parseQuantityString sets num = "0"; Mi takes the int64 fast path). Kubernetes' code wins.
    ("doc_bare_Mi_is_zero", lambda: is_quantity("Mi") and Q("Mi").sign() == 0),
    ("doc_is_integer", lambda: Q("50000000G").is_integer() and Q("50k").is_integer()),
    ("doc_sub_float", lambda: Q("50k").sub(20000).as_approximate_float() == 30000.0),
    ("doc_add", lambda: Q("50k").add(Q("20k")).compare(Q("70k")) == 0),
    ("doc_sub", lambda: Q("50k").sub(Q("20k")).compare(Q("30k")) == 0),
    ("doc_sub_int", lambda: Q("50k").sub(20000).compare(Q("30k")) == 0),
    ("doc_chain", lambda: Q("50k").add(20).sub(Q("100k")).sub(-50000).compare(Q("20")) == 0),
    ("doc_sign", lambda: (Q("50k").sign(), Q("-50k").sign(), Q("0").sign()) == (1, -1, 0)),
]


@pytest.mark.parametrize("name, check", CEL_CASES, ids=[name for name, _ in CEL_CASES])
def test_cel_library(name, check):
    assert check()


@pytest.mark.parametrize("text, message", [
    ("10Mo", ERR_FORMAT_WRONG),  # parseInvalidSuffix: fails the scanner ("quantities must match ...")
    ("10Mm", ERR_SUFFIX),  # parseInvalidSuffixPassesRegex
    ("200K", ERR_SUFFIX), ("Three", ERR_FORMAT_WRONG), ("1,3G", ERR_FORMAT_WRONG),
])
def test_cel_parse_errors(text, message):
    with pytest.raises(QuantityError) as error:
        Q(text)
    assert str(error.value) == message


def test_cel_as_integer_error():
    with pytest.raises(QuantityError, match="^cannot convert value to integer$"):
        Q("9999999999999999999999999999999999999G").as_integer()


# ---- modelplane-spec 5.4 / dra-cel 2.6 examples -----------------------------------------------------

def test_spec_examples():
    assert Q("50M").compare(Q("50Mi")) == -1
    assert Q("200M").compare(Q("0.2G")) == 0
    assert Q("50k").add(20).compare(Q("50020")) == 0
    assert Q("-50k").sign() == -1
    assert Q("256e3").compare(Q("256000")) == 0
    # Only BinarySI saturates (at 2**63-1, keeping the sign); the decimal path is unbounded.
    assert Q("8Ei").compare(Q("10Ei")) == 0 and Q("10Ei").compare(Q("100Ei")) == 0
    assert Q("8Ei").compare(Q("9223372036854775807")) == 0
    assert Q("-10Ei").compare(Q("-9223372036854775807")) == 0
    assert Q("7Ei").compare(Q("8Ei")) == -1
    assert Q("256E").compare(Q("1Ei")) == 1
    assert Q("256E").compare(Q("256000000000000000000")) == 0
    assert str(Q("0.1n")) == "1n"
    assert Q("0.0000000004").compare(Q("0.000000001")) == 0


# ---- Edge cases: what the Go code does, and why ----------------------------------------------------

# (input, compare-equal value, format, isInteger, String()). Each comment traces quantity.go.
EDGE_VALID = [
    # Bare suffixes: parseQuantityString finds no digits, so num = "0"; the fast path gives 0.
    ("Mi", "0", BSI, True, "0"), ("Ki", "0", BSI, True, "0"), ("k", "0", DSI, True, "0"),
    ("E", "0", DSI, True, "0"),  # "E" alone is the Exa suffix, not an exponent
    ("n", "0", DSI, False, "0"),  # int64Amount{0, -9}: AsInt64 fails for any negative scale
    ("m", "0", DSI, False, "0"), ("0m", "0", DSI, False, "0"),
    ("e3", "0", DE, True, "0"),  # int64Amount{0, 3}: positiveScaleInt64(0, 3) is (0, true)
    (".", "0", DSI, True, "0"), ("-.", "0", DSI, True, "0"),  # TestParseQuantityString: "." is "0"
    ("-", "0", DSI, True, "0"), ("+", "0", DSI, True, "0"),  # sign then end of input: num = "0"
    ("-0", "0", DSI, True, "0"), ("-00", "0", DSI, True, "0"),  # zeros are stripped; 0 has no sign
    # "5." has an empty fraction (allowed, see the TODO in parseQuantityString); "5" is cached as canonical
    # because shifted = "5", so String() is the input text "5.".
    ("5.", "5", DSI, True, "5."),
    (".5", "500m", DSI, False, "500m"),  # num "0", denom "5": int64Amount{5, -1}
    ("+1", "1", DSI, True, "+1"),  # the sign is skipped; the canonical-form cache keeps the input text
    ("1E3", "1000", DE, True, "1E3"),  # "E3" is not a table suffix, so it is an exponent; cached
    ("1e+3", "1000", DE, True, "1e+3"),  # strconv.ParseInt accepts a leading "+"
    ("1.5e-3", "1500u", DE, False, "1500e-6"),  # int64Amount{15, -4}; -4 % 3 != 0 so not cached
    ("1e-10", "1n", DE, False, "1e-9"),  # scale -10 < Nano: inf.Dec path, rounded up to 1n
    ("-1e-10", "-1n", DE, False, "-1e-9"),  # rounding is away from zero
    ("1.0000000001", "1000000001n", DSI, False, "1000000001n"),
    ("-1.0000000001", "-1000000001n", DSI, False, "-1000000001n"),
    ("1e-100", "1n", DE, False, "1e-9"),
    ("1e0000000000000000000000000000003", "1000", DE, True, "1e0000000000000000000000000000003"),
    # The exponent is ParseInt'ed as int64, then int32(parsed) wraps: 2**32 -> 0, so this is 1.
    ("1e4294967296", "1", DE, True, "1e4294967296"),
    ("1.500", "1500m", DSI, False, "1.500"),  # shifted "1500", scale -3: passes the cache check
    ("100.035k", "100035", DSI, True, "100.035k"),  # int64Amount{100035, 0}: an integer
    ("007Mi", "7Mi", BSI, True, "007Mi"),  # num "7", 7 & 7 != 0: cached with its leading zeros
    ("1.5Gi", "1536Mi", BSI, False, "1536Mi"),  # a fraction with a binary suffix: inf.Dec
    ("1Ei", "1Ei", BSI, False, "1Ei"), ("1Pi", "1Pi", BSI, False, "1Pi"),  # precision < 0: inf.Dec
    ("128Ti", "128Ti", BSI, False, "128Ti"),  # 15 - 3 - 12 - 1 < 0: inf.Dec
    ("99Ti", "99Ti", BSI, True, "99Ti"), ("100Ti", "100Ti", BSI, False, "100Ti"),
    ("99999Gi", "99999Gi", BSI, True, "99999Gi"), ("100000Gi", "100000Gi", BSI, False, "100000Gi"),
    ("99999999Mi", "99999999Mi", BSI, True, "99999999Mi"), ("100000000Mi", "100000000Mi", BSI, False, "100000000Mi"),
    ("99999999999Ki", "99999999999Ki", BSI, True, "99999999999Ki"),
    ("999999999999Ki", "999999999999Ki", BSI, False, "999999999999Ki"),
    ("1536Mi", "1.5Gi", BSI, True, "1536Mi"),
    ("1.5Ki", "1536", BSI, False, "1536"),  # no "" entry in the binary suffix table: plain digits
    ("1953.125Ki", "2M", BSI, False, "2000000"),
    ("922337203685477580", "922337203685477580", DSI, True, "922337203685477580"),  # 18 digits
    ("9E", "9000000000000000000", DSI, True, "9E"), ("-9E", "-9E", DSI, True, "-9E"),
    ("10E", "10E", DSI, False, "10E"),  # 10**19 overflows int64
    ("1e18", "1E", DE, True, "1e18"), ("1e19", "10E", DE, False, "10e18"),
    ("1000E", "1e21", DSI, False, "1e21"),  # no suffix beyond E: exponent notation
    ("0.0000000001e-3", "1n", DE, False, "1e-9"),
    ("1e999999999", "1e999999999", DE, False, "1e999999999"),  # int64Amount{1, 999999999}, no 10**n built
    ("1000000000000000000e999999999", "1e1000000017", DE, False, "1e1000000017"),  # inf.Dec path, same
]


@pytest.mark.parametrize("text, equal_to, fmt, integer, expected_str", EDGE_VALID)
def test_edge_cases(text, equal_to, fmt, integer, expected_str):
    q = Q(text)
    assert q.compare(Q(equal_to)) == 0
    assert q._fmt == fmt
    assert q.is_integer() is integer
    assert str(q) == expected_str
    assert q.canonical().compare(q) == 0


EDGE_INVALID = [
    ("1e", ERR_SUFFIX),  # suffix "e": not in a table, and an exponent needs len(suffix) > 1
    ("e", ERR_SUFFIX), ("i", ERR_SUFFIX), ("1ki", ERR_SUFFIX), ("1Kii", ERR_SUFFIX),
    ("1KI", ERR_FORMAT_WRONG),  # "I" is not one of the scanner's suffix letters "eEinumkKMGTP"
    ("1e3e3", ERR_FORMAT_WRONG),  # after suffix letters, one sign and digits, nothing else may follow
    ("1e99999999999999999999", ERR_SUFFIX),  # ParseInt overflows int64
    ("1e-", ERR_SUFFIX), ("1e+", ERR_SUFFIX),
    # "Pi"/"Ei" alone take the inf.Dec path (precision < 0) and inf.Dec.SetString("") has no digit.
    ("Pi", ERR_NUMERIC), ("Ei", ERR_NUMERIC), ("-Ei", ERR_NUMERIC), (".Pi", ERR_NUMERIC),
    ("e-10", ERR_NUMERIC),  # scale -10 < Nano: inf.Dec path with no digit
    # The first sign is the number's; the second is scanned as the sign of an (empty-lettered) suffix "-1".
    ("--1", ERR_SUFFIX), ("+-1", ERR_SUFFIX),
    ("1..", ERR_FORMAT_WRONG), ("1e3.5", ERR_FORMAT_WRONG),
    ("0x10", ERR_FORMAT_WRONG), ("1_000", ERR_FORMAT_WRONG), ("inf", ERR_FORMAT_WRONG), ("nan", ERR_FORMAT_WRONG),
    ("NaN", ERR_FORMAT_WRONG), ("\uff11", ERR_FORMAT_WRONG), ("1\n", ERR_FORMAT_WRONG), ("5Gi ", ERR_FORMAT_WRONG),
    (" 5Gi", ERR_FORMAT_WRONG),
]


@pytest.mark.parametrize("text, message", EDGE_INVALID)
def test_edge_invalid(text, message):
    with pytest.raises(QuantityError) as error:
        Q(text)
    assert str(error.value) == message


def test_parse_rejects_non_strings():
    with pytest.raises(TypeError):
        Q(5)


# isInteger is representation-dependent; the API server's canonical form can change the answer.
@pytest.mark.parametrize("text, integer, canonical_str, canonical_integer", [
    ("1000m", False, "1", True), ("1.0", False, "1", True), ("1.5Gi", False, "1536Mi", True),
    ("1Ei", False, "1Ei", False), ("128Ti", False, "128Ti", False), ("1536Mi", True, "1536Mi", True),
    ("100.035k", True, "100.035k", True), ("2000m", False, "2", True), ("1.5", False, "1500m", False),
])
def test_canonical(text, integer, canonical_str, canonical_integer):
    q = Q(text)
    c = q.canonical()
    assert q.is_integer() is integer
    assert str(c) == canonical_str
    assert c.is_integer() is canonical_integer
    assert c.compare(q) == 0


def test_canonical_can_lose_binary_format():
    # 2000000 is not a multiple of 1024, so BinarySI prints plain digits, which re-parse as DecimalSI:
    # the String() of the stored value differs from the String() the API server wrote.
    q = Q("1953.125Ki")
    assert str(q) == "2000000" and q._fmt == BSI
    c = q.canonical()
    assert c._fmt == DSI and str(c) == "2M" and c.compare(q) == 0


def test_arithmetic_overflow_moves_to_inf_dec():
    big = Quantity.from_int(MAX_INT64).add(1)
    assert not big.is_integer() and str(big) == "9223372036854775808"
    small = Quantity.from_int(MIN_INT64).sub(1)
    assert not small.is_integer() and str(small) == "-9223372036854775809"
    assert small.add(1).compare(Quantity.from_int(MIN_INT64)) == 0
    assert not small.add(1).is_integer()  # once inf.Dec, always inf.Dec
    assert Q("0").add(1000).as_integer() == 1000 and str(Q("0").add(1000)) == "1e3"  # takes int's format


def test_receiver_unchanged():
    for text in ("1.5Gi", "50k", "1000m"):
        q = Q(text)
        before = (canon(q), q.is_integer(), q.as_approximate_float())
        q.add(Q("1Ei")), q.sub(Q("1Ei")), q.add(7), q.sub(-7), q.compare(Q("1Ei")), q.canonical()
        assert (canon(q), q.is_integer(), q.as_approximate_float()) == before


def test_copy_and_pickle():
    for q in (Q("1.5Gi"), Q("+1"), Quantity.from_int(MAX_INT64).add(1)):
        for clone in (copy.copy(q), copy.deepcopy(q), pickle.loads(pickle.dumps(q))):
            assert clone.compare(q) == 0 and str(clone) == str(q)
            assert clone.is_integer() is q.is_integer()
            assert clone.as_approximate_float() == q.as_approximate_float()


def test_no_rich_comparisons():
    for name in ("__eq__", "__ne__", "__lt__", "__le__", "__gt__", "__ge__"):
        assert getattr(Quantity, name) is getattr(object, name)
    assert "Quantity('1536Mi'" in repr(Q("1.5Gi"))


def test_huge_inputs_do_not_hang():
    digits = "7" * 20000  # beyond Python's 4300-digit int/str conversion limit
    q = Q(digits + "m")
    assert str(q) == digits + "m" and q.compare(Q(digits)) == -1
    assert Q("1e999999999").as_approximate_float() == math.inf
    assert Q("-1e999999999").compare(Q("-1Ei")) == -1


# ---- property tests ---------------------------------------------------------------------------------

SUFFIXES = st.sampled_from(["", "n", "u", "m", "k", "M", "G", "T", "P", "E", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"]) \
    | st.builds(lambda letter, n: f"{letter}{n}", st.sampled_from(["e", "E", "e+"]), st.integers(-25, 25))


@st.composite
def quantity_texts(draw):
    whole = draw(st.text("0123456789", max_size=22))
    frac = draw(st.none() | st.text("0123456789", max_size=22))
    if not whole and not frac:
        whole = "1"
    sign = draw(st.sampled_from(["", "-", "+"]))
    return sign + whole + ("" if frac is None else "." + frac) + draw(SUFFIXES).replace("e+-", "e-")


quantities = quantity_texts().map(Q)


@settings(max_examples=300, deadline=None)
@given(quantities)
def test_string_round_trips(q):
    assert Q(str(q)).compare(q) == 0
    assert Q(canon(q)).compare(q) == 0
    assert q.canonical().compare(q) == 0


@settings(max_examples=300, deadline=None)
@given(quantities, quantities)
def test_compare_is_antisymmetric_and_matches_sub(a, b):
    assert a.compare(b) == -b.compare(a)
    assert a.compare(b) == a.sub(b).sign()
    assert a.compare(a) == 0


@settings(max_examples=300, deadline=None)
@given(quantities, quantities | st.integers(MIN_INT64, MAX_INT64))
def test_add_then_sub_is_identity(a, b):
    before = canon(a)
    assert a.add(b).sub(b).compare(a) == 0
    assert a.sub(b).add(b).compare(a) == 0
    assert canon(a) == before


@settings(max_examples=300, deadline=None)
@given(st.integers(MIN_INT64, MAX_INT64), st.integers(MIN_INT64, MAX_INT64))
def test_int_arithmetic_matches_python(x, y):
    total = Quantity.from_int(x).add(y)
    assert total.compare(Quantity.from_int(0).add(x).add(y)) == 0
    assert total.is_integer() is (MIN_INT64 <= x + y <= MAX_INT64)  # overflow falls back to inf.Dec
    if total.is_integer():
        assert total.as_integer() == x + y
