"""Parse-only check of device-selector CEL, so a syntax error fails validation, not a deploy.

Full compilation (known functions and fields, Kubernetes' cost limit) belongs to
`modelplane.devices`; this layer only needs to know the expression is CEL at all.
"""
from __future__ import annotations

from functools import lru_cache

import celpy
from celpy.celparser import CELParseError


_PUNCTUATION = {"RPAR": "')'", "RSQB": "']'", "RBRACE": "'}'", "COMMA": "','", "COLON": "':'", "DOT": "'.'",
                "LPAR": "'('", "LSQB": "'['", "QUESTION": "'?'"}
_OPERAND_STARTS = {"IDENT", "INT_LIT", "STRING_LIT", "LPAR"}


def _expected(cause: object) -> str:
    """What the parser wanted instead: punctuation by name, or 'an operand'."""
    expected = set(getattr(cause, "expected", None) or getattr(cause, "allowed", None) or ())
    if not expected:
        return ""
    if _OPERAND_STARTS <= expected:
        return ": expected a value, a name or '(' here"
    shown = sorted(_PUNCTUATION[name] for name in expected if name in _PUNCTUATION)
    if shown and len(shown) <= 4:
        return f": expected {' or '.join(shown)}"
    return ""


@lru_cache(maxsize=4096)
def cel_syntax_problem(expression: str) -> str | None:
    """None if `expression` parses as CEL, else a message with the line, column and a caret."""
    try:
        celpy.Environment().compile(expression)
    except CELParseError as error:
        where = ""
        if getattr(error, "line", None) is not None:
            where = f" at line {error.line}, column {error.column}"
        context = str(error.args[0]).rstrip("\n") if error.args else ""
        caret = "\n      " + context.replace("\n", "\n      ") if context else ""
        return f"CEL syntax error{where}{_expected(error.__context__)}{caret}"
    except Exception as error:  # noqa: BLE001 - the parser raises lark internals on odd input
        return f"CEL syntax error: {error}"
    return None
