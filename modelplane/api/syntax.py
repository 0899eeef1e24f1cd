"""Kubernetes string grammars the API checks: names, label keys and values, quantities, semver.

Each `*_problem` function returns None when the value is valid, else a sentence saying why not.
Every grammar is matched against the whole value (`fullmatch`): with `re.match` and `$`, a name
ending in a newline ("ml-team\n") would pass, since Python's `$` also matches before a final
newline. Messages show a value only through `shown` (one short line, hidden where secrets may be).
"""

from __future__ import annotations

import ipaddress
import re

from .errors import shown

_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_DNS_1035_LABEL = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_QUALIFIED_NAME = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
_LABEL_VALUE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")
_C_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_ENV_VAR_NAME = re.compile(r"[!-<>-~]([ !-<>-~]*[!-<>-~])?")  # printable ASCII but '='; inner spaces only
_CONFIG_KEY = re.compile(r"[-._a-zA-Z0-9]+")
_HTTP_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")

# Kubernetes resource.ParseQuantity: sign, digits with optional fraction, then a binary suffix,
# a decimal exponent or a decimal SI suffix. No whitespace, no bare suffix.
_QUANTITY = re.compile(r"[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([KMGTPE]i|[eE][+-]?[0-9]+|[numkMGTPE])?")

# semver.org 2.0.0, strict (what DRA's `version` attribute type requires).
_SEMVER = re.compile(
    r"(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?"
    r"(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?"
)

RESERVED_LABEL_PREFIX = "modelplane.ai/"


def dns_label_problem(value: str, max_length: int = 63) -> str | None:
    if len(value) > max_length:
        return f"must be at most {max_length} characters (got {len(value)})"
    if not _DNS_LABEL.fullmatch(value):
        return "must be lower-case letters, digits and '-', starting and ending with a letter or digit"
    return None


def dns_1035_label_problem(value: str, max_length: int = 63) -> str | None:
    if len(value) > max_length:
        return f"must be at most {max_length} characters (got {len(value)})"
    if not _DNS_1035_LABEL.fullmatch(value):
        return "must be lower-case letters, digits and '-', starting with a letter and ending with a letter or digit"
    return None


def dns_subdomain_problem(value: str, max_length: int = 253) -> str | None:
    if len(value) > max_length:
        return f"must be at most {max_length} characters (got {len(value)})"
    if not _DNS_SUBDOMAIN.fullmatch(value):
        return "must be a DNS subdomain: lower-case letters, digits, '-' and '.', starting and ending with a letter or digit"
    return None


def qualified_name_problem(key: str) -> str | None:
    """A label or annotation key: optional DNS-subdomain prefix and '/', then a name of at most 63."""
    prefix, slash, name = key.rpartition("/")
    if slash:
        if not prefix:
            return "has an empty prefix before '/'"
        if problem := dns_subdomain_problem(prefix):
            return f"prefix {shown(prefix)} {problem}"
    if not name:
        return "must not be empty"
    if len(name) > 63:
        return f"name part must be at most 63 characters (got {len(name)})"
    if not _QUALIFIED_NAME.fullmatch(name):
        return "must be alphanumerics, '-', '_' or '.', starting and ending with an alphanumeric (optionally prefixed 'example.com/')"
    return None


def label_value_problem(value: str) -> str | None:
    if len(value) > 63:
        return f"label values must be at most 63 characters (got {len(value)})"
    if not _LABEL_VALUE.fullmatch(value):
        return "label values must be empty or alphanumerics, '-', '_' or '.', starting and ending with an alphanumeric"
    return None


def device_attribute_name_problem(name: str) -> str | None:
    """A DRA attribute or capacity name: a C identifier of at most 32, optionally `domain/` first."""
    domain, slash, ident = name.rpartition("/")
    if slash and (problem := dns_subdomain_problem(domain, 63)):
        return f"domain {shown(domain)} {problem}"
    if not _C_IDENTIFIER.fullmatch(ident) or len(ident) > 32:
        return "must be a C identifier of at most 32 characters (e.g. 'memory'), optionally prefixed by a domain ('example.com/memory')"
    return None


def quantity_problem(value: str) -> str | None:
    if not _QUANTITY.fullmatch(value):
        return (
            f"{shown(value)} is not a Kubernetes quantity (examples: '80Gi', '81559Mi', '500m', '1e3'; "
            "binary suffixes are Ki Mi Gi Ti Pi Ei, decimal ones n u m k M G T P E)"
        )
    return None


def is_negative_quantity(value: str) -> bool:
    return value.startswith("-") and any(c in "123456789" for c in value.split("e")[0].split("E")[0])


def semver_problem(value: str) -> str | None:
    if not _SEMVER.fullmatch(value):
        return f"{shown(value)} is not a strict semantic version (MAJOR.MINOR.PATCH, e.g. '12.4.0' or '1.2.3-rc.1')"
    return None


def single_line_problem(value: str) -> str | None:
    """Free text that ends up in a manifest, a command line or a chart: one line, no padding."""
    if any(not c.isprintable() for c in value):
        return "must be one line of printable text (no newline, tab or other control character)"
    if value != value.strip():
        return "must not start or end with a space"
    return None


def env_var_name_problem(value: str) -> str | None:
    """Kubernetes 1.34 (RelaxedEnvironmentVariableValidation, GA): printable ASCII except '='."""
    if not _ENV_VAR_NAME.fullmatch(value):
        return "must be printable ASCII characters other than '=' (e.g. 'HF_TOKEN'), without spaces at the ends"
    return None


def config_key_problem(value: str) -> str | None:
    """A key of a Secret or ConfigMap."""
    if len(value) > 253:
        return f"must be at most 253 characters (got {len(value)})"
    if not _CONFIG_KEY.fullmatch(value):
        return "must be letters, digits, '-', '_' or '.' (a key of a Secret or ConfigMap)"
    return None


def http_header_problem(value: str) -> str | None:
    if not _HTTP_TOKEN.fullmatch(value):
        return "must be an HTTP header name: letters, digits and !#$%&'*+-.^_`|~ (e.g. 'Authorization')"
    return None


def ip_range_problem(value: str) -> str | None:
    """A MetalLB address: CIDR (`172.18.255.0/28`) or range (`172.18.255.200-172.18.255.250`)."""
    if any(c.isspace() or not c.isprintable() for c in value):
        return f"{shown(value)} must not contain spaces, newlines or other control characters"
    try:
        if "-" in value:
            first, last = (ipaddress.ip_address(part.strip()) for part in value.split("-", 1))
            if first.version != last.version or first > last:  # type: ignore[operator]  # same family (the left test)
                return f"{shown(value)} must be 'FIRST-LAST' with FIRST <= LAST in the same IP family"
        else:
            ipaddress.ip_network(value, strict=False)
    except ValueError:
        return f"{shown(value)} is neither a CIDR ('172.18.255.0/28') nor a range ('172.18.255.200-172.18.255.250')"
    return None


def cidr_problem(value: str) -> str | None:
    try:
        ipaddress.ip_network(value, strict=True)
    except ValueError:
        return f"{shown(value)} is not a network in CIDR notation (e.g. '10.0.0.0/16')"
    return None
