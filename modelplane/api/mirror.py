"""`modelplane:mirror`: where an air-gapped fleet gets its Helm charts and CRD manifests.

Without it every chart comes from its upstream repository and every CRD manifest from GitHub,
at `pulumi preview` time. With it:

* `charts` is one of
  - `oci://host[:port][/path]`: an OCI registry prefix; chart `X` version `V` is pulled as
    `oci://host/path/X` version `V` (what `helm push X-V.tgz oci://host/path` creates);
  - `https://host/path`: a classic Helm repository (an `index.yaml` there lists the charts:
    Artifactory, Nexus, Harbor's chartrepo, ChartMuseum);
  - an absolute folder holding the `X-V.tgz` files `helm pull` writes.
* `manifests` is an `https://` base URL (the file is `<base>/<file name>`) or an absolute folder.

Either may be set alone. `http://` is accepted for both (internal file servers often have no
TLS) with a warning. A folder must be absolute: Pulumi's Kubernetes provider reads it from its own
working folder, so a relative path would depend on where `pulumi` was started.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from typing import Literal
from urllib.parse import SplitResult, urlsplit

from pydantic import Field, model_validator

from .common import ApiModel, Rules, SingleLine
from .errors import ConfigIssue

KEY = "mirror"

LocationKind = Literal["oci", "https", "http", "folder"]

# Distribution spec: a registry host (optionally with a port), then lowercase path components.
_HOST = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*")
_OCI_COMPONENT = re.compile(r"[a-z0-9]+(?:(?:\.|_|__|-+)[a-z0-9]+)*")
_WINDOWS_ABSOLUTE = re.compile(r"[A-Za-z]:[\\/]")
_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*)://")

FOLDER_EXAMPLE = "/srv/modelplane-mirror"


@dataclass(frozen=True)
class Location:
    """A validated mirror location: its kind and its text without a trailing slash."""

    kind: LocationKind
    value: str

    def join(self, name: str) -> str:
        """`<location>/<name>` (a file in a folder, a file under a base URL, a chart under a prefix)."""
        return f"{self.value}/{name}"


def is_local_path(text: str) -> bool:
    """An absolute folder or file path (POSIX, or a Windows drive path), as opposed to a URL."""
    return text.startswith("/") or bool(_WINDOWS_ABSOLUTE.match(text))


def location(text: str) -> Location:
    """The kind of an already-validated location (see `location_problem`)."""
    scheme = _SCHEME.match(text)
    kind: LocationKind = scheme.group(1).lower() if scheme else "folder"  # type: ignore[assignment]
    if scheme:  # Helm recognises `oci://` in lowercase only
        text = kind + text[len(scheme.group(1)) :]
    value = text.rstrip("/\\") or text  # the root folder stays "/"
    return Location(kind, value)


def location_problem(text: str, what: Literal["charts", "manifests"]) -> str | None:
    """Why `text` cannot be the `charts` or `manifests` location, or None.

    No message repeats the value: a URL may carry credentials.
    """
    allowed = (
        "an OCI registry prefix (oci://host/path), an https Helm repository or an absolute folder"
        if what == "charts"
        else "an https base URL or an absolute folder"
    )
    if not text:
        return f"must not be empty; set {allowed}, or leave `{what}` out to fetch from upstream"
    if any(c.isspace() for c in text):
        return "must not contain spaces or line breaks"
    scheme = _SCHEME.match(text)
    if scheme is None:
        return _folder_problem(text)
    name = scheme.group(1).lower()
    if name == "oci":
        if what == "manifests":
            return (
                "manifests are plain YAML files that Pulumi reads over http(s) or from disk, not OCI "
                "artifacts; use an https base URL or an absolute folder"
            )
        return _oci_problem(text)
    if name in ("https", "http"):
        return _url_problem(text, what)
    if name == "file":
        return f"write the folder itself, not a file:// URL (e.g. {FOLDER_EXAMPLE}/{what})"
    return f"unsupported scheme '{name}://'; use {allowed}"


def _folder_problem(text: str) -> str | None:
    if is_local_path(text):
        return None
    if text.startswith("~"):
        return f"'~' is not expanded here; write the absolute folder (e.g. {FOLDER_EXAMPLE})"
    return (
        f"a folder must be an absolute path (e.g. {FOLDER_EXAMPLE}): Pulumi's Kubernetes provider reads "
        "files from its own working folder, so a relative path would depend on where `pulumi` runs"
    )


def _authority_problem(parts: SplitResult, what: str) -> str | None:
    if "@" in parts.netloc:
        fix = (
            "for an OCI registry, log in with `helm registry login` on the machine that runs `pulumi`; a Helm "
            "repository must be readable without a login"
            if what == "charts"
            else "serve the manifests without a login from inside the network, or use a folder"
        )
        return (
            f"must not hold credentials (they would sit in plain text in the stack file and in Pulumi's state); {fix}"
        )
    host = parts.hostname
    if not host:
        return "names no host"
    try:
        port = parts.port
    except ValueError:
        return "has an invalid port"
    if port == 0:
        return "has an invalid port"
    if ":" in host:  # an IPv6 literal, [...] in the URL
        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            return "has an invalid host"
    elif not _HOST.fullmatch(host):
        return "has an invalid host name"
    return None


def _url_problem(text: str, what: str) -> str | None:
    parts = urlsplit(text)
    if parts.query or parts.fragment or "?" in text or "#" in text:
        return "must not have a query (?...) or a fragment (#...): file names are appended to it"
    return _authority_problem(parts, what)


def _oci_problem(text: str) -> str | None:
    parts = urlsplit(text)
    if parts.query or parts.fragment or "?" in text or "#" in text:
        return "must be oci://host[:port]/path, without a query or fragment"
    if (problem := _authority_problem(parts, "charts")) is not None:
        return problem
    path = parts.path.strip("/")
    if ":" in path or "@" in path:
        return (
            "must be a registry prefix without a tag or digest (oci://host/path); each chart's version becomes its tag"
        )
    for component in path.split("/") if path else []:
        if not _OCI_COMPONENT.fullmatch(component):
            return (
                "has an invalid repository path: OCI repository names are lowercase letters, digits "
                "and single separators (. _ __ -) between them, segments joined by '/'"
            )
    return None


class Mirror(ApiModel):
    """`modelplane:mirror`: a private copy of every chart and CRD manifest the fleet installs."""

    charts: SingleLine | None = Field(default=None, max_length=1024)
    manifests: SingleLine | None = Field(default=None, max_length=1024)

    @model_validator(mode="after")
    def _locations(self) -> Mirror:
        rules = Rules()
        if self.charts is None and self.manifests is None:
            rules.fail([], "set `charts`, `manifests` or both (see docs/air-gapped.md), or remove the block")
        for field in ("charts", "manifests"):
            value = getattr(self, field)
            if value is not None and (problem := location_problem(value, field)) is not None:
                rules.fail([field], problem)
        rules.raise_if_any()
        return self

    @property
    def chart_location(self) -> Location | None:
        return location(self.charts) if self.charts is not None else None

    @property
    def manifest_location(self) -> Location | None:
        return location(self.manifests) if self.manifests is not None else None

    def warnings(self) -> list[ConfigIssue]:
        """Legal but risky: content fetched over plain http can be changed on its way."""
        found = []
        if (charts := self.chart_location) is not None and charts.kind == "http":
            found.append(
                ConfigIssue(
                    (KEY, "charts"),
                    "charts are fetched over plain http: anyone on the network "
                    "path can change what gets installed; prefer https, OCI or a folder",
                )
            )
        if (manifests := self.manifest_location) is not None and manifests.kind == "http":
            found.append(
                ConfigIssue(
                    (KEY, "manifests"),
                    "manifests are fetched over plain http: anyone on the "
                    "network path can change the CRDs that get applied (their pinned SHA-256 is "
                    "checked only for a folder); prefer https or a folder",
                )
            )
        return found
