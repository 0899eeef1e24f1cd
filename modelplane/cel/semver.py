"""Semantic versions as Kubernetes' CEL `kubernetes.Semver` sees them.

A port of github.com/blang/semver/v4 (`Parse`, `Version.Compare`, `Version.String`) and of the
normalizing parser of k8s.io/apiserver/pkg/cel/library/semverlib.go (`normalizeAndParse`).
Error messages follow the Go text; `%q` is approximated by `_go_quote`.

Go stores the numbers as uint64, so values above 2**64-1 are rejected here as well. Semver has
deliberately no rich comparisons (`__eq__`, `__lt__`, ...): compare with `compare()`.
"""

from __future__ import annotations

_NUMBERS = frozenset("0123456789")
_ALPHANUM = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ-0123456789")
_UINT64_MAX = 2**64 - 1
_GO_ESCAPES = {
    "\a": "\\a",
    "\b": "\\b",
    "\f": "\\f",
    "\n": "\\n",
    "\r": "\\r",
    "\t": "\\t",
    "\v": "\\v",
    '"': '\\"',
    "\\": "\\\\",
}


class SemverError(ValueError):
    """The text is not a version (strict semver 2.0.0, or the normalized short form)."""


def _go_quote(s: str) -> str:
    """Approximately Go's strconv.Quote, as used by fmt's %q."""
    out = []
    for ch in s:
        code = ord(ch)
        if ch in _GO_ESCAPES:
            out.append(_GO_ESCAPES[ch])
        elif ch.isprintable():
            out.append(ch)
        elif code < 0x80:
            out.append(f"\\x{code:02x}")
        elif code < 0x10000:
            out.append(f"\\u{code:04x}")
        else:
            out.append(f"\\U{code:08x}")
    return '"' + "".join(out) + '"'


def _contains_only(s: str, allowed: frozenset) -> bool:
    return all(ch in allowed for ch in s)  # like Go: true for ""


def _has_leading_zeroes(s: str) -> bool:
    return len(s) > 1 and s[0] == "0"


def _parse_uint64(s: str) -> int:
    """strconv.ParseUint(s, 10, 64) for a string already known to hold only ASCII digits."""
    if not s:
        raise SemverError(f"strconv.ParseUint: parsing {_go_quote(s)}: invalid syntax")
    # The length check also keeps int() clear of Python's limit on huge digit strings.
    if len(s.lstrip("0")) > 20 or int(s) > _UINT64_MAX:
        raise SemverError(f"strconv.ParseUint: parsing {_go_quote(s)}: value out of range")
    return int(s)


def _parse_number(s: str, name: str) -> int:
    """Major, minor or patch number."""
    if not _contains_only(s, _NUMBERS):
        raise SemverError(f"Invalid character(s) found in {name} number {_go_quote(s)}")
    if _has_leading_zeroes(s):
        raise SemverError(f"{name.capitalize()} number must not contain leading zeroes {_go_quote(s)}")
    return _parse_uint64(s)


def _parse_prerelease(s: str) -> int | str:
    """blang's NewPRVersion: a numeric identifier becomes an int, an alphanumeric one stays a str."""
    if not s:
        raise SemverError("Prerelease is empty")
    if _contains_only(s, _NUMBERS):
        if _has_leading_zeroes(s):
            raise SemverError(f"Numeric PreRelease version must not contain leading zeroes {_go_quote(s)}")
        return _parse_uint64(s)
    if _contains_only(s, _ALPHANUM):
        return s
    raise SemverError(f"Invalid character(s) found in prerelease {_go_quote(s)}")


def _normalize(text: str) -> str:
    """The string rewriting of semverlib.go normalizeAndParse (no whitespace trimming)."""
    text = text.removeprefix("v")
    parts = text.split(".", 2)
    for i, part in enumerate(parts):
        if len(part.encode("utf-8", "surrogatepass")) > 1:  # Go's len() counts bytes
            part = part.lstrip("0")
            if not part or part[0] not in _NUMBERS:
                part = "0" + part
            parts[i] = part
    if len(parts) < 3:
        if "+" in parts[-1] or "-" in parts[-1]:
            raise SemverError("short version cannot contain PreRelease/Build meta data")
        parts += ["0"] * (3 - len(parts))
    return ".".join(parts)


def _compare_identifier(a: int | str, b: int | str) -> int:
    """blang's PRVersion.Compare: numbers sort below alphanumerics."""
    a_num, b_num = isinstance(a, int), isinstance(b, int)
    if a_num != b_num:
        return -1 if a_num else 1
    return (a > b) - (a < b)  # type: ignore[operator]  # both ints or both strs (above); ints numerically, strs by code point (ASCII bytes here)


class Semver:
    """A semantic version (treat as immutable); build metadata is kept for str() but ignored by compare()."""

    __slots__ = ("build", "major", "minor", "patch", "pre")

    major: int
    minor: int
    patch: int
    pre: tuple
    build: tuple[str, ...]

    def __init__(self, major: int, minor: int, patch: int, pre: tuple = (), build: tuple[str, ...] = ()) -> None:
        self.major, self.minor, self.patch = major, minor, patch
        self.pre, self.build = tuple(pre), tuple(build)

    @classmethod
    def parse(cls, text: str, normalize: bool = False) -> Semver:
        """blang/semver Parse; with normalize, Kubernetes' normalizeAndParse. Raises SemverError."""
        if not isinstance(text, str):
            raise TypeError(f"Semver.parse() needs a str, not {type(text).__name__}")
        if normalize:
            text = _normalize(text)
        if not text:
            raise SemverError("Version string empty")
        parts = text.split(".", 2)
        if len(parts) != 3:
            raise SemverError("No Major.Minor.Patch elements found")
        major = _parse_number(parts[0], "major")
        minor = _parse_number(parts[1], "minor")
        rest, build, pre = parts[2], [], []
        if "+" in rest:
            rest, _, tail = rest.partition("+")
            build = tail.split(".")
        if "-" in rest:
            rest, _, tail = rest.partition("-")
            pre = tail.split(".")
        patch = _parse_number(rest, "patch")
        prerelease = tuple(_parse_prerelease(ident) for ident in pre)
        for ident in build:
            if not ident:
                raise SemverError("Build meta data is empty")
            if not _contains_only(ident, _ALPHANUM):
                raise SemverError(f"Invalid character(s) found in build meta data {_go_quote(ident)}")
        return cls(major, minor, patch, prerelease, tuple(build))

    def compare(self, other: Semver) -> int:
        """blang's Version.Compare: -1, 0 or 1; build metadata does not count."""
        mine, theirs = (self.major, self.minor, self.patch), (other.major, other.minor, other.patch)
        if mine != theirs:
            return 1 if mine > theirs else -1
        if not self.pre or not other.pre:  # a release sorts above its pre-releases
            return (not self.pre) - (not other.pre)
        for a, b in zip(self.pre, other.pre, strict=False):  # then the longer sorts above
            if result := _compare_identifier(a, b):
                return result
        return (len(self.pre) > len(other.pre)) - (len(self.pre) < len(other.pre))

    def __str__(self) -> str:
        text = f"{self.major}.{self.minor}.{self.patch}"
        if self.pre:
            text += "-" + ".".join(str(ident) for ident in self.pre)
        if self.build:
            text += "+" + ".".join(self.build)
        return text

    def __repr__(self) -> str:
        return f"Semver.parse({str(self)!r})"


def is_semver(text: str, normalize: bool = False) -> bool:
    """True iff Semver.parse(text, normalize) would succeed (CEL isSemver)."""
    try:
        Semver.parse(text, normalize)
    except SemverError:
        return False
    return True
