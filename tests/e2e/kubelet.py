"""A fake kubelet: the nodes, devices and status writes that a cluster without containers still needs.

Per cluster it registers the nodes modelplane's scheduler counts on (one group per `nodePools[]` entry, with the
devices of the pool's InferenceClass published as DRA ResourceSlices, plus one untainted system node), and then,
from one daemon thread, plays the parts nothing else plays on loopback: it renews node leases, reports bound pods
Running and Ready (Job pods Succeeded), confirms pod deletions, gives Gateways and LoadBalancer Services an address
and binds Pending PersistentVolumeClaims to hostPath volumes. Like a real kubelet it acts on what its watches
report changed, and lists in full only on start, after a failed step, and when idle for a while.
"""
from __future__ import annotations

import hashlib
import ipaddress
import itertools
import logging
import re
import threading
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from functools import partial
from typing import Any, Sequence

from .kube_api import ApiError, KubeApi, object_path

log = logging.getLogger(__name__)

# The conventions of modelplane/infra/backends/base.py (importing it would pull in Pulumi);
# tests/test_e2e_kubelet_unit.py keeps the two in step.
POOL_LABEL = "modelplane.ai/pool"
SYSTEM_POOL = "system"
GPU_TAINT = {"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}

FIELD_MANAGER = "fake-kubelet"
KUBELET_VERSION = "v1.34.3"
NODE_CAPACITY = {"cpu": "64", "memory": "512Gi", "pods": "110", "ephemeral-storage": "1Ti"}  # the system node
# A pool node: small enough that each pod's default request for scoring (100m CPU, 200 MiB: the pods here request
# none) moves the node's MostAllocated score by a point, so kube-scheduler packs a pool's pods (controlplane.
# scheduler_config); at 64 CPUs eight pods scored as none.
POOL_NODE_CAPACITY = {"cpu": "8", "memory": "16Gi", "pods": "110", "ephemeral-storage": "1Ti"}
# A real kubelet renews its node's lease every 10 s (a quarter of its 40 s duration) and reports an unchanged node
# status every 5 minutes. Here one process plays every node of the fleet on the operator's 2 cores: 283 nodes at
# 10 x 50 renewing every 10 s were a third of the idle fleet's CPU, which every operation's wall time pays (issue 27,
# docs/e2e.md). So the leases last 3 times as long and are renewed every 30 s, and the controller-managers allow
# for it (controlplane.NODE_MONITOR_GRACE_SECONDS).
LEASE_SECONDS = 120
LEASE_RENEW_EVERY = 30.0  # seconds
NODE_STATUS_EVERY = 300.0  # seconds, as the real kubelet's nodeStatusReportFrequency
# A round runs when a watch reports a change (at most once per `interval`), when the lease is due, and at the latest
# this long after the last. A round acts on the objects the watches reported changed since the last; it lists a kind
# in full only on the first round, after a step on that kind failed, and when idle for this long (in case a watch
# missed something). Listing every changed kind every second, in every cluster, made the fleet's work during an `up`
# grow with clusters x seconds rather than with the objects applied (issue 27, docs/e2e.md).
IDLE_ROUND = 30.0
# What the kubelet watches and acts on.
PODS, SERVICES, CLAIMS, GATEWAYS = WATCHED = (
    "/api/v1/pods", "/api/v1/services", "/api/v1/persistentvolumeclaims", "/apis/gateway.networking.k8s.io/v1/gateways")
MAX_DEVICES_PER_SLICE = 128  # resource.k8s.io/v1 ResourceSliceMaxDevices
PV_ROOT = "/tmp/modelplane-e2e-pv"
FAKE_PV_LABEL = "modelplane.ai/e2e-fake-pv"


@dataclass(frozen=True)
class NodeGroup:
    pool: str | None  # the modelplane node pool name; None for the cluster's system nodes
    nodes: int
    labels: dict[str, str]
    taints: tuple[dict, ...]  # Kubernetes taint dicts
    devices: tuple[dict, ...]  # resource.k8s.io/v1 Device objects every node of the group publishes
    driver: str | None  # the DRA driver the devices belong to (the first one when there are several)
    device_drivers: tuple[str, ...] = ()  # per device, its driver (classes may mix drivers); empty: all `driver`

    def devices_by_driver(self) -> dict[str, list[dict]]:
        drivers = self.device_drivers or (self.driver,) * len(self.devices)
        grouped: dict[str, list[dict]] = {}
        for device, driver in zip(self.devices, drivers):
            grouped.setdefault(driver, []).append(device)
        return grouped


def node_groups(fleet: Any, cluster: str) -> list[NodeGroup]:
    """What modelplane's scheduler assumes exists on `cluster`: per pool, `nodeCount` nodes, each with `count`
    devices of every DRA device of the pool's class (Synthetic devices have no driver to publish them); one
    system node. (The plan gives each pod a node of its own, so the real scheduler has at least that room.)

    A cluster that is not an InferenceCluster (the front door's) has only the system node.
    """
    spec = fleet.inference_clusters.get(cluster)
    pools = list(spec.node_pools) if spec is not None else []
    groups = []
    for pool in pools:
        devices, drivers, names = [], [], set()
        for device in fleet.inference_classes[pool.class_name].devices:
            if device.claim != "DRA":
                continue
            config = device.to_config()
            for i in range(device.count):
                published: dict[str, Any] = {"name": _unique(f"{_dns_label(device.name, 56)}-{i}", names)}
                for section in ("attributes", "capacity"):
                    if config.get(section):
                        published[section] = config[section]
                devices.append(published)
                drivers.append(device.driver)
        groups.append(NodeGroup(pool.name, pool.node_count, {POOL_LABEL: pool.name}, (dict(GPU_TAINT),),
                                tuple(devices), drivers[0] if drivers else None, tuple(drivers)))
    # Provisioned clusters label their system pool; an Existing cluster may have named a GPU pool "system".
    system_labels = {} if any(p.name == SYSTEM_POOL for p in pools) else {POOL_LABEL: SYSTEM_POOL}
    groups.append(NodeGroup(None, 1, system_labels, (), (), None))
    return groups


def _dns_label(text: str, limit: int = 63) -> str:
    label = re.sub(r"[^a-z0-9-]+", "-", text.lower()).strip("-")[:limit].strip("-")
    return label or "x"


def _unique(name: str, taken: set[str]) -> str:
    candidate = name
    for n in itertools.count(2):
        if candidate not in taken:
            break
        candidate = f"{name}-{n}"
    taken.add(candidate)
    return candidate


def _now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _micro_now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def stable_address(prefix: str, key: str) -> str:
    """A fake address derived from `key`, the same on every run: `prefix` is a /16 such as 198.18."""
    digest = hashlib.sha256(key.encode()).digest()
    return f"{prefix}.{digest[0]}.{digest[1] % 254 + 1}"


def resource_slices(node: str, node_uid: str | None, group: NodeGroup) -> list[dict]:
    """The ResourceSlices one node of `group` publishes: one pool per driver named after the node."""
    slices = []
    for driver, devices in group.devices_by_driver().items():
        chunks = [devices[i:i + MAX_DEVICES_PER_SLICE] for i in range(0, len(devices), MAX_DEVICES_PER_SLICE)]
        for k, chunk in enumerate(chunks):
            name = f"{node}-{driver}" + (f"-{k}" if len(chunks) > 1 else "")
            metadata: dict[str, Any] = {"name": name}
            if node_uid:
                metadata["ownerReferences"] = [{"apiVersion": "v1", "kind": "Node", "name": node, "uid": node_uid}]
            slices.append({
                "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": metadata,
                "spec": {"driver": driver, "nodeName": node,
                         "pool": {"name": node, "generation": 1, "resourceSliceCount": len(chunks)},
                         "devices": [dict(d) for d in chunk]},
            })
    return slices


def _condition(kind: str, status: str, now: str, reason: str | None = None) -> dict:
    condition = {"type": kind, "status": status, "lastTransitionTime": now}
    if reason:
        condition["reason"] = reason
    return condition


def _merge_conditions(existing: list[dict], ours: list[dict]) -> list[dict]:
    """Ours replace same-typed ones (keeping a transition time whose status did not change); others stay."""
    before = {c.get("type"): c for c in existing}
    for c in ours:
        old = before.get(c["type"])
        if old is not None and old.get("status") == c["status"] and old.get("lastTransitionTime"):
            c["lastTransitionTime"] = old["lastTransitionTime"]
    kinds = {c["type"] for c in ours}
    kept = [{k: v for k, v in c.items() if v is not None} for c in existing if c.get("type") not in kinds]
    return kept + ours  # (nulls dropped: in a merge patch they would read as "remove")


def is_job_pod(pod: dict) -> bool:
    return any(ref.get("kind") == "Job" for ref in pod["metadata"].get("ownerReferences") or [])


def pod_status(pod: dict, host_ip: str, pod_ip: str, now: str) -> dict:
    """The status the kubelet reports for `pod` once its containers run: Running and Ready, or, for a Job's pod,
    Succeeded with every container exited 0 (what the Job controller counts as a completion)."""
    spec = pod["spec"]
    done = is_job_pod(pod)

    def container(c: dict, state: str) -> dict:
        status: dict[str, Any] = {"name": c["name"], "image": c.get("image", ""),
                                  "imageID": f"fake://{c.get('image', '')}",
                                  "containerID": f"fake://{pod['metadata'].get('uid', '')}/{c['name']}",
                                  "restartCount": 0, "ready": state == "running", "started": state == "running"}
        if state == "running":
            status["state"] = {"running": {"startedAt": now}}
        else:
            status["state"] = {"terminated": {"exitCode": 0, "reason": "Completed", "startedAt": now,
                                              "finishedAt": now}}
        return status

    inits = [container(c, "running" if c.get("restartPolicy") == "Always" and not done else "terminated")
             for c in spec.get("initContainers") or []]
    mains = [container(c, "terminated" if done else "running") for c in spec.get("containers") or []]
    if done:
        ours = [_condition("PodReadyToStartContainers", "False", now), _condition("Initialized", "True", now),
                _condition("Ready", "False", now, "PodCompleted"),
                _condition("ContainersReady", "False", now, "PodCompleted"),
                _condition("PodScheduled", "True", now)]
    else:
        ours = [_condition(kind, "True", now)
                for kind in ("PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady", "PodScheduled")]
    status: dict[str, Any] = {
        "phase": "Succeeded" if done else "Running",
        "hostIP": host_ip, "hostIPs": [{"ip": host_ip}], "podIP": pod_ip, "podIPs": [{"ip": pod_ip}],
        "startTime": pod.get("status", {}).get("startTime") or now,
        "conditions": _merge_conditions(pod.get("status", {}).get("conditions") or [], ours),
        "containerStatuses": mains,
    }
    if inits:
        status["initContainerStatuses"] = inits
    return status


def gateway_status(gateway: dict, address: str, now: str) -> dict:
    generation = gateway["metadata"].get("generation", 1)

    def conditions(*kinds: str) -> list[dict]:
        return [{"type": k, "status": "True", "reason": k, "message": "fake kubelet", "observedGeneration": generation,
                 "lastTransitionTime": now} for k in kinds]

    listeners = [{"name": listener["name"], "attachedRoutes": 0,
                  "supportedKinds": [{"group": "gateway.networking.k8s.io", "kind": "HTTPRoute"}],
                  "conditions": conditions("Accepted", "Programmed", "ResolvedRefs")}
                 for listener in gateway.get("spec", {}).get("listeners") or []]
    status: dict[str, Any] = {"addresses": [{"type": "IPAddress", "value": address}],
                              "conditions": conditions("Accepted", "Programmed")}
    if listeners:
        status["listeners"] = listeners
    return status


def gateway_needs_status(gateway: dict) -> bool:
    status = gateway.get("status") or {}
    generation = gateway["metadata"].get("generation", 1)
    programmed = [c for c in status.get("conditions") or [] if c.get("type") == "Programmed"]
    return not status.get("addresses") or not programmed or programmed[0].get("observedGeneration") != generation


def volume_for(claim: dict) -> dict:
    """A hostPath PersistentVolume pre-bound to `claim`: the PV controller then binds the two."""
    meta, spec = claim["metadata"], claim.get("spec") or {}
    size = ((spec.get("resources") or {}).get("requests") or {}).get("storage", "1Gi")
    return {
        "apiVersion": "v1", "kind": "PersistentVolume",
        "metadata": {"name": f"pvc-{meta['uid']}", "labels": {FAKE_PV_LABEL: "true"}},
        "spec": {
            "capacity": {"storage": size},
            "accessModes": spec.get("accessModes") or ["ReadWriteOnce"],
            "persistentVolumeReclaimPolicy": "Retain",  # hostPath has no deleter; released ones are removed here
            "storageClassName": spec.get("storageClassName") or "",
            "volumeMode": spec.get("volumeMode") or "Filesystem",
            "hostPath": {"path": f"{PV_ROOT}/{meta['uid']}", "type": "DirectoryOrCreate"},
            "claimRef": {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "namespace": meta["namespace"],
                         "name": meta["name"], "uid": meta["uid"]},
        },
    }


class FakeKubelet:
    """The kubelet of every fake node of one cluster, as one daemon thread."""

    def __init__(self, api: KubeApi, cluster: str, groups: Sequence[NodeGroup], interval: float = 1.0) -> None:
        self.api, self.cluster, self.groups, self.interval = api, cluster, list(groups), interval
        self.node_pool: dict[str, str | None] = {}
        self._node_group: dict[str, NodeGroup] = {}
        self.node_ip: dict[str, str] = {}
        taken: set[str] = set()
        first_ip = ipaddress.IPv4Address("127.0.1.0")
        for group in self.groups:
            base = _dns_label(group.pool if group.pool is not None else SYSTEM_POOL, 50)
            for i in range(group.nodes):
                name = _unique(f"{base}-{i}", taken)
                self.node_pool[name] = group.pool
                self._node_group[name] = group
                self.node_ip[name] = str(first_ip + len(self.node_ip) + 1)
        self._registered_at = _now()
        self._pod_ips: dict[str, str] = {}  # pod uid -> address we gave it
        self._seen_ips: set[str] = set()  # addresses pods had when we started (a restarted kubelet must not reuse them)
        self._ip_counter = itertools.count(1)
        self._deleted: set[str] = set()  # uids whose deletion we confirmed
        self._last_lease = self._last_status = 0.0
        self._errors: dict[str, str] = {}  # step -> last error logged (each distinct error once)
        self._unreachable = False
        self._stop = threading.Event()
        self._wake = threading.Event()  # set by a watch: something changed
        self._list_in_full: set[str] = set(WATCHED)  # the WATCHED kinds the next round lists in full
        # kind -> uid -> the latest (event type, object) a watch reported since the last round
        self._changes: dict[str, dict[str, tuple[str, dict]]] = {kind: {} for kind in WATCHED}
        self._changes_lock = threading.Lock()  # the watch threads add to `_changes`, the round takes them
        # per WATCHED kind: the step that lists it in full, and the one that acts on one changed object
        self._steps = {PODS: (self._sync_pods, self._pod), SERVICES: (self._sync_services, self._service),
                       CLAIMS: (self._sync_claims, self._claim), GATEWAYS: (self._sync_gateways, self._gateway)}
        self._thread: threading.Thread | None = None
        self._watchers: list[threading.Thread] = []
        self.rounds = 0

    # --- lifecycle ------------------------------------------------------------------------------------------------

    def start(self) -> None:
        self.register()
        self._seen_ips = {p.get("status", {}).get("podIP") for p in self.api.list("/api/v1/pods")} - {None}
        self._stop.clear()  # startable again after stop()
        self._thread = threading.Thread(target=self._run, name=f"fake-kubelet-{self.cluster}", daemon=True)
        self._thread.start()
        self._watchers = [threading.Thread(target=self.api.watch, args=(path, partial(self._on_event, path),
                                                                        self._stop),
                                           name=f"fake-kubelet-{self.cluster}-watch", daemon=True) for path in WATCHED]
        for watcher in self._watchers:
            watcher.start()

    def wait_schedulable(self, timeout: float = 60.0) -> None:
        """Until the node lifecycle controller has lifted its `node.kubernetes.io/not-ready` taint (put on every new
        node before its first status) from all our nodes: about a second after start()."""
        deadline = time.monotonic() + timeout
        while True:
            nodes = {n["metadata"]["name"]: n for n in self.api.list("/api/v1/nodes")}
            waiting = [name for name in self.node_pool if name not in nodes or any(
                t.get("key", "").startswith("node.kubernetes.io/") for t in nodes[name]["spec"].get("taints") or [])]
            if not waiting:
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"{self.cluster}: nodes {', '.join(waiting)} still carry a node.kubernetes.io/ "
                                   f"taint after {timeout:.0f}s")
            time.sleep(0.2)

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        self.api.close_watches()
        for thread in [self._thread, *self._watchers]:
            if thread is not None:
                thread.join()
        self._thread, self._watchers = None, []

    def register(self) -> None:
        """Nodes, their leases and ResourceSlices; idempotent (server-side apply), so a restart re-registers."""
        for name, group in self._node_group.items():
            node = self.api.apply(object_path("v1", "nodes", None, name), self._node(name, group), FIELD_MANAGER)
            uid = node["metadata"]["uid"]
            self.api.merge_patch(object_path("v1", "nodes", None, name) + "/status", self._node_status(name))
            self.api.apply(object_path("coordination.k8s.io/v1", "leases", "kube-node-lease", name),
                           self._lease(name, uid), FIELD_MANAGER)
            for resource_slice in resource_slices(name, uid, group):
                path = object_path("resource.k8s.io/v1", "resourceslices", None, resource_slice["metadata"]["name"])
                self.api.apply(path, resource_slice, FIELD_MANAGER)
        self._last_lease = self._last_status = time.monotonic()

    def _run(self) -> None:
        while not self._stop.is_set():
            began = time.monotonic()
            try:
                self.sync()
                if self._unreachable:
                    log.info("%s: API server reachable again", self.cluster)
                self._unreachable = False
            except OSError as error:  # stopped on purpose, or restarting: retry quietly
                if not self._unreachable:
                    log.info("%s: API server unreachable (%s); retrying", self.cluster, error)
                self._unreachable = True
            except Exception:  # noqa: BLE001 - the loop must survive anything
                log.exception("%s: fake kubelet round failed", self.cluster)
            self.rounds += 1
            self._stop.wait(max(0.0, self.interval - (time.monotonic() - began)))
            self._wait_for_a_reason(began)

    def _on_event(self, kind: str, event: dict) -> None:
        """A watch on `kind` (one of WATCHED) reported an event: the next round acts on the object's latest state (an
        ERROR event, e.g. the watch's resource version expired, has the kind listed in full)."""
        obj = event.get("object") or {}
        uid = (obj.get("metadata") or {}).get("uid")
        if event.get("type") in ("ADDED", "MODIFIED", "DELETED") and uid:
            with self._changes_lock:
                self._changes[kind][uid] = (event["type"], obj)
        elif event.get("type") != "BOOKMARK":
            self._list_again([kind])
        self._wake.set()

    def _list_again(self, kinds) -> None:
        with self._changes_lock:
            self._list_in_full.update(kinds)

    def _wait_for_a_reason(self, began: float) -> None:
        """Until a watch reports a change, the lease is due, or IDLE_ROUND has passed since the round `began` (then
        the round lists every kind in full)."""
        due = min(self._last_lease + LEASE_RENEW_EVERY, began + IDLE_ROUND)
        if not self._wake.wait(max(0.0, due - time.monotonic())) and time.monotonic() >= began + IDLE_ROUND:
            self._list_again(WATCHED)
        self._wake.clear()  # before the round: a change during it wakes the next

    def sync(self) -> None:
        """One round: the lease, then each kind: listed in full, or only the objects a watch reported changed. A
        step's API errors are logged once and its kind is listed in full next round; OSError ends the round (and the
        kinds it had not reached are listed in full next time)."""
        with self._changes_lock:
            in_full, self._list_in_full = self._list_in_full, set()
            changes, self._changes = self._changes, {kind: {} for kind in WATCHED}
        todo: list[tuple[str | None, Any]] = [(None, self._heartbeat)]
        for kind in WATCHED:  # a full list supersedes the changes reported before it
            sync_all, act = self._steps[kind]
            if kind in in_full:
                todo.append((kind, sync_all))
            elif changes[kind]:
                todo.append((kind, partial(self._act_on_changes, act, changes[kind].values())))
        for index, (kind, step) in enumerate(todo):
            name = kind or "heartbeat"
            try:
                step()
                self._errors.pop(name, None)
            except OSError:
                self._list_again(kind for kind, _ in todo[index:] if kind)
                raise
            except ApiError as error:
                self._list_again([kind] if kind else [])  # retried next round
                if error.status >= 500 or error.status == 429:  # an API server starting up or shutting down
                    log.debug("%s: %s: %s", self.cluster, name, error)
                elif self._errors.get(name) != str(error):
                    log.warning("%s: %s: %s", self.cluster, name, error)
                self._errors[name] = str(error)

    def _act_on_changes(self, act, changes) -> None:
        for event_type, obj in changes:
            if event_type != "DELETED":
                act(obj)
            elif act == self._pod:  # a pod gone: its address and its confirmed deletion are forgotten
                self._forget_pod(obj["metadata"]["uid"])

    # --- objects --------------------------------------------------------------------------------------------------

    def _node(self, name: str, group: NodeGroup) -> dict:
        labels = {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
                  "node.kubernetes.io/instance-type": "fake", **group.labels}
        return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels},
                "spec": {"taints": [dict(t) for t in group.taints]}}

    def _node_status(self, name: str) -> dict:
        now = _now()
        capacity = NODE_CAPACITY if self._node_group[name].pool is None else POOL_NODE_CAPACITY

        def condition(kind: str, status: str, reason: str) -> dict:
            return {"type": kind, "status": status, "reason": reason, "message": "fake kubelet",
                    "lastHeartbeatTime": now, "lastTransitionTime": self._registered_at}

        return {"status": {
            "capacity": dict(capacity), "allocatable": dict(capacity),
            "conditions": [condition("MemoryPressure", "False", "KubeletHasSufficientMemory"),
                           condition("DiskPressure", "False", "KubeletHasNoDiskPressure"),
                           condition("PIDPressure", "False", "KubeletHasSufficientPID"),
                           condition("Ready", "True", "KubeletReady")],
            "addresses": [{"type": "InternalIP", "address": self.node_ip[name]}, {"type": "Hostname", "address": name}],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {"machineID": name, "systemUUID": name, "bootID": self._registered_at,
                         "kernelVersion": "fake", "osImage": "fake", "containerRuntimeVersion": "fake://1",
                         "kubeletVersion": KUBELET_VERSION, "kubeProxyVersion": "", "operatingSystem": "linux",
                         "architecture": "amd64"},
        }}

    def _lease(self, name: str, node_uid: str) -> dict:
        return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                "metadata": {"name": name, "namespace": "kube-node-lease",
                             "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": name, "uid": node_uid}]},
                "spec": {"holderIdentity": name, "leaseDurationSeconds": LEASE_SECONDS, "renewTime": _micro_now()}}

    # --- steps ----------------------------------------------------------------------------------------------------

    def _heartbeat(self) -> None:
        now = time.monotonic()
        if now - self._last_lease >= LEASE_RENEW_EVERY:
            for name in self.node_pool:
                try:
                    self.api.merge_patch(object_path("coordination.k8s.io/v1", "leases", "kube-node-lease", name),
                                         {"spec": {"renewTime": _micro_now()}})
                except ApiError as error:
                    if error.status != 404:
                        raise
                    log.info("%s: node %s is gone; registering again", self.cluster, name)
                    self.register()
                    return
            self._last_lease = now
            self._delete_released_volumes()
        if now - self._last_status >= NODE_STATUS_EVERY:
            for name in self.node_pool:
                self.api.merge_patch(object_path("v1", "nodes", None, name) + "/status", self._node_status(name))
            self._last_status = now

    def _sync_pods(self) -> None:
        """Bound Pending pods in full (few), every pod's metadata only: a replica pod can be tens of kB."""
        for pod in self.api.list("/api/v1/pods", field_selector="status.phase=Pending,spec.nodeName!="):
            self._start(pod)
        present = set()
        for meta in (item["metadata"] for item in self.api.list("/api/v1/pods", metadata_only=True)):
            present.add(meta["uid"])
            self._confirm_deletion(meta)
        self._deleted &= present
        self._pod_ips = {uid: ip for uid, ip in self._pod_ips.items() if uid in present}

    def _pod(self, pod: dict) -> None:
        if (pod.get("status") or {}).get("phase") == "Pending" and pod["spec"].get("nodeName"):
            self._start(pod)
        self._confirm_deletion(pod["metadata"])

    def _start(self, pod: dict) -> None:
        """A bound Pending pod on one of our nodes: Running and Ready (a Job's pod: Succeeded)."""
        meta, spec, status = pod["metadata"], pod["spec"], pod.get("status") or {}
        node = spec.get("nodeName")
        if node not in self.node_pool or meta.get("deletionTimestamp"):
            return
        host_ip = self.node_ip[node]
        pod_ip = host_ip if spec.get("hostNetwork") else status.get("podIP") or self._pod_ip(meta["uid"])
        self.api.merge_patch(object_path("v1", "pods", meta["namespace"], meta["name"]) + "/status",
                             {"status": pod_status(pod, host_ip, pod_ip, _now())})

    def _confirm_deletion(self, meta: dict) -> None:
        # An unbound pod is deleted at once by the API server, so a lingering one is on a node, all of which are
        # ours: the kubelet confirms a deletion once its containers stopped.
        uid = meta["uid"]
        if not meta.get("deletionTimestamp") or uid in self._deleted:
            return
        try:
            self._terminate(meta)
            self.api.delete(object_path("v1", "pods", meta["namespace"], meta["name"]),
                            {"gracePeriodSeconds": 0, "preconditions": {"uid": uid}})
        except ApiError as error:
            if error.status != 409:  # 409: a new pod of the same name (the precondition held)
                raise
        self._deleted.add(uid)

    def _forget_pod(self, uid: str) -> None:
        self._deleted.discard(uid)
        self._pod_ips.pop(uid, None)

    def _terminate(self, meta: dict) -> None:
        """What the kubelet reports once a deleted pod's containers stopped: a terminal phase.

        The resourceclaim controller releases a scheduled pod's claims only then (`isPodDone`), and a
        pod deleted in the foreground (its ResourceClaim blocks it) would otherwise never go away.
        """
        path = object_path("v1", "pods", meta["namespace"], meta["name"])
        pod = self.api.get(path)
        if pod is None or (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            return
        now = _now()
        stopped = {"terminated": {"exitCode": 0, "reason": "Completed", "startedAt": now, "finishedAt": now}}
        statuses = [{"name": c["name"], "image": c.get("image", ""), "imageID": "", "ready": False, "started": False,
                     "restartCount": 0, "state": stopped} for c in pod["spec"].get("containers", [])]
        self.api.merge_patch(path + "/status", {"status": {
            "phase": "Succeeded", "containerStatuses": statuses,
            "conditions": [_condition("Ready", "False", now, "PodCompleted"),
                           _condition("ContainersReady", "False", now, "PodCompleted")]}})

    def _pod_ip(self, uid: str) -> str:
        if uid not in self._pod_ips:
            taken = self._seen_ips | set(self._pod_ips.values())
            while True:
                n = next(self._ip_counter)
                address = f"10.244.{n // 254 % 256}.{n % 254 + 1}"
                if address not in taken:
                    break
            self._pod_ips[uid] = address
        return self._pod_ips[uid]

    def _list_optional(self, path: str) -> list[dict]:
        """A list of a kind whose CRD may not be installed (yet)."""
        try:
            return self.api.list(path)
        except ApiError as error:
            if error.status == 404:
                return []
            raise

    def _sync_gateways(self) -> None:
        for gateway in self._list_optional("/apis/gateway.networking.k8s.io/v1/gateways"):
            self._gateway(gateway)

    def _gateway(self, gateway: dict) -> None:
        if not gateway_needs_status(gateway):
            return
        meta = gateway["metadata"]
        address = stable_address("198.18", f"{self.cluster}/{meta['namespace']}/{meta['name']}")
        path = object_path("gateway.networking.k8s.io/v1", "gateways", meta["namespace"], meta["name"])
        self.api.merge_patch(path + "/status", {"status": gateway_status(gateway, address, _now())})

    def _sync_services(self) -> None:
        for service in self.api.list("/api/v1/services"):
            self._service(service)

    def _service(self, service: dict) -> None:
        if (service["spec"].get("type") != "LoadBalancer"
                or ((service.get("status") or {}).get("loadBalancer") or {}).get("ingress")):
            return
        meta = service["metadata"]
        address = stable_address("198.19", f"{self.cluster}/{meta['namespace']}/{meta['name']}")
        self.api.merge_patch(object_path("v1", "services", meta["namespace"], meta["name"]) + "/status",
                             {"status": {"loadBalancer": {"ingress": [{"ip": address}]}}})

    def _sync_claims(self) -> None:
        for claim in self.api.list("/api/v1/persistentvolumeclaims"):
            self._claim(claim)

    def _claim(self, claim: dict) -> None:
        if ((claim.get("status") or {}).get("phase") != "Pending" or claim["spec"].get("volumeName")
                or claim["metadata"].get("deletionTimestamp")):
            return
        try:
            self.api.create("/api/v1/persistentvolumes", volume_for(claim))
        except ApiError as error:
            if error.status != 409:  # made in an earlier round; the PV controller binds it
                raise

    def _delete_released_volumes(self) -> None:
        for volume in self.api.list("/api/v1/persistentvolumes", label_selector=f"{FAKE_PV_LABEL}=true"):
            if (volume.get("status") or {}).get("phase") in ("Released", "Failed"):
                self.api.delete(object_path("v1", "persistentvolumes", None, volume["metadata"]["name"]))
