"""Offline validation of generated Kubernetes objects, for the test suite (no tests in here).

No API server can run on the build machines, so validation is schema-based and in-process
(docs/schemas.md says where the CRDs come from):

* Built-in kinds: the JSON schemas bundled in ``kubernetes-validate`` for Kubernetes 1.34.0, strict
  flavour (unknown fields are errors). The bundled schemas accept any string as a Quantity and do
  not check base64, list-map keys or names, so those are tightened here, plus a few hand-written
  server rules that the OpenAPI schemas lack (pod templates, Service type, Job restartPolicy, PVC,
  EndpointSlice addresses, DRA requests).
* Custom resources: the pinned upstream CRDs (tests/upstream-crds.toml) in ``CRD_DIR``: all from
  ``$MODELPLANE_K8S_CRD_DIR`` if set, else each file from the first of ``<repo>/../shared/k8s-crds``
  and the user cache that ``scripts/fetch_crds.py`` fills that has it with the pinned digest
  (``find_crd_dir``, docs/schemas.md); each file's SHA-256 is checked again before loading. Each
  ``openAPIV3Schema`` becomes a Draft-4 JSON Schema in which unknown fields are errors. Schema
  ``default:`` values are applied first, then the schema is checked, list-map keys must be unique,
  and the ``x-kubernetes-validations`` CEL rules run with cel-python. A rule cel-python cannot run
  (a transition rule, which needs ``oldSelf``, or a function outside cel-python and the few
  Kubernetes string functions added here) is skipped and recorded: ``skipped_cel_rules()`` lists
  them, and the test suite pins that list so a new one cannot slip in unnoticed.

An unknown apiVersion/kind is an error, never a pass. A pinned file found nowhere (or no CRDs at
all) skips the tests that reach a custom resource of its API group, or that need every CRD
(``require_all_crds``), with one reason (``MISSING_CRDS``); built-in kinds and the other custom
resources are still validated. But ``$MODELPLANE_K8S_CRD_DIR`` naming a directory that does not
exist or lacks a pinned file (``CRDDirectoryMissingError``), or a file whose SHA-256 is not the
pinned one with no good copy elsewhere (``CRDDigestError``), is an error: a CI job that sets the
variable fails rather than skips.

Entry points: ``validate_object(obj) -> list[str]`` and ``assert_valid(objects)``.
"""
from __future__ import annotations

import atexit
import base64
import copy
import functools
import ipaddress
import json
import logging
import os
import re
import shutil
import sys
import tempfile
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

__all__ = [
    "CRD_DIR",
    "CRD_SOURCE",
    "K8S_VERSION",
    "MISSING_CRDS",
    "CRDDigestError",
    "CRDCopies",
    "CRDDirectoryMissingError",
    "CRDSource",
    "CRDVersion",
    "SkippedRule",
    "assert_valid",
    "crd_kinds",
    "find_crd_dir",
    "find_crd_files",
    "load_crds",
    "require_all_crds",
    "skipped_cel_rules",
    "validate_object",
]

K8S_VERSION = "1.34.0"
REPO = Path(__file__).resolve().parent.parent
# The fetch script owns the pinned list and the cache location; the lookup here must agree with it.
if str(REPO / "scripts") not in sys.path:
    sys.path.insert(0, str(REPO / "scripts"))
import fetch_crds  # noqa: E402

CRD_DIR_ENV = "MODELPLANE_K8S_CRD_DIR"
PINS = fetch_crds.load_pins()


def _group_of(pin_path: str) -> str:
    return Path(pin_path).name.partition("_")[0]


# API groups of the pinned CRDs (kubebuilder names files <group>_<plural>.yaml): without the CRDs,
# an object of these groups is unchecked (skip), any other unknown kind is still an error.
PINNED_GROUPS = frozenset(_group_of(pin.path) for pin in PINS)


@dataclass(frozen=True)
class CRDSource:
    """Where the CRDs are and which lookup step found them.

    ``path``: a directory holding every pinned file that was found (None: none was found);
    ``missing``: the pinned files found nowhere (custom resources of their groups skip).
    """

    path: Path | None
    origin: str
    missing: tuple[str, ...] = ()


def _lookup_dirs(env: Mapping[str, str], repo: Path) -> list[tuple[Path, str]]:
    return [(repo.parent / "shared" / "k8s-crds", "../shared beside the repository"),
            (fetch_crds.cache_dir(env), "user cache")]


@dataclass(frozen=True)
class CRDCopies:
    """The copies of one pinned file in the lookup places, in lookup order."""

    good: tuple[Path, ...]  # with the pinned SHA-256
    other: tuple[Path, ...]  # with another digest: never used, but named in the error if there is no good one

    @property
    def chosen(self) -> Path | None:
        return (self.good + self.other + (None,))[0]


def find_crd_files(env: Mapping[str, str] = os.environ, repo: Path = REPO,
                   pins: Iterable[fetch_crds.Pin] = PINS) -> dict[str, CRDCopies]:
    """For each pinned file, its copies in ``<repo>/../shared/k8s-crds`` and the user cache."""
    out: dict[str, CRDCopies] = {}
    for pin in pins:
        copies = [d / pin.path for d, _ in _lookup_dirs(env, repo) if (d / pin.path).is_file()]
        good = tuple(c for c in copies if fetch_crds.sha256_of(c) == pin.sha256)
        out[pin.path] = CRDCopies(good, tuple(c for c in copies if c not in good))
    return out


def find_crd_dir(env: Mapping[str, str] = os.environ, repo: Path = REPO,
                 pins: Iterable[fetch_crds.Pin] = PINS) -> CRDSource:
    """``$MODELPLANE_K8S_CRD_DIR``, else, file by file, ``<repo>/../shared/k8s-crds`` or the user cache.

    The variable wins even when its directory is missing or incomplete (an error later, not a
    skip): whoever sets it wants those CRDs, and a typo must not fall back to another copy or to
    skipping. Otherwise each pinned file is taken from the first of the two places that has it
    with its pinned digest (a copy with another digest only when there is no good one: loading
    it is then an error that names it). When one place holds every file so chosen, or a copy as
    good, it is the directory; otherwise the directory is a temporary one of links to the chosen
    copies (removed at exit), so that code reading ``CRD_DIR / path`` keeps working.
    """
    if env.get(CRD_DIR_ENV):
        return CRDSource(Path(env[CRD_DIR_ENV]).expanduser(), CRD_DIR_ENV)
    pins = list(pins)
    found = {path: copies for path, copies in find_crd_files(env, repo, pins).items() if copies.chosen}
    missing = tuple(pin.path for pin in pins if pin.path not in found)
    tail = f"; {len(missing)} pinned files found nowhere, their custom resources skip" if missing else ""
    if not found:
        return CRDSource(None, "nowhere", missing)
    places = _lookup_dirs(env, repo)
    for directory, origin in places:
        if all(directory / path in (copies.good or copies.other[:1]) for path, copies in found.items()):
            return CRDSource(directory, origin + tail, missing)
    links = Path(tempfile.mkdtemp(prefix="modelplane-k8s-crds-"))
    atexit.register(shutil.rmtree, links, ignore_errors=True)
    taken = {origin: 0 for _, origin in places}
    for path, copies in found.items():
        (links / path).parent.mkdir(parents=True, exist_ok=True)
        (links / path).symlink_to(copies.chosen)
        taken[next(origin for directory, origin in places if copies.chosen == directory / path)] += 1
    return CRDSource(links, "per file: " + ", ".join(f"{n} from {o}" for o, n in taken.items() if n) + tail, missing)


CRD_SOURCE = find_crd_dir()
CRD_DIR = CRD_SOURCE.path  # None: custom resources are not validated, their tests skip
MISSING_CRDS = (f"needs the pinned CRDs, not in {fetch_crds.cache_dir()}: "
                f"run venv/bin/python scripts/fetch_crds.py, or set {CRD_DIR_ENV} to a folder of them (docs/schemas.md)")


class CRDDirectoryMissingError(FileNotFoundError):
    """The pinned CRDs are not where they should be; custom resources cannot be validated."""


class CRDDigestError(ValueError):
    """A CRD file is not the pinned upstream file; it is not used."""


def skip_without_crds() -> None:
    """Skip the running test: it needs the CRDs. One call site, so pytest -rs folds them into one line."""
    pytest.skip(MISSING_CRDS)


def require_all_crds(crd_dir: Path | None = CRD_DIR) -> None:
    """Skip the running test unless every pinned CRD was found (for tests about the whole set)."""
    if crd_dir is None or (crd_dir == CRD_DIR and CRD_SOURCE.missing):
        skip_without_crds()


def _expected_pins(crd_dir: Path) -> list[fetch_crds.Pin]:
    """The pinned files that ``crd_dir`` must have: all, except in the looked-up CRD_DIR the ones found nowhere."""
    if crd_dir == CRD_DIR and CRD_SOURCE.missing:
        return [pin for pin in PINS if pin.path not in CRD_SOURCE.missing]
    return PINS


def _unchecked_groups(crd_dir: Path | None) -> frozenset[str]:
    """API groups whose unknown kinds skip (a CRD of the group may be among the files not found)."""
    if crd_dir is None:
        return PINNED_GROUPS
    if crd_dir == CRD_DIR:
        return frozenset(_group_of(path) for path in CRD_SOURCE.missing)
    return frozenset()


# ---------------------------------------------------------------------------------------------
# Shared pieces: formats, Kubernetes list semantics, names, paths
# ---------------------------------------------------------------------------------------------

QUANTITY_RE = re.compile(
    r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|"
    r"([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?\Z"
)
_DNS_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
DNS1123_LABEL = re.compile(rf"^{_DNS_LABEL}\Z")
DNS1123_SUBDOMAIN = re.compile(rf"^{_DNS_LABEL}(\.{_DNS_LABEL})*\Z")
DNS1035_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?\Z")
_QUALIFIED_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]\Z")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?\Z")
_CONFIG_KEY = re.compile(r"^[-._a-zA-Z0-9]+\Z")
_RFC3339 = re.compile(r"^\d{4}-\d\d-\d\d[Tt]\d\d:\d\d:\d\d(\.\d+)?([Zz]|[+-]\d\d:\d\d)\Z")

# Only formats whose JSON-Schema meaning matches Kubernetes'. Not 'duration': JSON Schema's is
# ISO-8601 (PT1H), Kubernetes' is Go's (1h30m).
FORMATS = jsonschema.FormatChecker(formats=())


@FORMATS.checks("int32", raises=())
def _int32(value: object) -> bool:
    return not isinstance(value, int) or -(2**31) <= value < 2**31


@FORMATS.checks("int64", raises=())
def _int64(value: object) -> bool:
    return not isinstance(value, int) or -(2**63) <= value < 2**63


@FORMATS.checks("ipv4", raises=ValueError)
def _ipv4(value: object) -> bool:
    return not isinstance(value, str) or bool(ipaddress.IPv4Address(value))


@FORMATS.checks("ipv6", raises=ValueError)
def _ipv6(value: object) -> bool:
    return not isinstance(value, str) or bool(ipaddress.IPv6Address(value))


@FORMATS.checks("date-time", raises=())
def _date_time(value: object) -> bool:
    return not isinstance(value, str) or bool(_RFC3339.match(value))


@FORMATS.checks("byte", raises=(ValueError, TypeError))
def _byte(value: object) -> bool:
    return not isinstance(value, str) or base64.b64decode(value, validate=True) is not None


# Built-in list-map keys are compared without server defaulting; these keys have a fixed default.
_BUILTIN_KEY_DEFAULTS = {"protocol": "TCP"}


def _list_map_keys(validator, keys, instance, schema):
    if schema.get("x-kubernetes-list-type") != "map" or not isinstance(instance, list):
        return
    seen: dict[tuple, int] = {}
    for i, item in enumerate(instance):
        if not isinstance(item, dict):
            continue
        values = [item.get(k, _BUILTIN_KEY_DEFAULTS.get(k)) for k in keys]
        key = tuple(json.dumps(v, sort_keys=True) for v in values)
        if key in seen:
            shown = ", ".join(f"{k}={v!r}" for k, v in zip(keys, values))
            yield jsonschema.ValidationError(
                f"duplicate entries in list-map (keys {shown}): items {seen[key]} and {i}"
            )
        else:
            seen[key] = i


def _list_type_set(validator, list_type, instance, schema):
    if list_type != "set" or not isinstance(instance, list):
        return
    seen: dict[str, int] = {}
    for i, item in enumerate(instance):
        key = json.dumps(item, sort_keys=True)
        if key in seen:
            yield jsonschema.ValidationError(
                f"duplicate value {item!r} in set-list: items {seen[key]} and {i}"
            )
        else:
            seen[key] = i


def _quantity(validator, enabled, instance, schema):
    if not enabled or instance is None:
        return
    if isinstance(instance, (int, float)) and not isinstance(instance, bool):
        return  # a JSON number is a valid quantity
    if not isinstance(instance, str) or not QUANTITY_RE.match(instance):
        yield jsonschema.ValidationError(
            f"{instance!r} is not a valid Kubernetes quantity (e.g. '500m', '16Gi', '2')"
        )


_K8S_KEYWORDS = {
    "x-kubernetes-list-map-keys": _list_map_keys,
    "x-kubernetes-list-type": _list_type_set,
    "x-k8s-quantity": _quantity,
}
_BuiltinValidator = jsonschema.validators.extend(jsonschema.Draft202012Validator, _K8S_KEYWORDS)
_CRDValidator = jsonschema.validators.extend(jsonschema.Draft4Validator, _K8S_KEYWORDS)

_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\Z")


def _fmt_path(parts: Iterable[Any]) -> str:
    out = ""
    for p in parts:
        if isinstance(p, int):
            out += f"[{p}]"
        elif _IDENT.match(str(p)):
            out += f".{p}" if out else str(p)
        else:
            out += f"[{json.dumps(str(p))}]"
    return out or "<root>"


def _join(path: str, key: Any) -> str:
    """``path`` extended by one key or index (``<root>`` is the empty path)."""
    tail = _fmt_path([key])
    if path == "<root>":
        return tail
    return path + (tail if tail.startswith("[") else "." + tail)


def describe(obj: dict) -> str:
    """``Kind/namespace/name`` (``Kind/name`` without a namespace) for messages."""
    meta = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}
    parts = [str(obj.get("kind") or "<no kind>")]
    if meta.get("namespace"):
        parts.append(str(meta["namespace"]))
    parts.append(str(meta.get("name") or "<no name>"))
    return "/".join(parts)


def _schema_errors(validator, instance: Any, base: tuple = ()) -> list[str]:
    """All schema errors (not just the best match), sorted by path; ``base`` prefixes the path."""
    errors = sorted(validator.iter_errors(instance), key=lambda e: list(map(str, e.absolute_path)))
    return [f"{_fmt_path([*base, *e.absolute_path])}: {e.message}" for e in errors]


def _qualified_name_problem(key: str) -> str | None:
    prefix, _, name = key.rpartition("/")
    if "/" in key and not prefix:
        return "empty prefix"
    if prefix and (len(prefix) > 253 or not DNS1123_SUBDOMAIN.match(prefix)):
        return f"prefix {prefix!r} is not a DNS-1123 subdomain"
    if not name or len(name) > 63 or not _QUALIFIED_NAME.match(name):
        return f"name part {name!r} must be 1-63 alphanumerics, '-', '_' or '.', starting and ending alphanumeric"
    return None


def _metadata_problems(obj: dict) -> Iterator[str]:
    """Names, namespace, label and annotation syntax (ObjectMeta validation in the API server)."""
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        return  # the schema reports it
    name = meta.get("name")
    group = str(obj.get("apiVersion", "")).rpartition("/")[0]
    kind = obj.get("kind")
    if not name:
        yield "metadata.name: required (generateName is not used by this project)"
    elif not isinstance(name, str):
        pass  # the schema reports the type
    elif group == "rbac.authorization.k8s.io":
        if name in (".", "..") or "/" in name or "%" in name:
            yield f"metadata.name: {name!r} is not a valid path segment name"
    elif (group, kind) in (("", "Service"),):
        if len(name) > 63 or not DNS1035_LABEL.match(name):
            yield f"metadata.name: {name!r} is not a DNS-1035 label (lowercase alphanumerics and '-', starting with a letter, at most 63)"
    elif (group, kind) in (("", "Namespace"),):
        if len(name) > 63 or not DNS1123_LABEL.match(name):
            yield f"metadata.name: {name!r} is not a DNS-1123 label (at most 63)"
    elif len(name) > 253 or not DNS1123_SUBDOMAIN.match(name):
        yield f"metadata.name: {name!r} is not a DNS-1123 subdomain (lowercase alphanumerics, '-' and '.', at most 253)"
    ns = meta.get("namespace")
    if isinstance(ns, str) and ns and (len(ns) > 63 or not DNS1123_LABEL.match(ns)):
        yield f"metadata.namespace: {ns!r} is not a DNS-1123 label"
    for field_name in ("labels", "annotations"):
        entries = meta.get(field_name)
        if not isinstance(entries, dict):
            continue
        for key, value in entries.items():
            where = _join(f"metadata.{field_name}", key)
            problem = _qualified_name_problem(str(key))
            if problem:
                yield f"{where}: invalid key: {problem}"
            if field_name == "labels" and isinstance(value, str) and (len(value) > 63 or not _LABEL_VALUE.match(value)):
                yield f"{where}: invalid label value {value!r} (at most 63 alphanumerics, '-', '_' or '.', starting and ending alphanumeric)"


# ---------------------------------------------------------------------------------------------
# Built-in kinds: kubernetes-validate's bundled JSON schemas
# ---------------------------------------------------------------------------------------------

_QUANTITY_DEF = "io.k8s.apimachinery.pkg.api.resource.Quantity"
_OBJECT_META_REF = "https://kubernetes.io/api/_definitions.json#/$defs/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"


def _schema_dir(strict: bool = True):
    return resources.files("kubernetes_validate") / "kubernetes-json-schema" / (
        f"v{K8S_VERSION}-local" + ("-strict" if strict else "")
    )


@functools.cache
def _builtin_registry() -> Registry:
    defs = json.loads((_schema_dir() / "_definitions.json").read_text())
    defs["$defs"][_QUANTITY_DEF] = {"x-k8s-quantity": True}
    return Resource.from_contents(defs, default_specification=DRAFT202012) @ Registry()


@functools.cache
def _builtin_validator(api_version: str, kind: str):
    """The validator of a top-level built-in kind, or None if Kubernetes 1.34 has no such kind."""
    if not api_version or not kind or "/" in kind or "." in kind:
        return None
    group, _, version = api_version.rpartition("/")
    file_gv = f"{group.split('.')[0]}-{version}" if group else version
    path = _schema_dir() / f"{kind.lower()}-{file_gv}.json"
    if not path.is_file():
        return None
    schema = json.loads(path.read_text())
    # The file naming is lossy (the group's domain is dropped) and sub-types have files too:
    # accept only a schema that declares exactly this group/version/kind.
    gvks = schema.get("x-kubernetes-group-version-kind") or []
    if not any((g.get("group", ""), g.get("version"), g.get("kind")) == (group, version, kind) for g in gvks):
        return None
    return _BuiltinValidator(schema, registry=_builtin_registry(), format_checker=FORMATS)


@functools.cache
def _object_meta_validator():
    return _BuiltinValidator({"$ref": _OBJECT_META_REF}, registry=_builtin_registry(), format_checker=FORMATS)


def _validate_builtin(obj: dict, validator) -> list[str]:
    problems = _schema_errors(validator, obj)
    problems += _metadata_problems(obj)
    problems += _builtin_rules(obj)
    return problems


def _get(obj: Any, *keys: Any) -> Any:
    for k in keys:
        if isinstance(obj, dict):
            obj = obj.get(k)
        elif isinstance(obj, list) and isinstance(k, int) and -len(obj) <= k < len(obj):
            obj = obj[k]
        else:
            return None
    return obj


def _items(value: Any) -> list:
    return value if isinstance(value, list) else []


def _pod_spec_rules(spec: Any, path: str, *, restart_policies: tuple[str, ...] | None = None) -> Iterator[str]:
    """Server rules for a pod spec (core/validation) that the OpenAPI schema does not carry."""
    if not isinstance(spec, dict):
        return
    claim_names = {c.get("name") for c in _items(spec.get("resourceClaims")) if isinstance(c, dict)}
    for i, claim in enumerate(_items(spec.get("resourceClaims"))):
        if isinstance(claim, dict):
            sources = [k for k in ("resourceClaimName", "resourceClaimTemplateName") if claim.get(k)]
            if len(sources) != 1:
                yield f"{path}.resourceClaims[{i}]: exactly one of resourceClaimName or resourceClaimTemplateName is required"
    for list_name in ("initContainers", "containers"):
        for i, c in enumerate(_items(spec.get(list_name))):
            if not isinstance(c, dict):
                continue
            where = f"{path}.{list_name}[{i}]"
            if isinstance(c.get("name"), str) and not DNS1123_LABEL.match(c["name"]):
                yield f"{where}.name: {c['name']!r} is not a DNS-1123 label"
            if not c.get("image"):
                yield f"{where}.image: required (the pods created from this template would be rejected)"
            for j, port in enumerate(_items(c.get("ports"))):
                for key in ("containerPort", "hostPort"):
                    value = _get(port, key)
                    if isinstance(value, int) and not 1 <= value <= 65535:
                        yield f"{where}.ports[{j}].{key}: {value} is not in 1-65535"
            for j, claim in enumerate(_items(_get(c, "resources", "claims"))):
                name = _get(claim, "name")
                if name not in claim_names:
                    yield f"{where}.resources.claims[{j}].name: {name!r} is not one of the pod's resourceClaims"
    policy = spec.get("restartPolicy")
    allowed = restart_policies or ("Always", "OnFailure", "Never")
    if policy is not None and policy not in allowed:
        yield f"{path}.restartPolicy: {policy!r} is not one of {list(allowed)}"


def _pod_template_rules(template: Any, path: str, *, selector: Any = None,
                        restart_policies: tuple[str, ...] | None = None) -> Iterator[str]:
    if not isinstance(template, dict):
        return
    labels = _get(template, "metadata", "labels") or {}
    match_labels = _get(selector, "matchLabels")
    if isinstance(match_labels, dict) and isinstance(labels, dict):
        for k, v in match_labels.items():
            if labels.get(k) != v:
                yield f"{path}.metadata.labels: selector matchLabels {k}={v!r} does not match the template labels"
    yield from _pod_spec_rules(template.get("spec"), f"{path}.spec", restart_policies=restart_policies)


def _device_request_rules(req: dict, path: str) -> Iterator[str]:
    mode = req.get("allocationMode")
    if mode is not None and mode not in ("ExactCount", "All"):
        yield f"{path}.allocationMode: {mode!r} is not one of ['ExactCount', 'All']"
    count = req.get("count")
    if (mode in (None, "ExactCount")) and isinstance(count, int) and count < 1:
        yield f"{path}.count: must be greater than zero"
    if mode == "All" and count is not None:
        yield f"{path}.count: must not be set when allocationMode is All"
    for i, sel in enumerate(_items(req.get("selectors"))):
        expr = _get(sel, "cel", "expression")
        if isinstance(expr, str):
            try:
                _cel_env().compile(expr)
            except Exception as ex:  # noqa: BLE001 - any compile failure is a rejection
                yield f"{path}.selectors[{i}].cel.expression: does not compile: {str(ex).splitlines()[0][:160]}"


def _builtin_rules(obj: dict) -> list[str]:
    kind, api = obj.get("kind"), obj.get("apiVersion")
    spec = obj.get("spec")
    out: list[str] = []
    if (api, kind) in (("apps/v1", "Deployment"), ("apps/v1", "ReplicaSet"), ("apps/v1", "StatefulSet"), ("apps/v1", "DaemonSet")):
        out += _pod_template_rules(_get(spec, "template"), "spec.template", selector=_get(spec, "selector"))
        if isinstance(_get(spec, "replicas"), int) and spec["replicas"] < 0:
            out.append("spec.replicas: must be greater than or equal to 0")
    elif (api, kind) == ("batch/v1", "Job"):
        out += _pod_template_rules(_get(spec, "template"), "spec.template", restart_policies=("Never", "OnFailure"))
        if _get(spec, "template", "spec") is not None and _get(spec, "template", "spec", "restartPolicy") is None:
            out.append("spec.template.spec.restartPolicy: required for a Job (Never or OnFailure)")
    elif (api, kind) == ("v1", "PodTemplate"):
        out += _pod_template_rules(obj.get("template"), "template")
    elif (api, kind) == ("v1", "Pod"):
        out += _pod_spec_rules(spec, "spec")
    elif (api, kind) == ("v1", "Service") and isinstance(spec, dict):
        stype = spec.get("type", "ClusterIP")
        if stype not in ("ClusterIP", "NodePort", "LoadBalancer", "ExternalName"):
            out.append(f"spec.type: {stype!r} is not one of ['ClusterIP', 'NodePort', 'LoadBalancer', 'ExternalName']")
        ports = _items(spec.get("ports"))
        if not ports and stype != "ExternalName" and spec.get("clusterIP") != "None":
            out.append("spec.ports: required unless the Service is headless or ExternalName")
        for i, port in enumerate(ports):
            if len(ports) > 1 and not _get(port, "name"):
                out.append(f"spec.ports[{i}].name: required when there is more than one port")
            for key in ("port", "targetPort", "nodePort"):
                value = _get(port, key)
                if isinstance(value, int) and not isinstance(value, bool) and not 1 <= value <= 65535:
                    out.append(f"spec.ports[{i}].{key}: {value} is not in 1-65535")
    elif (api, kind) == ("v1", "PersistentVolumeClaim") and isinstance(spec, dict):
        if not spec.get("accessModes"):
            out.append("spec.accessModes: at least one access mode is required")
        if _get(spec, "resources", "requests", "storage") is None:
            out.append("spec.resources.requests.storage: required")
    elif (api, kind) == ("discovery.k8s.io/v1", "EndpointSlice"):
        kinds = {"IPv4": ipaddress.IPv4Address, "IPv6": ipaddress.IPv6Address, "FQDN": None}
        atype = obj.get("addressType")
        if atype is not None and atype not in kinds:
            out.append(f"addressType: {atype!r} is not one of {list(kinds)}")
        for i, ep in enumerate(_items(obj.get("endpoints"))):
            for j, addr in enumerate(_items(_get(ep, "addresses"))):
                parse = kinds.get(atype)
                try:
                    if parse is not None:
                        parse(addr)
                    elif atype == "FQDN" and not DNS1123_SUBDOMAIN.match(str(addr)):
                        raise ValueError(addr)
                except ValueError:
                    out.append(f"endpoints[{i}].addresses[{j}]: {addr!r} is not a valid {atype} address")
    elif (api, kind) in (("v1", "Secret"), ("v1", "ConfigMap")):
        for field_name in ("data", "stringData", "binaryData"):
            entries = obj.get(field_name)
            for key in entries if isinstance(entries, dict) else ():
                if not _CONFIG_KEY.match(str(key)) or len(str(key)) > 253:
                    out.append(f"{_join(field_name, key)}: invalid key (alphanumerics, '-', '_' or '.')")
    elif (api, kind) in (("resource.k8s.io/v1", "ResourceClaimTemplate"), ("resource.k8s.io/v1", "ResourceClaim")):
        base = ("spec", "spec") if kind == "ResourceClaimTemplate" else ("spec",)
        for i, req in enumerate(_items(_get(obj, *base, "devices", "requests"))):
            if not isinstance(req, dict):
                continue
            where = ".".join(base) + f".devices.requests[{i}]"
            if not DNS1123_LABEL.match(str(req.get("name", ""))):
                out.append(f"{where}.name: {req.get('name')!r} is not a DNS-1123 label")
            if (req.get("exactly") is None) == (req.get("firstAvailable") is None):
                out.append(f"{where}: exactly one of 'exactly' or 'firstAvailable' is required")
            if isinstance(req.get("exactly"), dict):
                out += _device_request_rules(req["exactly"], f"{where}.exactly")
            for j, sub in enumerate(_items(req.get("firstAvailable"))):
                if isinstance(sub, dict):
                    out += _device_request_rules(sub, f"{where}.firstAvailable[{j}]")
    return out


# ---------------------------------------------------------------------------------------------
# Custom resources: pinned upstream CRDs
# ---------------------------------------------------------------------------------------------

_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@dataclass(eq=False)
class CRDVersion:
    """One served-or-not version of one CRD."""

    group: str
    version: str
    kind: str
    scope: str
    served: bool
    storage: bool
    deprecated: bool
    schema: dict
    source: Path
    _validator: Any = field(default=None, repr=False)
    _rules: dict | None = field(default=None, repr=False)

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}"

    @property
    def validator(self):
        if self._validator is None:
            root = to_jsonschema(self.schema)
            root.setdefault("properties", {})
            root["properties"]["apiVersion"] = {"enum": [self.api_version]}
            root["properties"]["kind"] = {"enum": [self.kind]}
            # ObjectMeta is checked with the built-in schema (unknown fields, types); keep only
            # what the CRD itself says about metadata (rarely more than the type), not strictly.
            crd_meta = (self.schema.get("properties") or {}).get("metadata") or {"type": "object"}
            root["properties"]["metadata"] = to_jsonschema(crd_meta, strict=False)
            root["required"] = sorted(set(root.get("required", [])) | {"apiVersion", "kind", "metadata"})
            self._validator = _CRDValidator(root, format_checker=FORMATS)
        return self._validator

    @property
    def rules(self) -> dict:
        """Compiled CEL programs by rule text, and the rules that are skipped (with reasons)."""
        if self._rules is None:
            self._rules = _compile_rules(self)
        return self._rules


def pinned_files(crd_dir: Path, pins: Iterable[fetch_crds.Pin] = PINS) -> list[Path]:
    """The pinned files under ``crd_dir``, each checked against its pinned SHA-256."""
    crd_dir = Path(crd_dir)
    how_to_fix = "(see docs/schemas.md; venv/bin/python scripts/fetch_crds.py fills the user cache)"
    if not crd_dir.is_dir():
        raise CRDDirectoryMissingError(f"CRD directory {crd_dir} does not exist {how_to_fix}")
    pins = list(pins)
    missing = [pin.path for pin in pins if not (crd_dir / pin.path).is_file()]
    if missing:
        raise CRDDirectoryMissingError(
            f"CRD directory {crd_dir} lacks {len(missing)} of the {len(pins)} pinned files "
            f"({', '.join(missing[:3])}{', ...' if len(missing) > 3 else ''}) {how_to_fix}")
    for pin in pins:
        got = fetch_crds.sha256_of(crd_dir / pin.path)
        if got != pin.sha256:
            raise CRDDigestError(f"{crd_dir / pin.path} is not the pinned upstream file (SHA-256 {got}, pinned "
                                 f"{pin.sha256} in tests/upstream-crds.toml); not used. Restore or re-fetch it.")
    return [crd_dir / pin.path for pin in pins]


@functools.cache
def load_crds(crd_dir: Path | None = CRD_DIR) -> dict[tuple[str, str], CRDVersion]:
    """Every version of every pinned CRD, by (apiVersion, kind). No directory (None): skip the test."""
    if crd_dir is None:
        skip_without_crds()
    out: dict[tuple[str, str], CRDVersion] = {}
    for path in pinned_files(crd_dir, _expected_pins(crd_dir)):
        with open(path, encoding="utf-8") as fh:
            for doc in yaml.load_all(fh, Loader=_Loader):
                if not isinstance(doc, dict) or doc.get("kind") != "CustomResourceDefinition":
                    continue
                spec = doc["spec"]
                for v in spec["versions"]:
                    cv = CRDVersion(
                        group=spec["group"], version=v["name"], kind=spec["names"]["kind"],
                        scope=spec.get("scope", "Namespaced"), served=bool(v.get("served")),
                        storage=bool(v.get("storage")), deprecated=bool(v.get("deprecated")),
                        schema=v["schema"]["openAPIV3Schema"], source=path,
                    )
                    key = (cv.api_version, cv.kind)
                    if key in out:
                        raise ValueError(f"{key} is defined twice: {out[key].source} and {path}")
                    out[key] = cv
    return out


def crd_kinds(crd_dir: Path | None = CRD_DIR) -> list[tuple[str, str]]:
    """(apiVersion, kind) of every served CRD version."""
    return sorted(k for k, cv in load_crds(crd_dir).items() if cv.served)


_DROPPED = {"description", "default", "example", "x-kubernetes-validations", "externalDocs"}


def to_jsonschema(node: dict, strict: bool = True) -> dict:
    """An OpenAPI v3 structural schema (CRD) as a Draft-4 JSON Schema.

    ``nullable`` becomes a null type, ``x-kubernetes-int-or-string`` an integer-or-string, an
    embedded resource requires apiVersion/kind, and, when ``strict``, an object with
    ``properties`` rejects other fields unless it preserves unknown fields (the API server would
    prune them silently).
    """
    s: dict = {}
    for key, value in node.items():
        if key in _DROPPED:
            continue
        if key == "properties":
            s[key] = {name: to_jsonschema(sub, strict) for name, sub in value.items()}
        elif key in ("items", "additionalProperties", "not") and isinstance(value, dict):
            s[key] = to_jsonschema(value, strict)
        elif key in ("allOf", "anyOf", "oneOf"):
            s[key] = [to_jsonschema(sub, strict) for sub in value]
        else:
            s[key] = value
    if s.pop("nullable", False):
        if "type" in s:
            s["type"] = [s["type"], "null"]
        if "enum" in s:
            s["enum"] = [*s["enum"], None]
    is_object = s.get("type") == "object" or (isinstance(s.get("type"), list) and "object" in s["type"])
    if (strict and is_object and "properties" in s and "additionalProperties" not in s
            and not s.get("x-kubernetes-preserve-unknown-fields")):
        s["additionalProperties"] = False
    if s.get("x-kubernetes-int-or-string") and "type" not in s and "anyOf" not in s:
        s["anyOf"] = [{"type": "integer"}, {"type": "string"}]
    if s.get("x-kubernetes-embedded-resource"):
        s["required"] = sorted(set(s.get("required", [])) | {"apiVersion", "kind"})
    return s


def apply_defaults(obj: Any, schema: dict) -> Any:
    """Structural defaulting as the apiextensions-apiserver does it (in place; returns obj)."""
    if isinstance(obj, dict):
        props = schema.get("properties") or {}
        extra = schema.get("additionalProperties")
        for name, sub in props.items():
            if name not in obj and "default" in sub:
                obj[name] = copy.deepcopy(sub["default"])
        for name, value in obj.items():
            if name in props:
                apply_defaults(value, props[name])
            elif isinstance(extra, dict):
                apply_defaults(value, extra)
    elif isinstance(obj, list) and isinstance(schema.get("items"), dict):
        for item in obj:
            apply_defaults(item, schema["items"])
    return obj


# --- CEL (x-kubernetes-validations) ----------------------------------------------------------

@dataclass(frozen=True)
class SkippedRule:
    """A CEL rule that cannot be evaluated offline, and why."""

    api_version: str
    kind: str
    path: str
    rule: str
    reason: str


_MACROS = {"has", "all", "exists", "exists_one", "filter", "map"}
_STRING_LITERAL = re.compile(r"""[rR]?('''.*?'''|\"\"\".*?\"\"\"|'(?:\\.|[^'\\])*'|"(?:\\.|[^"\\])*")""", re.DOTALL)
_CALL = re.compile(r"\b([A-Za-z_][A-Za-z0-9_]*)\s*\(")
# Keywords CEL reserves; Kubernetes exposes properties with these names as __name__.
_CEL_RESERVED = {
    "true", "false", "null", "in", "as", "break", "const", "continue", "else", "for", "function",
    "if", "import", "let", "loop", "package", "namespace", "return", "var", "void", "while",
}
_CEL_ACCESSIBLE = re.compile(r"^[A-Za-z_./-][A-Za-z0-9_./-]*\Z")


def _k8s_string_functions() -> dict:
    """The parts of the Kubernetes CEL strings library that the pinned CRDs use (and a few more)."""
    from celpy import celtypes

    def as_list(values):
        return celtypes.ListType([celtypes.StringType(v) for v in values])

    def split(s, sep, limit=None):
        if limit is None or int(limit) < 0:
            return as_list(str(s).split(str(sep)))
        if int(limit) == 0:
            return as_list([])
        return as_list(str(s).split(str(sep), int(limit) - 1))

    return {
        "split": split,
        "lowerAscii": lambda s: celtypes.StringType(str(s).lower()),
        "upperAscii": lambda s: celtypes.StringType(str(s).upper()),
        "trim": lambda s: celtypes.StringType(str(s).strip()),
        "join": lambda items, sep="": celtypes.StringType(str(sep).join(str(x) for x in items)),
        "indexOf": lambda s, sub: celtypes.IntType(str(s).find(str(sub))),
        "replace": lambda s, old, new: celtypes.StringType(str(s).replace(str(old), str(new))),
    }


@functools.cache
def _cel_env():
    import celpy

    logging.getLogger("celpy").setLevel(logging.CRITICAL)
    return celpy.Environment()


@functools.cache
def _cel_functions() -> tuple[dict, frozenset]:
    import celpy.evaluation

    funcs = _k8s_string_functions()
    known = {name for name in celpy.evaluation.base_functions if name[0].isalpha()}
    return funcs, frozenset(known | set(funcs) | _MACROS)


def _unsupported_functions(rule: str) -> list[str]:
    _, supported = _cel_functions()
    code = _STRING_LITERAL.sub("''", rule)
    return sorted({name for name in _CALL.findall(code) if name not in supported})


def _iter_rules(schema: dict, path: str = "<root>") -> Iterator[tuple[str, dict]]:
    for rule in schema.get("x-kubernetes-validations") or []:
        yield path, rule
    for name, sub in (schema.get("properties") or {}).items():
        yield from _iter_rules(sub, _join(path, name))
    if isinstance(schema.get("additionalProperties"), dict):
        yield from _iter_rules(schema["additionalProperties"], _join(path, "*"))
    if isinstance(schema.get("items"), dict):
        yield from _iter_rules(schema["items"], path + "[*]")


def _compile_rules(cv: CRDVersion) -> dict:
    env = _cel_env()
    funcs, _ = _cel_functions()
    programs: dict[str, Any] = {}
    skipped: list[SkippedRule] = []
    evaluated = 0
    for path, rule in _iter_rules(cv.schema):
        text = rule["rule"]
        reason = None
        if re.search(r"\boldSelf\b", text):
            reason = "transition rule (uses oldSelf): only evaluated on update"
        elif missing := _unsupported_functions(text):
            reason = f"uses functions cel-python lacks: {', '.join(missing)}"
        else:
            try:
                programs[text] = env.program(env.compile(text), functions=funcs)
            except Exception as ex:  # noqa: BLE001
                reason = f"cel-python cannot compile it: {str(ex).splitlines()[0][:120]}"
        if reason:
            skipped.append(SkippedRule(cv.api_version, cv.kind, path, text, reason))
        else:
            evaluated += 1
    return {"programs": programs, "skipped": skipped, "evaluated": evaluated}


def skipped_cel_rules(crd_dir: Path | None = CRD_DIR) -> list[SkippedRule]:
    """Every CEL rule of every served CRD version that is not evaluated, with the reason."""
    out: list[SkippedRule] = []
    for cv in load_crds(crd_dir).values():
        if cv.served:
            out += cv.rules["skipped"]
    return out


def _to_cel(value: Any, schema: dict):
    """A JSON value as CEL, with properties named as Kubernetes exposes them (escaped)."""
    from celpy import celtypes, json_to_cel

    if isinstance(value, dict):
        props = schema.get("properties")
        extra = schema.get("additionalProperties")
        if props:
            out = {}
            for key, sub in value.items():
                if key in props:
                    name = _cel_property_name(key)
                    if name is not None:
                        out[celtypes.StringType(name)] = _to_cel(sub, props[key])
            return celtypes.MapType(out)
        if isinstance(extra, dict):
            return celtypes.MapType({celtypes.StringType(k): _to_cel(v, extra) for k, v in value.items()})
        return json_to_cel(value)
    if isinstance(value, list):
        items = schema.get("items") if isinstance(schema.get("items"), dict) else {}
        return celtypes.ListType([_to_cel(v, items) for v in value])
    return json_to_cel(value)


def _cel_property_name(name: str) -> str | None:
    if name in _CEL_RESERVED:
        return f"__{name}__"
    if not _CEL_ACCESSIBLE.match(name):
        return None
    return (name.replace("__", "__underscores__").replace(".", "__dot__")
            .replace("-", "__dash__").replace("/", "__slash__"))


def _check_cel(value: Any, schema: dict, path: str, programs: dict, errors: list[str]) -> None:
    """Evaluate x-kubernetes-validations bottom-up, ``self`` bound to each node that is present."""
    if value is None:
        return
    if isinstance(value, dict):
        props = schema.get("properties") or {}
        extra = schema.get("additionalProperties")
        for key, sub in value.items():
            sub_schema = props.get(key) if key in props else (extra if isinstance(extra, dict) else None)
            if sub_schema is not None:
                _check_cel(sub, sub_schema, _join(path, key), programs, errors)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for i, item in enumerate(value):
            _check_cel(item, schema["items"], f"{path}[{i}]", programs, errors)
    rules = schema.get("x-kubernetes-validations")
    if not rules:
        return
    from celpy.evaluation import CELEvalError

    this = None
    for rule in rules:
        program = programs.get(rule["rule"])
        if program is None:
            continue  # skipped: listed by skipped_cel_rules()
        if this is None:
            this = _to_cel(value, schema)
        try:
            result = program.evaluate({"self": this})
        except CELEvalError as ex:
            result = ex
        if isinstance(result, Exception):
            detail = str(result.args[0] if result.args else result)[:160]
            errors.append(f"{path}: CEL rule {rule['rule']!r} failed to evaluate: {detail}")
        elif not bool(result):
            errors.append(f"{path}: {rule.get('message') or rule['rule']} (CEL rule {rule['rule']!r})")


def _validate_custom(obj: dict, cv: CRDVersion) -> list[str]:
    problems: list[str] = []
    if not cv.served:
        problems.append(f"apiVersion: {cv.api_version} {cv.kind} is not served by the pinned CRD")
    defaulted = apply_defaults(copy.deepcopy(obj), cv.schema)
    schema_errors = list(cv.validator.iter_errors(defaulted))
    schema_errors.sort(key=lambda e: list(map(str, e.absolute_path)))
    problems += [f"{_fmt_path(e.absolute_path)}: {e.message}" for e in schema_errors]
    if isinstance(obj.get("metadata"), dict):
        problems += _schema_errors(_object_meta_validator(), obj["metadata"], ("metadata",))
    problems += _metadata_problems(obj)
    # The API server skips CEL when the object has type errors (CEL would see the wrong types).
    if not any(e.validator == "type" for e in schema_errors):
        _check_cel(defaulted, cv.schema, "<root>", cv.rules["programs"], problems)
    problems += _custom_rules(obj, cv)
    return problems


def _custom_rules(obj: dict, cv: CRDVersion) -> list[str]:
    """Extra checks for custom resources whose CRD embeds built-in types."""
    out: list[str] = []
    if cv.group == "leaderworkerset.x-k8s.io":
        # The LWS CRD inlines the PodTemplateSpec of a newer Kubernetes; the pods it creates must
        # be valid for the 1.34 cluster, so check each template as a 1.34 PodTemplate too.
        lwt = _get(obj, "spec", "leaderWorkerTemplate") or {}
        for name in ("leaderTemplate", "workerTemplate"):
            template = _get(lwt, name)
            if template is None:
                continue
            wrapped = {"apiVersion": "v1", "kind": "PodTemplate",
                       "metadata": {"name": "template"}, "template": template}
            where = f"spec.leaderWorkerTemplate.{name}"
            for p in _validate_builtin(wrapped, _builtin_validator("v1", "PodTemplate")):
                out.append(where + p[len("template"):] if p.startswith("template") else f"{where}: {p}")
    return out


# ---------------------------------------------------------------------------------------------
# Entry points
# ---------------------------------------------------------------------------------------------

def validate_object(obj: dict, *, crd_dir: Path | None = CRD_DIR) -> list[str]:
    """Every problem a Kubernetes 1.34 API server (with the pinned CRDs) would have with ``obj``.

    Each message starts with ``Kind/namespace/name`` and a field path. Empty list: valid.
    Without CRDs (``crd_dir`` None), a custom resource of a pinned group skips the test.
    """
    # First, so that a broken CRD directory fails even a test of built-in kinds.
    crds = load_crds(crd_dir) if crd_dir is not None else {}
    if not isinstance(obj, dict):
        return [f"<not an object>: expected a dict, got {type(obj).__name__}"]
    who = describe(obj)
    api_version, kind = obj.get("apiVersion"), obj.get("kind")
    if not isinstance(api_version, str) or not api_version or not isinstance(kind, str) or not kind:
        return [f"{who}: apiVersion and kind are required strings (got {api_version!r}, {kind!r})"]
    # CRDs first: the built-in schema files are named by the group's first label only.
    cv = crds.get((api_version, kind))
    if cv is not None:
        problems = _validate_custom(obj, cv)
    else:
        validator = _builtin_validator(api_version, kind)
        if validator is None and api_version.rpartition("/")[0] in _unchecked_groups(crd_dir):
            skip_without_crds()
        if validator is None:
            return [f"{who}: unknown apiVersion/kind {api_version} {kind}: neither a Kubernetes "
                    + f"{K8S_VERSION} built-in kind nor a pinned CRD" + (f" under {crd_dir}" if crd_dir else "")]
        problems = _validate_builtin(obj, validator)
    return [f"{who}: {p}" for p in problems]


def assert_valid(objects: Iterable[dict], *, crd_dir: Path | None = CRD_DIR) -> None:
    """Raise AssertionError listing every problem of every object (and duplicate identities).

    Without CRDs, the other objects are still checked: their problems fail the test, and only
    then do the unchecked custom resources skip it.
    """
    objects = list(objects)
    problems: list[str] = []
    seen: dict[tuple, int] = {}
    unchecked: BaseException | None = None
    for i, obj in enumerate(objects):
        try:
            problems += validate_object(obj, crd_dir=crd_dir)
        except pytest.skip.Exception as skip:
            unchecked = skip
        if isinstance(obj, dict):
            meta = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}
            group = str(obj.get("apiVersion", "")).rpartition("/")[0]
            ident = (group, obj.get("kind"), meta.get("namespace"), meta.get("name"))
            if ident in seen:
                problems.append(f"{describe(obj)}: objects {seen[ident]} and {i} have the same group, kind, namespace and name")
            else:
                seen[ident] = i
    if problems:
        raise AssertionError(
            f"{len(problems)} problem(s) in {len(objects)} Kubernetes object(s):\n  " + "\n  ".join(problems)
        )
    if unchecked is not None:
        raise unchecked


def integral_floats_to_int(value: Any) -> Any:
    """Pulumi mocks deliver numbers as doubles (8000 -> 8000.0); turn integral ones back to int."""
    if isinstance(value, dict):
        return {k: integral_floats_to_int(v) for k, v in value.items()}
    if isinstance(value, list):
        return [integral_floats_to_int(v) for v in value]
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value
