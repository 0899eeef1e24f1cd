"""Building blocks shared by every kind: the model base, rule violations, secrets, label maps."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, GetCoreSchemaHandler
from pydantic.alias_generators import to_camel
from pydantic_core import core_schema

from . import syntax
from .errors import shown
from .labels import missing_labels

PathPart = str | int


class ApiModel(BaseModel):
    """camelCase on the wire (the reference's field names), snake_case in Python; unknown fields rejected."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True, strict=True)

    def to_config(self) -> dict[str, Any]:
        """The stack-config form of this object (camelCase, unset fields left out)."""
        return self.model_dump(by_alias=True, exclude_none=True, mode="json")


class RuleViolation(ValueError):
    """A cross-field rule broken inside one object, with paths relative to that object.

    pydantic keeps the exception in the error's context, so the loader can point each message
    at the exact field (`engines[0].members[1].role`) instead of at the enclosing object.
    """

    def __init__(self, problems: Sequence[tuple[tuple[PathPart, ...], str]]):
        self.problems = list(problems)
        super().__init__("; ".join(message for _, message in self.problems))


class Rules:
    """Collects rule violations in a model validator; raises them together at the end."""

    def __init__(self) -> None:
        self.problems: list[tuple[tuple[PathPart, ...], str]] = []

    def fail(self, path: Sequence[PathPart], message: str) -> None:
        self.problems.append((tuple(path), message))

    def check(self, ok: bool, path: Sequence[PathPart], message: str) -> None:
        if not ok:
            self.fail(path, message)

    def unique_names(self, list_field: str, items: Iterable[Any], noun: str, scope: str = "") -> None:
        """Every item of `list_field` has its own `.name` (the reference's list-map keys)."""
        for i, name in duplicates(item.name for item in items):
            self.fail(
                [list_field, i, "name"], f"{noun} {shown(name)} is listed twice; {noun} names must be unique{scope}"
            )

    def raise_if_any(self) -> None:
        if self.problems:
            raise RuleViolation(self.problems)


def duplicates(values: Iterable[Any]) -> list[tuple[int, Any]]:
    """(position, value) of every value seen before, in order."""
    seen: set[Any] = set()
    found = []
    for i, value in enumerate(values):
        if value in seen:
            found.append((i, value))
        seen.add(value)
    return found


class SecretValue:
    """A secret from stack config: a kubeconfig, a token.

    From a stack file it is the `secure:` ciphertext, which only the Pulumi CLI can decrypt, so
    the CLI validates around it. Inside the Pulumi program it is the decrypted text, which the
    infra layer wraps in `pulumi.Output.secret`. Its repr never shows either.
    """

    __slots__ = ("ciphertext", "declared_secure", "plaintext")
    shown_as = "a secret value"  # what a message says instead of the value

    def __init__(self, plaintext: str | None = None, *, ciphertext: str | None = None, declared_secure: bool = True):
        self.plaintext = plaintext
        self.ciphertext = ciphertext
        self.declared_secure = declared_secure

    def __repr__(self) -> str:
        return "SecretValue([secret])"

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SecretValue) and (self.plaintext, self.ciphertext) == (
            other.plaintext,
            other.ciphertext,
        )

    def __hash__(self) -> int:
        return hash((self.plaintext, self.ciphertext))

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: GetCoreSchemaHandler) -> core_schema.CoreSchema:
        def coerce(value: Any) -> SecretValue:
            if isinstance(value, SecretValue):
                if value.plaintext is None and not value.ciphertext:
                    raise ValueError(
                        "is a `secure:` entry without ciphertext; set the secret again: "
                        "`pulumi config set --secret --path '<this path>' <value>`"
                    )
                return value
            if isinstance(value, str) and value:
                # Plain text here means the program received a decrypted value, or a stack file
                # holds the secret unencrypted; the loader warns about the latter.
                return SecretValue(value, declared_secure=False)
            raise ValueError("must be a non-empty secret value: set it with `pulumi config set --secret --path ...`")

        return core_schema.no_info_plain_validator_function(
            coerce, serialization=core_schema.plain_serializer_function_ser_schema(lambda v: "[secret]")
        )


def _checked(problem: Callable[[str], str | None]) -> Callable[[str], str]:
    def validate(value: str) -> str:
        if (message := problem(value)) is not None:
            raise ValueError(message)
        return value

    return validate


DnsLabel = Annotated[str, AfterValidator(_checked(syntax.dns_label_problem))]
DnsSubdomain = Annotated[str, AfterValidator(_checked(syntax.dns_subdomain_problem))]
Quantity = Annotated[str, Field(min_length=1, max_length=32), AfterValidator(_checked(syntax.quantity_problem))]
LabelValue = Annotated[str, AfterValidator(_checked(syntax.label_value_problem))]
QualifiedName = Annotated[str, AfterValidator(_checked(syntax.qualified_name_problem))]
# Free text that ends up in a manifest, a command or a chart (an image, a version, a region).
SingleLine = Annotated[str, AfterValidator(_checked(syntax.single_line_problem))]


def _label_map(reserved: bool, value_max: int, value_check: bool) -> Callable[[dict[str, str]], dict[str, str]]:
    def validate(labels: dict[str, str]) -> dict[str, str]:
        rules = Rules()
        for key, value in labels.items():
            if reserved and key.startswith(syntax.RESERVED_LABEL_PREFIX):
                rules.fail(
                    [key],
                    f"keys under '{syntax.RESERVED_LABEL_PREFIX}' are managed by modelplane; choose another prefix",
                )
            elif (problem := syntax.qualified_name_problem(key)) is not None:
                rules.fail([key], f"key {problem}")
            if value_check and (problem := syntax.label_value_problem(value)) is not None:
                rules.fail([key], problem)
            elif len(value) > value_max:
                rules.fail([key], f"value must be at most {value_max} characters (got {len(value)})")
        rules.raise_if_any()
        return labels

    return validate


# Labels anyone may set (cluster labels may use modelplane.ai/region, as the reference's docs do).
Labels = Annotated[dict[str, str], Field(max_length=64), AfterValidator(_label_map(False, 63, True))]
# Labels and annotations users put on generated objects: the modelplane.ai/ prefix is ours.
UserLabels = Annotated[dict[str, str], Field(max_length=32), AfterValidator(_label_map(True, 63, True))]
UserAnnotations = Annotated[dict[str, str], Field(max_length=32), AfterValidator(_label_map(True, 8192, False))]
# Selectors only need well-formed keys and values.
MatchLabels = Annotated[dict[str, str], Field(max_length=64), AfterValidator(_label_map(False, 63, True))]


class LabelSelector(ApiModel):
    match_labels: MatchLabels | None = None

    def matches(self, labels: dict[str, str]) -> bool:
        return not missing_labels(labels, self.match_labels or {})


class LocalRef(ApiModel):
    name: str = Field(min_length=1)


class Unreadable:
    """A value that could not be read (a number too large for any field, JSON nested too deeply).

    The reader that made it has already reported why; validation skips errors about it, so one
    mistake is reported once.
    """

    __slots__ = ("reason",)
    shown_as = "a value that could not be read"

    def __init__(self, reason: str):
        self.reason = reason

    def __repr__(self) -> str:
        return f"Unreadable({self.reason!r})"


def decode_top_level(value: Any) -> Any:
    """Pulumi stores `pulumi config set key '{"a": 1}'` (without --path) as a JSON string."""
    if isinstance(value, str) and value.lstrip()[:1] in ("{", "["):
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            return value
        except RecursionError:
            return Unreadable("is JSON nested too deeply to read; stack config nests about 20 levels")
        except ValueError:  # an integer literal past Python's 4300-digit conversion limit
            return Unreadable("is JSON holding a number too large to read; no field takes a number this large")
    return value
