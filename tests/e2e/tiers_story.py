"""Preference tiers against the real engine and fleet (docs/placement.md, "Preference tiers"): overflow to the
second tier, scale-in from it, failback with `WhenRoom` one move per plan, make-before-break, then no flapping.

The story runs on the e2e stack's `tier-*` pools (class tier-gpu: two devices a node, two nodes a cluster), which
no other deployment of the stack can use, and removes its deployments at the end, so the later steps of the
scenario see the fleet as the drain story left it. Tier 1 is gpu-eu-west, tier 2 gpu-us-east.

    1. tier-filler (2 replicas, tier 1 only) and tiered (5 replicas, failback Never): tier 1's four devices
       fill (2 + 2), tiered's other 3 overflow to tier 2.
    2. `modelplane scale` tiered to 4: the replica removed is a tier-2 one.
    3. `modelplane scale` tier-filler to 0: tier 1 has room for 2, and failback Never moves nothing. (Room is
       made in its own `up`. Under WhenRoom the plan that scales tier-filler down would not move a replica
       either: the scheduler waits a plan for room freed in the same plan, since Pulumi creates a replacement,
       awaiting its rollout, before it deletes tier-filler's pods, which still hold the devices.)
    4. failback WhenRoom, maxMovesPerPlan 1: one `up` moves exactly one replica back (the limit, not the room,
       binds); its replacement completes before the old replica is deleted (the engine's event order).
    5. the next `up` moves the last tier-2 replica; 6. the one after changes nothing (no flapping).
    7. both deployments removed: back to the fleet of the drain story.

Every step's expectation is also what `modelplane plan --previous <the stack's placement output>` predicts, and
the stack outputs (placement, capacity, deployment status) must say the same as the API servers.
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterable

import yaml

from .kube_api import object_path

if TYPE_CHECKING:  # the scenario imports this module; imported lazily at run time
    from .scenario import Scenario

NAMESPACE = "ml-team"
TIERED = "tiered"
FILLER = "tier-filler"  # sorts before `tiered`: filled first when both are added in one plan
TIER_ONE, TIER_TWO = "gpu-eu-west", "gpu-us-east"
REGION_LABEL = "modelplane.ai/region"
TIER_POOLS = {TIER_ONE: "tier-eu-west", TIER_TWO: "tier-us-east"}
POOL_LABEL = "modelplane.ai/pool"
MAX_MOVES = 1
# one device of class tier-gpu (12Gi): the stack's other classes have 16Gi (the gang's), 24Gi and 80Gi, so only the
# tier pools match
TIER_GPU_SELECTOR = 'device.capacity["gpu.example.com"].memory.compareTo(quantity("12Gi")) <= 0'
IMAGE = "python@sha256:6d43704baacd1bfbe7c295d7f13079d5d8104ed33568873133f8fc69980419df"


# --- the config edits (pure) -------------------------------------------------------------------------------
def _deployment(replicas: int, preferences: list[dict]) -> dict:
    return {
        "replicas": replicas,
        "placement": {"preferences": preferences, "failback": "Never"},
        "template": {"spec": {"engines": [{"name": "mock", "members": [{
            "role": "Standalone",
            "nodeSelector": {"devices": [{"name": "gpu", "count": 1, "selectors": [{"cel": TIER_GPU_SELECTOR}]}]},
            "template": {"spec": {"containers": [{"name": "engine", "image": IMAGE,
                                                  "command": ["python", "-m", "http.server", "8000"]}]}},
        }]}]}},
    }


def _tier(cluster: str) -> dict:
    return {"clusterSelector": {"matchLabels": {REGION_LABEL: cluster.removeprefix("gpu-")}}}


def add_story_deployments(document: dict) -> dict:
    """The stack document with tier-filler (tier 1 only) and tiered (tier 1, then tier 2) added."""
    deployments = document["config"]["modelplane:modelDeployments"].setdefault(NAMESPACE, {})
    deployments[FILLER] = _deployment(2, [_tier(TIER_ONE)])
    deployments[TIERED] = _deployment(5, [_tier(TIER_ONE), _tier(TIER_TWO)])
    return document


def set_failback_when_room(document: dict, max_moves: int = MAX_MOVES) -> dict:
    placement = document["config"]["modelplane:modelDeployments"][NAMESPACE][TIERED]["placement"]
    placement.update({"failback": "WhenRoom", "maxMovesPerPlan": max_moves})
    return document


def remove_story_deployments(document: dict) -> dict:
    deployments = document["config"]["modelplane:modelDeployments"][NAMESPACE]
    for name in (FILLER, TIERED):
        deployments.pop(name, None)
    return document


# --- reading a placement (pure) ------------------------------------------------------------------------------
Split = dict[str, list[str]]  # cluster -> sorted replica names of one deployment


def split_of(replicas: Iterable[dict], deployment: str, namespace: str = NAMESPACE) -> Split:
    """A deployment's replicas per cluster, from a placement document's `replicas` (plan or stack output)."""
    out: dict[str, list[str]] = {}
    for replica in replicas:
        if replica["namespace"] == namespace and replica["deployment"] == deployment:
            out.setdefault(replica["cluster"], []).append(replica["name"])
    return {cluster: sorted(names) for cluster, names in sorted(out.items())}


def counts(split: Split) -> dict[str, int]:
    return {cluster: len(names) for cluster, names in split.items() if names}


def located(split: Split) -> dict[str, str]:
    """replica name -> cluster"""
    return {name: cluster for cluster, names in split.items() for name in names}


@dataclass(frozen=True)
class Change:
    gone: dict[str, str]   # replica name -> the cluster it left
    new: dict[str, str]    # replica name -> the cluster it came to

    def describe(self) -> str:
        parts = [f"-{n} ({c})" for n, c in sorted(self.gone.items())] + [f"+{n} ({c})" for n, c in sorted(self.new.items())]
        return ", ".join(parts) or "none"


def change(before: Split, after: Split) -> Change:
    was, now = located(before), located(after)
    return Change({n: c for n, c in was.items() if n not in now}, {n: c for n, c in now.items() if n not in was})


def scale_in_problems(before: Split, after: Split, tier_two: str = TIER_TWO) -> list[str]:
    """Scaling in by one removes exactly one replica, from the last tier, and touches nothing else."""
    moved = change(before, after)
    problems = []
    if len(moved.gone) != 1 or moved.new:
        problems.append(f"expected exactly one replica removed and none added, got {moved.describe()}")
    problems += [f"{name} was removed from {cluster}, not from tier 2 ({tier_two})"
                 for name, cluster in moved.gone.items() if cluster != tier_two]
    return problems


def failback_problems(before: Split, after: Split, max_moves: int, tier_one: str = TIER_ONE,
                      tier_two: str = TIER_TWO, expect_moves: int | None = None) -> list[str]:
    """A failback step: replicas leave tier 2 only, as many arrive in tier 1, no more than `max_moves` (and
    exactly `expect_moves` when given)."""
    moved = change(before, after)
    problems = []
    if any(c != tier_two for c in moved.gone.values()) or any(c != tier_one for c in moved.new.values()):
        problems.append(f"a move must go from {tier_two} to {tier_one}: {moved.describe()}")
    if len(moved.gone) != len(moved.new):
        problems.append(f"{len(moved.gone)} replicas left but {len(moved.new)} arrived: {moved.describe()}")
    if len(moved.new) > max_moves:
        problems.append(f"{len(moved.new)} replicas moved in one plan, maxMovesPerPlan is {max_moves}")
    if expect_moves is not None and len(moved.new) != expect_moves:
        problems.append(f"expected {expect_moves} move(s), got {len(moved.new)}: {moved.describe()}")
    return problems


def replacement_before_removal(events: list[dict], new_replica: str, new_cluster: str, old_replica: str,
                               ) -> tuple[bool, str]:
    """In the engine's event order: the new replica's engine Deployment is created (rolled out, pods Ready: the
    provider awaits it) before any object of the old replica is deleted, on its cluster or the front door's."""
    done = [e for e in events if e.get("kind") == "done"]
    created = [e["seq"] for e in done if e["op"] == "create" and e["type"].endswith(":Deployment")
               and e["urn"].rsplit("::", 1)[-1].startswith(f"{new_cluster}/")
               and _of_replica(e["urn"], new_replica) and not e["urn"].endswith("-epp")]
    removed = [e["seq"] for e in done if e["op"] == "delete" and _of_replica(e["urn"], old_replica)]
    ok = bool(created) and bool(removed) and max(created) < min(removed)
    return ok, (f"{new_replica} ready on {new_cluster} at event {max(created) if created else None}, "
                f"first deletion of {old_replica} at event {min(removed) if removed else None} "
                f"({len(removed)} deletions)")


def _of_replica(urn: str, replica: str) -> bool:
    """A replica's objects are named after it: `<replica>` or `<replica>-<suffix>` (the resource name's last part)."""
    name = urn.rsplit("::", 1)[-1].rsplit("/", 1)[-1]
    return name == replica or name.startswith(f"{replica}-")


def allocated_devices(node_devices: set[tuple[str, str, str]], claims: Iterable[dict]) -> int:
    """How many of these devices (driver, pool, device) the ResourceClaims hold allocated."""
    return sum(1 for claim in claims
               for r in claim.get("status", {}).get("allocation", {}).get("devices", {}).get("results", [])
               if (r["driver"], r["pool"], r["device"]) in node_devices)


# --- the story against the fleet -------------------------------------------------------------------------------
class TiersStory:
    def __init__(self, scenario: "Scenario"):
        from .scenario import _engine_error, _proposed, _short  # the scenario imports this module first
        self.s = scenario
        self.report = scenario.report
        self._engine_error, self._proposed, self._short = _engine_error, _proposed, _short
        self.previous = scenario.work / "tiers-previous.json"

    # what each view says
    def api_split(self, deployment: str, available_only: bool = True) -> Split:
        """Replicas per cluster as the API servers hold them: engine Deployments (that are available)."""
        out: Split = {}
        for cluster in (TIER_ONE, TIER_TWO):
            objects = self.s.api(cluster).list(object_path("apps/v1", "deployments", NAMESPACE),
                                               label_selector=f"modelplane.ai/deployment={deployment}")
            names = sorted(o["spec"]["template"]["metadata"]["labels"]["modelplane.ai/serving"] for o in objects
                           if "modelplane.ai/serving" in o["spec"]["template"]["metadata"].get("labels", {})
                           and (not available_only
                                or (o.get("status", {}).get("availableReplicas") or 0) >= (o["spec"].get("replicas") or 1)))
            if names:
                out[cluster] = names
        return out

    def tier_one_devices(self) -> tuple[int, int]:
        """(allocated, declared) devices of tier 1's tier pool, from its nodes' ResourceSlices and the claims."""
        api = self.s.api(TIER_ONE)
        nodes = api.list(object_path("v1", "nodes"), label_selector=f"{POOL_LABEL}={TIER_POOLS[TIER_ONE]}")
        devices: set[tuple[str, str, str]] = set()
        for node in nodes:
            for piece in api.list(object_path("resource.k8s.io/v1", "resourceslices"),
                                  field_selector=f"spec.nodeName={node['metadata']['name']}"):
                devices |= {(piece["spec"]["driver"], piece["spec"]["pool"]["name"], d["name"])
                            for d in piece["spec"].get("devices", [])}
        claims = api.list(object_path("resource.k8s.io/v1", "resourceclaims", NAMESPACE))
        return allocated_devices(devices, claims), len(devices)

    def tier_one_devices_settled(self, want: int, seconds: float = 60) -> tuple[int, int]:
        """Deleted pods release their claims asynchronously (kubelet stand-in, then the claim controller)."""
        deadline = time.monotonic() + seconds
        while True:
            allocated, declared = self.tier_one_devices()
            if allocated == want or time.monotonic() > deadline:
                return allocated, declared
            time.sleep(1)

    def outputs(self) -> tuple[Split, dict, dict]:
        """tiered's placement, its status and tier 1's tier pool capacity, from the stack outputs."""
        outputs = self.s.project.outputs()
        split = split_of(outputs.get("placement", {}).get("replicas", []), TIERED)
        status = outputs.get("deployments", {}).get(f"{NAMESPACE}/{TIERED}", {})
        capacity = outputs.get("capacity", {}).get("pools", {}).get(f"{TIER_ONE}/{TIER_POOLS[TIER_ONE]}", {})
        return split, status, capacity

    def predicted(self) -> dict:
        """What `modelplane plan` says the next `up` does, against the placement the stack last exported."""
        placement = self.s.project.outputs().get("placement") or {"replicas": []}
        self.previous.write_text(json.dumps(placement))
        return self.s.plan(previous=self.previous)

    # the steps
    def edit(self, change_document) -> None:
        document = yaml.safe_load(self.s.project.stack_file.read_text())
        self.s.project.stack_file.write_text(yaml.safe_dump(change_document(document), sort_keys=False))

    def up(self, what: str) -> tuple[Any, dict, Split]:
        """`modelplane plan`'s prediction, then `pulumi up`; returns the run, the prediction and tiered's API split."""
        plan = self.predicted()
        run = self.s.engine(f"pulumi up (tiers: {what})", "up")
        return run, plan, self.api_split(TIERED)

    def agree(self, plan: dict, api: Split) -> list[str]:
        """The API servers, the plan and the stack outputs name the same replicas on the same clusters."""
        planned = split_of(plan["replicas"], TIERED)
        exported, _, _ = self.outputs()
        problems = []
        if planned != api:
            problems.append(f"plan {planned} != API servers {api}")
        if exported != api:
            problems.append(f"outputs {exported} != API servers {api}")
        return problems

    def scale(self, deployment: str, replicas: int) -> str:
        edit = self.s.modelplane("scale", "--config", str(self.s.project.stack_file), f"{NAMESPACE}/{deployment}",
                                 "--replicas", str(replicas))
        return "" if edit.returncode == 0 else f"modelplane scale failed: {self._short(edit.stderr)}"

    def run(self) -> None:
        check = self.report.check
        # 1. overflow
        self.edit(add_story_deployments)
        run, plan, first = self.up("overflow")
        filler = self.api_split(FILLER)
        allocated, declared = self.tier_one_devices()
        _, status, capacity = self.outputs()
        problems = self.agree(plan, first)
        if counts(first) != {TIER_ONE: 2, TIER_TWO: 3} or counts(filler) != {TIER_ONE: 2}:
            problems.append(f"tiered {counts(first)}, tier-filler {counts(filler)}; expected tiered 2 in tier 1 "
                            "and 3 in tier 2, tier-filler 2 in tier 1")
        if not declared or allocated != declared:
            problems.append(f"tier 1 pool {TIER_POOLS[TIER_ONE]}: {allocated} of {declared} devices allocated, not full")
        if capacity.get("free") != 0 or status.get("scheduled") != 5:
            problems.append(f"outputs: tier 1 capacity {capacity}, tiered scheduled {status.get('scheduled')} of 5")
        if not check("tiers: tier 1 fills, the rest overflows to tier 2 (API servers, plan and outputs agree)",
                     run.result.get("ok") and not problems,
                     self._engine_error(run) or "; ".join(problems) or
                     f"tiered {first}; tier-filler {filler}; tier 1 pool {allocated}/{declared} devices allocated; "
                     f"outputs capacity {capacity}"):
            return self.clean_up()

        # 2. scale-in
        error = self.scale(TIERED, 4)
        run, plan, second = self.up("scale in") if not error else (None, {}, first)
        problems = [error] if error else scale_in_problems(first, second) + self.agree(plan, second)
        if not check("tiers: scale-in removes a tier-2 replica", run is not None and run.result.get("ok") and not problems,
                     (self._engine_error(run) if run else "") or "; ".join(problems) or
                     f"removed {change(first, second).describe()}; now {second}"):
            return self.clean_up()

        # 3. room in tier 1; failback Never keeps every replica where it is
        error = self.scale(FILLER, 0)
        run, plan, third = self.up("room in tier 1, failback Never") if not error else (None, {}, second)
        allocated, declared = self.tier_one_devices_settled(want=2)
        _, _, capacity = self.outputs()
        problems = [error] if error else self.agree(plan, third)
        if third != second:
            problems.append(f"failback Never moved replicas: {change(second, third).describe()}")
        if (allocated, declared) != (2, 4) or capacity.get("free") != 2:
            problems.append(f"tier 1 should have room for 2: {allocated}/{declared} devices allocated, outputs {capacity}")
        if not check("tiers: room in tier 1, failback Never moves nothing", run is not None and run.result.get("ok")
                     and not problems, (self._engine_error(run) if run else "") or "; ".join(problems) or
                     f"tier 1 pool {allocated}/{declared} devices allocated, outputs {capacity}; tiered stays {third}"):
            return self.clean_up()

        # 4.-6. failback WhenRoom, one move per plan, make-before-break, then nothing more
        self.edit(set_failback_when_room)
        states, order_ok, order_details = [third], True, []
        for step in (1, 2):
            run, plan, now = self.up(f"failback WhenRoom, move {step}")
            problems = self.agree(plan, now) + failback_problems(states[-1], now, MAX_MOVES, expect_moves=1)
            moved = change(states[-1], now)
            if len(moved.gone) == 1 and len(moved.new) == 1:
                (old, _), (new, cluster) = next(iter(moved.gone.items())), next(iter(moved.new.items()))
                ok, detail = replacement_before_removal(run.result.get("events", []), new, cluster, old)
                order_ok, order_details = order_ok and ok, order_details + [detail]
            else:
                order_ok = False
            states.append(now)
            if not check(f"tiers: failback WhenRoom moves {step} of 2 tier-2 replicas back with maxMovesPerPlan "
                         f"{MAX_MOVES}, though tier 1 has room for {3 - step}",
                         run.result.get("ok") and not problems, self._engine_error(run) or "; ".join(problems) or
                         f"moved {moved.describe()}; now {now}"):
                return self.clean_up()
        check("tiers: each failback's replacement is created and ready before the old replica is deleted "
              "(engine event order)", order_ok, "; ".join(order_details))
        run = self.s.engine("pulumi up (tiers: nothing left to move)", "up")
        changes = {op: n for op, n in (run.result.get("changes") or {}).items() if op not in ("same", "read")}
        now = self.api_split(TIERED)
        check("tiers: the next up moves nothing (no flapping)", run.result.get("ok") and not changes and now == states[-1]
              and counts(now) == {TIER_ONE: 4},
              self._engine_error(run) or f"changes {changes or 'none'}: {self._proposed(run)}; tiered {now}")
        self.clean_up()

    def clean_up(self) -> None:
        """Remove the story's deployments, so the rest of the scenario sees the fleet the drain story left."""
        self.edit(remove_story_deployments)
        run = self.s.engine("pulumi up (tiers: deployments removed)", "up")
        left = {name: split for name in (TIERED, FILLER) if (split := self.api_split(name, available_only=False))}
        exported, _, _ = self.outputs()
        self.report.check("tiers: the story's deployments are removed from every cluster and the outputs",
                          run.result.get("ok") and not left and not exported,
                          self._engine_error(run) or f"still on the clusters: {left or 'none'}; in the outputs: "
                          f"{exported or 'none'}")


def run(scenario: "Scenario") -> None:
    TiersStory(scenario).run()
