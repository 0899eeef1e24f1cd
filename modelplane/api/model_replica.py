"""ModelReplica: one placed replica, the shape the scheduler hands to the render and infra layers."""
from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from .common import ApiModel, DnsLabel, LocalRef, Rules
from .model_deployment import (DeviceSelector, MemberTemplate, Role, Serving, WorkerSpec, check_engine_shape,
                               check_prefill_decode)


class ResolvedDeviceRequest(ApiModel):
    """A member's device request resolved against a pool: what goes into the ResourceClaimTemplate."""

    name: DnsLabel
    device_class_name: str = Field(min_length=1, max_length=253)
    count: int = Field(default=1, ge=1, le=64)
    selectors: list[DeviceSelector] = Field(default_factory=list, max_length=8)


class ReplicaMember(ApiModel):
    role: Role = "Standalone"
    node_pool_name: str = Field(min_length=1)
    device_requests: list[ResolvedDeviceRequest] | None = Field(default=None, min_length=1, max_length=16)
    worker: WorkerSpec | None = None
    template: MemberTemplate

    @property
    def pods(self) -> int:
        return self.worker.nodes if self.role == "Worker" and self.worker else 1


class ReplicaEngine(ApiModel):
    name: DnsLabel
    copies: int = Field(default=1, ge=1, le=64)
    phase: Literal["Prefill", "Decode"] | None = None
    members: list[ReplicaMember] = Field(min_length=1, max_length=2)

    @model_validator(mode="after")
    def _shape(self) -> "ReplicaEngine":
        rules = Rules()
        check_engine_shape(rules, [m.role for m in self.members], [])
        rules.check(any(m.device_requests for m in self.members), ["members"],
                    "at least one member must claim devices (deviceRequests)")
        rules.raise_if_any()
        return self

    def node_cost(self) -> int:
        """Nodes this engine occupies: pods x copies for every member that claims a DRA device."""
        return sum(m.pods * self.copies for m in self.members if m.device_requests)


class ModelReplicaSpec(ApiModel):
    cluster_name: str = Field(min_length=1)
    model_cache_ref: LocalRef | None = None
    serving: Serving | None = None
    engines: list[ReplicaEngine] = Field(min_length=1, max_length=8)

    @model_validator(mode="after")
    def _engines(self) -> "ModelReplicaSpec":
        rules = Rules()
        rules.unique_names("engines", self.engines, "engine")
        check_prefill_decode(rules, self.serving.mode if self.serving else "Unified", [e.phase for e in self.engines])
        rules.raise_if_any()
        return self


class ModelReplica(ApiModel):
    """A placed replica: identity (namespace, deployment, cluster, index) plus its spec."""

    name: str = Field(min_length=1, max_length=63)
    namespace: DnsLabel
    deployment: str = Field(min_length=1)
    index: int = Field(ge=0)
    labels: dict[str, str] = Field(default_factory=dict)
    spec: ModelReplicaSpec
