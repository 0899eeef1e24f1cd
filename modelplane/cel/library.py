"""The functions a DRA device selector may call, with their overloads, as Kubernetes declares them.

Each overload says whether it is a member (`x.f(y)`) or a global (`f(x, y)`) call, because the
Kubernetes checker accepts each function only in the style it was declared in: `q.isGreaterThan(p)`
but not `isGreaterThan(q, p)`; `sign(q)` but not `q.sign()`; `size()` both ways.

Sources: cel-go's standard library and ext.Strings (v2), ext.Sets, ext.Lists; Kubernetes'
apiserver CEL libraries (quantity, semver, regex, lists); DRA's `includes`.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass

from . import regex
from .errors import CelRuntimeError
from .quantity import Quantity, QuantityError
from .semver import Semver, SemverError, is_semver
from .types import (
    BOOL,
    BYTES,
    DOUBLE,
    DYN,
    INT,
    LIST_DYN,
    MAP_DYN,
    NULL,
    OPTIONAL_DYN,
    QUANTITY,
    SEMVER,
    STRING,
    TYPE,
    UINT,
    Type,
    list_of,
)
from .values import MISSING, NONE, CelType, OptionalValue, UInt, compare, equals, lookup_key, type_name

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
UINT64_MAX = 2**64 - 1
MAX_LIST_ATTRIBUTE_VALUES = 48  # ResourceSliceMaxAttributeValuesPerDevice, for `includes`


@dataclass(frozen=True)
class Overload:
    name: str
    params: tuple[Type, ...]  # for a member overload the first parameter is the receiver
    result: Type
    impl: Callable
    member: bool = False
    cost: int = 1


FUNCTIONS: dict[str, list[Overload]] = {}


def define(name: str, params: tuple[Type, ...], result: Type, member: bool = False, cost: int = 1):
    def register(impl: Callable) -> Callable:
        FUNCTIONS.setdefault(name, []).append(Overload(name, params, result, impl, member, cost))
        return impl

    return register


def fail(message: str) -> CelRuntimeError:
    return CelRuntimeError(message)


def checked_int(value: int) -> int:
    if not INT64_MIN <= value <= INT64_MAX:
        raise fail("integer overflow")
    return value


def checked_uint(value: int) -> UInt:
    if not 0 <= value <= UINT64_MAX:
        raise fail("unsigned integer overflow")
    return UInt(value)


# ---- operators -----------------------------------------------------------------------------------


@define("-_", (INT,), INT)
def _neg_int(a):
    return checked_int(-a)


@define("-_", (DOUBLE,), DOUBLE)
def _neg_double(a):
    return -a


@define("!_", (BOOL,), BOOL)
def _not(a):
    return not a


def _arith(name: str, int_op: Callable, float_op: Callable | None) -> None:
    define(name, (INT, INT), INT)(lambda a, b: checked_int(int_op(a, b)))
    define(name, (UINT, UINT), UINT)(lambda a, b: checked_uint(int_op(a, b)))
    if float_op is not None:
        define(name, (DOUBLE, DOUBLE), DOUBLE)(float_op)


def _int_div(a: int, b: int) -> int:
    if b == 0:
        raise fail("division by zero")
    quotient = abs(a) // abs(b)  # Go truncates toward zero
    return quotient if (a >= 0) == (b >= 0) else -quotient


def _int_mod(a: int, b: int) -> int:
    if b == 0:
        raise fail("modulus by zero")
    return a - b * _int_div(a, b)


def _float_div(a: float, b: float) -> float:
    if b == 0:
        return math.copysign(math.inf, a) * math.copysign(1, b) if a != 0 and not math.isnan(a) else math.nan
    return a / b


_arith("_+_", lambda a, b: a + b, lambda a, b: a + b)
_arith("_-_", lambda a, b: a - b, lambda a, b: a - b)
_arith("_*_", lambda a, b: a * b, lambda a, b: a * b)
_arith("_/_", _int_div, _float_div)
_arith("_%_", _int_mod, None)
define("_+_", (STRING, STRING), STRING)(lambda a, b: a + b)
define("_+_", (BYTES, BYTES), BYTES)(lambda a, b: a + b)
define("_+_", (LIST_DYN, LIST_DYN), LIST_DYN)(lambda a, b: list(a) + list(b))


def _numeric_order(test: Callable[[int], bool]) -> Callable[[object, object], bool]:
    def order(a, b) -> bool:
        if (type(a) is float and math.isnan(a)) or (type(b) is float and math.isnan(b)):
            return False  # every comparison with NaN is false
        return test(compare(a, b))

    return order


for _name, _test in (
    ("_<_", lambda c: c < 0),
    ("_<=_", lambda c: c <= 0),
    ("_>_", lambda c: c > 0),
    ("_>=_", lambda c: c >= 0),
):
    for _a in (INT, UINT, DOUBLE):
        for _b in (INT, UINT, DOUBLE):
            define(_name, (_a, _b), BOOL)(_numeric_order(_test))
    for _s in (STRING, BOOL, BYTES):
        define(_name, (_s, _s), BOOL)(lambda a, b, _t=_test: _t(compare(a, b)))


def contains(collection: object, value: object) -> bool:
    """CEL `in`: list membership by CEL equality, or map key presence. Not substring (CEL has none)."""
    if isinstance(collection, list):
        return any(_equal_or_false(item, value) for item in collection)
    if isinstance(collection, dict):
        return lookup_key(collection, value, presence=True) is not MISSING
    raise fail(f"no such overload: {type_name(value)} in {type_name(collection)}")


def _equal_or_false(a: object, b: object) -> bool:
    try:
        return equals(a, b)
    except CelRuntimeError:
        return False


define("@in", (DYN, LIST_DYN), BOOL)(lambda v, c: contains(c, v))
define("@in", (DYN, MAP_DYN), BOOL)(lambda v, c: contains(c, v))


# ---- size and conversions ------------------------------------------------------------------------


def _size(value):
    return len(value)


for _t in (STRING, BYTES, LIST_DYN, MAP_DYN):
    define("size", (_t,), INT)(_size)
    define("size", (_t,), INT, member=True)(_size)


@define("int", (INT,), INT)
def _int_from_int(v):
    return v


@define("int", (UINT,), INT)
def _int_from_uint(v):
    return checked_int(int(v))


@define("int", (DOUBLE,), INT)
def _int_from_double(v):
    if math.isnan(v) or not -(2.0**63) <= v < 2.0**63:
        raise fail("integer overflow converting double to int")
    return int(v)


@define("int", (STRING,), INT)
def _int_from_string(v):
    try:
        return checked_int(int(v, 10))
    except ValueError:
        raise fail(f"cannot convert '{v}' to int") from None


@define("uint", (UINT,), UINT)
def _uint_from_uint(v):
    return v


@define("uint", (INT,), UINT)
def _uint_from_int(v):
    return checked_uint(v)


@define("uint", (DOUBLE,), UINT)
def _uint_from_double(v):
    if math.isnan(v) or not 0 <= v < 2.0**64:
        raise fail("unsigned integer overflow converting double to uint")
    return UInt(int(v))


@define("uint", (STRING,), UINT)
def _uint_from_string(v):
    try:
        return checked_uint(int(v, 10))
    except ValueError:
        raise fail(f"cannot convert '{v}' to uint") from None


for _t in (INT, UINT, DOUBLE):
    define("double", (_t,), DOUBLE)(lambda v: float(v))


@define("double", (STRING,), DOUBLE)
def _double_from_string(v):
    try:
        return float(v)
    except ValueError:
        raise fail(f"cannot convert '{v}' to double") from None


def _format_double(v: float) -> str:
    if math.isinf(v):
        return "+Inf" if v > 0 else "-Inf"
    if math.isnan(v):
        return "NaN"
    text = repr(v)
    return text[:-2] if text.endswith(".0") else text


define("string", (STRING,), STRING)(lambda v: v)
define("string", (INT,), STRING)(lambda v: str(int(v)))
define("string", (UINT,), STRING)(lambda v: str(int(v)))
define("string", (DOUBLE,), STRING)(_format_double)
define("string", (BOOL,), STRING)(lambda v: "true" if v else "false")


@define("string", (BYTES,), STRING)
def _string_from_bytes(v):
    try:
        return v.decode("utf-8")
    except UnicodeDecodeError:
        raise fail("invalid UTF-8 in bytes, cannot convert to string") from None


define("bytes", (BYTES,), BYTES)(lambda v: v)
define("bytes", (STRING,), BYTES)(lambda v: v.encode("utf-8"))
define("bool", (BOOL,), BOOL)(lambda v: v)


@define("bool", (STRING,), BOOL)
def _bool_from_string(v):
    if v in ("1", "t", "true", "TRUE", "True"):
        return True
    if v in ("0", "f", "false", "FALSE", "False"):
        return False
    raise fail(f"cannot convert '{v}' to bool")


define("dyn", (DYN,), DYN)(lambda v: v)
define("type", (DYN,), TYPE)(lambda v: CelType(type_name(v)))


# ---- strings (standard library and ext.Strings v2) -----------------------------------------------


def _regex(function: Callable) -> Callable:
    """A regex function (RE2, as Go's regexp) whose bad pattern is a CEL runtime error."""

    def run(*args):
        try:
            return function(*args)
        except regex.RegexError as error:
            raise fail(str(error)) from None

    return run


define("contains", (STRING, STRING), BOOL, member=True)(lambda s, sub: sub in s)
define("startsWith", (STRING, STRING), BOOL, member=True)(lambda s, p: s.startswith(p))
define("endsWith", (STRING, STRING), BOOL, member=True)(lambda s, p: s.endswith(p))
define("matches", (STRING, STRING), BOOL, member=True, cost=10)(_regex(regex.matches))
define("matches", (STRING, STRING), BOOL, cost=10)(_regex(regex.matches))


@define("charAt", (STRING, INT), STRING, member=True)
def _char_at(s, i):
    if not 0 <= i <= len(s):
        raise fail(f"index out of range: {i}")
    return s[i : i + 1]


def _check_offset(s: str, i: int) -> None:
    if not 0 <= i <= len(s):
        raise fail(f"index out of range: {i}")


@define("indexOf", (STRING, STRING), INT, member=True)
def _index_of(s, sub):
    return s.find(sub)


@define("indexOf", (STRING, STRING, INT), INT, member=True)
def _index_of_from(s, sub, start):
    _check_offset(s, start)
    return s.find(sub, start)


@define("lastIndexOf", (STRING, STRING), INT, member=True)
def _last_index_of(s, sub):
    return s.rfind(sub)


@define("lastIndexOf", (STRING, STRING, INT), INT, member=True)
def _last_index_of_from(s, sub, end):
    _check_offset(s, end)
    return s.rfind(sub, 0, end + len(sub))


define("lowerAscii", (STRING,), STRING, member=True)(lambda s: "".join(c.lower() if c.isascii() else c for c in s))
define("upperAscii", (STRING,), STRING, member=True)(lambda s: "".join(c.upper() if c.isascii() else c for c in s))
define("replace", (STRING, STRING, STRING), STRING, member=True)(lambda s, old, new: s.replace(old, new))
define("replace", (STRING, STRING, STRING, INT), STRING, member=True)(
    lambda s, old, new, n: s.replace(old, new) if n < 0 else s.replace(old, new, n)
)
define("trim", (STRING,), STRING, member=True)(
    lambda s: s.strip(
        " \t\n\v\f\r\x85\xa0\u1680\u2000\u2001\u2002\u2003"
        "\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u2028"
        "\u2029\u202f\u205f\u3000"
    )
)


@define("split", (STRING, STRING), list_of(STRING), member=True)
def _split(s, sep):
    return list(s) if sep == "" else s.split(sep)


@define("split", (STRING, STRING, INT), list_of(STRING), member=True)
def _split_n(s, sep, n):
    if n == 0:
        return []
    if n < 0:
        return _split(s, sep)
    if sep == "":
        chars = list(s)
        return chars[: n - 1] + (["".join(chars[n - 1 :])] if len(chars) >= n else [])
    return s.split(sep, n - 1)


@define("substring", (STRING, INT), STRING, member=True)
def _substring(s, start):
    _check_offset(s, start)
    return s[start:]


@define("substring", (STRING, INT, INT), STRING, member=True)
def _substring_range(s, start, end):
    _check_offset(s, start)
    _check_offset(s, end)
    if end < start:
        raise fail(f"invalid substring range. start: {start}, end: {end}")
    return s[start:end]


@define("join", (list_of(STRING),), STRING, member=True)
def _join(items):
    return "".join(_strings(items))


@define("join", (list_of(STRING), STRING), STRING, member=True)
def _join_with(items, sep):
    return sep.join(_strings(items))


def _strings(items: list) -> list[str]:
    if not all(type(i) is str for i in items):
        raise fail("join() needs a list of strings")
    return items


@define("strings.quote", (STRING,), STRING)
def _quote(s):
    escaped = s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\t", "\\t").replace("\r", "\\r")
    return f'"{escaped}"'


# Kubernetes regex library
define("find", (STRING, STRING), STRING, member=True, cost=10)(_regex(regex.find))
define("findAll", (STRING, STRING), list_of(STRING), member=True, cost=10)(_regex(regex.find_all))
define("findAll", (STRING, STRING, INT), list_of(STRING), member=True, cost=10)(_regex(regex.find_all))
REGEX_FUNCTIONS = {"matches", "find", "findAll"}  # their pattern argument must be valid RE2


# ---- lists (Kubernetes lists library, ext.Lists, ext.Sets) ---------------------------------------


def _ordered(items: list) -> list:
    for a, b in itertools.pairwise(items):
        compare(a, b)  # raises for mixed or unorderable element types
    return items


define("isSorted", (LIST_DYN,), BOOL, member=True)(
    lambda xs: all(compare(a, b) <= 0 for a, b in itertools.pairwise(xs))
)


@define("sum", (LIST_DYN,), DYN, member=True)
def _sum(xs):
    if not xs:
        return 0
    total = xs[0]
    for x in xs[1:]:
        if type(x) is not type(total) or type(x) not in (int, UInt, float):
            raise fail("sum() needs a list of one numeric type")
        total = total + x
    return checked_int(total) if type(total) is int else total


def _extreme(xs: list, pick: int):
    if not xs:
        raise fail("min/max of an empty list")
    best = xs[0]
    for x in xs[1:]:
        if compare(x, best) * pick > 0:
            best = x
    return best


define("min", (LIST_DYN,), DYN, member=True)(lambda xs: _extreme(xs, -1))
define("max", (LIST_DYN,), DYN, member=True)(lambda xs: _extreme(xs, 1))


def _position(xs: list, value: object, reverse: bool) -> int:
    indexes = range(len(xs) - 1, -1, -1) if reverse else range(len(xs))
    return next((i for i in indexes if _equal_or_false(xs[i], value)), -1)


define("indexOf", (LIST_DYN, DYN), INT, member=True)(lambda xs, v: _position(xs, v, False))
define("lastIndexOf", (LIST_DYN, DYN), INT, member=True)(lambda xs, v: _position(xs, v, True))


@define("slice", (LIST_DYN, INT, INT), LIST_DYN, member=True)
def _slice(xs, start, end):
    if start < 0 or end < 0 or start > end or end > len(xs):
        raise fail(f"cannot slice({start}, {end}) a list of length {len(xs)}")
    return xs[start:end]


def _flatten(xs: list, depth: int) -> list:
    if depth < 0:
        raise fail("level must be non-negative")
    out: list = []
    for x in xs:
        out.extend(_flatten(x, depth - 1) if isinstance(x, list) and depth > 0 else [x])
    return out


define("flatten", (LIST_DYN,), LIST_DYN, member=True)(lambda xs: _flatten(xs, 1))
define("flatten", (LIST_DYN, INT), LIST_DYN, member=True)(_flatten)


@define("distinct", (LIST_DYN,), LIST_DYN, member=True)
def _distinct(xs):
    out: list = []
    for x in xs:
        if not any(_equal_or_false(x, y) for y in out):
            out.append(x)
    return out


define("reverse", (LIST_DYN,), LIST_DYN, member=True)(lambda xs: list(reversed(xs)))


@define("sort", (LIST_DYN,), LIST_DYN, member=True)
def _sort(xs):
    import functools

    return sorted(_ordered(list(xs)), key=functools.cmp_to_key(compare))


@define("lists.range", (INT,), list_of(INT))
def _range(n):
    if n > 100_000:
        raise fail("lists.range() argument too large")
    return list(range(max(n, 0)))


def _set_contains(xs: list, ys: list) -> bool:
    return all(any(_equal_or_false(x, y) for x in xs) for y in ys)


define("sets.contains", (LIST_DYN, LIST_DYN), BOOL)(_set_contains)
define("sets.equivalent", (LIST_DYN, LIST_DYN), BOOL)(lambda a, b: _set_contains(a, b) and _set_contains(b, a))
define("sets.intersects", (LIST_DYN, LIST_DYN), BOOL)(lambda a, b: any(_equal_or_false(x, y) for x in a for y in b))


# DRA list-typed attributes (Kubernetes 1.36+): scalar or list target.
@define("includes", (DYN, DYN), BOOL, member=True, cost=MAX_LIST_ATTRIBUTE_VALUES)
def _includes(target, value):
    if isinstance(target, list):
        if len(target) > MAX_LIST_ATTRIBUTE_VALUES:
            raise fail(f"includes() on a list of more than {MAX_LIST_ATTRIBUTE_VALUES} values")
        return any(_equal_or_false(item, value) for item in target)
    return _equal_or_false(target, value)


# ---- Kubernetes quantity library ------------------------------------------------------------------


def _parse_quantity(text: str) -> Quantity:
    try:
        return Quantity.parse(text)
    except QuantityError as error:
        raise fail(str(error)) from None


define("quantity", (STRING,), QUANTITY)(_parse_quantity)


@define("isQuantity", (STRING,), BOOL)
def _is_quantity(text):
    try:
        Quantity.parse(text)
        return True
    except QuantityError:
        return False


define("sign", (QUANTITY,), INT)(lambda q: q.sign())
define("isInteger", (QUANTITY,), BOOL, member=True)(lambda q: q.is_integer())


@define("asInteger", (QUANTITY,), INT, member=True)
def _as_integer(q):
    try:
        return q.as_integer()
    except QuantityError as error:
        raise fail(str(error)) from None


define("asApproximateFloat", (QUANTITY,), DOUBLE, member=True)(lambda q: q.as_approximate_float())


def _arithmetic(operation: Callable) -> Callable:
    def run(q, other):
        try:
            return operation(q, other)
        except QuantityError as error:
            raise fail(str(error)) from None

    return run


for _other in (QUANTITY, INT):
    define("add", (QUANTITY, _other), QUANTITY, member=True)(_arithmetic(Quantity.add))
    define("sub", (QUANTITY, _other), QUANTITY, member=True)(_arithmetic(Quantity.sub))

for _kind in (QUANTITY, SEMVER):
    define("compareTo", (_kind, _kind), INT, member=True)(lambda a, b: a.compare(b))
    define("isGreaterThan", (_kind, _kind), BOOL, member=True)(lambda a, b: a.compare(b) > 0)
    define("isLessThan", (_kind, _kind), BOOL, member=True)(lambda a, b: a.compare(b) < 0)


# ---- Kubernetes semver library --------------------------------------------------------------------


def _parse_semver(text: str, normalize: bool = False) -> Semver:
    try:
        return Semver.parse(text, normalize=normalize)
    except SemverError as error:
        raise fail(str(error)) from None


define("semver", (STRING,), SEMVER)(_parse_semver)
define("semver", (STRING, BOOL), SEMVER)(_parse_semver)


define("isSemver", (STRING,), BOOL)(is_semver)
define("isSemver", (STRING, BOOL), BOOL)(is_semver)
define("major", (SEMVER,), INT, member=True)(lambda v: v.major)
define("minor", (SEMVER,), INT, member=True)(lambda v: v.minor)
define("patch", (SEMVER,), INT, member=True)(lambda v: v.patch)


# ---- optionals (cel-go's optional library, enabled in Kubernetes' base environment) ----------------

define("optional.of", (DYN,), OPTIONAL_DYN)(lambda v: OptionalValue(True, v))
define("optional.none", (), OPTIONAL_DYN)(lambda: NONE)


@define("optional.ofNonZeroValue", (DYN,), OPTIONAL_DYN)
def _of_non_zero(v):
    zero = (
        v in (0, "", b"", False, None)
        if type(v) in (int, UInt, float, str, bytes, bool, type(None))
        else (len(v) == 0 if isinstance(v, (list, dict)) else False)
    )
    return NONE if zero else OptionalValue(True, v)


define("hasValue", (OPTIONAL_DYN,), BOOL, member=True)(lambda o: o.present)
define("orValue", (OPTIONAL_DYN, DYN), DYN, member=True)(lambda o, v: o.value if o.present else v)
define("or", (OPTIONAL_DYN, OPTIONAL_DYN), OPTIONAL_DYN, member=True)(lambda o, p: o if o.present else p)


@define("value", (OPTIONAL_DYN,), DYN, member=True)
def _optional_value(o):
    if not o.present:
        raise fail("optional.none() dereference")
    return o.value


# ---- runtime type tests ---------------------------------------------------------------------------

_RUNTIME_TYPES: dict[Type, Callable[[object], bool]] = {
    DYN: lambda v: True,
    BOOL: lambda v: type(v) is bool,
    INT: lambda v: type(v) is int,
    UINT: lambda v: type(v) is UInt,
    DOUBLE: lambda v: type(v) is float,
    STRING: lambda v: type(v) is str,
    BYTES: lambda v: type(v) is bytes,
    NULL: lambda v: v is None,
    QUANTITY: lambda v: type(v) is Quantity,
    SEMVER: lambda v: type(v) is Semver,
    TYPE: lambda v: type(v) is CelType,
}


def runtime_accepts(param: Type, value: object) -> bool:
    if isinstance(param, tuple):
        return isinstance(value, {"list": list, "map": dict, "optional": OptionalValue}[param[0]])
    return _RUNTIME_TYPES[param](value)
