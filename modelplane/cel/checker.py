"""Compile-time checks, as the Kubernetes API server makes them before accepting a selector.

Infers a static type for every node (the `device` variable is typed; attribute values are `dyn`),
rejects unknown identifiers, functions, fields and overloads, requires a bool (or dyn) result,
and estimates the worst-case cost the way cel-go does: comprehensions multiply by the largest
size their range can have (32 domains or ids, 64 list values, or a literal's length).

Feature gates: the environment is Kubernetes 1.34 with its default gates, which is what both the API
server (validating a new selector) and the scheduler have. What an alpha gate adds (`allowMultipleAllocations`,
`includes`) is a compile error naming the gate unless `gates` turns it on; only tests that run
Kubernetes' own gate-on cases do that.
"""

from __future__ import annotations

from dataclasses import dataclass

from .errors import SelectorCompileError
from .library import FUNCTIONS, REGEX_FUNCTIONS
from .regex import RegexError, compile_regex
from .tree import Bind, Call, Comprehension, Ident, Index, ListLit, Lit, MapLit, Node, Select
from .types import (
    BOOL,
    BYTES,
    DEVICE,
    DEVICE_FIELDS,
    DOUBLE,
    DYN,
    INT,
    NULL,
    STRING,
    TYPE,
    UINT,
    Type,
    assignable,
    element,
    is_list,
    is_map,
    is_optional,
    list_of,
    map_of,
    optional_of,
    show,
    unify,
)
from .values import CelType, UInt

MAX_ENTRIES = 32  # domains per device, ids per domain (ResourceSliceMaxAttributesAndCapacitiesPerDevice)
MAX_VALUES = 64  # list attribute values and string length, for size estimates
UNKNOWN_SIZE = 64

CONSUMABLE_CAPACITY, LIST_TYPE_ATTRIBUTES = "DRAConsumableCapacity", "DRAListTypeAttributes"
NO_GATES: frozenset[str] = frozenset()

# What an alpha feature gate adds to the selector environment: (gate, what to tell the user after the
# API server's own error). Measured on kube-apiserver v1.34.3 with stock gates: a new selector using
# device.allowMultipleAllocations is refused with 422 "undefined field 'allowMultipleAllocations'".
GATED_FIELDS: dict[str, tuple[str, str]] = {
    "allowMultipleAllocations": (
        CONSUMABLE_CAPACITY,
        "device.allowMultipleAllocations needs the "
        "DRAConsumableCapacity feature gate (alpha in Kubernetes 1.34, off by default), "
        "so the API server would refuse this selector; remove it",
    ),
}
GATED_FUNCTIONS: dict[str, tuple[str, str]] = {
    "includes": (
        LIST_TYPE_ATTRIBUTES,
        "includes() needs the DRAListTypeAttributes feature gate (alpha since "
        "Kubernetes 1.36, off by default), so the API server would refuse this selector; compare the "
        "attribute with == instead",
    ),
}


@dataclass(frozen=True)
class Checked:
    type: Type
    cost: int  # worst-case estimate
    size: int  # largest number of elements (lists, maps) or characters (strings) it can have


def check(root: Node, gates: frozenset[str] = NO_GATES) -> Checked:
    """Type-check a selector; raises SelectorCompileError like the Kubernetes compiler would.

    `gates`: the alpha feature gates to treat as on (GATED_FIELDS, GATED_FUNCTIONS); none by default.
    """
    result = _Checker(gates).visit(root, {})
    if result.type not in (BOOL, DYN):
        raise SelectorCompileError(f"must evaluate to bool or the unknown type, not {show(result.type)}")
    return result


def _literal_type(value: object) -> Type:
    kind = type(value)
    if kind is bool:
        return BOOL
    if kind is UInt:
        return UINT
    return {int: INT, float: DOUBLE, str: STRING, bytes: BYTES, type(None): NULL, CelType: TYPE}[kind]


class _Checker:
    def __init__(self, gates: frozenset[str]) -> None:
        self.gates = gates

    def visit(self, node: Node, scope: dict[str, Type]) -> Checked:
        return getattr(self, f"_{type(node).__name__}")(node, scope)

    def _Lit(self, node: Lit, scope) -> Checked:
        size = len(node.value) if isinstance(node.value, (str, bytes)) else 0
        return Checked(_literal_type(node.value), 0, size)

    def _Ident(self, node: Ident, scope) -> Checked:
        if node.name in scope:
            t = scope[node.name]
            return Checked(t, 1, MAX_VALUES if t == DYN or is_list(t) else MAX_ENTRIES)
        if node.name == "device":
            return Checked(DEVICE, 1, 0)
        if node.name in ("int", "uint", "double", "string", "bytes", "bool", "list", "map", "null_type", "type"):
            return Checked(TYPE, 0, 0)
        raise SelectorCompileError(f"undeclared reference to '{node.name}' (in container '')")

    def _Select(self, node: Select, scope) -> Checked:
        operand = self.visit(node.operand, scope)
        if is_optional(operand.type) or node.optional:  # x.?f, or any selection on an optional
            inner = Checked(operand.type[1] if is_optional(operand.type) else operand.type, operand.cost, operand.size)
            plain = self._select(Select(node.operand, node.field, node.test_only), inner)
            return Checked(plain.type if node.test_only else optional_of(plain.type), plain.cost, plain.size)
        return self._select(node, operand)

    def _select(self, node: Select, operand: Checked) -> Checked:
        t = operand.type
        if t == DEVICE:
            if node.field not in DEVICE_FIELDS:
                raise SelectorCompileError(f"undefined field '{node.field}'")
            gate, hint = GATED_FIELDS.get(node.field, (None, ""))
            if gate is not None and gate not in self.gates:
                raise SelectorCompileError(f"undefined field '{node.field}': {hint}")
            field_type = DEVICE_FIELDS[node.field]
            size = MAX_ENTRIES if is_map(field_type) else MAX_VALUES
            return Checked(BOOL if node.test_only else field_type, operand.cost + 1, size)
        if is_map(t):
            if not assignable(t[1], STRING):
                raise SelectorCompileError(f"type '{show(t)}' does not support field selection")
            value = t[2]
            size = MAX_ENTRIES if is_map(value) else MAX_VALUES
            return Checked(BOOL if node.test_only else value, operand.cost + 1, size)
        if t == DYN:
            return Checked(BOOL if node.test_only else DYN, operand.cost + 1, MAX_VALUES)
        raise SelectorCompileError(f"type '{show(t)}' does not support field selection")

    def _Index(self, node: Index, scope) -> Checked:
        operand, index = self.visit(node.operand, scope), self.visit(node.index, scope)
        if is_optional(operand.type) or node.optional:  # m[?k], or any index on an optional
            inner = Checked(operand.type[1] if is_optional(operand.type) else operand.type, operand.cost, operand.size)
            plain = self._index(inner, index)
            return Checked(optional_of(plain.type), plain.cost, plain.size)
        return self._index(operand, index)

    def _index(self, operand: Checked, index: Checked) -> Checked:
        t, cost = operand.type, operand.cost + index.cost + 1
        if is_list(t):
            self._expect("_[_]", [t, index.type], assignable(INT, index.type) or index.type in (UINT, DOUBLE))
            return Checked(t[1], cost, MAX_VALUES)
        if is_map(t):
            self._expect("_[_]", [t, index.type], assignable(t[1], index.type) or _numeric_key(t[1], index.type))
            return Checked(t[2], cost, MAX_ENTRIES if is_map(t[2]) else MAX_VALUES)
        if t == DYN:
            return Checked(DYN, cost, MAX_VALUES)
        raise SelectorCompileError(
            f"found no matching overload for '_[_]' applied to '({show(t)}, {show(index.type)})'"
        )

    def _ListLit(self, node: ListLit, scope) -> Checked:
        items = [self.visit(item, scope) for item in node.items]
        common: Type = DYN
        if items:
            common = items[0].type
            for item in items[1:]:
                joined = unify(common, item.type)
                if joined is None:
                    raise SelectorCompileError(
                        f"expected type '{show(common)}' but found '{show(item.type)}' "
                        "(list literals must be homogeneous)"
                    )
                common = joined
        return Checked(list_of(common), sum(i.cost for i in items) + 1, len(items))

    def _MapLit(self, node: MapLit, scope) -> Checked:
        keys = [self.visit(k, scope) for k, _ in node.entries]
        values = [self.visit(v, scope) for _, v in node.entries]
        key_type = self._homogeneous(keys)
        for key in keys:
            if key.type not in (STRING, INT, UINT, BOOL, DYN):
                raise SelectorCompileError(f"unsupported map key type '{show(key.type)}'")
        cost = sum(c.cost for c in keys + values) + 1
        return Checked(map_of(key_type, self._homogeneous(values)), cost, len(node.entries))

    def _homogeneous(self, parts: list[Checked]) -> Type:
        common: Type = DYN
        for i, part in enumerate(parts):
            joined = part.type if i == 0 else unify(common, part.type)
            if joined is None:
                raise SelectorCompileError(
                    f"expected type '{show(common)}' but found '{show(part.type)}' (map literals must be homogeneous)"
                )
            common = joined
        return common

    def _Bind(self, node: Bind, scope) -> Checked:
        init = self.visit(node.init, scope)
        body = self.visit(node.body, {**scope, node.var: init.type})
        return Checked(body.type, init.cost + body.cost + 1, body.size)

    def _Comprehension(self, node: Comprehension, scope) -> Checked:
        rng = self.visit(node.range, scope)
        t = rng.type
        if is_list(t):
            first, second = (INT, t[1]) if node.var2 else (t[1], None)
        elif is_map(t):
            first, second = t[1], (t[2] if node.var2 else None)
        elif t == DYN:
            first, second = DYN, (DYN if node.var2 else None)
        else:
            raise SelectorCompileError(
                f"expression of type '{show(t)}' cannot be range of a comprehension (must be list, map, or dynamic)"
            )
        inner = {**scope, node.var: first}
        if node.var2:
            inner[node.var2] = second
        body = self.visit(node.body, inner)
        transform = self.visit(node.transform, inner) if node.transform is not None else None
        macro = node.macro
        predicate = macro in ("all", "exists", "exists_one", "filter") or transform is not None
        if predicate and body.type not in (BOOL, DYN):
            raise SelectorCompileError(f"{macro}() needs a bool predicate, not {show(body.type)}")
        per_item = body.cost + (transform.cost if transform else 0) + 2
        cost = rng.cost + max(rng.size, 1) * per_item
        if macro in ("all", "exists", "exists_one"):
            return Checked(BOOL, cost, 0)
        if macro == "filter":
            return Checked(t if not is_map(t) else list_of(t[1]), cost, rng.size)
        if macro == "sortBy":
            return Checked(t, cost + rng.size * 10, rng.size)
        if macro == "map":
            return Checked(list_of((transform or body).type), cost, rng.size)
        if macro == "transformList":
            return Checked(list_of((transform or body).type), cost, rng.size)
        return Checked(map_of(first, (transform or body).type), cost, rng.size)  # transformMap

    def _Call(self, node: Call, scope) -> Checked:
        if node.function in ("_&&_", "_||_"):
            left, right = (self.visit(a, scope) for a in node.args)
            for side in (left, right):
                self._expect(node.function, [left.type, right.type], side.type in (BOOL, DYN))
            return Checked(BOOL, left.cost + right.cost, 0)
        if node.function == "_?_:_":
            cond, then, otherwise = (self.visit(a, scope) for a in node.args)
            self._expect(node.function, [cond.type, then.type, otherwise.type], cond.type in (BOOL, DYN))
            joined = unify(then.type, otherwise.type)
            self._expect(node.function, [cond.type, then.type, otherwise.type], joined is not None)
            assert joined is not None  # _expect raised otherwise
            return Checked(joined, cond.cost + max(then.cost, otherwise.cost), max(then.size, otherwise.size))
        if node.function in ("_==_", "_!=_"):
            left, right = (self.visit(a, scope) for a in node.args)
            self._expect(node.function, [left.type, right.type], unify(left.type, right.type) is not None)
            return Checked(BOOL, left.cost + right.cost + 1, 0)
        target = self.visit(node.target, scope) if node.target is not None else None
        args = [self.visit(a, scope) for a in node.args]
        parts = ([target] if target else []) + args
        checked = self._overload(node, parts)
        if node.function in REGEX_FUNCTIONS:  # after type checking, as cel-go's AST validators run
            _check_constant_pattern(node)
        return checked

    def _overload(self, node: Call, parts: list[Checked]) -> Checked:
        member = node.target is not None
        candidates = [o for o in FUNCTIONS.get(node.function, ()) if o.member == member]
        if not FUNCTIONS.get(node.function):
            raise SelectorCompileError(f"undeclared reference to '{node.function}' (in container '')")
        gate, hint = GATED_FUNCTIONS.get(node.function, (None, ""))
        if gate is not None and gate not in self.gates:
            raise SelectorCompileError(f"undeclared reference to '{node.function}': {hint}")
        types = [p.type for p in parts]
        matching = [
            o
            for o in candidates
            if len(o.params) == len(types) and all(assignable(p, t) for p, t in zip(o.params, types, strict=True))
        ]
        if not matching:
            hint = ""
            if not candidates:
                style = "global" if member else "member"
                example = f"{node.function}(x, ...)" if member else f"x.{node.function}(...)"
                hint = f" ({node.function} is declared only as a {style} function: write {example})"
            raise SelectorCompileError(
                f"found no matching overload for '{node.function}' applied to '{self._signature(types, member)}'{hint}"
            )
        results = {o.result for o in matching}
        result = results.pop() if len(results) == 1 else DYN
        result = _refine(node.function, result, types)
        size = _result_size(node.function, parts)
        cost = sum(p.cost for p in parts) + max(o.cost for o in matching) + _string_cost(node.function, parts)
        return Checked(result, cost, size)

    @staticmethod
    def _signature(types: list[Type], member: bool) -> str:
        shown = [show(t) for t in types]
        if member and shown:
            return f"{shown[0]}.({', '.join(shown[1:])})"
        return f"({', '.join(shown)})"

    def _expect(self, function: str, types: list[Type], ok: bool) -> None:
        if not ok:
            raise SelectorCompileError(
                f"found no matching overload for '{function}' applied to '({', '.join(show(t) for t in types)})'"
            )


def _check_constant_pattern(node: Call) -> None:
    """A literal pattern RE2 refuses is a compile error, as cel-go's regex-literal validation (Kubernetes'
    base environment since 1.29) makes it: otherwise every evaluation would fail and abort allocation."""
    operands = ([node.target] if node.target is not None else []) + list(node.args)
    pattern = operands[1] if len(operands) > 1 else None  # (text, pattern) as member or global call
    if isinstance(pattern, Lit) and type(pattern.value) is str:
        try:
            compile_regex(pattern.value)
        except RegexError as error:
            raise SelectorCompileError(f"invalid {node.function} argument '{pattern.value}': {error}") from None


def _numeric_key(key_type: Type, index_type: Type) -> bool:
    return key_type in (INT, UINT, DOUBLE) and index_type in (INT, UINT, DOUBLE)


def _refine(function: str, result: Type, types: list[Type]) -> Type:
    """Generic results (a list's element, the sum of a list) from the argument types."""
    if function in ("min", "max", "sum") and types and is_list(types[0]):
        return element(types[0])
    if function in ("_+_",) and types and is_list(types[0]) and len(types) == 2:
        joined = unify(types[0], types[1])
        return joined if joined is not None else result
    if function in ("slice", "distinct", "reverse", "sort") and types and is_list(types[0]):
        return types[0]
    if function in ("value", "orValue") and types and is_optional(types[0]):
        inner = types[0][1] if function == "value" else unify(types[0][1], types[1])
        return inner if inner is not None else result
    if function in ("optional.of", "optional.ofNonZeroValue") and types:
        return optional_of(types[0])
    if function == "or" and types and is_optional(types[0]):
        return types[0]
    return result


def _result_size(function: str, parts: list[Checked]) -> int:
    if function in ("split", "findAll", "flatten", "lists.range"):
        return UNKNOWN_SIZE
    if function == "_+_" and len(parts) == 2:
        return parts[0].size + parts[1].size
    if parts and function in (
        "slice",
        "distinct",
        "reverse",
        "sort",
        "substring",
        "trim",
        "lowerAscii",
        "upperAscii",
        "replace",
        "join",
    ):
        return parts[0].size
    return UNKNOWN_SIZE if function in ("string", "charAt") else 0


_STRING_FUNCTIONS = {
    "contains",
    "startsWith",
    "endsWith",
    "matches",
    "indexOf",
    "lastIndexOf",
    "lowerAscii",
    "upperAscii",
    "replace",
    "split",
    "substring",
    "trim",
    "join",
    "find",
    "findAll",
    "_+_",
}


def _string_cost(function: str, parts: list[Checked]) -> int:
    """cel-go charges string functions by length (0.1 per character)."""
    if function in _STRING_FUNCTIONS:
        return sum(p.size for p in parts) // 10
    return 0
