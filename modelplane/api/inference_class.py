"""InferenceClass: a hardware recipe, the devices a node of a pool has, in DRA's vocabulary."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from . import syntax
from .common import ApiModel, DnsSubdomain, Quantity, Rules, SingleLine
from .errors import shown

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1

ProviderName = Literal["GKE", "EKS", "AKS"]


class Accelerator(ApiModel):
    type: SingleLine = Field(min_length=1, max_length=63)
    count: int = Field(ge=1, le=16)


# A node's boot disk: the reference's 10..65536 GB (65,536 GB is also GKE's and EBS gp3's largest volume).
MAX_DISK_GB = 65536


class GKEProvisioning(ApiModel):
    machine_type: SingleLine = Field(min_length=1, max_length=128)
    accelerator: Accelerator
    disk_size_gb: int = Field(default=100, ge=10, le=MAX_DISK_GB)


class EKSProvisioning(ApiModel):
    instance_type: SingleLine = Field(min_length=1, max_length=128)
    accelerator: Accelerator  # informational: the instance family decides the GPU
    disk_size_gb: int = Field(default=100, ge=10, le=MAX_DISK_GB)


class AKSProvisioning(ApiModel):
    vm_size: SingleLine = Field(min_length=1, max_length=128)
    accelerator: Accelerator
    disk_size_gb: int = Field(default=100, ge=10, le=MAX_DISK_GB)


class Provisioning(ApiModel):
    """How to provision such a pool on a cloud. Omit for pools of Existing or Kind clusters."""

    provider: ProviderName
    gke: GKEProvisioning | None = None
    eks: EKSProvisioning | None = None
    aks: AKSProvisioning | None = None

    @model_validator(mode="after")
    def _one_block_for_the_provider(self) -> Provisioning:
        rules = Rules()
        wanted = self.provider.lower()
        rules.check(
            getattr(self, wanted) is not None, [wanted], f"provider {self.provider} requires the '{wanted}' block"
        )
        for other in ("gke", "eks", "aks"):
            if other != wanted and getattr(self, other) is not None:
                rules.fail(
                    [other], f"block '{other}' does not apply to provider {self.provider}; remove it or change provider"
                )
        rules.raise_if_any()
        return self

    def block(self) -> GKEProvisioning | EKSProvisioning | AKSProvisioning:
        return getattr(self, self.provider.lower())


class AttributeValue(ApiModel):
    """A typed DRA attribute: exactly one of string, version, bool, int."""

    string: str | None = Field(default=None, max_length=253)
    version: str | None = Field(default=None, max_length=32)
    bool_: bool | None = Field(default=None, alias="bool")
    int_: int | None = Field(default=None, alias="int", ge=INT64_MIN, le=INT64_MAX)

    @model_validator(mode="after")
    def _exactly_one(self) -> AttributeValue:
        rules = Rules()
        set_fields = [name for name, value in self._typed().items() if value is not None]
        rules.check(
            len(set_fields) == 1,
            [],
            "set exactly one of string, version, bool, int"
            + (f" (found {', '.join(set_fields)})" if set_fields else ""),
        )
        if self.version is not None:
            rules.check(
                syntax.semver_problem(self.version) is None, ["version"], syntax.semver_problem(self.version) or ""
            )
        rules.raise_if_any()
        return self

    def _typed(self) -> dict[str, object]:
        return {"string": self.string, "version": self.version, "bool": self.bool_, "int": self.int_}

    @property
    def kind(self) -> str:
        return next(name for name, value in self._typed().items() if value is not None)

    @property
    def value(self) -> object:
        return self._typed()[self.kind]


class CapacityValue(ApiModel):
    value: Quantity


class DeviceSpec(ApiModel):
    """One kind of device on every node of a pool, as a DRA driver would publish it in a ResourceSlice."""

    name: SingleLine = Field(min_length=1, max_length=63)
    claim: Literal["DRA", "Synthetic"] = "DRA"
    driver: DnsSubdomain = Field(min_length=1, max_length=63)
    device_class_name: DnsSubdomain | None = Field(default=None, min_length=1, max_length=253)
    count: int = Field(default=1, ge=1, le=64)
    attributes: dict[str, AttributeValue] = Field(default_factory=dict, max_length=32)
    capacity: dict[str, CapacityValue] = Field(default_factory=dict, max_length=32)

    @model_validator(mode="after")
    def _dra_rules(self) -> DeviceSpec:
        rules = Rules()
        rules.check(
            self.claim != "DRA" or self.device_class_name is not None,
            ["deviceClassName"],
            "is required when claim is DRA (the DeviceClass pods claim this device through, "
            "e.g. gpu.nvidia.com); use claim: Synthetic for hardware without a DRA driver",
        )
        for section in ("attributes", "capacity"):
            qualified: dict[str, str] = {}
            for key in getattr(self, section):
                if (problem := syntax.device_attribute_name_problem(key)) is not None:
                    rules.fail([section, key], f"name {problem}")
                    continue
                domain, _, ident = key.rpartition("/")
                full = f"{domain or self.driver}/{ident}"
                if full in qualified:
                    rules.fail(
                        [section, key],
                        f"is the same {section[:-1] if section == 'attributes' else section} as "
                        f"{shown(qualified[full])} (short names live under the driver's domain '{self.driver}'); keep one",
                    )
                qualified[full] = key
        for key, cap in self.capacity.items():
            rules.check(not syntax.is_negative_quantity(cap.value), ["capacity", key, "value"], "must not be negative")
        rules.raise_if_any()
        return self


class InferenceClass(ApiModel):
    description: str | None = None
    provisioning: Provisioning | None = None
    devices: list[DeviceSpec] = Field(min_length=1, max_length=16)

    @model_validator(mode="after")
    def _unique_devices(self) -> InferenceClass:
        rules = Rules()
        rules.unique_names("devices", self.devices, "device", " in a class")
        rules.raise_if_any()
        return self

    @property
    def claimable(self) -> bool:
        return any(d.claim == "DRA" for d in self.devices)
