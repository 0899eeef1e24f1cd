"""CEL source -> a small AST, with macros expanded, on top of cel-python's lark parser.

cel-python supplies the grammar and the parse; everything after (macros, type checking,
evaluation) is ours, so the semantics can follow cel-go and Kubernetes exactly.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import cast

import lark

from .errors import SelectorCompileError
from .syntax import WRAPPERS, CelSyntaxError, chain_terms, parse_cel, unary_run
from .values import UInt

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
UINT64_MAX = 2**64 - 1


class Node:
    """Base of every AST node."""


@dataclass(frozen=True)
class Lit(Node):
    value: object


@dataclass(frozen=True)
class Ident(Node):
    name: str


@dataclass(frozen=True)
class Select(Node):
    operand: Node
    field: str
    test_only: bool = False  # has(operand.field)
    optional: bool = False  # operand.?field


@dataclass(frozen=True)
class Index(Node):
    operand: Node
    index: Node
    optional: bool = False  # operand[?index]


@dataclass(frozen=True)
class Call(Node):
    """A function or operator (`_+_`, `_==_`, `!_`, ...). `target` is the receiver of `x.f(...)`."""

    function: str
    args: tuple[Node, ...]
    target: Node | None = None


@dataclass(frozen=True)
class ListLit(Node):
    items: tuple[Node, ...]


@dataclass(frozen=True)
class MapLit(Node):
    entries: tuple[tuple[Node, Node], ...]


@dataclass(frozen=True)
class Comprehension(Node):
    """A macro over a list or map: all, exists, exists_one, map, filter, sortBy (and two-variable forms)."""

    macro: str
    range: Node
    var: str
    body: Node
    var2: str | None = None  # two-variable forms: (index or key, value)
    transform: Node | None = None  # with a filter: map(x, body=filter, transform)


@dataclass(frozen=True)
class Bind(Node):
    """cel.bind(var, init, body)."""

    var: str
    init: Node
    body: Node


@dataclass(frozen=True)
class Parsed:
    root: Node
    node_count: int = field(compare=False)
    functions: frozenset[str] = frozenset()  # every function and macro called


_OPERATORS = {
    "relation_lt": "_<_",
    "relation_le": "_<=_",
    "relation_gt": "_>_",
    "relation_ge": "_>=_",
    "relation_eq": "_==_",
    "relation_ne": "_!=_",
    "relation_in": "@in",
    "addition_add": "_+_",
    "addition_sub": "_-_",
    "multiplication_mul": "_*_",
    "multiplication_div": "_/_",
    "multiplication_mod": "_%_",
}
_ONE_VAR_MACROS = {"all", "exists", "exists_one", "existsOne", "map", "filter", "sortBy"}
_TWO_VAR_MACROS = {"all", "exists", "existsOne", "exists_one", "transformList", "transformMap"}


def parse(text: str) -> Parsed:
    """Parse a CEL expression; raises SelectorCompileError with the parser's position on bad syntax."""
    try:
        tree = parse_cel(text)
    except CelSyntaxError as error:
        where = f" at line {error.line}, column {error.column}" if error.line is not None else ""
        expected = f" ({error.expected})" if error.expected else ""
        raise SelectorCompileError(f"Syntax error{where}{expected}: {error}") from None
    builder = _Builder()
    root = builder.build(tree)
    return Parsed(root, builder.nodes, frozenset(builder.functions))


class _Builder:
    def __init__(self) -> None:
        self.nodes = 0
        self.functions: set[str] = set()

    def build(self, tree: lark.Tree) -> Node:
        while tree.data == "paren_expr" or (tree.data in WRAPPERS and len(tree.children) == 1):
            tree = tree.children[0]  # a loop, not a frame per level: one parenthesis is ten grammar levels
        self.nodes += 1
        node = getattr(self, f"_{tree.data}")(tree)
        if isinstance(node, (Call, Comprehension)):
            self.functions.add(node.function if isinstance(node, Call) else node.macro)
        return node

    def _expr(self, tree: lark.Tree) -> Node:
        if len(tree.children) == 1:
            return self.build(tree.children[0])
        cond, then, otherwise = (self.build(c) for c in tree.children)
        return Call("_?_:_", (cond, then, otherwise))

    def _conditionalor(self, tree: lark.Tree) -> Node:
        return self._balanced("_||_", [self.build(term) for term in chain_terms(tree)])

    def _conditionaland(self, tree: lark.Tree) -> Node:
        return self._balanced("_&&_", [self.build(term) for term in chain_terms(tree)])

    def _balanced(self, function: str, terms: list[Node]) -> Node:
        """A flat chain as a balanced tree, like cel-go's parser: depth log2(n), not n (same result,
        as && and || are associative and absorb errors commutatively)."""
        if len(terms) == 1:
            return terms[0]
        middle = (len(terms) + 1) // 2  # cel-go's split
        return Call(function, (self._balanced(function, terms[:middle]), self._balanced(function, terms[middle:])))

    def _operator_chain(self, tree: lark.Tree) -> Node:
        if len(tree.children) == 1:
            return self.build(tree.children[0])
        op_tree, right = tree.children  # e.g. relation_lt(relation) , addition
        left = self.build(op_tree.children[0])
        return Call(_OPERATORS[op_tree.data], (left, self.build(right)))

    _relation = _addition = _multiplication = _operator_chain

    def _unary(self, tree: lark.Tree) -> Node:
        if len(tree.children) == 1:
            return self.build(tree.children[0])
        run, operand = unary_run(tree)  # cel-go: `!!x` is x, `!!!x` is !x (likewise `-`)
        inner = self.build(operand)
        return inner if run % 2 == 0 else Call("!_" if tree.children[0].data == "unary_not" else "-_", (inner,))

    def _member_dot(self, tree: lark.Tree) -> Node:
        operand, name = tree.children
        return Select(self.build(operand), str(name))

    def _member_index(self, tree: lark.Tree) -> Node:
        operand, index = tree.children
        return Index(self.build(operand), self.build(index))

    def _member_dot_opt(self, tree: lark.Tree) -> Node:
        operand, name = tree.children
        return Select(self.build(operand), str(name), optional=True)

    def _member_index_opt(self, tree: lark.Tree) -> Node:
        operand, index = tree.children
        return Index(self.build(operand), self.build(index), optional=True)

    def _member_object(self, tree: lark.Tree) -> Node:
        raise SelectorCompileError("message construction (Type{field: value}) is not available in device selectors")

    def _args(self, tree: lark.Tree | None) -> tuple[Node, ...]:
        if tree is None:
            return ()
        return tuple(self.build(c) for c in tree.children)

    def _member_dot_arg(self, tree: lark.Tree) -> Node:
        operand, name, *rest = tree.children
        name = str(name)
        raw_args = rest[0].children if rest and rest[0] is not None else []
        # Namespaced functions and cel.bind are written like member calls on a bare identifier.
        target_tree = operand
        if _bare_ident(target_tree) in ("cel", "sets", "lists", "strings", "optional", "math"):
            namespace = _bare_ident(target_tree)
            if namespace == "cel" and name == "bind":
                return self._bind(raw_args)
            return Call(f"{namespace}.{name}", tuple(self.build(a) for a in raw_args))
        target = self.build(operand)
        if name in _ONE_VAR_MACROS | _TWO_VAR_MACROS and raw_args and _bare_ident(raw_args[0]) is not None:
            return self._macro(name, target, raw_args)
        return Call(name, tuple(self.build(a) for a in raw_args), target)

    def _macro(self, name: str, target: Node, raw_args: list) -> Node:
        var = _bare_ident(raw_args[0])
        assert var is not None  # the caller checked
        if len(raw_args) == 2:
            if name in ("transformList", "transformMap"):
                raise SelectorCompileError(f"{name}() needs three or four arguments")
            return Comprehension(_canonical(name), target, var, self.build(raw_args[1]))
        if len(raw_args) == 3 and name == "map":  # map(x, filter, transform)
            return Comprehension("map", target, var, self.build(raw_args[1]), transform=self.build(raw_args[2]))
        var2 = _bare_ident(raw_args[1])
        if len(raw_args) == 3 and var2 is not None and name in _TWO_VAR_MACROS:
            return Comprehension(_canonical(name), target, var, self.build(raw_args[2]), var2=var2)
        if len(raw_args) == 4 and var2 is not None and name in ("transformList", "transformMap"):
            return Comprehension(
                name,
                target,
                var,
                self.build(raw_args[2]),
                var2=var2,  # (i, v, filter, transform)
                transform=self.build(raw_args[3]),
            )
        raise SelectorCompileError(f"wrong number of arguments to the {name}() macro")

    def _bind(self, raw_args: list) -> Node:
        name = _bare_ident(raw_args[0]) if len(raw_args) == 3 else None
        if name is None:
            raise SelectorCompileError("cel.bind() takes (variable name, value, expression)")
        return Bind(name, self.build(raw_args[1]), self.build(raw_args[2]))

    def _ident_arg(self, tree: lark.Tree) -> Node:
        name, *rest = tree.children
        raw_args = rest[0].children if rest and rest[0] is not None else []
        if str(name) == "has":
            if len(raw_args) != 1:
                raise SelectorCompileError("has() takes exactly one argument")
            inner = self.build(raw_args[0])
            if not isinstance(inner, Select):
                raise SelectorCompileError(
                    "invalid argument to has() macro: it takes a field selection, "
                    'e.g. has(device.attributes["domain"].name)'
                )
            return Select(inner.operand, inner.field, test_only=True)
        return Call(str(name), tuple(self.build(a) for a in raw_args))

    def _dot_ident_arg(self, tree: lark.Tree) -> Node:
        return self._ident_arg(tree)

    def _ident(self, tree: lark.Tree) -> Node:
        return Ident(str(tree.children[0]))

    _dot_ident = _ident

    def _list_lit(self, tree: lark.Tree) -> Node:
        return ListLit(self._args(tree.children[0] if tree.children else None))

    def _map_lit(self, tree: lark.Tree) -> Node:
        if not tree.children or tree.children[0] is None:
            return MapLit(())
        parts = [self.build(c) for c in tree.children[0].children]
        return MapLit(tuple(zip(parts[0::2], parts[1::2], strict=True)))

    def _literal(self, tree: lark.Tree) -> Node:
        token = cast(lark.Token, tree.children[0])
        return Lit(literal_value(token.type, str(token)))


def _bare_ident(tree: object) -> str | None:
    """The name if `tree` is nothing but an identifier (through the grammar's wrapper rules)."""
    while isinstance(tree, lark.Tree):
        if tree.data == "ident":
            return str(tree.children[0])
        if len(tree.children) != 1:
            return None
        tree = tree.children[0]
    return None


def _canonical(name: str) -> str:
    return "exists_one" if name == "existsOne" else name


_ESCAPES = {
    "a": "\a",
    "b": "\b",
    "f": "\f",
    "n": "\n",
    "r": "\r",
    "t": "\t",
    "v": "\v",
    "\\": "\\",
    "?": "?",
    '"': '"',
    "'": "'",
    "`": "`",
}
_ESCAPE = re.compile(r"\\(x[0-9a-fA-F]{2}|u[0-9a-fA-F]{4}|U[0-9a-fA-F]{8}|[0-7]{3}|.)", re.S)


def literal_value(kind: str, text: str) -> object:
    if kind == "BOOL_LIT":
        return text == "true"
    if kind == "NULL_LIT":
        return None
    if kind == "INT_LIT":
        value = _int(text)
        if not INT64_MIN <= value <= INT64_MAX:
            raise SelectorCompileError(f"int literal {text} is out of the 64-bit range")
        return value
    if kind == "UINT_LIT":
        value = _int(text[:-1])
        if not 0 <= value <= UINT64_MAX:
            raise SelectorCompileError(f"uint literal {text} is out of range")
        return UInt(value)
    if kind == "FLOAT_LIT":
        return float(text)
    if kind in ("STRING_LIT", "MLSTRING_LIT"):
        return _string(text)
    if kind == "BYTES_LIT":
        return _string(text[1:], as_bytes=True)
    raise SelectorCompileError(f"unsupported literal {text}")


def _int(text: str) -> int:
    negative = text.startswith("-")
    digits = text.lstrip("-")
    value = int(digits, 16) if digits.lower().startswith("0x") else int(digits)
    return -value if negative else value


def _string(text: str, as_bytes: bool = False) -> str | bytes:
    raw = text[:1] in "rR"
    if raw:
        text = text[1:]
    quote = text[:3] if text[:3] in ('"""', "'''") else text[:1]
    body = text[len(quote) : -len(quote)]
    if raw:
        return body.encode() if as_bytes else body
    pieces: list[str | int] = []  # text, or a raw byte value (\x.. and octal escapes in bytes literals)
    position = 0
    for match in _ESCAPE.finditer(body):
        pieces.append(body[position : match.start()])
        position = match.end()
        code = match.group(1)
        if code in _ESCAPES:
            pieces.append(_ESCAPES[code])
        elif code[0] in "xX01234567" and (len(code) == 3 or code[0] in "xX"):
            value = int(code[1:], 16) if code[0] in "xX" else int(code, 8)
            pieces.append(value if as_bytes else chr(value))
        elif code[0] in "uU":
            pieces.append(chr(int(code[1:], 16)))
        else:
            raise SelectorCompileError(f"invalid escape sequence \\{code} in a string literal")
    pieces.append(body[position:])
    if not as_bytes:
        return "".join(pieces)  # type: ignore[arg-type]
    return b"".join(bytes([p]) if isinstance(p, int) else p.encode() for p in pieces)
