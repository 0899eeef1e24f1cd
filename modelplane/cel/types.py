"""Static CEL types for the checker: names for scalars, tuples for list and map.

Only what device selectors need: the `device` object, the scalar kinds, lists, maps, Quantity,
Semver, and `dyn` (unknown until run time, e.g. an attribute value).
"""

from __future__ import annotations

Type = str | tuple

BOOL, INT, UINT, DOUBLE, STRING, BYTES = "bool", "int", "uint", "double", "string", "bytes"
NULL, DYN, TYPE = "null_type", "dyn", "type"
QUANTITY, SEMVER = "kubernetes.Quantity", "kubernetes.Semver"
DEVICE = "kubernetes.DRADevice"


def list_of(element: Type) -> Type:
    return ("list", element)


def map_of(key: Type, value: Type) -> Type:
    return ("map", key, value)


def optional_of(inner: Type) -> Type:
    return ("optional", inner)


LIST_DYN, MAP_DYN, OPTIONAL_DYN = list_of(DYN), map_of(DYN, DYN), optional_of(DYN)

# The `device` variable: Kubernetes' DRA device type with every field any gate adds, so the
# interpreter can read them all. allowMultipleAllocations exists only with the alpha
# DRAConsumableCapacity gate (off by default in 1.34): the checker refuses it unless that gate is
# on (checker.GATED_FIELDS).
DEVICE_FIELDS: dict[str, Type] = {
    "driver": STRING,
    "attributes": map_of(STRING, map_of(STRING, DYN)),
    "capacity": map_of(STRING, map_of(STRING, QUANTITY)),
    "allowMultipleAllocations": BOOL,
}


def is_list(t: Type) -> bool:
    return isinstance(t, tuple) and t[0] == "list"


def is_map(t: Type) -> bool:
    return isinstance(t, tuple) and t[0] == "map"


def is_optional(t: Type) -> bool:
    return isinstance(t, tuple) and t[0] == "optional"


def element(t: Type) -> Type:
    return t[1] if is_list(t) else DYN


def show(t: Type) -> str:
    if is_list(t):
        return f"list({show(t[1])})"
    if is_map(t):
        return f"map({show(t[1])}, {show(t[2])})"
    if is_optional(t):
        return f"optional_type({show(t[1])})"
    return str(t)


def assignable(param: Type, arg: Type) -> bool:
    """Can a value of static type `arg` be passed where `param` is expected?"""
    if param in (DYN, arg) or arg == DYN:
        return True
    if is_list(param) and is_list(arg):
        return assignable(param[1], arg[1])
    if is_map(param) and is_map(arg):
        return assignable(param[1], arg[1]) and assignable(param[2], arg[2])
    if is_optional(param) and is_optional(arg):
        return assignable(param[1], arg[1])
    return False


def unify(a: Type, b: Type) -> Type | None:
    """The common type of two operands of `==`, `?:` or list literal items, or None if there is none."""
    if a == b:
        return a
    if a == DYN or b == DYN:
        return DYN
    if a == NULL or b == NULL:
        return DYN
    if is_list(a) and is_list(b):
        inner = unify(a[1], b[1])
        return list_of(inner) if inner is not None else None
    if is_map(a) and is_map(b):
        key, value = unify(a[1], b[1]), unify(a[2], b[2])
        return map_of(key, value) if key is not None and value is not None else None
    if is_optional(a) and is_optional(b):
        inner = unify(a[1], b[1])
        return optional_of(inner) if inner is not None else None
    return None
