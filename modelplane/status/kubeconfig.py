"""A cluster's kubeconfig, read into what the status client needs; no secret ever reaches a message.

Supported (enough for kind, Existing clusters and the end-to-end fleet, and the clouds' exec plugins):
the named context, else `current-context`, else the first context (else the first cluster and user);
an `https://` or `http://` server; `certificate-authority-data` or `certificate-authority`, or
`insecure-skip-tls-verify`; `tls-server-name`; a bearer `token` or `tokenFile`,
`client-certificate(-data)` with `client-key(-data)`, or an `exec` credential plugin (run when the
cluster is read). Messages name the cluster and where the kubeconfig came from, never its text.
"""
from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from ..api.errors import ModelplaneError


class KubeconfigError(ModelplaneError):
    """A kubeconfig status cannot use (exit 2)."""


@dataclass(frozen=True, repr=False)
class ClusterAccess:
    """How to reach one cluster's API server. `repr` shows only the cluster and server."""

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

    def __repr__(self) -> str:
        return f"ClusterAccess({self.cluster!r}, server={self.server!r})"

    __str__ = __repr__


def parse_kubeconfig(text: str, cluster: str, origin: str, context: str | None = None,
                     base_dir: Path | None = None) -> ClusterAccess:
    """The access `text` gives to `cluster` through `context` when it has one (the stack config's
    `existing.context`), else its current context; relative file paths resolve against `base_dir`."""
    where = f"the kubeconfig of cluster {cluster} ({origin})"
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError as error:  # its message would quote the offending line: keep only the line number
        mark = getattr(error, "problem_mark", None)
        line = f" at line {mark.line + 1}" if mark is not None else ""
        raise KubeconfigError(f"{where} is not valid YAML{line}") from None
    if not isinstance(document, dict):
        raise KubeconfigError(f"{where} is not a kubeconfig (expected a YAML mapping with clusters, users, contexts)")
    clusters = _named(document, "clusters", "cluster", where)
    users = _named(document, "users", "user", where)
    contexts = _named(document, "contexts", "context", where)
    chosen = context if context in contexts else document.get("current-context")
    ctx = contexts.get(chosen) if isinstance(chosen, str) else None
    if ctx is None:
        ctx = next(iter(contexts.values()), {})
    server_entry = clusters.get(ctx.get("cluster")) if ctx.get("cluster") else next(iter(clusters.values()), None)
    if server_entry is None:
        raise KubeconfigError(f"{where} names no cluster its context can use")
    user = users.get(ctx.get("user")) if ctx.get("user") else next(iter(users.values()), {})
    user = user or {}
    server = server_entry.get("server")
    if not isinstance(server, str) or not server.startswith(("https://", "http://")):
        raise KubeconfigError(f"{where}: the cluster's server must be an https:// or http:// URL")
    return ClusterAccess(
        cluster=cluster, origin=origin, server=server.rstrip("/"),
        insecure=server_entry.get("insecure-skip-tls-verify") is True,
        ca_pem=_pem(server_entry.get("certificate-authority-data"), where, "certificate-authority-data"),
        ca_file=_path(server_entry.get("certificate-authority"), base_dir),
        tls_server_name=_text(server_entry.get("tls-server-name")),
        token=_token(user, base_dir, where),
        client_cert_pem=_decoded(user.get("client-certificate-data"), where, "client-certificate-data"),
        client_key_pem=_decoded(user.get("client-key-data"), where, "client-key-data"),
        client_cert_file=_path(user.get("client-certificate"), base_dir),
        client_key_file=_path(user.get("client-key"), base_dir),
        exec_plugin=user.get("exec") if isinstance(user.get("exec"), dict) else None)


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
        return user["token"].strip()
    token_file = _path(user.get("tokenFile"), base_dir)
    if token_file is None:
        return None
    try:
        return Path(token_file).read_text().strip()
    except OSError as error:
        raise KubeconfigError(f"{where}: cannot read its tokenFile {token_file} ({error.strerror})") from None
