"""ModelDeployment: what an ML team wants served, and on what hardware, in DRA-style CEL."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, Field, model_validator

from . import syntax
from .common import (
    ApiModel,
    DnsLabel,
    DnsSubdomain,
    LabelSelector,
    LocalRef,
    Rules,
    SingleLine,
    UserAnnotations,
    UserLabels,
    _checked,
    duplicates,
)
from .errors import shown
from .scheduling import PlacementPolicy

ENGINE_CONTAINER = "engine"
MAX_CEL_LENGTH = 10240
MAX_LIST = 1024  # command, args, env: far beyond any engine's, and it keeps a broken list's errors few

Role = Literal["Standalone", "Leader", "Worker"]


class Toleration(ApiModel):
    key: str | None = None
    operator: Literal["Exists", "Equal"] = "Equal"
    value: str | None = None
    effect: Literal["NoSchedule", "NoExecute"] | None = None

    @model_validator(mode="after")
    def _operator_rules(self) -> Toleration:
        rules = Rules()
        if self.operator == "Equal":
            rules.check(bool(self.key), ["key"], "is required with operator Equal (or use operator: Exists)")
        else:
            rules.check(self.value is None, ["value"], "must not be set with operator Exists (it matches any value)")
        rules.raise_if_any()
        return self

    def tolerates(self, key: str, value: str | None, effect: str) -> bool:
        """Kubernetes' rule: effect must match if set; Exists matches any value; an empty key with Exists matches all."""
        if self.effect and self.effect != effect:
            return False
        if self.operator == "Exists":
            return not self.key or self.key == key
        return self.key == key and (self.value or "") == (value or "")


class DeviceSelector(ApiModel):
    cel: str = Field(min_length=1, max_length=MAX_CEL_LENGTH)


class DeviceRequestSpec(ApiModel):
    """One DRA device request of a member: the name becomes the DeviceRequest name in the ResourceClaim."""

    name: DnsLabel
    count: int = Field(default=1, ge=1, le=64)
    selectors: list[DeviceSelector] = Field(default_factory=list, min_length=1, max_length=8)  # absent = any device


class NodeSelector(ApiModel):
    devices: list[DeviceRequestSpec] = Field(min_length=1, max_length=16)

    @model_validator(mode="after")
    def _unique_requests(self) -> NodeSelector:
        rules = Rules()
        rules.unique_names("devices", self.devices, "request", " in a member")
        rules.raise_if_any()
        return self


class WorkerSpec(ApiModel):
    nodes: int = Field(ge=1, le=63)  # worker pods, one per node


ConfigKey = Annotated[str, AfterValidator(_checked(syntax.config_key_problem))]
EnvVarName = Annotated[str, AfterValidator(_checked(syntax.env_var_name_problem))]


class SecretKeySelector(ApiModel):
    name: DnsSubdomain = Field(min_length=1)
    key: ConfigKey = Field(min_length=1)
    optional: bool | None = None


class FieldSelector(ApiModel):
    field_path: SingleLine = Field(min_length=1)
    api_version: SingleLine | None = None


class EnvVarSource(ApiModel):
    secret_key_ref: SecretKeySelector | None = None
    config_map_key_ref: SecretKeySelector | None = None
    field_ref: FieldSelector | None = None

    @model_validator(mode="after")
    def _exactly_one(self) -> EnvVarSource:
        rules = Rules()
        chosen = [n for n in ("secretKeyRef", "configMapKeyRef", "fieldRef") if getattr(self, _snake(n)) is not None]
        rules.check(len(chosen) == 1, [], "set exactly one of secretKeyRef, configMapKeyRef, fieldRef")
        rules.raise_if_any()
        return self


def _snake(camel: str) -> str:
    return "".join(f"_{c.lower()}" if c.isupper() else c for c in camel)


class EnvVar(ApiModel):
    name: EnvVarName = Field(min_length=1)
    value: str | None = None
    value_from: EnvVarSource | None = None

    @model_validator(mode="after")
    def _value_or_source(self) -> EnvVar:
        rules = Rules()
        rules.check(self.value is None or self.value_from is None, ["valueFrom"], "set value or valueFrom, not both")
        rules.raise_if_any()
        return self


class Container(ApiModel):
    name: str = Field(min_length=1)
    image: SingleLine = Field(min_length=1)
    command: list[str] | None = Field(default=None, max_length=MAX_LIST)
    args: list[str] | None = Field(default=None, max_length=MAX_LIST)
    env: list[EnvVar] | None = Field(default=None, max_length=MAX_LIST)

    @model_validator(mode="after")
    def _env_unique(self) -> Container:
        rules = Rules()
        for i, name in duplicates(e.name for e in self.env or []):
            rules.fail(["env", i, "name"], f"variable {shown(name)} is set twice")
        rules.raise_if_any()
        return self


class LocalObjectReference(ApiModel):
    name: DnsSubdomain = Field(min_length=1)


class PodSpec(ApiModel):
    containers: list[Container] = Field(min_length=1, max_length=1)
    image_pull_secrets: list[LocalObjectReference] | None = Field(default=None, max_length=64)

    @model_validator(mode="after")
    def _engine_container(self) -> PodSpec:
        rules = Rules()
        rules.check(
            self.containers[0].name == ENGINE_CONTAINER,
            ["containers", 0, "name"],
            f"the one container must be named '{ENGINE_CONTAINER}' (got {shown(self.containers[0].name)})",
        )
        rules.raise_if_any()
        return self

    @property
    def engine(self) -> Container:
        return self.containers[0]


class PodMetadata(ApiModel):
    labels: UserLabels | None = None
    annotations: UserAnnotations | None = None


class MemberTemplate(ApiModel):
    metadata: PodMetadata | None = None
    spec: PodSpec


class Member(ApiModel):
    role: Role = "Standalone"
    node_selector: NodeSelector | None = None
    worker: WorkerSpec | None = None
    template: MemberTemplate

    @model_validator(mode="after")
    def _worker_block(self) -> Member:
        rules = Rules()
        rules.check(
            self.worker is None or self.role == "Worker", ["worker"], "is only allowed on a member with role Worker"
        )
        rules.raise_if_any()
        return self

    @property
    def pods(self) -> int:
        """Pods of one copy of this member: worker.nodes for Workers (1 when unset), else 1."""
        return self.worker.nodes if self.role == "Worker" and self.worker else 1


def check_engine_shape(rules: Rules, roles: list[str], prefix: list) -> None:
    """Exactly one Standalone member, or one Leader plus one Worker (at most two members)."""
    if roles.count("Standalone") == 1 and len(roles) == 1:
        return
    if roles.count("Leader") == 1 and roles.count("Worker") >= 1 and "Standalone" not in roles:
        return
    rules.fail(
        prefix + ["members"],
        "an engine is exactly one Standalone member, or one Leader plus one Worker "
        f"(roles found: {', '.join(roles) or 'none'})",
    )


class Engine(ApiModel):
    name: DnsLabel
    copies: int = Field(default=1, ge=1, le=64)
    phase: Literal["Prefill", "Decode"] | None = None
    members: list[Member] = Field(min_length=1, max_length=2)

    @model_validator(mode="after")
    def _shape(self) -> Engine:
        rules = Rules()
        check_engine_shape(rules, [m.role for m in self.members], [])
        rules.check(
            any(m.node_selector for m in self.members),
            ["members"],
            "at least one member needs a nodeSelector with the devices it claims",
        )
        rules.raise_if_any()
        return self


class Serving(ApiModel):
    mode: Literal["Unified", "PrefillDecode"]


def check_prefill_decode(rules: Rules, mode: str, phases: list[str | None]) -> None:
    if mode == "PrefillDecode":
        rules.check(len(phases) == 2, ["engines"], f"PrefillDecode needs exactly 2 engines (got {len(phases)})")
        rules.check(
            phases.count("Prefill") == 1, ["engines"], "PrefillDecode needs exactly one engine with phase: Prefill"
        )
        rules.check(
            phases.count("Decode") == 1, ["engines"], "PrefillDecode needs exactly one engine with phase: Decode"
        )
    else:
        for i, phase in enumerate(phases):
            rules.check(phase is None, ["engines", i, "phase"], "is only allowed with serving.mode: PrefillDecode")


class DeploymentSpec(ApiModel):
    cluster_selector: LabelSelector | None = None
    model_cache_ref: LocalRef | None = None
    serving: Serving | None = None
    tolerations: list[Toleration] | None = Field(default=None, max_length=64)
    engines: list[Engine] = Field(min_length=1, max_length=8)

    @model_validator(mode="after")
    def _engines(self) -> DeploymentSpec:
        rules = Rules()
        rules.unique_names("engines", self.engines, "engine")
        check_prefill_decode(rules, self.serving_mode, [e.phase for e in self.engines])
        rules.raise_if_any()
        return self

    @property
    def serving_mode(self) -> str:
        return self.serving.mode if self.serving else "Unified"


class DeploymentMetadata(ApiModel):
    labels: UserLabels | None = None


class DeploymentTemplate(ApiModel):
    metadata: DeploymentMetadata | None = None
    spec: DeploymentSpec


# Replica objects are named `<deployment>-<5 hex>` and suffixed up to `-pool`/`-epp`, and the
# name is the value of the modelplane.ai/deployment label: 53 keeps every derived name legal.
MAX_DEPLOYMENT_NAME = 53


class ModelDeployment(ApiModel):
    replicas: int = Field(ge=0, le=10)  # 0 parks the model: its config stays, no replica runs
    template: DeploymentTemplate
    placement: PlacementPolicy | None = None  # preference tiers and failback; fields unset: the fleet's default

    @property
    def spec(self) -> DeploymentSpec:
        return self.template.spec

    @property
    def labels(self) -> dict[str, str]:
        return dict(self.template.metadata.labels or {}) if self.template.metadata else {}


def deployment_name_problem(name: str) -> str | None:
    if problem := syntax.dns_1035_label_problem(name, MAX_DEPLOYMENT_NAME):
        return f"deployment name {problem} (replica objects derive their names from it)"
    return None
