"""ModelService (one URL over weighted endpoints) and ModelEndpoint (a backend it can route to)."""

from __future__ import annotations

import re
from typing import Annotated, Literal
from urllib.parse import urlsplit

from pydantic import AfterValidator, Field, model_validator

from . import syntax
from .common import ApiModel, LabelSelector, MatchLabels, Rules, SecretValue, UserLabels, _checked
from .endpoint_url import CREDENTIALS_PROBLEM, endpoint_url_problem
from .errors import shown


class EndpointSelector(LabelSelector):
    match_labels: MatchLabels  # required here: a service names what it routes to


class ServiceEndpoint(ApiModel):
    weight: int = Field(default=1, ge=1, le=1_000_000)
    selector: EndpointSelector
    # Fallback endpoints (e.g. a SaaS provider) get traffic only while the service's other endpoints are
    # unhealthy: "on-prem first, spill to cloud" (front door on Envoy Gateway only).
    fallback: bool = False


def _alias(value: str) -> str:
    if not ALIAS_PATTERN.fullmatch(value):
        raise ValueError(
            f"{shown(value)} is not a model alias: 1-128 characters, letters, digits and '.', '_', ':', "
            "'-', starting with a letter or digit (e.g. 'llama-3.1-8b'); no '/', which only the "
            "canonical '<namespace>/<service>' names have"
        )
    return value


ALIAS_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,127}")
PROVIDER_MODEL_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:/@+-]{0,255}")


def _provider_model(value: str) -> str:
    if not PROVIDER_MODEL_PATTERN.fullmatch(value):
        raise ValueError(
            f"{shown(value)} is not a model name: 1-256 characters, letters, digits and '.', '_', ':', "
            "'/', '@', '+', '-', starting with a letter or digit (e.g. 'Qwen/Qwen3-8B')"
        )
    return value


FallbackWhen = Literal["AllPrimariesDown", "BelowHealthy"]


class FallbackPolicy(ApiModel):
    """When a service's `fallback: true` endpoints get traffic (Envoy priority failover).

    AllPrimariesDown (the default): only while no primary endpoint is healthy. BelowHealthy: part of the
    traffic spills once fewer than `healthyPercent` of the primaries are healthy (Envoy's own default
    is 72%), the more the fewer are healthy.
    """

    when: FallbackWhen = "AllPrimariesDown"
    healthy_percent: int | None = Field(default=None, ge=1, le=100)

    @model_validator(mode="after")
    def _percent_with_below_healthy(self) -> FallbackPolicy:
        rules = Rules()
        if self.when == "BelowHealthy":
            rules.check(
                self.healthy_percent is not None,
                ["healthyPercent"],
                "is required with when: BelowHealthy (e.g. healthyPercent: 50)",
            )
        else:
            rules.check(
                self.healthy_percent is None, ["healthyPercent"], "only applies with when: BelowHealthy; remove it"
            )
        rules.raise_if_any()
        return self


class ModelService(ApiModel):
    endpoints: list[ServiceEndpoint] = Field(min_length=1, max_length=64)
    # A short name clients may put in the request's `model` besides '<namespace>/<service>'; unique in the fleet.
    alias: Annotated[str, AfterValidator(_alias)] | None = None
    # When the fallback endpoints take traffic (Envoy Gateway front door); unset: AllPrimariesDown.
    fallback: FallbackPolicy | None = None


def _url_shown(value: str) -> str:
    """A URL for a message, without any `user:password@` part (`shown` masks it, however it is written)."""
    return shown(value)


def _no_blanks(value: str) -> None:
    """urlsplit silently drops tabs and newlines, so "https://host/\n" would pass and be used as written."""
    if any(c.isspace() or not c.isprintable() for c in value):
        raise ValueError(f"{_url_shown(value)} must not contain spaces, newlines or other control characters")


def _http_url(value: str) -> str:
    _no_blanks(value)
    try:
        parts = urlsplit(value)
        hostname = parts.hostname
    except ValueError:  # e.g. an unbalanced '[' in the host
        hostname = None
        parts = None
    if parts is not None and "@" in value.partition("?")[0]:  # user:password@, however written ('/', '#' and ':'
        raise ValueError(f"{_url_shown(value)} {CREDENTIALS_PROBLEM}")  # in it make parsers see a path or port)
    if parts is None or parts.scheme not in ("http", "https") or not hostname:
        raise ValueError(
            f"{_url_shown(value)} must be an http:// or https:// URL with a host (e.g. https://api.together.xyz/)"
        )
    try:
        _ = parts.port  # raises on a malformed port
    except ValueError:
        raise ValueError(f"{_url_shown(value)} has an invalid port") from None
    if (problem := endpoint_url_problem(parts)) is not None:
        raise ValueError(f"{_url_shown(value)} {problem}")
    return value


def _absolute_path(value: str) -> str:
    _no_blanks(value)
    if not value.startswith("/"):
        raise ValueError(f"{shown(value)} must start with '/' (e.g. '/' or '/v1/')")
    return value


def _scheme_problem(value: str) -> str | None:
    return syntax.single_line_problem(value) or (syntax.http_header_problem(value) if value else None)


class EndpointAuth(ApiModel):
    """A credential the front door adds to every request it forwards to this endpoint."""

    token: SecretValue
    header: Annotated[str, AfterValidator(_checked(syntax.http_header_problem))] = "Authorization"
    scheme: Annotated[str, AfterValidator(_checked(_scheme_problem))] = (
        "Bearer"  # the value sent is '<scheme> <token>'; '' sends the bare token
    )


class ModelEndpoint(ApiModel):
    """A hand-made endpoint, e.g. an OpenAI-compatible SaaS provider for overflow or failover.

    (Endpoints of scheduled replicas are made by modelplane and never appear in config.)
    """

    labels: UserLabels = Field(default_factory=dict)  # what ModelService selectors match
    url: Annotated[str, Field(min_length=1), AfterValidator(_http_url)]
    rewrite_path: Annotated[str, AfterValidator(_absolute_path)] | None = None
    auth: EndpointAuth | None = None
    # The name this endpoint serves the model under (a provider's own, e.g. 'Qwen/Qwen3-8B'): an Envoy
    # Gateway front door puts it in the body's `model` of every request it forwards here.
    model: Annotated[str, AfterValidator(_provider_model)] | None = None
