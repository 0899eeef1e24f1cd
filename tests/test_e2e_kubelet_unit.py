"""The pure parts of the e2e fake kubelet and REST client (tests/e2e/kubelet.py, kube_api.py), without binaries."""
from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import yaml

from e2e import kubelet as kl
from e2e.kube_api import ApiError, KubeApi, object_path
from modelplane.api.loading import load_fleet
from modelplane.cli import load_file
from modelplane.devices import device_key
from modelplane.scheduling.snapshot import clusters_of

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def demo():
    return load_file(REPO / "stacks" / "Pulumi.demo.yaml")[1]


@pytest.fixture(scope="module")
def cloud():
    return load_file(REPO / "stacks" / "Pulumi.cloud.yaml")[1]


MIXED = yaml.safe_load("""
inferenceClasses:
  gpu-and-nic:
    devices:
      - {name: gpu, driver: gpu.example.com, deviceClassName: gpu.example.com, count: 2,
         attributes: {model: {string: X1}, cores: {int: 128}, ecc: {bool: true}, fw: {version: 1.2.3}},
         capacity: {memory: {value: 80Gi}}}
      - {name: nic, driver: nic.example.com, deviceClassName: nic.example.com, count: 1}
      - {name: efa, claim: Synthetic, driver: efa.example.com, count: 4}
inferenceClusters:
  own:
    cluster: {source: Existing, existing: {kubeconfig: "apiVersion: v1"}}
    nodePools:
      - {name: system, className: gpu-and-nic, nodeCount: 3}
      - {name: empty, className: gpu-and-nic, nodeCount: 0}
""")


def test_conventions_match_the_backends():
    from modelplane.infra.backends import base
    from modelplane.render import types as render_types

    assert kl.POOL_LABEL == base.POOL_LABEL and kl.SYSTEM_POOL == base.SYSTEM_POOL
    assert kl.GPU_TAINT == {"key": render_types.GPU_TAINT_KEY, "value": base.GPU_TAINT_VALUE, "effect": "NoSchedule"}


def test_demo_groups(demo):
    pool, system = kl.node_groups(demo, "gpu-eu-west")
    assert pool == kl.NodeGroup("gpu-eu-west", 1, {"modelplane.ai/pool": "gpu-eu-west"}, (kl.GPU_TAINT,),
                                ({"name": "gpu-0", "capacity": {"memory": {"value": "80Gi"}}},), "gpu.example.com",
                                ("gpu.example.com",))
    assert system == kl.NodeGroup(None, 1, {"modelplane.ai/pool": "system"}, (), (), None)


def test_pool_nodes_have_a_capacity_the_scheduler_can_pack_and_the_system_node_room(demo):
    kubelet = kl.FakeKubelet(None, "gpu-eu-west", kl.node_groups(demo, "gpu-eu-west"))
    capacity = {name: kubelet._node_status(name)["status"]["allocatable"]["cpu"] for name in kubelet.node_pool}
    assert {cpu for name, cpu in capacity.items() if kubelet.node_pool[name] is None} == {kl.NODE_CAPACITY["cpu"]}
    assert {cpu for name, cpu in capacity.items() if kubelet.node_pool[name]} == {kl.POOL_NODE_CAPACITY["cpu"]}


def test_front_door_cluster_has_only_the_system_node(demo):
    assert [g.pool for g in kl.node_groups(demo, "control")] == [None]


@pytest.mark.parametrize("stack", ["demo", "cloud"])
def test_published_devices_are_what_the_scheduler_counts(stack, request):
    """Per pool: nodeCount nodes, each with `count` devices of every DRA kind, seen by selectors as the scheduler sees them."""
    fleet = request.getfixturevalue(stack)
    for cluster in clusters_of(fleet):
        groups = {g.pool: g for g in kl.node_groups(fleet, cluster.name)}
        for pool in cluster.pools:
            group = groups[pool.name]
            assert group.nodes == pool.nodes
            published = [device_key({**d, "driver": driver})
                         for d, driver in zip(group.devices, group.device_drivers)]
            expected = [kind.key for kind in pool.devices if kind.claim == "DRA" for _ in range(kind.count)]
            assert published == expected


def test_mixed_drivers_typed_attributes_and_synthetic_devices():
    fleet = load_fleet(MIXED, origin="pulumi")
    system_pool, empty, system = kl.node_groups(fleet, "own")
    assert [d["name"] for d in system_pool.devices] == ["gpu-0", "gpu-1", "nic-0"]  # no Synthetic efa
    assert system_pool.devices[0]["attributes"] == {"model": {"string": "X1"}, "cores": {"int": 128},
                                                    "ecc": {"bool": True}, "fw": {"version": "1.2.3"}}
    assert system_pool.driver == "gpu.example.com"
    assert {k: [d["name"] for d in v] for k, v in system_pool.devices_by_driver().items()} == {
        "gpu.example.com": ["gpu-0", "gpu-1"], "nic.example.com": ["nic-0"]}
    assert empty.nodes == 0
    assert system.labels == {}  # a GPU pool is called "system": the system node must not claim its label
    kubelet = kl.FakeKubelet(None, "own", [system_pool, empty, system])
    assert kubelet.node_pool == {"system-0": "system", "system-1": "system", "system-2": "system", "system-0-2": None}
    assert len(set(kubelet.node_ip.values())) == 4


def test_resource_slices_one_per_node_and_driver():
    group = kl.node_groups(load_fleet(MIXED, origin="pulumi"), "own")[0]
    slices = kl.resource_slices("n-0", "uid-1", group)
    assert [(s["metadata"]["name"], s["spec"]["driver"], len(s["spec"]["devices"])) for s in slices] == [
        ("n-0-gpu.example.com", "gpu.example.com", 2), ("n-0-nic.example.com", "nic.example.com", 1)]
    spec = slices[0]["spec"]
    assert spec["nodeName"] == "n-0" and spec["pool"] == {"name": "n-0", "generation": 1, "resourceSliceCount": 1}
    assert slices[0]["metadata"]["ownerReferences"][0] == {"apiVersion": "v1", "kind": "Node", "name": "n-0",
                                                           "uid": "uid-1"}


def test_many_devices_split_into_slices_of_one_pool():
    big = kl.NodeGroup("p", 1, {}, (), tuple({"name": f"d-{i}"} for i in range(130)), "d.example.com")
    slices = kl.resource_slices("n", None, big)
    assert [len(s["spec"]["devices"]) for s in slices] == [128, 2]
    assert {s["spec"]["pool"]["resourceSliceCount"] for s in slices} == {2}
    assert len({s["metadata"]["name"] for s in slices}) == 2


def _pod(owner: str | None = None, init: list | None = None) -> dict:
    pod = {"metadata": {"name": "p", "namespace": "ns", "uid": "u1",
                        "ownerReferences": [{"kind": owner, "name": "o"}] if owner else []},
           "spec": {"nodeName": "n", "containers": [{"name": "a", "image": "i"}, {"name": "b", "image": "j"}]},
           "status": {"phase": "Pending", "conditions": [
               {"type": "PodScheduled", "status": "True", "lastTransitionTime": "T0", "lastProbeTime": None}]}}
    if init:
        pod["spec"]["initContainers"] = init
    return pod


def test_running_pod_status():
    status = kl.pod_status(_pod("ReplicaSet", init=[{"name": "setup", "image": "s"},
                                                    {"name": "side", "image": "s", "restartPolicy": "Always"}]),
                           "127.0.1.1", "10.244.0.2", "T1")
    assert status["phase"] == "Running" and status["podIPs"] == [{"ip": "10.244.0.2"}]
    assert status["hostIPs"] == [{"ip": "127.0.1.1"}]
    conditions = {c["type"]: c for c in status["conditions"]}
    assert {k: c["status"] for k, c in conditions.items()} == dict.fromkeys(
        ["PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady", "PodScheduled"], "True")
    assert conditions["PodScheduled"]["lastTransitionTime"] == "T0"
    assert all(None not in c.values() for c in status["conditions"])
    assert [(c["name"], c["ready"], list(c["state"])) for c in status["containerStatuses"]] == [
        ("a", True, ["running"]), ("b", True, ["running"])]
    assert [list(c["state"]) for c in status["initContainerStatuses"]] == [["terminated"], ["running"]]


def test_job_pod_succeeds():
    status = kl.pod_status(_pod("Job"), "127.0.1.1", "10.244.0.2", "T1")
    assert status["phase"] == "Succeeded"
    assert all(c["state"]["terminated"]["exitCode"] == 0 and not c["ready"] for c in status["containerStatuses"])
    conditions = {c["type"]: c["status"] for c in status["conditions"]}
    assert conditions["Ready"] == "False" and conditions["PodReadyToStartContainers"] == "False"


class RecordingApi:
    def __init__(self, objects: dict[str, list[dict]]):
        self.objects, self.calls = objects, []

    def list(self, path, *, label_selector=None, field_selector=None, metadata_only=False):
        items = self.objects.get(path, [])
        if field_selector:
            assert field_selector == "status.phase=Pending,spec.nodeName!="
            items = [i for i in items if i.get("status", {}).get("phase") == "Pending" and i["spec"].get("nodeName")]
        return [{"metadata": i["metadata"]} for i in items] if metadata_only else items

    def get(self, path):
        return next((i for items in self.objects.values() for i in items
                     if path.endswith(f"/namespaces/{i['metadata'].get('namespace')}/pods/{i['metadata']['name']}")), None)

    def merge_patch(self, path, patch):
        self.calls.append(("patch", path, patch))

    def delete(self, path, body=None):
        self.calls.append(("delete", path, body))

    def create(self, path, obj):
        self.calls.append(("create", path, obj))


def test_pods_on_its_nodes_run_and_deleted_ones_go():
    group = kl.NodeGroup("p", 1, {}, (), (), None)
    pending, elsewhere, running, job = _pod("ReplicaSet"), _pod(), _pod(), _pod("Job")
    elsewhere["spec"]["nodeName"], elsewhere["metadata"]["uid"] = "other-cluster-node", "u2"
    running["status"] = {"phase": "Running", "podIP": "10.244.0.2"}
    running["metadata"].update(uid="u3", name="r", deletionTimestamp="T")
    job["metadata"].update(uid="u4", name="j")
    for pod in (pending, running, job):
        pod["spec"]["nodeName"] = "p-0"
    api = RecordingApi({"/api/v1/pods": [pending, elsewhere, running, job]})
    kubelet = kl.FakeKubelet(api, "c", [group])
    kubelet._seen_ips = {"10.244.0.2"}
    kubelet._sync_pods()
    kubelet._sync_pods()  # a deletion is confirmed once
    assert [(c[0], c[1]) for c in api.calls] == [
        ("patch", "/api/v1/namespaces/ns/pods/p/status"), ("patch", "/api/v1/namespaces/ns/pods/j/status"),
        ("patch", "/api/v1/namespaces/ns/pods/r/status"), ("delete", "/api/v1/namespaces/ns/pods/r"),
        ("patch", "/api/v1/namespaces/ns/pods/p/status"), ("patch", "/api/v1/namespaces/ns/pods/j/status")]  # the fake stores nothing
    first, job_patch, stopped, deletion, again = (c[2] for c in api.calls[:5])
    # a deleted pod's containers stop first (a terminal phase): only then are its ResourceClaims released
    assert stopped["status"]["phase"] == "Succeeded"
    assert all("terminated" in c["state"] for c in stopped["status"]["containerStatuses"])
    assert first["status"]["hostIP"] == "127.0.1.1" and first["status"]["phase"] == "Running"
    assert job_patch["status"]["phase"] == "Succeeded"
    ips = {first["status"]["podIP"], job_patch["status"]["podIP"]}
    assert len(ips) == 2 and not ips & {"10.244.0.2", "127.0.1.1"}  # unique, never one a pod had before us
    assert again["status"]["podIP"] == first["status"]["podIP"]
    assert deletion == {"gracePeriodSeconds": 0, "preconditions": {"uid": "u3"}}


def test_gateways_services_and_claims():
    gateway = {"metadata": {"name": "g", "namespace": "ns", "generation": 2},
               "spec": {"listeners": [{"name": "http", "port": 80, "protocol": "HTTP"}]}}
    done = {"metadata": {"name": "h", "namespace": "ns", "generation": 1},
            "status": {"addresses": [{"type": "IPAddress", "value": "1.2.3.4"}],
                       "conditions": [{"type": "Programmed", "status": "True", "observedGeneration": 1}]}}
    service = {"metadata": {"name": "s", "namespace": "ns"}, "spec": {"type": "LoadBalancer"}}
    claim = {"metadata": {"name": "c", "namespace": "ns", "uid": "u9"}, "status": {"phase": "Pending"},
             "spec": {"accessModes": ["ReadWriteMany"], "storageClassName": "rwx",
                      "resources": {"requests": {"storage": "5Gi"}}}}
    api = RecordingApi({"/apis/gateway.networking.k8s.io/v1/gateways": [gateway, done],
                        "/api/v1/services": [service, {"metadata": {"name": "x", "namespace": "ns"}, "spec": {}}],
                        "/api/v1/persistentvolumeclaims": [claim]})
    kubelet = kl.FakeKubelet(api, "c", [])
    kubelet._sync_gateways(), kubelet._sync_services(), kubelet._sync_claims()
    (_, gpath, gpatch), (_, spath, spatch), (_, vpath, volume) = api.calls
    assert gpath == "/apis/gateway.networking.k8s.io/v1/namespaces/ns/gateways/g/status"
    status = gpatch["status"]
    assert status["addresses"] == [{"type": "IPAddress", "value": kl.stable_address("198.18", "c/ns/g")}]
    assert {c["type"]: c["observedGeneration"] for c in status["conditions"]} == {"Accepted": 2, "Programmed": 2}
    assert status["listeners"][0]["name"] == "http"
    assert spath == "/api/v1/namespaces/ns/services/s/status"
    assert spatch["status"]["loadBalancer"]["ingress"][0]["ip"].startswith("198.19.")
    assert vpath == "/api/v1/persistentvolumes" and volume["spec"]["claimRef"]["uid"] == "u9"
    assert (volume["spec"]["storageClassName"], volume["spec"]["capacity"]) == ("rwx", {"storage": "5Gi"})
    assert volume["spec"]["accessModes"] == ["ReadWriteMany"]


def test_stable_addresses_differ_per_cluster():
    a, b = kl.stable_address("198.18", "eu/ns/g"), kl.stable_address("198.18", "us/ns/g")
    assert a == kl.stable_address("198.18", "eu/ns/g") and a != b
    assert all(0 < int(part) < 255 for part in a.split(".")[3:])


@pytest.mark.parametrize("args, path", [
    (("v1", "pods", "ns", "x"), "/api/v1/namespaces/ns/pods/x"),
    (("apps/v1", "deployments", None, None), "/apis/apps/v1/deployments"),
    (("v1", "nodes", None, "n"), "/api/v1/nodes/n"),
    (("resource.k8s.io/v1", "resourceclaims", "ns", None), "/apis/resource.k8s.io/v1/namespaces/ns/resourceclaims"),
])
def test_object_path(args, path):
    assert object_path(*args) == path


def test_from_kubeconfig_picks_the_current_context():
    text = yaml.safe_dump({
        "current-context": "b",
        "clusters": [{"name": "a", "cluster": {"server": "https://a"}}, {"name": "b", "cluster": {"server": "https://b/"}}],
        "users": [{"name": "a", "user": {"token": "ta"}}, {"name": "b", "user": {"token": "tb"}}],
        "contexts": [{"name": "a", "context": {"cluster": "a", "user": "a"}}, {"name": "b", "context": {"cluster": "b", "user": "b"}}],
    })
    api = KubeApi.from_kubeconfig(text)
    assert (api.server, api.token) == ("https://b", "tb")


@pytest.fixture()
def fake_server():
    """A plain-HTTP stand-in for the API server that records requests and answers from a table."""
    seen: list[tuple] = []
    answers: dict[tuple[str, str], tuple[int, object]] = {}

    class Handler(BaseHTTPRequestHandler):
        def _answer(self):
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            seen.append((self.command, self.path, self.headers.get("Content-Type"), self.headers.get("Authorization"),
                         json.loads(body) if body else None, self.headers.get("Accept")))
            code, payload = answers.get((self.command, self.path.split("?")[0]), (404, {"kind": "Status",
                                        "reason": "NotFound", "message": "nothing\nhere"}))
            data = payload.encode() if isinstance(payload, str) else json.dumps(payload).encode()
            self.send_response(code)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = do_PATCH = do_DELETE = _answer

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield KubeApi(f"http://127.0.0.1:{server.server_address[1]}", "tok"), seen, answers
    server.shutdown()
    server.server_close()


def test_client_requests_and_errors(fake_server):
    api, seen, answers = fake_server
    answers[("GET", "/readyz")] = (200, "ok")
    answers[("GET", "/api/v1/pods")] = (200, {"items": [{"metadata": {"name": "p"}}]})
    answers[("PATCH", "/api/v1/nodes/n")] = (200, {"metadata": {"name": "n"}})
    answers[("POST", "/api/v1/namespaces")] = (409, {"kind": "Status", "reason": "AlreadyExists", "message": "exists"})
    assert api.ready()
    assert api.get("/api/v1/nodes/missing") is None
    api.delete("/api/v1/nodes/missing")
    assert api.list("/api/v1/pods", label_selector="a=b") == [{"metadata": {"name": "p"}}]
    assert api.apply("/api/v1/nodes/n", {"kind": "Node"}, "me") == {"metadata": {"name": "n"}}
    api.merge_patch("/api/v1/nodes/n", {"x": 1})
    with pytest.raises(ApiError) as caught:
        api.create("/api/v1/namespaces", {"metadata": {"name": "x"}})
    assert (caught.value.status, caught.value.reason, caught.value.message) == (409, "AlreadyExists", "exists")
    with pytest.raises(ApiError) as caught:
        api.request("GET", "/nope")
    assert "\n" not in str(caught.value) and "404 NotFound" in str(caught.value)
    assert seen[3][:2] == ("GET", "/api/v1/pods?labelSelector=a%3Db")
    api.list("/api/v1/pods", metadata_only=True)
    assert seen[-1][1] == "/api/v1/pods" and "as=PartialObjectMetadataList" in seen[-1][5]
    assert seen[4][1:5] == ("/api/v1/nodes/n?fieldManager=me&force=true", "application/apply-patch+yaml", "Bearer tok",
                           {"kind": "Node"})
    assert seen[5][2] == "application/merge-patch+json"


def test_connection_kept_alive_and_renewed_when_the_server_dropped_it():
    connections: list[int] = []

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, but every second answer drops the connection unannounced

        def do_GET(self):
            connections.append(id(self.connection))
            data = b'{"items": []}'
            self.send_response(200)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            self.close_connection = len(connections) % 2 == 0

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        api = KubeApi(f"http://127.0.0.1:{server.server_address[1]}", "t")
        for _ in range(4):
            assert api.list("/api/v1/pods") == []
    finally:
        server.shutdown()
        server.server_close()
    assert len(connections) == 4 and len(set(connections[:2])) == 1  # two requests on one connection, then a new one


def test_ready_is_false_when_nothing_listens():
    assert not KubeApi("https://127.0.0.1:9", "t", timeout=1).ready()


@pytest.fixture()
def watch_server():
    """An API server stand-in whose watches send `events` lines, then hold the stream open (`hold`) or end it."""
    state = {"events": 2, "hold": False, "requests": [], "status": 200}
    release = threading.Event()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self):
            state["requests"].append((self.path, self.headers.get("Accept")))
            self.send_response(state["status"])
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for i in range(state["events"]):
                line = json.dumps({"type": "ADDED", "object": {"metadata": {"name": f"p{i}"}}}).encode() + b"\n"
                self.wfile.write(b"%x\r\n%s\r\n" % (len(line), line))
                self.wfile.flush()
            if state["hold"]:
                release.wait(10)
            self.wfile.write(b"0\r\n\r\n")

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield KubeApi(f"http://127.0.0.1:{server.server_address[1]}", "t"), state
    release.set()
    server.shutdown()
    server.server_close()


def test_a_watch_reports_each_event_and_starts_again_when_the_server_ends_it(watch_server):
    api, state = watch_server
    stop, events = threading.Event(), []

    def on_event(event):
        events.append(event)
        if len(events) == 5:
            stop.set()

    api.watch("/api/v1/pods", on_event, stop, retry=0.01)
    assert len(events) == 5 and len(state["requests"]) == 3  # 2 + 2 + 1: two watches ended by the server, a third
    assert [e["object"]["metadata"]["name"] for e in events] == ["p0", "p1", "p0", "p1", "p0"]
    path, accept = state["requests"][0]
    assert path.startswith("/api/v1/pods?watch=1&timeoutSeconds=") and accept == "application/json"  # whole objects


def test_a_failing_watch_is_retried_and_a_blocked_one_ends_when_closed(watch_server):
    api, state = watch_server
    state["status"] = 404  # a kind not served yet
    stop, events = threading.Event(), []
    watcher = threading.Thread(target=api.watch, args=("/apis/x/v1/things", events.append, stop),
                               kwargs={"retry": 0.05}, daemon=True)
    watcher.start()
    deadline = time.monotonic() + 5
    while len(state["requests"]) < 3 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert len(state["requests"]) >= 3 and events == []  # retried, and an error is no event
    state.update(status=200, events=1, hold=True)
    while not events and time.monotonic() < deadline:
        time.sleep(0.02)
    assert [e["type"] for e in events] == ["ADDED"]  # then blocked on the open stream
    stop.set()
    api.close_watches()
    watcher.join(timeout=2)
    assert not watcher.is_alive()


def test_the_kubelet_looks_again_when_woken_or_when_idle_for_long(monkeypatch):
    kubelet = kl.FakeKubelet(None, "c", [])
    kubelet._last_lease = time.monotonic()  # the lease is not due
    monkeypatch.setattr(kl, "IDLE_ROUND", 0.3)
    began = time.monotonic()
    kubelet._wait_for_a_reason(began)
    assert 0.25 <= time.monotonic() - began < 2  # idle: at most IDLE_ROUND after the round
    kubelet._wake.set()
    began = time.monotonic()
    kubelet._wait_for_a_reason(began)
    assert time.monotonic() - began < 0.1 and not kubelet._wake.is_set()  # woken by a watch: at once, and reset


class ListingApi(RecordingApi):
    """RecordingApi that also records each list path, and can fail a status patch once."""

    def __init__(self, objects):
        super().__init__(objects)
        self.listed = []
        self.fail_patch: Exception | None = None  # the next merge_patch raises it

    def merge_patch(self, path, patch):
        if self.fail_patch is not None:
            error, self.fail_patch = self.fail_patch, None
            raise error
        super().merge_patch(path, patch)

    def list(self, path, **kwargs):
        self.listed.append(path)
        return super().list(path, **kwargs)


def _round(kubelet: kl.FakeKubelet) -> set[str]:
    """The kinds one round listed."""
    kubelet.api.listed.clear()
    kubelet.sync()
    return set(kubelet.api.listed)


def _settled(api: ListingApi) -> kl.FakeKubelet:
    """A kubelet past its first round (which lists every kind), with no lease or status due."""
    kubelet = kl.FakeKubelet(api, "c", [kl.NodeGroup("p", 1, {}, (), (), None)])
    kubelet._last_lease = kubelet._last_status = time.monotonic()
    assert _round(kubelet) == set(kl.WATCHED)
    api.calls.clear()
    return kubelet


LOAD_BALANCER = {"metadata": {"name": "s", "namespace": "ns", "uid": "s1"}, "spec": {"type": "LoadBalancer"}}


def test_a_round_acts_on_what_the_watches_reported_without_listing():
    api = ListingApi({})
    kubelet = _settled(api)
    assert _round(kubelet) == set() and api.calls == []  # nothing changed since
    pod = _pod("ReplicaSet")
    pod["spec"]["nodeName"] = "p-0"
    kubelet._on_event(kl.PODS, {"type": "ADDED", "object": {**pod, "status": {}}})
    kubelet._on_event(kl.PODS, {"type": "MODIFIED", "object": pod})  # the latest state of each object counts
    kubelet._on_event(kl.SERVICES, {"type": "ADDED", "object": LOAD_BALANCER})
    kubelet._on_event(kl.GATEWAYS, {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "9"}}})
    assert kubelet._wake.is_set()
    assert _round(kubelet) == set()
    assert [c[1] for c in api.calls] == ["/api/v1/namespaces/ns/pods/p/status",
                                         "/api/v1/namespaces/ns/services/s/status"]
    address = api.calls[0][2]["status"]["podIP"]
    assert _round(kubelet) == set() and len(api.calls) == 2  # each change is acted on once
    kubelet._on_event(kl.PODS, {"type": "DELETED", "object": pod})
    _round(kubelet)
    assert "u1" not in kubelet._pod_ips and len(api.calls) == 2  # a pod gone: its address is free again
    kubelet._on_event(kl.PODS, {"type": "MODIFIED", "object": pod})
    _round(kubelet)
    assert api.calls[-1][2]["status"]["podIP"] != address


def test_a_deleted_pod_is_confirmed_once_from_its_watch_event():
    api = ListingApi({})
    kubelet = _settled(api)
    pod = _pod("ReplicaSet")
    pod["spec"]["nodeName"] = "p-0"
    pod["status"] = {"phase": "Running"}
    pod["metadata"]["deletionTimestamp"] = "T"
    for _ in range(2):
        kubelet._on_event(kl.PODS, {"type": "MODIFIED", "object": pod})
        _round(kubelet)
    assert [c[0] for c in api.calls] == ["delete"]  # the fake has no pod to stop: only the deletion is confirmed
    assert api.calls[0][2] == {"gracePeriodSeconds": 0, "preconditions": {"uid": "u1"}}


@pytest.mark.parametrize("error, raised", [(ApiError(503, "ServiceUnavailable", "starting"), False),
                                           (ConnectionRefusedError("stopped"), True)])
def test_a_kind_whose_step_failed_is_listed_in_full_next_round(error, raised):
    api = ListingApi({kl.SERVICES: [LOAD_BALANCER]})
    kubelet = _settled(api)
    api.fail_patch = error
    kubelet._on_event(kl.SERVICES, {"type": "ADDED", "object": LOAD_BALANCER})
    kubelet._on_event(kl.CLAIMS, {"type": "ADDED", "object": {"metadata": {"name": "c", "uid": "c1"}, "spec": {},
                                                              "status": {"phase": "Bound"}}})
    if raised:  # the API server went away: the round ends, and what it had not reached waits for the next
        with pytest.raises(OSError):
            kubelet.sync()
    else:
        kubelet.sync()
    assert _round(kubelet) == ({kl.SERVICES, kl.CLAIMS} if raised else {kl.SERVICES})
    assert not kubelet._list_in_full
    assert api.calls[-1][1] == "/api/v1/namespaces/ns/services/s/status"  # the list found it still to do


def test_an_error_event_has_its_kind_listed_in_full():
    kubelet = _settled(ListingApi({}))
    kubelet._on_event(kl.GATEWAYS, {"type": "ERROR", "object": {"kind": "Status", "code": 410}})
    assert _round(kubelet) == {kl.GATEWAYS}


def test_an_idle_round_lists_every_kind_and_a_woken_one_nothing(monkeypatch):
    kubelet = _settled(ListingApi({}))
    monkeypatch.setattr(kl, "IDLE_ROUND", 0.2)
    kubelet._wait_for_a_reason(time.monotonic())
    assert _round(kubelet) == set(kl.WATCHED)
    monkeypatch.setattr(kl, "IDLE_ROUND", 30.0)
    kubelet._on_event(kl.SERVICES, {"type": "ADDED", "object": LOAD_BALANCER})
    kubelet._wait_for_a_reason(time.monotonic())
    assert _round(kubelet) == set()


def test_leases_are_renewed_well_within_the_controller_managers_grace_period():
    from e2e import controlplane as cp

    # a real kubelet renews 5 times per node-monitor grace period (10 s, 50 s) and its lease lasts 4 renewals
    assert cp.NODE_MONITOR_GRACE_SECONDS / kl.LEASE_RENEW_EVERY >= 5
    assert kl.LEASE_SECONDS >= 4 * kl.LEASE_RENEW_EVERY
    assert f"--node-monitor-grace-period={cp.NODE_MONITOR_GRACE_SECONDS}s" in cp.controller_manager_args(
        cp.ClusterFiles(Path("/x")))
