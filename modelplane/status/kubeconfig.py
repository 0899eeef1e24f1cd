"""A cluster's kubeconfig, read into what the status client needs; no secret ever reaches a message.

Supported (enough for kind, Existing clusters and the end-to-end fleet, and the clouds' exec plugins):
the named context, else `current-context`, else the first context (else the first cluster and user);
an `https://` or `http://` server; `certificate-authority-data` or `certificate-authority`, or
`insecure-skip-tls-verify`; `tls-server-name`; `proxy-url` (an `http://` proxy), else the
`HTTPS_PROXY` / `HTTP_PROXY` / `NO_PROXY` environment the way kubectl reads it; a bearer `token` or
`tokenFile`, `client-certificate(-data)` with `client-key(-data)`, or an `exec` credential plugin
(run when the cluster is read). An `auth-provider` user (the old gcp/azure/oidc plugins) is
reported as unsupported. `$KUBECONFIG` may list several files, merged the way kubectl merges them.
Messages name the cluster and where the kubeconfig came from, never its text.
"""

from __future__ import annotations

import base64
import binascii
import ipaddress
import os
import urllib.parse
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from ..api.errors import ModelplaneError
from ..api.textfile import read_text

MAX_TOKEN_FILE_BYTES = 64 << 10  # a service-account token is about 1 KB
MAX_KUBECONFIG_BYTES = 1 << 20
_FILE_KEYS = {"clusters": ("certificate-authority",), "users": ("tokenFile", "client-certificate", "client-key")}


class KubeconfigError(ModelplaneError):
    """A kubeconfig status cannot use: that cluster is reported unreadable, with this message."""


@dataclass(frozen=True, repr=False)
class ClusterAccess:
    """How to reach one cluster's API server. `repr` shows only the cluster and server.

    `problem` set: the cluster cannot be read with this kubeconfig (and why); nothing else is used."""

    cluster: str  # the fleet's name for it
    origin: str  # where the kubeconfig came from, for messages: "gpu-eu-west.yaml in --kubeconfig-dir"
    server: str
    insecure: bool = False
    ca_pem: str | None = None  # from certificate-authority-data
    ca_file: str | None = None
    tls_server_name: str | None = None
    token: str | None = None
    client_cert_pem: bytes | None = None
    client_key_pem: bytes | None = None
    client_cert_file: str | None = None
    client_key_file: str | None = None
    exec_plugin: dict[str, Any] | None = None  # the user's `exec` block, run when the cluster is read
    proxy: str | None = None  # an http:// proxy URL (proxy-url, else the environment's), possibly with credentials
    problem: str | None = None

    def __repr__(self) -> str:
        return f"ClusterAccess({self.cluster!r}, server={self.server!r})"

    __str__ = __repr__

    @classmethod
    def unusable(cls, cluster: str, origin: str, problem: str) -> ClusterAccess:
        return cls(cluster, origin, "", problem=problem)


def parse_kubeconfig(
    text: str,
    cluster: str,
    origin: str,
    context: str | None = None,
    base_dir: Path | None = None,
    environ: Mapping[str, str] | None = None,
) -> ClusterAccess:
    """The access `text` gives to `cluster` through `context` when it has one (the stack config's
    `existing.context`), else its current context; relative file paths resolve against `base_dir`."""
    where = f"the kubeconfig of cluster {cluster} ({origin})"
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError as error:  # its message would quote the offending line: keep only the line number
        mark = getattr(error, "problem_mark", None)
        line = f" at line {mark.line + 1}" if mark is not None else ""
        raise KubeconfigError(f"{where} is not valid YAML{line}") from None
    except RecursionError:
        raise KubeconfigError(f"{where} nests too deeply to be a kubeconfig") from None
    return access_from_document(document, cluster, origin, context, base_dir, environ)


def access_from_document(
    document: Any,
    cluster: str,
    origin: str,
    context: str | None = None,
    base_dir: Path | None = None,
    environ: Mapping[str, str] | None = None,
) -> ClusterAccess:
    """Long: kubeconfig's fields read one by one, each with its own error."""
    where = f"the kubeconfig of cluster {cluster} ({origin})"
    if not isinstance(document, dict):
        raise KubeconfigError(f"{where} is not a kubeconfig (expected a YAML mapping with clusters, users, contexts)")
    clusters = _named(document, "clusters", "cluster", where)
    users = _named(document, "users", "user", where)
    contexts = _named(document, "contexts", "context", where)
    chosen = context if context in contexts else document.get("current-context")
    ctx = contexts.get(chosen) if isinstance(chosen, str) else None
    if ctx is None:
        ctx = next(iter(contexts.values()), {})
    cluster_name, user_name = ctx.get("cluster"), ctx.get("user")
    if not isinstance(cluster_name, (str, type(None))) or not isinstance(user_name, (str, type(None))):
        raise KubeconfigError(f"{where}: its context's cluster and user must be names")
    server_entry = clusters.get(cluster_name) if cluster_name else next(iter(clusters.values()), None)
    if server_entry is None:
        raise KubeconfigError(f"{where} names no cluster its context can use")
    user = (users.get(user_name) if user_name else next(iter(users.values()), {})) or {}
    server = server_problem = None
    raw_server = server_entry.get("server")
    if isinstance(raw_server, str):
        server, server_problem = _server(raw_server)
    if server is None:
        raise KubeconfigError(
            f"{where}: the cluster's server must be an https:// or http:// URL"
            + (f" ({server_problem})" if server_problem else "")
        )
    if user.get("auth-provider") is not None and not isinstance(user.get("exec"), dict):
        name = (user.get("auth-provider") or {}).get("name") if isinstance(user.get("auth-provider"), dict) else None
        plugin = f" ({name})" if isinstance(name, str) and name.isidentifier() else ""
        return ClusterAccess.unusable(
            cluster,
            origin,
            f"its kubeconfig ({origin}) authenticates with an "
            f"auth-provider plugin{plugin}, which status does not support (kubectl dropped "
            "them too): switch the user to an exec plugin such as gke-gcloud-auth-plugin "
            "or kubelogin",
        )
    proxy, proxy_problem = _proxy(server_entry.get("proxy-url"), server, os.environ if environ is None else environ)
    if proxy_problem:
        return ClusterAccess.unusable(cluster, origin, f"its kubeconfig ({origin}): {proxy_problem}")
    return ClusterAccess(
        cluster=cluster,
        origin=origin,
        server=server,
        insecure=server_entry.get("insecure-skip-tls-verify") is True,
        ca_pem=_pem(server_entry.get("certificate-authority-data"), where, "certificate-authority-data"),
        ca_file=_path(server_entry.get("certificate-authority"), base_dir),
        tls_server_name=_text(server_entry.get("tls-server-name")),
        token=_token(user, base_dir, where),
        client_cert_pem=_decoded(user.get("client-certificate-data"), where, "client-certificate-data"),
        client_key_pem=_decoded(user.get("client-key-data"), where, "client-key-data"),
        client_cert_file=_path(user.get("client-certificate"), base_dir),
        client_key_file=_path(user.get("client-key"), base_dir),
        exec_plugin=user.get("exec") if isinstance(user.get("exec"), dict) else None,
        proxy=proxy,
    )


def merged_kubeconfig(value: str, what: str = "$KUBECONFIG") -> dict[str, Any]:
    """The files of a `KUBECONFIG` value (separated by os.pathsep) merged the way kubectl merges them:
    the first file to name a cluster, user or context wins, and the first `current-context` set wins.
    Relative paths inside each file resolve against that file's folder. A missing file is skipped."""
    merged: dict[str, Any] = {"clusters": [], "users": [], "contexts": []}
    seen: dict[str, set[str]] = {key: set() for key in ("clusters", "users", "contexts")}
    for name in (p for p in value.split(os.pathsep) if p):
        path = Path(name).expanduser()
        if not path.exists():
            continue
        text = read_text(path, f"kubeconfig {name} (in {what})", MAX_KUBECONFIG_BYTES, error=KubeconfigError)
        try:
            document = yaml.safe_load(text)
        except (yaml.YAMLError, RecursionError):
            raise KubeconfigError(f"kubeconfig {path} (in {what}) is not valid YAML") from None
        if not isinstance(document, dict):
            continue
        if not merged.get("current-context") and isinstance(document.get("current-context"), str):
            merged["current-context"] = document["current-context"]
        for key, inner in (("clusters", "cluster"), ("users", "user"), ("contexts", "context")):
            entries = document.get(key)
            for entry in entries if isinstance(entries, list) else []:
                if (
                    not (
                        isinstance(entry, dict)
                        and isinstance(entry.get("name"), str)
                        and isinstance(entry.get(inner), dict)
                    )
                    or entry["name"] in seen[key]
                ):
                    continue
                seen[key].add(entry["name"])
                body = dict(entry[inner])
                for file_key in _FILE_KEYS.get(key, ()):
                    if _text(body.get(file_key)):
                        body[file_key] = _path(body[file_key], path.parent)
                merged[key].append({"name": entry["name"], inner: body})
    return merged


def context_names(document: dict[str, Any]) -> set[str]:
    return {c["name"] for c in document.get("contexts", []) if isinstance(c, dict) and isinstance(c.get("name"), str)}


def _server(value: str) -> tuple[str | None, str | None]:
    """The server URL without a trailing slash, or why it cannot be one."""
    if not value.startswith(("https://", "http://")) or any(not c.isprintable() or c.isspace() for c in value):
        return None, None
    try:
        parts = urllib.parse.urlsplit(value)
        port, host = parts.port, parts.hostname
    except ValueError:
        return None, "it has an invalid host or port"
    if not host:
        return None, "it names no host"
    if port == 0:
        return None, "port 0"
    if parts.query or parts.fragment:
        return None, "it must not have a query or fragment"
    return value.rstrip("/"), None


def _proxy(proxy_url: Any, server: str, environ: Mapping[str, str]) -> tuple[str | None, str | None]:
    """The proxy to reach `server` through: the kubeconfig's `proxy-url`, else the environment's (as Go's
    net/http reads it: HTTPS_PROXY for an https server, HTTP_PROXY for http, NO_PROXY, and never for
    localhost or a loopback address)."""
    parts = urllib.parse.urlsplit(server)
    if proxy_url is None:
        proxies = {k.lower(): v for k, v in environ.items() if k.lower() in ("https_proxy", "http_proxy", "no_proxy")}
        candidate = proxies.get(f"{parts.scheme}_proxy")
        if not candidate or _is_loopback(parts.hostname or "") or _bypassed(parts, proxies.get("no_proxy", "")):
            return None, None
        origin = f"{parts.scheme.upper()}_PROXY"
    else:
        candidate, origin = proxy_url, "its proxy-url"
    if not isinstance(candidate, str) or "://" not in candidate:
        candidate = f"http://{candidate}" if isinstance(candidate, str) and candidate else None
    if candidate is None:
        return None, f"{origin} is not a URL"
    try:
        proxy = urllib.parse.urlsplit(candidate)
        _ = proxy.port
    except ValueError:
        return None, f"{origin} has an invalid host or port"
    if proxy.scheme != "http":
        return None, (
            f"{origin} is a {proxy.scheme}:// proxy; status supports http:// proxies only (an "
            "HTTP CONNECT proxy, the common kind)"
        )
    if not proxy.hostname:
        return None, f"{origin} names no host"
    return candidate, None


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _bypassed(parts: urllib.parse.SplitResult, no_proxy: str) -> bool:
    if not no_proxy:
        return False
    if no_proxy.strip() == "*":
        return True
    host = parts.hostname or ""
    for entry in (e.strip().lower() for e in no_proxy.split(",") if e.strip()):
        entry_host = entry.rsplit(":", 1)[0] if entry.count(":") == 1 else entry
        try:
            if ipaddress.ip_address(host) in ipaddress.ip_network(entry_host, strict=False):
                return True
            continue
        except ValueError:
            pass
        entry_host = entry_host.lstrip("*").lstrip(".")
        if host == entry_host or host.endswith("." + entry_host):
            return True
    return False


def _named(document: dict, key: str, inner: str, where: str) -> dict[str, dict]:
    entries = document.get(key) or []
    if not isinstance(entries, list):
        raise KubeconfigError(f"{where}: {key} must be a list")
    out: dict[str, dict] = {}
    for entry in entries:
        if isinstance(entry, dict) and isinstance(entry.get(inner), dict):
            out.setdefault(str(entry.get("name", "")), entry[inner])
    return out


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _path(value: Any, base_dir: Path | None) -> str | None:
    if not _text(value):
        return None
    path = Path(value).expanduser()
    return str(path if path.is_absolute() or base_dir is None else base_dir / path)


def _decoded(value: Any, where: str, key: str) -> bytes | None:
    if not _text(value):
        return None
    try:
        return base64.b64decode(value, validate=False)
    except (binascii.Error, ValueError):
        raise KubeconfigError(f"{where}: {key} is not base64") from None


def _pem(value: Any, where: str, key: str) -> str | None:
    data = _decoded(value, where, key)
    if data is None:
        return None
    try:
        return data.decode("ascii")
    except UnicodeDecodeError:
        raise KubeconfigError(f"{where}: {key} does not hold PEM certificates") from None


def _token(user: dict, base_dir: Path | None, where: str) -> str | None:
    if _text(user.get("token")):
        token, source = user["token"].strip(), "its token"
    else:
        token_file = _path(user.get("tokenFile"), base_dir)
        if token_file is None:
            return None
        # a regular file only (not /dev/zero, not a FIFO), bounded, UTF-8; its text never reaches a message
        token = read_text(
            Path(token_file), f"{where}: its tokenFile", MAX_TOKEN_FILE_BYTES, error=KubeconfigError
        ).strip()
        source = f"its tokenFile {token_file}"
    if not all("!" <= c <= "~" for c in token):  # what an HTTP header can carry as a bearer token
        raise KubeconfigError(f"{where}: {source} is not a bearer token (printable ASCII without spaces)")
    return token or None
