"""Exact port of Kubernetes' `resource.Quantity`, as used by the Kubernetes CEL quantity library.

Sources: k8s.io/apimachinery/pkg/api/resource (quantity.go, amount.go, math.go, suffix.go) and
k8s.io/apiserver/pkg/cel/library/quantity.go. Go keeps a Quantity in one of two representations,
and some results depend on which one a value is in (not only on the value):

* `int64Amount` (value, scale): value * 10**scale with an int64 value. `ParseQuantity` only takes
  this path for short inputs: at most 18 significant digits (decimal) or 11/8/5/2 digits for
  Ki/Mi/Gi/Ti with no fraction, and scale >= -9.
* `inf.Dec`: everything else ("1.5Gi", "1Ei", "128Ti", 19+ digits, values finer than nano).

`isInteger`/`asInteger` is Go's `AsInt64`: it fails for every inf.Dec value and for an int64Amount
with a negative scale, so "1000m", "1.0", "0m" and "1.5Gi" are not integers while "100.035k" is.

Surprises kept on purpose (each one is what the Go code does):
* Parsing rounds non-zero values *away from zero* to a multiple of 1n ("0.1n" -> 1n, "-0.1n" -> -1n).
* Only BinarySI values are capped, to +-(2**63 - 1): 8Ei == 10Ei; decimal values are unbounded.
* A bare suffix has an empty number, read as 0: "Mi", "k", "m", "e3", ".", "-", "+" all parse to 0,
  except "Pi"/"Ei" (inf.Dec path, which needs a digit): "unable to parse numeric part of quantity".
* The exponent of "1e<n>" is parsed as int64, then truncated to int32 (Go `int32(parsed)`).
* `ParseQuantity` caches the input as the String() form when a cheap check calls it canonical, so
  String() of "+1", "007Mi", "1.500", "100.035k" or "1E3" is the input text itself.
* String() of a DecimalSI value beyond the suffix table (> E or < n) uses exponent form ("1e21");
  a BinarySI value >= 2**70 (only reachable by arithmetic) loses its suffix, as in Go.

Not ported: Go's CEL `add`/`sub` copy the Quantity struct, which shares an inf.Dec pointer, and
`Cmp` converts its receiver to inf.Dec in place; here every operation is pure (new objects only).
"""

from __future__ import annotations

import decimal
import math

__all__ = ["BINARY_SI", "DECIMAL_EXPONENT", "DECIMAL_SI", "Quantity", "QuantityError"]

DECIMAL_EXPONENT = "DecimalExponent"  # e.g. 12e6
BINARY_SI = "BinarySI"  # e.g. 12Mi (12 * 2^20)
DECIMAL_SI = "DecimalSI"  # e.g. 12M (12 * 10^6)

MAX_INT64 = (1 << 63) - 1
MIN_INT64 = -(1 << 63)
_NANO = -9
_MAX_INT64_FACTORS = 18  # math.go maxInt64Factors

_SPLIT_RE = "^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$"
ERR_FORMAT_WRONG = f"quantities must match the regular expression '{_SPLIT_RE}'"
ERR_NUMERIC = "unable to parse numeric part of quantity"
ERR_SUFFIX = "unable to parse quantity's suffix"
ERR_NOT_INTEGER = "cannot convert value to integer"

_DIGITS = frozenset("0123456789")
_SUFFIX_CHARS = frozenset("eEinumkKMGTP")
_DEC_SUFFIXES = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_BIN_SUFFIXES = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_DEC_BY_EXP = {e: s for s, e in _DEC_SUFFIXES.items()}
_BIN_BY_EXP = {e: s for s, e in _BIN_SUFFIXES.items()}

# math.Pow10's tables: Pow10 is a product/quotient of two table entries, not always the nearest double.
_POW10_TAB = [float(f"1e{i}") for i in range(32)]
_POW10_POS32 = [float(f"1e{32 * i}") for i in range(10)]
_POW10_NEG32 = [float(f"1e-{32 * i}") for i in range(11)]
_FLOAT_DIGITS_LIMIT = 330  # an integer with more digits than this is beyond float64's range


MAX_SCALE_GAP = 10_000  # Go would build a number this many digits long; we refuse instead of hanging


class QuantityError(ValueError):
    """A quantity string Kubernetes would reject, or a failed integer conversion."""


def _wrap32(n: int) -> int:
    """Go int32 truncation."""
    return (n + (1 << 31)) % (1 << 32) - (1 << 31)


def _fits64(n: int) -> bool:
    return MIN_INT64 <= n <= MAX_INT64


def _to_int(digits: str) -> int:
    # int(str) refuses more than 4300 digits (sys.int_max_str_digits); decimal has no such limit.
    return int(digits) if len(digits) <= 4000 else int(decimal.Decimal(digits))


def _digits(n: int) -> str:
    """Decimal digits of abs(n), without the str(int) length limit."""
    n = abs(n)
    return str(n) if n.bit_length() <= 13000 else str(decimal.Decimal(n))


def _ndigits(n: int) -> int:
    return len(_digits(n)) if n else 0


def _cmp(c1: int, e1: int, c2: int, e2: int) -> int:
    """Exact comparison of c1*10**e1 and c2*10**e2, never building a power larger than the inputs."""
    s1, s2 = (c1 > 0) - (c1 < 0), (c2 > 0) - (c2 < 0)
    if s1 != s2:
        return 1 if s1 > s2 else -1
    if s1 == 0:
        return 0
    if abs(e1 - e2) <= 64:  # the common case: align directly
        e = min(e1, e2)
        a, b = c1 * 10 ** (e1 - e), c2 * 10 ** (e2 - e)
        return (a > b) - (a < b)
    m1, m2 = _ndigits(c1) + e1, _ndigits(c2) + e2  # 10**(m-1) <= |value| < 10**m
    if m1 != m2:
        return s1 if m1 > m2 else -s1
    e = min(e1, e2)  # equal magnitudes: the shift is bounded by the digit counts
    a, b = abs(c1) * 10 ** (e1 - e), abs(c2) * 10 ** (e2 - e)
    return ((a > b) - (a < b)) * s1


def _integer_value(c: int, e: int) -> int | None:
    """c*10**e if it is a whole number, else None."""
    if e >= 0:
        return c * 10**e
    if -e > _ndigits(c):
        return 0 if c == 0 else None
    q, r = divmod(abs(c), 10**-e)
    return None if r else (q if c > 0 else -q)


def _pow10(n: int) -> float:
    """Go math.Pow10, bit for bit."""
    if 0 <= n <= 308:
        return _POW10_POS32[n // 32] * _POW10_TAB[n % 32]
    if -323 <= n <= 0:
        return _POW10_NEG32[-n // 32] / _POW10_TAB[-n % 32]
    return math.inf if n > 0 else 0.0


def _scan(text: str) -> tuple[bool, str, str, str, str]:
    """quantity.go parseQuantityString: (positive, value, num, denom, suffix)."""
    positive, pos, end = True, 0, len(text)
    if pos < end and text[0] in "+-":
        positive = text[0] == "+"
        pos += 1
    while True:  # strip leading zeros; all zeros (or nothing) is "0"
        if pos >= end:
            return positive, "0", "0", "", ""
        if text[pos] != "0":
            break
        pos += 1
    i = pos
    while i < end and text[i] in _DIGITS:
        i += 1
    if i >= end:
        return positive, text, text[pos:], "", ""
    num, pos = text[pos:i] or "0", i  # no integer digits at all: still "0"
    denom = ""
    if text[pos] == ".":  # "1." and ".5" are both fine; Go has a TODO about forbidding "1.G"
        pos += 1
        i = pos
        while i < end and text[i] in _DIGITS:
            i += 1
        if i >= end:
            return positive, text, num, text[pos:], ""
        denom, pos = text[pos:i], i
    value = text[:pos]
    suffix_start = i = pos
    while i < end and text[i] in _SUFFIX_CHARS:
        i += 1
    if i < end and text[i] in "+-":
        i += 1
    while i < end and text[i] in _DIGITS:
        i += 1
    if i < end:  # something that is neither a suffix letter, a sign nor a digit follows
        raise QuantityError(ERR_FORMAT_WRONG)
    return positive, value, num, denom, text[suffix_start:]


def _interpret(suffix: str) -> tuple[int, int, str] | None:
    """suffix.go interpret: (base, exponent, format), or None for an unknown suffix."""
    if suffix in _DEC_SUFFIXES:
        return 10, _DEC_SUFFIXES[suffix], DECIMAL_SI
    if suffix in _BIN_SUFFIXES:
        return 2, _BIN_SUFFIXES[suffix], BINARY_SI
    if len(suffix) > 1 and suffix[0] in "eE":
        rest = suffix[1:]  # strconv.ParseInt(rest, 10, 64): optional sign, then only digits
        body = rest[1:] if rest[:1] in ("+", "-") else rest
        if not body or not set(body) <= _DIGITS:
            return None
        significant = body.lstrip("0")  # leading zeros are fine for ParseInt, a 20th digit is not
        parsed = int(rest) if len(significant) <= 19 else MAX_INT64 + 1
        if not _fits64(parsed):
            return None
        return 10, _wrap32(parsed), DECIMAL_EXPONENT  # Go: int32(parsed), which wraps
    return None


class Quantity:
    """An immutable Kubernetes quantity. Compare with compare(); there is deliberately no __eq__."""

    __slots__ = ("_c", "_dec", "_e", "_fmt", "_gs", "_s")

    # _dec False: Go int64Amount{value: _c, scale: _e}.
    # _dec True: Go inf.Dec with value _c * 10**_e and inf scale _gs; Go's unscaled integer is
    #   _c * 10**(_e + _gs) with _e + _gs >= 0. Only as_approximate_float and the scale of Dec sums
    #   depend on _gs, so it is tracked without building the (possibly huge) unscaled integer.
    # _fmt: BinarySI / DecimalSI / DecimalExponent.  _s: Go's cached String() ("" = none).
    _c: int
    _e: int
    _dec: bool
    _gs: int
    _fmt: str
    _s: str

    def __init__(self, *args, **kwargs):
        raise TypeError("use Quantity.parse() or Quantity.from_int()")

    def __reduce__(self):  # copy, deepcopy and pickle rebuild through _make, not __init__
        return Quantity._make, (self._c, self._e, self._fmt, self._dec, self._gs, self._s)

    @classmethod
    def _make(cls, c: int, e: int, fmt: str, dec: bool = False, gs: int | None = None, s: str = "") -> Quantity:
        q = object.__new__(cls)
        q._dec, q._c, q._e, q._fmt, q._s = dec, c, e, fmt, s
        q._gs = (-e if gs is None else gs) if dec else 0
        return q

    @classmethod
    def parse(cls, text: str) -> Quantity:
        """resource.ParseQuantity. No whitespace trimming (only UnmarshalJSON trims)."""
        if not isinstance(text, str):
            raise TypeError(f"quantity must be a string, not {type(text).__name__}")
        if not text:
            raise QuantityError(ERR_FORMAT_WRONG)
        if text == "0":
            return cls._make(0, 0, DECIMAL_SI, s=text)
        positive, value, num, denom, suffix = _scan(text)
        interpreted = _interpret(suffix)
        if interpreted is None:
            raise QuantityError(ERR_SUFFIX)
        base, exponent, fmt = interpreted

        # Fast path to int64Amount, guarded by Go's rough digit-count precision estimate.
        mantissa, scale = 1, 0
        if fmt != BINARY_SI:
            scale = exponent
            precision = _MAX_INT64_FACTORS - (len(num) + len(denom))
        elif len(denom) == 0:  # binary exponents are 10..60; float32(e)*3/10 is exact
            mantissa = 1 << exponent
            precision = 15 - len(num) - exponent * 3 // 10 - 1
        else:
            precision = -1
        if precision >= 0:
            scale = _wrap32(scale - len(denom))  # int32 arithmetic in Go
            if scale >= _NANO:
                shifted = num + denom  # at most 18 digits here, so ParseInt cannot fail
                unsigned = int(shifted)
                result = unsigned * mantissa
                if _fits64(result):  # int64Multiply; otherwise fall through to inf.Dec
                    if not positive:
                        result = -result
                    cached = ""  # Go reuses the input as String() when this check passes
                    if fmt == BINARY_SI:
                        if exponent % 10 == 0 and unsigned & 0x07 != 0:
                            cached = text
                    elif scale % 3 == 0 and not shifted.endswith("000") and shifted[0] != "0":
                        cached = text
                    return cls._make(result, scale, fmt, s=cached)

        # inf.Dec path. SetString needs at least one digit ("Ei", "-Pi", ".Ei" fail here).
        body = value[1:] if value[:1] in ("+", "-") else value
        whole, _, frac = body.partition(".")
        if not whole + frac:
            raise QuantityError(ERR_NUMERIC)
        u = _to_int(whole + frac)  # |unscaled|; the sign is applied at the end, as in Go
        negative = value[:1] == "-" and u != 0
        if base == 10:
            gs = _wrap32(len(frac) + _wrap32(-exponent))  # SetScale(Scale + infScale(exponent))
        else:
            u, gs = u << exponent, len(frac)
        c, e = u, -gs
        if u != 0:
            # Round(amount, 9, RoundUp): away from zero, and the result always has scale 9.
            if gs > 9:
                shift = gs - 9
                if _ndigits(u) < shift:  # 0 < u < 10**shift: rounds up to 1n
                    c = 1
                else:
                    q, r = divmod(u, 10**shift)
                    c = q + (1 if r else 0)
                e = -9
            gs = 9  # gs < 9: Go multiplies the unscaled value by 10**(9-gs); same value
        if fmt == BINARY_SI and _cmp(c, e, MAX_INT64, 0) > 0:
            c, e, gs = MAX_INT64, 0, 0  # the only cap: BinarySI at int64 max
        if fmt == BINARY_SI and c != 0 and _cmp(c, e, 1, 0) < 0:
            fmt = DECIMAL_SI  # 0 < |x| < 1 cannot be written with a binary suffix
        return cls._make(-c if negative else c, e, fmt, dec=True, gs=gs)

    @classmethod
    def from_int(cls, value: int) -> Quantity:
        """resource.NewQuantity(value, DecimalExponent): what CEL add(int)/sub(int) build."""
        if type(value) is not int:
            raise TypeError(f"expected an int, not {type(value).__name__}")
        if not _fits64(value):
            raise QuantityError(f"integer {value} is outside the int64 range")
        return cls._make(value, 0, DECIMAL_EXPONENT)

    # ---- comparisons and accessors -------------------------------------------------------------

    def compare(self, other: Quantity) -> int:
        """Quantity.Cmp: -1, 0 or 1, exact whatever the representations."""
        if not isinstance(other, Quantity):
            raise TypeError(f"cannot compare Quantity with {type(other).__name__}")
        return _cmp(self._c, self._e, other._c, other._e)

    def sign(self) -> int:
        return (self._c > 0) - (self._c < 0)

    def _as_int64(self) -> int | None:
        """Quantity.AsInt64 (None = not ok): representation-dependent, see the module docstring."""
        if self._dec or self._e < 0:
            return None
        if self._e == 0 or self._c == 0:
            return self._c
        if self._e >= 19:  # 10**19 alone overflows int64
            return None
        result = self._c * 10**self._e
        return result if _fits64(result) else None

    def is_integer(self) -> bool:
        return self._as_int64() is not None

    def as_integer(self) -> int:
        value = self._as_int64()
        if value is None:
            raise QuantityError(ERR_NOT_INTEGER)
        return value

    def as_approximate_float(self) -> float:
        """AsApproximateFloat64: float(unscaled) * math.Pow10(exponent), with Go's rounding."""
        if self._dec:
            shift = self._e + self._gs  # Go's unscaled integer is _c * 10**shift
            if self._c == 0:
                base = 0.0
            elif _ndigits(self._c) + shift > _FLOAT_DIGITS_LIMIT:
                base = math.copysign(math.inf, self._c)  # big.Float.Float64 overflows to +-Inf
            else:
                try:
                    base = float(self._c * 10**shift)
                except OverflowError:
                    base = math.copysign(math.inf, self._c)
            exponent = -self._gs
        else:
            base, exponent = float(self._c), self._e
        return base if exponent == 0 else base * _pow10(exponent)

    # ---- arithmetic (CEL copies the receiver, then calls Add/Sub on the copy) ------------------

    def _dec_parts(self) -> tuple[int, int, int]:
        return self._c, self._e, self._gs if self._dec else -self._e

    def _dec_sum(self, other: Quantity, sign: int, fmt: str) -> Quantity:
        """inf.Dec Add/Sub: the exact sum, at the larger of the two inf scales."""
        (xc, xe, xg), (yc, ye, yg) = self._dec_parts(), other._dec_parts()
        if abs(xe - ye) > MAX_SCALE_GAP:  # the exact sum would have that many digits
            raise QuantityError(f"quantity arithmetic across {abs(xe - ye)} decimal places is not supported")
        e = min(xe, ye)
        c = xc * 10 ** (xe - e) + sign * yc * 10 ** (ye - e)
        return Quantity._make(c, e, fmt, dec=True, gs=max(xg, yg))

    @staticmethod
    def _int_add(a: int, sa: int, b: int, sb: int) -> tuple[int, int] | None:
        """int64Amount.Add: None (caller falls back to inf.Dec) if any step overflows int64."""
        if b == 0:
            return a, sa
        if a == 0:
            return b, sb
        if sa != sb:  # scale the operand with the larger scale down to the smaller scale
            high, low = (a, b) if sa > sb else (b, a)
            diff = abs(sa - sb)
            if diff >= 19:
                return None
            high *= 10**diff
            if not _fits64(high):
                return None
            a, b, sa = high, low, min(sa, sb)
        total = a + b
        return (total, sa) if _fits64(total) else None

    def add(self, other: Quantity | int) -> Quantity:
        """Quantity.Add on a copy. A zero receiver takes the other operand's format."""
        y = Quantity.from_int(other) if type(other) is int else other
        if not isinstance(y, Quantity):
            raise TypeError(f"cannot add {type(other).__name__} to a Quantity")
        fmt = y._fmt if self._c == 0 else self._fmt
        if not self._dec and not y._dec:
            result = self._int_add(self._c, self._e, y._c, y._e)
            if result is not None:
                return Quantity._make(result[0], result[1], fmt)
        return self._dec_sum(y, 1, fmt)

    def sub(self, other: Quantity | int) -> Quantity:
        """Quantity.Sub on a copy. A zero receiver takes the other operand's format."""
        y = Quantity.from_int(other) if type(other) is int else other
        if not isinstance(y, Quantity):
            raise TypeError(f"cannot subtract {type(other).__name__} from a Quantity")
        fmt = y._fmt if self._c == 0 else self._fmt
        if not self._dec and not y._dec:
            if y._c == MIN_INT64:  # -y overflows int64: Go negates into an inf.Dec instead
                if self._c == 0:  # 0 - y is Neg(y), which keeps y's scale
                    return Quantity._make(-y._c, y._e, fmt, dec=True)
            else:
                result = self._int_add(self._c, self._e, -y._c, y._e)
                if result is not None:
                    return Quantity._make(result[0], result[1], fmt)
        return self._dec_sum(y, -1, fmt)

    # ---- formatting ----------------------------------------------------------------------------

    def _canonicalize(self) -> str:
        """CanonicalizeBytes: mantissa + suffix, largest exponent that keeps an integer mantissa."""
        c, e = self._c, self._e
        if c == 0:
            return "0"
        fmt = self._fmt
        if fmt == BINARY_SI:
            whole = None
            if _cmp(c, e, -1024, 0) <= 0 or _cmp(c, e, 1024, 0) >= 0:
                whole = _integer_value(c, e)  # AsScale(0) exact?
            if whole is not None:
                mantissa, power = abs(whole), 0
                while mantissa % 1024 == 0:
                    mantissa //= 1024
                    power += 1
                # No "" entry in the binary table: 2000 -> "2000". Beyond Ei Go drops the suffix.
                sign = "-" if whole < 0 else ""
                return sign + _digits(mantissa) + _BIN_BY_EXP.get(10 * power, "")
            fmt = DECIMAL_SI  # |x| < 1024 or fractional: "don't lose precision"
        digits = _digits(c)
        stripped = digits.rstrip("0")
        exponent = e + len(digits) - len(stripped)
        pad = exponent % 3  # lower the exponent to a multiple of 3 (towards -inf)
        significand, exponent = stripped + "0" * pad, exponent - pad
        suffix = _DEC_BY_EXP.get(exponent) if fmt == DECIMAL_SI else None
        if suffix is None:  # DecimalExponent, or DecimalSI beyond n..E (falls back to "e")
            suffix = f"e{exponent}" if exponent else ""
        return ("-" if c < 0 else "") + significand + suffix

    def __str__(self) -> str:
        """Quantity.String(): the cached parse input if Go cached it, else the canonical form."""
        if not self._s:
            self._s = self._canonicalize()  # a cache of an immutable value, as in Go
        return self._s

    def canonical(self) -> Quantity:
        """What the API server stores and hands back: ParseQuantity(q.String())."""
        return Quantity.parse(str(self))

    def __repr__(self) -> str:
        kind = "inf.Dec" if self._dec else "int64Amount"
        return f"Quantity({str(self)!r}, {self._fmt}, {kind} {self._c}e{self._e})"
