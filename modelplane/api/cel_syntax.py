"""The CEL parser for device selectors, and a parse-only check so a syntax error fails validation.

cel-python's lark grammar, extended with the optional syntax Kubernetes enables (`x.?field`,
`m[?key]`) and that its own error hints recommend. Full compilation (functions, fields, types,
cost) belongs to `modelplane.devices`, which parses with `parse_cel` from here.
"""
from __future__ import annotations

import importlib.util
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


@lru_cache(maxsize=1)
def _parser() -> lark.Lark:
    # cel-python's grammar file, found without importing celpy (its import is slow and unused here).
    spec = importlib.util.find_spec("celpy")
    assert spec is not None and spec.origin is not None, "cel-python is not installed"
    grammar = (Path(spec.origin).parent / "cel.lark").read_text()
    member_rule = re.search(r"^member\s*:.*$", grammar, re.M)
    if member_rule is None:  # pragma: no cover - a cel-python upgrade changed the grammar
        raise RuntimeError("cel-python's grammar has no 'member' rule; update modelplane.api.cel_syntax")
    extended = grammar.replace(member_rule.group(0), member_rule.group(0) + " | member_dot_opt | member_index_opt")
    return lark.Lark(extended + _OPTIONAL_RULES, parser="lalr", start="expr", g_regex_flags=re.M,
                     lexer_callbacks={"IDENT": _literal_keywords}, propagate_positions=True,
                     maybe_placeholders=False, priority="invert",
                     cache=True)  # the LALR tables, in the temp dir: building them costs ~0.15 s per process


def _literal_keywords(token: lark.Token) -> lark.Token:
    """`true` and `false` lex as identifiers in the grammar; make them literals (as cel-python does)."""
    return lark.Token("BOOL_LIT", token.value) if token.value in ("true", "false") else token


def parse_cel(expression: str) -> lark.Tree:
    """Parse CEL; raises CelSyntaxError with line, column, a caret, and what was expected."""
    try:
        return _parser().parse(expression)
    except UnexpectedInput as error:
        context = error.get_context(expression).rstrip("\n")
        raise CelSyntaxError(context, getattr(error, "line", None), getattr(error, "column", None),
                             _expected(error)) from None
    except RecursionError:
        raise CelSyntaxError("the expression nests too deeply") from None


_PUNCTUATION = {"RPAR": "')'", "RSQB": "']'", "RBRACE": "'}'", "COMMA": "','", "COLON": "':'", "DOT": "'.'",
                "LPAR": "'('", "LSQB": "'['", "QMARK": "'?'"}
_OPERAND_STARTS = {"IDENT", "INT_LIT", "STRING_LIT", "LPAR"}


def _expected(error: UnexpectedInput) -> str:
    """What the parser wanted instead: punctuation by name, or 'a value'."""
    expected = set()
    if isinstance(error, UnexpectedToken):
        expected = set(error.expected)
    elif isinstance(error, UnexpectedCharacters):
        expected = set(error.allowed or ())
    if _OPERAND_STARTS <= expected:
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
        context = "\n      " + str(error).replace("\n", "\n      ") if str(error) else ""
        return f"CEL syntax error{where}{expected}{context}"
    return None
