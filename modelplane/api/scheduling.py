"""`modelplane:scheduling`: fleet-wide settings of the fleet scheduler.

`packing` says how a pool's capacity is counted:

* `DeviceGranular` (default): every node of a pool carries its InferenceClass's DRA devices; a pod
  takes `count` devices per request from one node, so eight 1-GPU replicas share one 8-GPU node.
* `WholeNode`: the reference system's accounting (its issue #172): every pod that claims a DRA
  device is charged a whole node, whatever it asks for.

`placement` is the fleet's default placement policy; a deployment's own `placement` overrides it
field by field:

* `preferences`: ordered cluster tiers (`{clusterSelector: {matchLabels: ...}}`, `{}` matches
  every cluster). A cluster is in the first tier it matches; one matching none is not used. Fill
  takes the first tier until it is full (spreading within it), then overflows to the next; scale-in
  removes from the last tier first.
* `failback`: `Never` (default) keeps replicas where they are; `WhenRoom` moves at most
  `maxMovesPerPlan` (default 1) replicas per plan to a more preferred tier that can take them
  without evicting anything, the new replica made before the old one is removed.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from .common import ApiModel, LabelSelector, Rules

KEY = "scheduling"

Packing = Literal["DeviceGranular", "WholeNode"]
Failback = Literal["Never", "WhenRoom"]

MAX_PREFERENCES = 16
MAX_MOVES_PER_PLAN = 100


class Preference(ApiModel):
    cluster_selector: LabelSelector | None = None

    @property
    def labels(self) -> dict[str, str]:
        return dict(self.cluster_selector.match_labels or {}) if self.cluster_selector else {}


class PlacementPolicy(ApiModel):
    preferences: list[Preference] | None = Field(default=None, min_length=1, max_length=MAX_PREFERENCES)
    failback: Failback | None = None
    max_moves_per_plan: int | None = Field(default=None, ge=1, le=MAX_MOVES_PER_PLAN)

    @model_validator(mode="after")
    def _moves_need_failback(self) -> PlacementPolicy:
        rules = Rules()
        rules.check(
            self.max_moves_per_plan is None or self.failback != "Never",
            ["maxMovesPerPlan"],
            "only applies with failback: WhenRoom (failback: Never moves nothing); remove it or set failback: WhenRoom",
        )
        rules.raise_if_any()
        return self


class SchedulingConfig(ApiModel):
    packing: Packing = "DeviceGranular"
    placement: PlacementPolicy | None = None  # the fleet's default placement policy
