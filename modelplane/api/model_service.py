"""ModelService (one URL over weighted endpoints) and ModelEndpoint (a backend it can route to)."""
from __future__ import annotations

from typing import Annotated
from urllib.parse import urlsplit

from pydantic import AfterValidator, Field

from .common import ApiModel, LabelSelector, MatchLabels, SecretValue, UserLabels


class EndpointSelector(LabelSelector):
    match_labels: MatchLabels  # required here: a service names what it routes to


class ServiceEndpoint(ApiModel):
    weight: int = Field(default=1, ge=1, le=1_000_000)
    selector: EndpointSelector


class ModelService(ApiModel):
    endpoints: list[ServiceEndpoint] = Field(min_length=1)


def _http_url(value: str) -> str:
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"'{value}' must be an http:// or https:// URL with a host (e.g. https://api.together.xyz/)")
    try:
        _ = parts.port  # raises on a malformed port
    except ValueError:
        raise ValueError(f"'{value}' has an invalid port") from None
    return value


def _absolute_path(value: str) -> str:
    if not value.startswith("/"):
        raise ValueError(f"'{value}' must start with '/' (e.g. '/' or '/v1/')")
    return value


class EndpointAuth(ApiModel):
    """A credential the front door adds to every request it forwards to this endpoint."""

    token: SecretValue
    header: str = Field(default="Authorization", min_length=1)
    scheme: str = "Bearer"  # the value sent is '<scheme> <token>'; '' sends the bare token


class ModelEndpoint(ApiModel):
    """A hand-made endpoint, e.g. an OpenAI-compatible SaaS provider for overflow or failover.

    (Endpoints of scheduled replicas are made by modelplane and never appear in config.)
    """

    labels: UserLabels = Field(default_factory=dict)  # what ModelService selectors match
    url: Annotated[str, Field(min_length=1), AfterValidator(_http_url)]
    rewrite_path: Annotated[str, AfterValidator(_absolute_path)] | None = None
    auth: EndpointAuth | None = None
