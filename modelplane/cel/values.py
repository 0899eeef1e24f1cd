"""CEL runtime values in Python, and CEL's equality and ordering over them.

Values are plain Python objects (bool, int, float, str, bytes, None, list, dict) plus UInt,
Quantity and Semver. Note `bool` is an `int` subclass in Python: every type test here puts bool first.
"""

from __future__ import annotations

import math
from typing import Any

from .errors import CelRuntimeError
from .quantity import Quantity
from .semver import Semver


class UInt(int):
    """CEL's uint (`2u`): a distinct type from int, with the same numeric value semantics."""

    def __repr__(self) -> str:
        return f"{int(self)}u"


class CelType:
    """A type value, as returned by `type(x)` (compares by name)."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name


class OptionalValue:
    """CEL's optional: `optional.of(x)` or `optional.none()`, made by `x.?field` and `m[?key]`."""

    __slots__ = ("present", "value")

    def __init__(self, present: bool, value: object = None) -> None:
        self.present, self.value = present, value

    def __repr__(self) -> str:
        return f"optional.of({self.value!r})" if self.present else "optional.none()"


NONE = OptionalValue(False)


def type_name(value: object) -> str:
    """The CEL type name of a runtime value."""
    kind = type(value)
    if kind is bool:
        return "bool"
    if kind is UInt:
        return "uint"
    if kind is int:
        return "int"
    if kind is float:
        return "double"
    if kind is str:
        return "string"
    if kind is bytes:
        return "bytes"
    if value is None:
        return "null_type"
    if isinstance(value, list):
        return "list"
    if isinstance(value, dict):
        return "map"
    if kind is Quantity:
        return "kubernetes.Quantity"
    if kind is Semver:
        return "kubernetes.Semver"
    if kind is CelType:
        return "type"
    if kind is OptionalValue:
        return "optional_type"
    return getattr(value, "cel_type", kind.__name__)


_GO_NAMES = {
    "bool": "types.Bool",
    "int": "types.Int",
    "uint": "types.Uint",
    "double": "types.Double",
    "string": "types.String",
    "bytes": "types.Bytes",
    "null_type": "types.Null",
    "kubernetes.Quantity": "cel.Quantity",
    "kubernetes.Semver": "cel.Semver",
    "type": "types.Type",
}


def go_type_name(value: object) -> str:
    """The name cel-go prints for a value's type in runtime errors ('types.Int', 'cel.Semver')."""
    return _GO_NAMES.get(type_name(value), type_name(value))


def is_number(value: object) -> bool:
    return type(value) in (int, UInt, float)


def equals(left: Any, right: Any) -> bool:
    """CEL `==`: heterogeneous equality (false across types, numbers compared by value).

    Quantity and Semver compare by value with their own kind; a Quantity or Semver on the left of
    a different type is an error in cel-go, while a built-in on the left is simply unequal.
    """
    lt, rt = type(left), type(right)
    if lt in (Quantity, Semver):
        if rt is not lt:
            raise CelRuntimeError(f"no such overload: {type_name(left)} == {type_name(right)}")
        return left.compare(right) == 0
    if lt is bool or rt is bool:
        return lt is rt and left == right
    if is_number(left) and is_number(right):
        if (lt is float and math.isnan(left)) or (rt is float and math.isnan(right)):
            return False
        return left == right
    if (
        lt is not rt
        and not (isinstance(left, list) and isinstance(right, list))
        and not (isinstance(left, dict) and isinstance(right, dict))
    ):
        return False
    if isinstance(left, list):
        return len(left) == len(right) and all(equals(a, b) for a, b in zip(left, right, strict=True))
    if isinstance(left, dict):
        if len(left) != len(right):
            return False
        for key, value in left.items():
            other = lookup_key(right, key)
            if other is _MISSING or not equals(value, other):
                return False
        return True
    if lt is CelType:
        return left.name == right.name
    if lt is OptionalValue:
        return left.present == right.present and (not left.present or equals(left.value, right.value))
    return left == right


_MISSING = object()


def lookup_key(mapping: dict, key: object, presence: bool = False) -> object:
    """Map lookup with CEL key semantics: numeric keys match across int, uint and double.

    With `presence`, only real keys count (`in`, has()): a DomainMap's empty default does not.
    """
    if type(key) is bool:
        for k, v in mapping.items():
            if type(k) is bool and k == key:
                return v
        return _MISSING
    if is_number(key):
        for k, v in mapping.items():
            if is_number(k) and k == key:
                return v
        return _MISSING
    try:
        if presence or not hasattr(mapping, "lookup"):
            return mapping.get(key, _MISSING)
        return mapping.lookup(key)
    except TypeError:
        return _MISSING


MISSING = _MISSING


def compare(left: Any, right: Any) -> int:
    """CEL ordering (`<` and friends): numbers across int/uint/double, strings, bools, bytes."""
    lt, rt = type(left), type(right)
    if is_number(left) and is_number(right):
        if (lt is float and math.isnan(left)) or (rt is float and math.isnan(right)):
            raise CelRuntimeError("NaN values cannot be ordered")
        return (left > right) - (left < right)
    if lt is rt and lt in (str, bytes, bool):
        return (left > right) - (left < right)
    raise CelRuntimeError(f"no such overload: {type_name(left)} < {type_name(right)}")
