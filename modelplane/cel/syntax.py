"""The CEL parser for device selectors, and a parse-only check so a syntax error fails validation.

cel-python's lark grammar (cel.lark beside this file: vendored byte for byte from cel-python 0.5.0,
Copyright 2020 Capital One Services, LLC, Apache-2.0, license in cel.lark.LICENSE), extended with the optional syntax Kubernetes enables (`x.?field`,
`m[?key]`) and that its own error hints recommend. Full compilation (functions, fields, types,
cost) is `modelplane.cel.selectors`, which parses with `parse_cel` from here (through `tree`).
"""

from __future__ import annotations

import math
import re
from functools import lru_cache
from pathlib import Path

import lark
from lark.exceptions import UnexpectedCharacters, UnexpectedInput, UnexpectedToken

_OPTIONAL_RULES = """
member_dot_opt   : member "." "?" IDENT
member_index_opt : member "[" "?" expr "]"
"""


class CelSyntaxError(Exception):
    def __init__(self, message: str, line: int | None = None, column: int | None = None, expected: str = ""):
        super().__init__(message)
        self.line, self.column, self.expected = line, column, expected


@lru_cache(maxsize=2)
def _parser(positions: bool = False) -> lark.Lark:
    """`positions`: each tree node's line and column (`propagate_positions`), which doubles the
    parse time and only a nesting error reports: such an expression is parsed again with them."""
    grammar = (Path(__file__).parent / "cel.lark").read_text(encoding="utf-8")  # cel-python's, vendored
    member_rule = re.search(r"^member\s*:.*$", grammar, re.M)
    if member_rule is None:  # pragma: no cover - a cel-python upgrade changed the grammar
        raise RuntimeError("cel-python's grammar has no 'member' rule; update modelplane.cel.syntax")
    extended = grammar.replace(member_rule.group(0), member_rule.group(0) + " | member_dot_opt | member_index_opt")
    return lark.Lark(
        extended + _OPTIONAL_RULES,
        parser="lalr",
        start="expr",
        g_regex_flags=re.M,
        lexer_callbacks={"IDENT": _literal_keywords},
        propagate_positions=positions,
        maybe_placeholders=False,
        priority="invert",
        cache=True,
    )  # the LALR tables, in the temp dir: building them costs ~0.15 s per process


def _literal_keywords(token: lark.Token) -> lark.Token:
    """`true` and `false` lex as identifiers in the grammar; make them literals (as cel-python does)."""
    return lark.Token.new_borrow_pos("BOOL_LIT", token.value, token) if token.value in ("true", "false") else token


def parse_cel(expression: str) -> lark.Tree:
    """Parse CEL; raises CelSyntaxError with line, column, a caret, and what was expected.

    Also refuses nesting deeper than MAX_NESTING, as cel-go's parser refuses deep recursion.
    """
    if len(expression) > MAX_CODE_POINTS:  # bounds the parse time too
        raise CelSyntaxError(
            f"expression code point size exceeds limit: size: {len(expression)}, limit {MAX_CODE_POINTS}"
        )
    try:
        tree = _parser().parse(expression)  # LALR: no Python recursion, however deep the input nests
    except UnexpectedInput as error:
        context = error.get_context(expression).rstrip("\n")
        raise CelSyntaxError(
            context, getattr(error, "line", None), getattr(error, "column", None), _expected(error)
        ) from None
    except RecursionError:
        raise CelSyntaxError("the expression nests too deeply") from None
    depth, beyond = nesting(tree)
    if beyond is not None:
        depth, beyond = nesting(_parser(positions=True).parse(expression))  # the same tree, with positions
        assert beyond is not None
        raise CelSyntaxError(
            f"expression nests {depth} levels deep; at most {MAX_NESTING}",
            getattr(beyond.meta, "line", None),
            getattr(beyond.meta, "column", None),
        )
    return tree


# cel-go's parser refuses more than 250 levels ("expression recursion limit exceeded: 250",
# parser.maxRecursionDepth). modelplane.cel walks the tree recursively in Python, about three
# frames per level against a default limit of 1000 shared with the caller (Pulumi, pytest), so we
# stop at 100; real selectors nest fewer than 10 levels.
MAX_NESTING = 100
MAX_CODE_POINTS = 100_000  # cel-go's parser default (expressionSizeCodePointLimit)
WRAPPERS = {
    "expr",
    "conditionalor",
    "conditionaland",
    "relation",
    "addition",
    "multiplication",
    "unary",
    "member",
    "primary",
}  # with one child they only pass it on (and so does paren_expr, counted as a level)
_NOT_NODES = {
    "exprlist",
    "mapinits",
    "fieldinits",
    "relation_lt",
    "relation_le",
    "relation_gt",
    "relation_ge",
    "relation_eq",
    "relation_ne",
    "relation_in",
    "addition_add",
    "addition_sub",
    "multiplication_mul",
    "multiplication_div",
    "multiplication_mod",
}  # argument lists and the operator half of a binary node


def nesting(tree: lark.Tree) -> tuple[int, lark.Tree | None]:
    """How deep the evaluated tree nests, and the first node beyond MAX_NESTING (None if within).

    Counts what `modelplane.cel.tree` builds, plus parentheses (cel-go counts those too):
    a flat `&&`/`||` chain of n terms becomes a balanced tree, ceil(log2 n) levels, as in cel-go;
    a run of the same unary operator (`!!!x`) is one level at most, as in cel-go. Iterative.
    """
    deepest, beyond = 0, None
    stack: list[tuple[object, int]] = [(tree, 0)]
    while stack:
        node, depth = stack.pop()
        if not isinstance(node, lark.Tree):
            continue
        kids: list = node.children
        if node.data in WRAPPERS and len(kids) == 1:
            stack.append((kids[0], depth))
            continue
        if node.data in _NOT_NODES:
            stack.extend((kid, depth) for kid in kids)
            continue
        if node.data in ("conditionalor", "conditionaland"):
            kids = chain_terms(node)
            depth += math.ceil(math.log2(len(kids)))
        elif node.data == "unary":
            run, operand = unary_run(node)
            kids, depth = [operand], depth + run % 2
        else:
            depth += 1
        deepest = max(deepest, depth)
        if depth > MAX_NESTING and beyond is None:
            beyond = node
        stack.extend((kid, depth) for kid in reversed(kids))  # left to right: report the leftmost
    return deepest, beyond


def chain_terms(node: lark.Tree) -> list:
    """The terms of a left-nested `a || b || c` (or `&&`) chain, left to right, without recursion."""
    terms = []
    while len(node.children) == 2:
        terms.append(node.children[1])
        node = node.children[0]
    terms.append(node)  # the first term, still in its one-child wrapper
    return terms[::-1]


def unary_run(node: lark.Tree) -> tuple[int, lark.Tree]:
    """`!!!x` -> (3, x): how many times the same unary operator repeats, and its operand."""
    op, count = node.children[0].data, 0
    while (
        isinstance(node, lark.Tree) and node.data == "unary" and len(node.children) == 2 and node.children[0].data == op
    ):
        count, node = count + 1, node.children[1]
    return count, node


_PUNCTUATION = {
    "RPAR": "')'",
    "RSQB": "']'",
    "RBRACE": "'}'",
    "COMMA": "','",
    "COLON": "':'",
    "DOT": "'.'",
    "LPAR": "'('",
    "LSQB": "'['",
    "QMARK": "'?'",
}
_OPERAND_STARTS = {"IDENT", "INT_LIT", "STRING_LIT", "LPAR"}


def _expected(error: UnexpectedInput) -> str:
    """What the parser wanted instead: punctuation by name, or 'a value'."""
    expected = set()
    if isinstance(error, UnexpectedToken):
        expected = set(error.expected)
    elif isinstance(error, UnexpectedCharacters):
        expected = set(error.allowed or ())
    if expected >= _OPERAND_STARTS:
        return "expected a value, a name or '(' here"
    shown = sorted(_PUNCTUATION[name] for name in expected if name in _PUNCTUATION)
    return f"expected {' or '.join(shown)}" if shown and len(shown) <= 4 else ""


@lru_cache(maxsize=4096)
def cel_syntax_problem(expression: str) -> str | None:
    """None if `expression` parses as CEL, else a message with the line, column and a caret."""
    try:
        parse_cel(expression)
    except CelSyntaxError as error:
        where = f" at line {error.line}, column {error.column}" if error.line is not None else ""
        expected = f": {error.expected}" if error.expected else ""
        message = str(error)  # a caret context (several lines), or one line of its own
        context = (
            ("\n      " + message.replace("\n", "\n      ") if "\n" in message else f": {message}") if message else ""
        )
        return f"CEL syntax error{where}{expected}{context}"
    return None
