"""What a hand-made endpoint's URL may hold: what the objects it renders into accept.

Its host becomes an EndpointSlice address and an Envoy Gateway `Backend` endpoint, whose pinned CRD
takes a DNS name (lower-case RFC 1123 labels joined by dots, at most 253 characters: no trailing
dot, no `_`) or an IPv4 / IPv6 address in plain form (no zone id such as `%eth0`, no IPv4 tail); its
port becomes a Service port (1-65535). Credentials in the URL (`user:password@`) would be dropped
from every rendered object, so they are refused and the message points at `auth`.
"""

from __future__ import annotations

import ipaddress
import re
from urllib.parse import SplitResult

# The Envoy Gateway Backend CRD's patterns (gateway.envoyproxy.io_backends.yaml, v1.8.1).
_FQDN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_IPV6 = re.compile(r"(([0-9a-fA-F]{1,4}:){1,7}[0-9a-fA-F]{1,4}|::|(([0-9a-fA-F]{1,4}:){0,5})?(:[0-9a-fA-F]{1,4}){1,2})")
AUTH_HINT = (
    "put the credential in `auth` instead (`auth.token`, set with `pulumi config set --secret`; "
    "`auth.header` / `auth.scheme` choose how it is sent)"
)

CREDENTIALS_PROBLEM = (
    f"must not hold credentials (user:password@): they would be dropped from what is deployed; {AUTH_HINT}"
)


def endpoint_url_problem(parts: SplitResult) -> str | None:
    """Why a parsed http(s) URL cannot be a hand-made endpoint's, or None."""
    if "@" in parts.netloc:
        return CREDENTIALS_PROBLEM
    port = parts.port
    if port == 0:
        return "has port 0; a port is 1-65535"
    host = parts.hostname or ""
    if ":" in host or "%" in host:  # an IPv6 literal, [...] in the URL
        if "%" in host:
            return "has an IPv6 address with a zone id (%...); the gateway's Backend takes a plain address"
        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            return "has an invalid IPv6 address"
        if not _IPV6.fullmatch(host):
            return (
                "has an IPv6 address in a form the gateway's Backend does not take (write it as hex groups, "
                "without an IPv4 tail)"
            )
        return None
    try:
        ipaddress.IPv4Address(host)
        return None
    except ValueError:
        pass
    if len(host) > 253 or not _FQDN.fullmatch(host) or any(len(label) > 63 for label in host.split(".")):
        return (
            "has a host name the gateway's Backend does not take: lower-case letters, digits and '-' in labels "
            "of at most 63 characters joined by '.', at most 253 in all, with no trailing dot and no '_'"
        )
    return None
