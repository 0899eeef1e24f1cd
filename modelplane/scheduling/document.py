"""The placement document: the scheduler's output, and its input on the next run.

The Pulumi program exports it as the stack output `placement` and reads it back (a stack
reference to itself); `modelplane plan --previous FILE` takes the same JSON, for example from
`pulumi stack output placement --json > prev.json`. Only `replicas` is read back; `deployments`
is a summary for people and tools.

    {"apiVersion": "modelplane.ai/v1alpha1", "kind": "Placement",
     "replicas": [{"namespace": "ml-team", "deployment": "mock-demo", "name": "mock-demo-5ab63",
                   "cluster": "gpu-eu-west", "index": 0,
                   "engines": [{"name": "mock", "copies": 1, "members": [
                       {"role": "Standalone", "nodePool": "gpu-eu-west", "pods": 1,
                        "deviceRequests": [{"name": "gpu", "deviceClassName": "gpu.example.com",
                                            "count": 1, "selectors": [{"cel": "..."}]}]}]}]}],
     "deployments": [{"namespace": "ml-team", "name": "mock-demo", "replicas": 2, "scheduled": 2,
                      "conditions": [...]}]}
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator
from pydantic.alias_generators import to_camel

from ..api.errors import ModelplaneError, shown
from ..api.textfile import read_text

API_VERSION = "modelplane.ai/v1alpha1"
KIND = "Placement"


class _Doc(BaseModel):
    # Not strict: documents read back from Pulumi stack outputs carry numbers as floats (2.0).
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="ignore", frozen=True)


class DocSelector(_Doc):
    cel: str


class DocDeviceRequest(_Doc):
    name: str
    device_class_name: str
    count: int = Field(default=1, ge=1, le=64)  # bounds as the config's: a hand-made document cannot blow up the ledger
    selectors: tuple[DocSelector, ...] = ()


class DocMember(_Doc):
    role: Literal["Standalone", "Leader", "Worker"] = "Standalone"
    node_pool: str
    pods: int = Field(default=1, ge=1, le=64)
    device_requests: tuple[DocDeviceRequest, ...] = ()


class DocEngine(_Doc):
    name: str
    copies: int = Field(default=1, ge=1, le=64)
    phase: str | None = None
    members: tuple[DocMember, ...]


class DocReplica(_Doc):
    namespace: str
    deployment: str
    name: str
    cluster: str
    index: int = Field(ge=0, le=1000)
    engines: tuple[DocEngine, ...]

    def node_cost(self) -> dict[str, int]:
        """Nodes this replica occupies per pool, at its stamped shape."""
        return pool_cost(self.engines)

    def device_cost(self) -> dict[str, int]:
        """DRA devices this replica requests per pool, at its stamped shape."""
        return pool_devices(self.engines)


def pool_devices(engines) -> dict[str, int]:
    """DRA devices per pool that engines request: pods x copies x the member's request counts."""
    cost: dict[str, int] = {}
    for engine in engines:
        for member in engine.members:
            if member.device_requests:
                devices = member.pods * engine.copies * sum(r.count for r in member.device_requests)
                cost[member.node_pool] = cost.get(member.node_pool, 0) + devices
    return cost


def pool_cost(engines) -> dict[str, int]:
    """Nodes per pool that engines occupy (as stamped in a document, or as planned): each member
    claiming a DRA device costs pods x copies nodes; a claimless member costs none."""
    cost: dict[str, int] = {}
    for engine in engines:
        for member in engine.members:
            if member.device_requests:
                cost[member.node_pool] = cost.get(member.node_pool, 0) + member.pods * engine.copies
    return cost


class PlacementDocument(_Doc):
    api_version: str = API_VERSION
    kind: str = KIND
    replicas: tuple[DocReplica, ...] = ()
    deployments: tuple[dict[str, Any], ...] = ()

    @model_validator(mode="after")
    def _one_entry_per_replica(self) -> PlacementDocument:
        """A hand-merged document may repeat a replica: identical copies collapse into one; two
        different entries for one (namespace, deployment, cluster, index) are refused, since which
        one to believe would depend on their order."""
        seen: dict[tuple, DocReplica] = {}
        unique = []
        for replica in self.replicas:
            identity = (replica.namespace, replica.deployment, replica.cluster, replica.index)
            first = seen.setdefault(identity, replica)
            if first is replica:
                unique.append(replica)
            elif first != replica:
                raise ValueError(
                    f"replica {replica.namespace}/{replica.deployment} on cluster {replica.cluster} "
                    f"index {replica.index} is listed twice with different contents (names "
                    f"{first.name!r} and {replica.name!r}); keep the entry that matches what runs, "
                    "or start from `pulumi stack output placement --json`"
                )
        if len(unique) != len(self.replicas):
            object.__setattr__(self, "replicas", tuple(unique))  # frozen model; still being built
        return self

    def to_json(self) -> str:
        return (
            json.dumps(self.model_dump(by_alias=True, exclude_none=True, mode="json"), indent=2, sort_keys=False) + "\n"
        )


def load_previous(source: str | Path | dict | None) -> PlacementDocument:
    """A previous placement from a file, a parsed JSON value (a stack output), or nothing.

    A file is not trusted: only a regular file of at most 16 MiB (the placement of 200 clusters x
    2,000 deployments is about 5 MiB), strict UTF-8, JSON nested at most 64 deep, with at most
    1,000,000 objects and lists and 100,000 replicas; anything else is a clear ModelplaneError.
    """
    if source is None:
        return PlacementDocument()
    where = "the previous placement"
    if isinstance(source, (str, Path)):
        where = str(source)
        text = read_text(
            Path(source),
            "previous placement",
            MAX_PREVIOUS_BYTES,
            "the placement of 200 clusters and 2,000 deployments is about 5 MiB",
        )
        try:
            data = json.loads(text)
        except json.JSONDecodeError as error:
            raise ModelplaneError(
                f"{source} is not JSON ({error.msg} at line {error.lineno}); write it with "
                "`modelplane plan --output json` or `pulumi stack output placement --json`"
            ) from None
        except RecursionError:
            raise ModelplaneError(
                f"{source} is JSON nested too deeply to read; a placement nests about 11 levels"
            ) from None
        except ValueError:  # an integer literal past Python's 4300-digit conversion limit
            raise ModelplaneError(
                f"{source} holds a number too large to read; a placement's numbers are small counts and indexes"
            ) from None
    else:
        data = source
    if not data:
        return PlacementDocument()
    if (problem := _shape_problem(data)) is not None:
        raise ModelplaneError(f"{where} is not a placement document: {problem}")
    replicas = data.get("replicas") if isinstance(data.get("replicas"), list) else []
    at: tuple = ()
    try:
        # Replica by replica first, stopping at the first bad one: pydantic would build an error for
        # every field of every replica of a broken document before reporting any.
        validated = []
        for i, replica in enumerate(replicas):
            at = ("replicas", i)
            validated.append(DocReplica.model_validate(replica))
        at = ()
        # Validated replicas are taken as they are (pydantic does not revalidate model instances).
        document = PlacementDocument.model_validate({**data, "replicas": validated} if replicas else data)
    except ValidationError as error:
        first = error.errors(include_url=False, include_input=False)[0]
        where_in = ".".join(str(p) for p in at + tuple(first["loc"]))
        raise ModelplaneError(
            f"{where} is not a placement document: {where_in + ': ' if where_in else ''}{first['msg']}"
        ) from None
    if document.kind != KIND:
        raise ModelplaneError(f"{where} has kind {shown(document.kind)}; expected {KIND!r}")
    return document


MAX_PREVIOUS_BYTES = 16 << 20
_MAX_DEPTH = 64
_MAX_CONTAINERS = 1_000_000  # objects and lists; the placement of 200 clusters x 2,000 deployments has 52,000
_MAX_ITEMS = 100_000  # replicas or deployments; that placement has 4,527 and 2,000
_MAX_INNER_ITEMS = 1_000  # any other list (a replica has at most 8 engines, 2 members, 16 requests)


def _shape_problem(data: Any) -> str | None:
    """Bounds checked before pydantic, which would otherwise build an error for each of millions of items."""
    if not isinstance(data, dict):
        return f"it must be a JSON object (got {shown(data)})"
    for key in ("replicas", "deployments"):
        if isinstance(data.get(key), list) and len(data[key]) > _MAX_ITEMS:
            return f"{key} has {len(data[key]):,} entries; the limit is {_MAX_ITEMS:,}"
    if isinstance(data.get("deployments"), list):
        for i, entry in enumerate(data["deployments"]):
            if not isinstance(entry, dict):
                return f"deployments.{i}: must be a JSON object (got {shown(entry)})"
    containers, todo = 0, [(data, 1)]
    while todo:  # iterative: the document may nest deeper than Python recurses
        value, depth = todo.pop()
        if isinstance(value, (dict, list)):
            containers += 1
            if depth > _MAX_DEPTH:
                return f"it nests more than {_MAX_DEPTH} levels deep; a placement nests about 11"
            if containers > _MAX_CONTAINERS:
                return f"it holds more than {_MAX_CONTAINERS:,} objects and lists"
            if isinstance(value, list) and depth > 2 and len(value) > _MAX_INNER_ITEMS:
                return f"a list of {len(value):,} entries (at nesting level {depth}); the limit is {_MAX_INNER_ITEMS:,}"
            todo.extend((item, depth + 1) for item in (value.values() if isinstance(value, dict) else value))
        elif isinstance(value, int) and not isinstance(value, bool) and not -(2**63) <= value < 2**63:
            return f"it holds a number ({shown(value)}) larger than 64 bits"
    return None
