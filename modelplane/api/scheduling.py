"""`modelplane:scheduling`: fleet-wide settings of the fleet scheduler.

`packing` says how a pool's capacity is counted:

* `DeviceGranular` (default): every node of a pool carries its InferenceClass's DRA devices; a pod
  takes `count` devices per request from one node, so eight 1-GPU replicas share one 8-GPU node.
* `WholeNode`: the reference system's accounting (its issue #172): every pod that claims a DRA
  device is charged a whole node, whatever it asks for.
"""
from __future__ import annotations

from typing import Literal

from .common import ApiModel

KEY = "scheduling"

Packing = Literal["DeviceGranular", "WholeNode"]


class SchedulingConfig(ApiModel):
    packing: Packing = "DeviceGranular"
