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

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic.alias_generators import to_camel

from ..api.errors import ModelplaneError

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
    count: int = 1
    selectors: tuple[DocSelector, ...] = ()


class DocMember(_Doc):
    role: Literal["Standalone", "Leader", "Worker"] = "Standalone"
    node_pool: str
    pods: int = Field(default=1, ge=1)
    device_requests: tuple[DocDeviceRequest, ...] = ()


class DocEngine(_Doc):
    name: str
    copies: int = Field(default=1, ge=1)
    phase: str | None = None
    members: tuple[DocMember, ...]


class DocReplica(_Doc):
    namespace: str
    deployment: str
    name: str
    cluster: str
    index: int = Field(ge=0)
    engines: tuple[DocEngine, ...]

    def node_cost(self) -> dict[str, int]:
        """Nodes this replica occupies per pool, at its stamped shape (claimless members cost 0)."""
        cost: dict[str, int] = {}
        for engine in self.engines:
            for member in engine.members:
                if member.device_requests:
                    cost[member.node_pool] = cost.get(member.node_pool, 0) + member.pods * engine.copies
        return cost


class PlacementDocument(_Doc):
    api_version: str = API_VERSION
    kind: str = KIND
    replicas: tuple[DocReplica, ...] = ()
    deployments: tuple[dict[str, Any], ...] = ()

    def to_json(self) -> str:
        return json.dumps(self.model_dump(by_alias=True, exclude_none=True, mode="json"), indent=2, sort_keys=False) + "\n"


def load_previous(source: str | Path | dict | None) -> PlacementDocument:
    """A previous placement from a file, a parsed JSON value (a stack output), or nothing."""
    if source is None:
        return PlacementDocument()
    where = "the previous placement"
    if isinstance(source, (str, Path)):
        where = str(source)
        try:
            data = json.loads(Path(source).read_text())
        except FileNotFoundError:
            raise ModelplaneError(f"previous placement {source} does not exist") from None
        except json.JSONDecodeError as error:
            raise ModelplaneError(f"{source} is not JSON ({error.msg} at line {error.lineno}); write it with "
                                  "`modelplane plan --output json` or `pulumi stack output placement --json`") from None
    else:
        data = source
    if not data:
        return PlacementDocument()
    try:
        document = PlacementDocument.model_validate(data)
    except ValidationError as error:
        first = error.errors()[0]
        at = ".".join(str(p) for p in first["loc"])
        raise ModelplaneError(f"{where} is not a placement document: {at}: {first['msg']} "
                              f"({len(error.errors())} problem(s))") from None
    if document.kind != KIND:
        raise ModelplaneError(f"{where} has kind {document.kind!r}; expected {KIND!r}")
    return document
