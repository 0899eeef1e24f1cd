"""Evaluate a checked CEL AST: each node becomes a Python closure over an activation.

Errors are CelRuntimeError exceptions; `&&`, `||`, `all` and `exists` absorb them the way CEL
does (`false && error` is false). The runtime cost limit is not absorbable: like cel-go's
"actual cost limit exceeded", it aborts the whole evaluation.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from typing import Any, cast

from .errors import CelRuntimeError
from .library import FUNCTIONS, contains, runtime_accepts
from .tree import Bind, Call, Comprehension, Ident, Index, ListLit, Lit, MapLit, Node, Select
from .values import MISSING, NONE, CelType, OptionalValue, UInt, compare, equals, go_type_name, lookup_key, type_name

Closure = Callable[[dict], object]

RUNTIME_COST_LIMIT = 1_000_000  # cel.CostLimit for DRA selectors, per evaluation
_TYPE_NAMES = ("int", "uint", "double", "string", "bytes", "bool", "list", "map", "null_type", "type")


class CostLimitExceeded(Exception):
    """The evaluation used more than the runtime cost limit (never absorbed by && or ||)."""


class Budget:
    __slots__ = ("remaining",)

    def __init__(self, limit: int = RUNTIME_COST_LIMIT) -> None:
        self.remaining = limit

    def charge(self, cost: int) -> None:
        self.remaining -= cost
        if self.remaining < 0:
            raise CostLimitExceeded("operation cancelled: actual cost limit exceeded")


class DeviceValue:
    """The `device` variable: driver, attributes, capacity, allowMultipleAllocations."""

    cel_type = "kubernetes.DRADevice"
    __slots__ = ("fields",)

    def __init__(self, driver: str, attributes: dict, capacity: dict, allow_multiple_allocations: bool) -> None:
        self.fields = {
            "driver": driver,
            "attributes": attributes,
            "capacity": capacity,
            "allowMultipleAllocations": allow_multiple_allocations,
        }


class DomainMap(dict):
    """device.attributes / device.capacity: an unknown domain reads as an empty map (`in` sees real keys)."""

    def lookup(self, key: object) -> object:
        return self.get(key, _EMPTY) if type(key) is str else MISSING


_EMPTY: dict = {}
BUDGET = "@budget"  # activation key of the per-evaluation Budget


def compile_node(node: Node) -> Closure:
    return getattr(_Compiler, f"_{type(node).__name__}")(node)


def body_weight(node: Node) -> int:
    """Cost charged per comprehension iteration: the nodes evaluated in one step."""
    return _count(node) + 1


@functools.cache
def _count(node: Node) -> int:
    children = [v for v in vars(node).values() if isinstance(v, Node)]
    for value in vars(node).values():
        if isinstance(value, tuple):
            for item in value:
                if isinstance(item, Node):
                    children.append(item)
                elif isinstance(item, tuple):
                    children.extend(i for i in item if isinstance(i, Node))
    return 1 + sum(_count(c) for c in children)


class _Compiler:
    @staticmethod
    def _Lit(node: Lit) -> Closure:
        value = node.value
        return lambda env: value

    @staticmethod
    def _Ident(node: Ident) -> Closure:
        name = node.name
        if name in _TYPE_NAMES:
            type_value = CelType(name)
            return lambda env: env.get(name, type_value)

        def ident(env: dict) -> object:
            try:
                return env[name]
            except KeyError:
                raise CelRuntimeError(f"undeclared reference to '{name}'") from None

        return ident

    @staticmethod
    def _Select(node: Select) -> Closure:
        operand, field, test_only, optional = compile_node(node.operand), node.field, node.test_only, node.optional

        def select(env: dict) -> object:
            value = operand(env)
            if type(value) is OptionalValue or optional:
                return _optionally(value, optional, lambda v: _select(v, field, test_only), field)
            return _select(value, field, test_only)

        return select

    @staticmethod
    def _Index(node: Index) -> Closure:
        operand, index, optional = compile_node(node.operand), compile_node(node.index), node.optional

        def lookup(env: dict) -> object:
            container, key = operand(env), index(env)
            if type(container) is OptionalValue or optional:
                return _optionally(container, optional, lambda c: _index(c, key), key)
            return _index(container, key)

        return lookup

    @staticmethod
    def _ListLit(node: ListLit) -> Closure:
        items = [compile_node(i) for i in node.items]
        return lambda env: [item(env) for item in items]

    @staticmethod
    def _MapLit(node: MapLit) -> Closure:
        entries = [(compile_node(k), compile_node(v)) for k, v in node.entries]

        def build(env: dict) -> dict:
            result: dict = {}
            for key_fn, value_fn in entries:
                key = key_fn(env)
                if lookup_key(result, key) is not MISSING:
                    raise CelRuntimeError(f"Failed with repeated key: {key}")
                result[key] = value_fn(env)
            return result

        return build

    @staticmethod
    def _Bind(node: Bind) -> Closure:
        init, body, var = compile_node(node.init), compile_node(node.body), node.var
        return lambda env: body({**env, var: init(env)})

    @staticmethod
    def _Comprehension(node: Comprehension) -> Closure:
        return _comprehension(node)

    @staticmethod
    def _Call(node: Call) -> Closure:
        name = node.function
        special = _SPECIAL.get(name)
        if special is not None:
            return special(*[compile_node(a) for a in node.args])
        parts = ([compile_node(node.target)] if node.target is not None else []) + [compile_node(a) for a in node.args]
        member = node.target is not None
        overloads = [o for o in FUNCTIONS.get(name, ()) if o.member == member and len(o.params) == len(parts)]
        if name in _FOLDABLE and all(isinstance(a, Lit) for a in node.args):
            try:  # quantity("20Gi") with a literal: parse once, not on every evaluation
                value = _dispatch(name, overloads, [cast(Lit, a).value for a in node.args])
                return lambda env: value
            except CelRuntimeError:
                pass  # a bad literal stays a runtime error, as in Kubernetes

        return lambda env: _dispatch(name, overloads, [p(env) for p in parts])


_FOLDABLE = {"quantity", "semver", "isQuantity", "isSemver"}  # pure functions of their literal arguments


def _dispatch(name: str, overloads: list, values: list) -> object:
    for overload in overloads:
        if all(runtime_accepts(t, v) for t, v in zip(overload.params, values, strict=False)):
            return overload.impl(*values)
    shown = ", ".join(type_name(v) for v in values)
    raise CelRuntimeError(f"no such overload: {name}({shown})")


def _select(value: object, field: str, test_only: bool) -> object:
    if isinstance(value, DeviceValue):
        return True if test_only else value.fields[field]
    if isinstance(value, dict):
        found = lookup_key(value, field)
        if test_only:
            return found is not MISSING and not (isinstance(value, DomainMap) and found is _EMPTY)
        if found is MISSING:
            raise CelRuntimeError(f"no such key: {field}")
        return found
    raise CelRuntimeError(f"type '{type_name(value)}' does not support field selection")


def _index(container: Any, key: Any) -> object:
    if isinstance(container, list):
        if type(key) not in (int, UInt, float) or (type(key) is float and key != int(key)):
            raise CelRuntimeError(f"unsupported index type '{type_name(key)}' in list")
        position = int(key)
        if not 0 <= position < len(container):
            raise CelRuntimeError(f"index out of bounds: {position}")
        return container[position]
    if isinstance(container, dict):
        found = lookup_key(container, key)
        if found is MISSING:
            raise CelRuntimeError(f"no such key: {key}")
        return found
    raise CelRuntimeError(f"no such overload: {type_name(container)}[{type_name(key)}]")


def _optionally(value: object, optional: bool, access: Callable[[object], object], key: object) -> object:
    """`x.?f` / `m[?k]`: none when absent; any access on a present optional stays optional."""
    if type(value) is OptionalValue:
        if not value.present:
            return NONE
        value = value.value
    if optional and not _present(value, key):
        return NONE
    return OptionalValue(True, access(value))


def _present(container: Any, key: Any) -> bool:
    if isinstance(container, DeviceValue):
        return key in container.fields
    if isinstance(container, DomainMap):
        return lookup_key(container, key, presence=True) is not MISSING
    if isinstance(container, dict):
        return lookup_key(container, key) is not MISSING
    if isinstance(container, list):
        return type(key) in (int, UInt) and 0 <= key < len(container)
    return True  # the access raises its own error


def _absorbing(left: Closure, right: Closure, decisive: bool) -> Closure:
    """`&&` (decisive False) and `||` (decisive True), commutative over errors."""

    def logical(env: dict) -> object:
        error = None
        for side in (left, right):
            try:
                value = side(env)
            except CelRuntimeError as caught:
                error = error or caught
                continue
            if value is decisive:
                return decisive
            if type(value) is not bool:
                error = error or CelRuntimeError(f"no such overload: {type_name(value)} in a logical operator")
        if error is not None:
            raise error
        return not decisive

    return logical


def _conditional(cond: Closure, then: Closure, otherwise: Closure) -> Closure:
    def choose(env: dict) -> object:
        value = cond(env)
        if type(value) is not bool:
            raise CelRuntimeError(f"no such overload: {type_name(value)} ? _ : _")
        return then(env) if value else otherwise(env)

    return choose


def _equality(negate: bool) -> Callable[[Closure, Closure], Closure]:
    def build(left: Closure, right: Closure) -> Closure:
        return lambda env: equals(left(env), right(env)) != negate

    return build


def _in(value: Closure, collection: Closure) -> Closure:
    return lambda env: contains(collection(env), value(env))


def _not(operand: Closure) -> Closure:
    def negate(env: dict) -> object:
        value = operand(env)
        if type(value) is not bool:
            raise CelRuntimeError(f"no such overload: !{type_name(value)}")
        return not value

    return negate


_SPECIAL: dict[str, Callable[..., Closure]] = {
    "_&&_": lambda left, right: _absorbing(left, right, False),
    "_||_": lambda left, right: _absorbing(left, right, True),
    "_?_:_": _conditional,
    "_==_": _equality(False),
    "_!=_": _equality(True),
    "@in": _in,
    "!_": _not,
}


def _iterate(value: object) -> list[tuple[object, object]]:
    """(first variable, second variable) pairs: (index, item) for lists, (key, value) for maps."""
    if isinstance(value, list):
        return list(enumerate(value))
    if isinstance(value, dict):
        return list(value.items())
    raise CelRuntimeError(f"got '{go_type_name(value)}', expected iterable type")


def _comprehension(node: Comprehension) -> Closure:
    rng = compile_node(node.range)
    body = compile_node(node.body)
    transform = compile_node(node.transform) if node.transform is not None else None
    var, var2, macro = node.var, node.var2, node.macro
    weight = body_weight(node.body) + (body_weight(node.transform) if node.transform is not None else 0)

    def bindings(env: dict) -> Iterator[dict]:
        source = rng(env)
        is_list = isinstance(source, list)
        budget: Budget = env[BUDGET]
        for first, second in _iterate(source):
            budget.charge(weight)
            if var2 is None:
                yield {**env, var: second if is_list else first}
            else:
                yield {**env, var: first, var2: second}

    def predicate(scope: dict) -> bool:
        value = body(scope)
        if type(value) is not bool:
            raise CelRuntimeError(f"no such overload: {macro}() predicate returned {type_name(value)}")
        return value

    if macro in ("all", "exists"):
        decisive = macro == "exists"

        def quantify(env: dict) -> bool:
            error = None
            for scope in bindings(env):
                try:
                    if predicate(scope) is decisive:
                        return decisive
                except CelRuntimeError as caught:
                    error = error or caught
            if error is not None:
                raise error
            return not decisive

        return quantify
    if macro == "exists_one":
        return lambda env: sum(1 for scope in bindings(env) if predicate(scope)) == 1
    if macro == "filter":

        def keep(env: dict) -> list:
            return [scope[var2 or var] if var2 is None else scope[var2] for scope in bindings(env) if predicate(scope)]

        return keep
    if macro in ("map", "transformList"):
        if transform is not None:
            return lambda env: [transform(scope) for scope in bindings(env) if predicate(scope)]
        return lambda env: [body(scope) for scope in bindings(env)]
    if macro == "transformMap":

        def transform_map(env: dict) -> dict:
            out = {}
            for scope in bindings(env):
                if transform is None or predicate(scope):
                    out[scope[var]] = (transform or body)(scope)
            return out

        return transform_map
    if macro == "sortBy":

        def sort_by(env: dict) -> list:
            pairs: list[tuple[Any, Any]] = [(body(scope), scope[var]) for scope in bindings(env)]
            ordered = sorted(pairs, key=functools.cmp_to_key(_compare_keys))
            return [item for _, item in ordered]

        return sort_by
    raise CelRuntimeError(f"unknown macro {macro}")


def _compare_keys(a: tuple[Any, Any], b: tuple[Any, Any]) -> int:
    """sortBy's order: by the computed key, the first of each (key, item) pair."""
    return compare(a[0], b[0])
