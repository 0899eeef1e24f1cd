"""Regular expressions for `matches`, `find` and `findAll` with Go's RE2 semantics, as in Kubernetes.

cel-go and Kubernetes' regex library use Go's `regexp`: RE2 syntax, linear-time matching. We use
RE2 itself (google-re2), which shares Go's syntax and semantics: no backreferences, lookaround,
possessive quantifiers, `\\Z` or `(?x)`; `(?P<name>…)`, `(?<name>…)`, the flags `i m s U` and `\\z`;
`$` without `(?m)` matches only at the very end (Python's `$` also matches before a final newline);
`\\d \\s \\w \\b` are ASCII-only; `a{,3}` is literal text.
Where RE2 C++ and Go differ, Go wins:

* `\\C` (any byte) exists only in RE2 C++: refused, as Go does.
* `findAll` skips an empty match right after the previous match (Go's `FindAllString`);
  Python-style iteration would return it.

RE2's default 8 MiB program budget refuses a few huge patterns Go accepts (`\\pL{1000}`): a
clear error, and a bound on compile time.
"""

from __future__ import annotations

import functools

import re2

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # RE2 C++ would print every refused pattern to stderr


class RegexError(Exception):
    """The pattern is not valid RE2 (as Go's regexp.Compile would say)."""


@functools.lru_cache(maxsize=512)  # errors are not cached: a bad pattern fails on every call
def compile_regex(pattern: str):
    if (problem := _go_only(pattern)) is not None:
        raise RegexError(f"error parsing regexp: {problem}")
    try:
        return re2.compile(pattern, _OPTIONS)
    except re2.error as error:
        detail = error.args[0].decode(errors="replace") if error.args and isinstance(error.args[0], bytes) else error
        raise RegexError(f"error parsing regexp: {detail}") from None
    except UnicodeEncodeError:  # a lone surrogate from a \\u escape
        raise RegexError("error parsing regexp: invalid UTF-8") from None


def _go_only(pattern: str) -> str | None:
    """What RE2 C++ accepts but Go refuses: the `\\C` escape (outside `\\Q…\\E`)."""
    i = 0
    while i < len(pattern) - 1:
        if pattern[i] == "\\":
            if pattern[i + 1] == "Q":
                end = pattern.find("\\E", i + 2)
                if end < 0:
                    return None
                i = end + 2
                continue
            if pattern[i + 1] == "C":
                return "invalid escape sequence: \\C"
            i += 2
            continue
        i += 1
    return None


def _utf8(text: str) -> bytes:
    """Search bytes: google-re2 re-encodes a str on every search, which would make findAll quadratic."""
    try:
        return text.encode()
    except UnicodeEncodeError:
        raise RegexError("invalid UTF-8 in the string to match") from None


def matches(text: str, pattern: str) -> bool:
    return compile_regex(pattern).search(_utf8(text)) is not None


def find(text: str, pattern: str) -> str:
    """The leftmost match, or "" (Go's FindString)."""
    match = compile_regex(pattern).search(_utf8(text))
    return match.group(0).decode() if match else ""


def find_all(text: str, pattern: str, limit: int = -1) -> list[str]:
    """Successive non-overlapping matches, at most `limit` if it is not negative (Go's FindAllString)."""
    regex, data = compile_regex(pattern), _utf8(text)
    found: list[str] = []
    position, previous_end = 0, -1
    while (limit < 0 or len(found) < limit) and position <= len(data):
        match = regex.search(data, position)  # earlier text stays context for ^ and \b, as in Go
        if match is None:
            break
        start, end = match.span()
        if end == position:  # empty match: step one character; none right after the previous match
            accept = start != previous_end
            position += _UTF8_WIDTH[data[position] >> 4] if position < len(data) else 1
        else:
            accept, position = True, end
        previous_end = end
        if accept:
            found.append(match.group(0).decode())
    return found


_UTF8_WIDTH = [1] * 12 + [2, 2, 3, 4]  # bytes in a UTF-8 character, by the high nibble of its first byte
