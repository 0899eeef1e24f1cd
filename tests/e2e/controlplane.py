"""Real Kubernetes control planes on loopback: one etcd, and per cluster a kube-apiserver, kube-controller-manager and
kube-scheduler.

Every cluster gets its own CA, serving certificate, service-account key pair, admin token and etcd prefix, so
clusters are as separate as distinct API servers can be while sharing one etcd (the cheap part). Flags follow
controller-runtime envtest's API server defaults, plus what a cluster with controllers and a scheduler needs. Each
process runs in its own process group and is ended on `close()`, at interpreter exit, and on SIGINT/SIGTERM, so a
failing caller leaves nothing behind. No Python dependency beyond the standard library and the `openssl` CLI.
"""
from __future__ import annotations

import atexit
import ctypes
import json
import os
import random
import re
import secrets
import shutil
import signal
import socket
import ssl
import subprocess
import threading
import time
import urllib.error
import urllib.request
import weakref
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Mapping, Sequence

if TYPE_CHECKING:
    from .kube_api import KubeApi

SERVICE_CIDR = "10.0.0.0/24"
ADMIN_USER = "modelplane-e2e-admin"
STOP_GRACE = 5.0  # seconds between SIGTERM and SIGKILL
CLUSTER_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
# Go runtime knobs for every child. A soft memory limit makes the GC work harder before the heap grows, which keeps
# RSS lower at a small CPU cost. One P each: 60 and more Go processes share the machine's 2 cores, and a second P
# only spins looking for work and runs idle-time GC marking, CPU every other process of the fleet then lacks.
CHILD_GO_ENV = {"GOMEMLIMIT": "400MiB", "GOMAXPROCS": "1"}
# An API server with the charts' CRDs holds about 350 MB live: at 400 MiB its GC ran all the time during an `up`, a
# quarter of its CPU in a profile (MODELPLANE_E2E_PROFILING, docs/e2e.md). 600 MiB leaves the GC room.
API_SERVER_GO_ENV = {**CHILD_GO_ENV, "GOMEMLIMIT": "600MiB"}
ETCD_GO_ENV = {"GOMEMLIMIT": "400MiB"}  # the one etcd serves every cluster: all the machine's cores
# How long a node's lease may go unrenewed before its node is NotReady (1.34's default: 50 s). The stand-in kubelets
# renew every 30 s instead of a real kubelet's 10 s (tests/e2e/kubelet.py LEASE_RENEW_EVERY), so this keeps the real
# ratio of five renewals per grace period with a margin for a loaded machine.
NODE_MONITOR_GRACE_SECONDS = 150


@dataclass
class ClusterEndpoint:
    """How to reach one cluster's API server as its admin (system:masters)."""

    name: str
    server: str
    token: str
    kubeconfig: str  # YAML: insecure-skip-tls-verify, a token user, one context named after the cluster

    def api(self) -> "KubeApi":
        from .kube_api import KubeApi  # helper B's client; imported late so this module stands alone

        return KubeApi(self.server, self.token)


# --- pure parts (unit tested without binaries) ----------------------------------------------------------------------


def ephemeral_port_range() -> tuple[int, int]:
    try:
        low, high = map(int, Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
        return low, high
    except (OSError, ValueError):
        return 32768, 60999


def free_port(taken: set[int] | None = None) -> int:
    """A loopback TCP port nobody listens on now, chosen *below* the kernel's ephemeral range: a stopped cluster's
    port must still be free when it restarts, and outgoing connections take their local ports from that range."""
    taken = set() if taken is None else taken
    low = ephemeral_port_range()[0]
    rng = random.SystemRandom()
    for _ in range(200):
        port = rng.randrange(max(1024, low - 12000), low)
        if port in taken:
            continue
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        taken.add(port)
        return port
    raise RuntimeError(f"no free loopback port below {low}")


def kubeconfig_text(cluster: str, server: str, token: str) -> str:
    """A kubeconfig with one cluster, user and context, all named after the cluster (JSON is valid YAML)."""
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": cluster, "cluster": {"server": server, "insecure-skip-tls-verify": True}}],
        "users": [{"name": cluster, "user": {"token": token}}],
        "contexts": [{"name": cluster, "context": {"cluster": cluster, "user": cluster}}],
        "current-context": cluster,
        "preferences": {},
    }
    return json.dumps(doc, indent=2) + "\n"


def token_auth_line(token: str) -> str:
    """One --token-auth-file row: token,user,uid,"groups"."""
    return f'{token},{ADMIN_USER},{ADMIN_USER},"system:masters"\n'


def etcd_args(name: str, data_dir: Path, client_port: int, peer_port: int) -> list[str]:
    client, peer = f"http://127.0.0.1:{client_port}", f"http://127.0.0.1:{peer_port}"
    return [
        f"--name={name}",
        f"--data-dir={data_dir}",
        f"--listen-client-urls={client}",
        f"--advertise-client-urls={client}",
        f"--listen-peer-urls={peer}",
        f"--initial-advertise-peer-urls={peer}",
        f"--initial-cluster={name}={peer}",
        "--initial-cluster-state=new",
        "--unsafe-no-fsync=true",  # throw-away data: no fsync, as envtest does (much faster on shared disks)
        "--snapshot-count=5000",  # fewer raft entries kept in memory between snapshots
        # etcd compacts its history itself, once every 5 minutes, as the API server would ask it to: each of the
        # fleet's API servers asking (`--etcd-compaction-interval`) would compact the one shared etcd 21 times as often
        "--auto-compaction-mode=periodic",
        "--auto-compaction-retention=5m",
        "--log-level=warn",
    ]


@dataclass(frozen=True)
class ClusterFiles:
    """Where one cluster's certificates, keys, token file and kubeconfig live."""

    root: Path

    @property
    def ca_crt(self) -> Path:
        return self.root / "ca.crt"

    @property
    def ca_key(self) -> Path:
        return self.root / "ca.key"

    @property
    def serving_crt(self) -> Path:
        return self.root / "serving.crt"

    @property
    def serving_key(self) -> Path:
        return self.root / "serving.key"

    @property
    def sa_key(self) -> Path:
        return self.root / "sa.key"

    @property
    def sa_pub(self) -> Path:
        return self.root / "sa.pub"

    @property
    def tokens(self) -> Path:
        return self.root / "tokens.csv"

    @property
    def scheduler_config(self) -> Path:
        return self.root / "scheduler.yaml"

    @property
    def kubeconfig(self) -> Path:
        return self.root / "kubeconfig"


def apiserver_args(cluster: str, files: ClusterFiles, port: int, etcd_url: str) -> list[str]:
    server = f"https://127.0.0.1:{port}"
    return [
        f"--etcd-servers={etcd_url}",
        f"--etcd-prefix=/{cluster}",  # one etcd, one key space per cluster
        "--bind-address=127.0.0.1",
        "--advertise-address=127.0.0.1",
        # the `kubernetes` Service's Endpoints may not hold a loopback address: don't reconcile them at all
        "--endpoint-reconciler-type=none",
        f"--secure-port={port}",
        f"--tls-cert-file={files.serving_crt}",
        f"--tls-private-key-file={files.serving_key}",
        f"--client-ca-file={files.ca_crt}",
        f"--token-auth-file={files.tokens}",
        "--authorization-mode=RBAC",  # system:masters passes; Node authorizer not needed (no real kubelets)
        f"--service-cluster-ip-range={SERVICE_CIDR}",
        "--allow-privileged=true",
        f"--service-account-issuer={server}",
        f"--service-account-key-file={files.sa_pub}",
        f"--service-account-signing-key-file={files.sa_key}",
        # ServiceAccount admission stays on (unlike envtest): the controller-manager creates `default` SAs here.
        # Metrics nobody reads here, polled from the shared etcd by every API server: a count of each kind's objects
        # every minute (a tenth of an idle API server's CPU) and the database's size every 30 s.
        "--etcd-count-metric-poll-period=0",
        "--etcd-db-metric-poll-interval=0",
        "--etcd-compaction-interval=0",  # the shared etcd compacts itself (etcd_args)
        # MODELPLANE_E2E_PROFILING=1: /debug/pprof on every API server, to see where a fleet's CPU goes (docs/e2e.md)
        f"--profiling={'true' if os.environ.get('MODELPLANE_E2E_PROFILING') == '1' else 'false'}",
        "--v=1",
    ]


def controller_manager_args(files: ClusterFiles) -> list[str]:
    return [
        f"--kubeconfig={files.kubeconfig}",
        "--leader-elect=false",
        "--secure-port=0",  # no metrics/health endpoint: nothing to collide on, nothing to secure
        f"--service-account-private-key-file={files.sa_key}",
        f"--root-ca-file={files.ca_crt}",
        "--use-service-account-credentials=false",
        # All default controllers (namespace, deployment, replicaset, job, endpoint(slice), garbage collector,
        # serviceaccount + token, node lifecycle, resourceclaim for DRA, ...). Cloud/route/service-lb controllers
        # disable themselves without a cloud provider; bootstrap-signer/token-cleaner are off by default.
        "--controllers=*",
        f"--service-cluster-ip-range={SERVICE_CIDR}",
        f"--cluster-signing-cert-file={files.ca_crt}",  # lets the CSR signer start instead of logging that it skipped
        f"--cluster-signing-key-file={files.ca_key}",
        "--kube-api-qps=100",  # default 20 throttles large fleets (50 deployments per cluster)
        "--kube-api-burst=200",
        # the stand-in kubelets renew their leases less often than real ones (tests/e2e/kubelet.py): allow for it
        f"--node-monitor-grace-period={NODE_MONITOR_GRACE_SECONDS}s",
        "--profiling=false",
        "--v=1",
    ]


def scheduler_config(files: ClusterFiles) -> dict:
    """The kube-scheduler's configuration: the default profile (with the DynamicResources plugin: DRA is GA and on by
    default in 1.34), scoring nodes for packing.

    A pool whose replicas mix device counts fills only as planned when the cluster's scheduler packs
    (docs/placement.md, "Packing"). Left to its default (LeastAllocated on CPU and memory, which the pods here do
    not request), kube-scheduler chose among a pool's nodes at random, and at 20 x 100 a pool of two 8-device nodes,
    planned full, was left with one free device on each and a 2-device pod Pending. MostAllocated puts each pod on
    the pool's node with the most pods that still has room (the stand-in kubelet gives pool nodes a capacity small
    enough for each pod's default request to count: kubelet.POOL_NODE_CAPACITY)."""
    return {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "clientConnection": {"kubeconfig": str(files.kubeconfig), "qps": 100, "burst": 200},
        "leaderElection": {"leaderElect": False},
        "enableProfiling": False,
        "profiles": [{"schedulerName": "default-scheduler", "pluginConfig": [{
            "name": "NodeResourcesFit",
            "args": {"scoringStrategy": {"type": "MostAllocated",
                                         "resources": [{"name": "cpu", "weight": 1}, {"name": "memory", "weight": 1}]}},
        }]}],
    }


def scheduler_args(files: ClusterFiles) -> list[str]:
    """With `files.scheduler_config` written from `scheduler_config(files)`."""
    return [f"--config={files.scheduler_config}", "--secure-port=0", "--v=1"]


def feature_gates_flag(gates: Mapping[str, bool] | None) -> list[str]:
    """`--feature-gates=A=true,B=false` for every kube-* component, or nothing (1.34 defaults, as a kind cluster has)."""
    if not gates:
        return []
    return ["--feature-gates=" + ",".join(f"{k}={'true' if v else 'false'}" for k, v in sorted(gates.items()))]


API_SERVER_NAMES = ("IP:127.0.0.1", "IP:10.0.0.1", "DNS:localhost", "DNS:kubernetes", "DNS:kubernetes.default",
                    "DNS:kubernetes.default.svc", "DNS:kubernetes.default.svc.cluster.local")


def serving_cert_extensions(names: Sequence[str] = API_SERVER_NAMES) -> str:
    """x509 extensions of a serving certificate for `names` (the API server's: loopback plus the in-cluster
    service names)."""
    return (
        "basicConstraints=CA:FALSE\n"
        "keyUsage=critical,digitalSignature,keyEncipherment\n"
        "extendedKeyUsage=serverAuth\n"
        f"subjectAltName={','.join(names)}\n"
    )


def read_peak_rss(pid: int) -> int | None:
    """VmHWM (peak resident set) of a live process in bytes; None once it is gone."""
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    m = re.search(r"^VmHWM:\s+(\d+)\s+kB", text, re.M)
    return int(m.group(1)) * 1024 if m else None


def log_tail(path: Path, lines: int = 15) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


# --- certificates (openssl CLI) -------------------------------------------------------------------------------------


def _openssl(*args: str | Path, cwd: Path) -> None:
    run = subprocess.run(["openssl", *map(str, args)], cwd=cwd, capture_output=True, text=True)
    if run.returncode:
        raise RuntimeError(f"openssl {' '.join(map(str, args[:2]))} failed: {run.stderr.strip()}")


def make_cluster_certs(files: ClusterFiles, cluster: str) -> None:
    """A self-signed CA, a serving cert signed by it, and a service-account signing key pair."""
    d = files.root
    d.mkdir(parents=True, exist_ok=True)
    rsa = ("-newkey", "rsa:2048", "-nodes")
    _openssl("req", "-x509", *rsa, "-keyout", files.ca_key, "-out", files.ca_crt, "-days", "3650",
             "-subj", f"/CN=modelplane-e2e-{cluster}-ca", cwd=d)
    make_serving_cert(files, "kube-apiserver", files.serving_crt, files.serving_key, API_SERVER_NAMES)
    _openssl("genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out", files.sa_key, cwd=d)
    _openssl("pkey", "-in", files.sa_key, "-pubout", "-out", files.sa_pub, cwd=d)


def make_serving_cert(files: ClusterFiles, common_name: str, crt: Path, key: Path, names: Sequence[str]) -> None:
    """A key and a serving certificate for `names`, signed by the cluster's CA (so its clients trust it)."""
    d, stem = files.root, crt.stem
    _openssl("req", "-new", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", f"{stem}.csr",
             "-subj", f"/CN={common_name}", cwd=d)
    (d / f"{stem}.ext").write_text(serving_cert_extensions(names))
    _openssl("x509", "-req", "-in", f"{stem}.csr", "-CA", files.ca_crt, "-CAkey", files.ca_key, "-CAcreateserial",
             "-out", crt, "-days", "3650", "-extfile", f"{stem}.ext", cwd=d)
    key.chmod(0o600)


# --- processes ------------------------------------------------------------------------------------------------------

_PR_SET_PDEATHSIG = 1


def _child_setup(die_with_parent: bool) -> Callable[[], None]:
    """Runs in the child before exec: own process group; optionally SIGKILL when the parent dies (even kill -9)."""

    def setup() -> None:
        os.setpgid(0, 0)
        if die_with_parent:
            try:
                ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
            except (OSError, AttributeError):
                pass

    return setup


@dataclass
class Proc:
    label: str  # "etcd" or "<cluster>-<component>"
    argv: list[str]
    log: Path
    popen: subprocess.Popen | None = None
    peak_rss: int = 0  # the highest VmHWM seen over all runs of this process
    go_env: Mapping[str, str] = field(default_factory=lambda: CHILD_GO_ENV)

    def start(self) -> None:
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log, "ab") as out:
            out.write(f"\n=== {time.strftime('%H:%M:%S')} start: {' '.join(self.argv)}\n".encode())
            out.flush()
            # PDEATHSIG fires when the *thread* that forked exits; only safe from the main thread (= process lifetime).
            main = threading.current_thread() is threading.main_thread()
            self.popen = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                          env={**os.environ, **self.go_env}, preexec_fn=_child_setup(main),
                                          close_fds=True)

    def alive(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def sample(self) -> int:
        if self.alive():
            self.peak_rss = max(self.peak_rss, read_peak_rss(self.popen.pid) or 0)
        return self.peak_rss

    def signal(self, sig: int) -> None:
        if self.popen is None:
            return
        try:
            os.killpg(self.popen.pid, sig)  # the group: anything the process spawned goes too
        except ProcessLookupError:
            pass


def stop_procs(procs: Sequence[Proc], grace: float = STOP_GRACE) -> None:
    """SIGTERM all, wait up to `grace`, SIGKILL what is left, and reap."""
    running = [p for p in procs if p.popen is not None]
    for p in running:
        p.sample()
        if p.popen.poll() is None:
            p.signal(signal.SIGTERM)
    deadline = time.monotonic() + grace
    for p in running:
        try:
            p.popen.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.signal(signal.SIGKILL)  # the group, before reaping: its id cannot have been reused yet
            p.popen.wait()
        p.popen = None


# --- the fleet ------------------------------------------------------------------------------------------------------

_LIVE_FLEETS: "weakref.WeakSet[LocalFleet]" = weakref.WeakSet()
_HANDLERS_INSTALLED = False


def _close_all_fleets() -> None:
    for fleet in list(_LIVE_FLEETS):
        fleet.close()


def _install_exit_handlers() -> None:
    """atexit, and SIGINT/SIGTERM handlers that close every fleet and then behave as before (chained)."""
    global _HANDLERS_INSTALLED
    if _HANDLERS_INSTALLED:
        return
    _HANDLERS_INSTALLED = True
    atexit.register(_close_all_fleets)
    if threading.current_thread() is not threading.main_thread():
        return  # signal handlers can only be set from the main thread; atexit + PDEATHSIG still apply
    for sig in (signal.SIGINT, signal.SIGTERM):
        previous = signal.getsignal(sig)
        if previous == signal.SIG_IGN:
            continue  # e.g. SIGINT in a background job: the caller chose to ignore it

        def handler(signum, frame, previous=previous):
            _close_all_fleets()
            if callable(previous):
                previous(signum, frame)
            elif previous == signal.SIG_DFL:
                signal.signal(signum, signal.SIG_DFL)
                os.kill(os.getpid(), signum)

        signal.signal(sig, handler)


@dataclass
class _Cluster:
    name: str
    files: ClusterFiles
    port: int
    token: str
    apiserver: Proc
    controller_manager: Proc
    scheduler: Proc

    @property
    def procs(self) -> list[Proc]:
        return [self.apiserver, self.controller_manager, self.scheduler]


class ControlPlaneError(RuntimeError):
    """A control plane did not come up; the message names the cluster and the log to read."""


class LocalFleet:
    """One etcd plus a kube-apiserver, kube-controller-manager and kube-scheduler per cluster, on loopback."""

    def __init__(self, work: Path, bin_dir: Path, clusters: Sequence[str], *, start_timeout: float | None = None,
                 feature_gates: Mapping[str, bool] | None = None):
        """`feature_gates` go to every kube-* component; none by default, so the clusters behave as stock 1.34 does
        (e.g. `device.allowMultipleAllocations` in a CEL selector needs {"DRAConsumableCapacity": True})."""
        for name in clusters:
            if not CLUSTER_NAME.match(name):
                raise ValueError(f"cluster name {name!r} must be a DNS label (a-z, 0-9, '-')")
        if len(set(clusters)) != len(clusters):
            raise ValueError(f"duplicate cluster names in {list(clusters)}")
        self.work = Path(work).resolve()
        self.bin_dir = Path(bin_dir).expanduser().resolve()
        self.cluster_names = list(clusters)
        self.gates = feature_gates_flag(feature_gates)
        self.logs = self.work / "logs"
        # 2 shared cores: API servers starting together are slow; allow more per cluster
        self.start_timeout = start_timeout or 90.0 + 20.0 * len(clusters)
        self.endpoints: dict[str, ClusterEndpoint] = {}
        self.etcd: Proc | None = None
        self.etcd_url = ""
        self._clusters: dict[str, _Cluster] = {}
        self._lock = threading.RLock()
        self._closed = False

    # context manager
    def __enter__(self) -> "LocalFleet":
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _binary(self, name: str) -> str:
        path = self.bin_dir / name
        if not os.access(path, os.X_OK):
            raise FileNotFoundError(f"{path} is missing: build the toolchain with scripts/e2e-tools.sh")
        return str(path)

    def start(self) -> dict[str, ClusterEndpoint]:
        """Fresh data, certificates and tokens; returns when every cluster is ready (see `_wait_ready`)."""
        with self._lock:
            if self.etcd is not None:
                raise RuntimeError("fleet already started")
            binaries = {b: self._binary(b) for b in ("etcd", "kube-apiserver", "kube-controller-manager",
                                                      "kube-scheduler")}
            check_inotify_instances(len(self.cluster_names))
            _LIVE_FLEETS.add(self)
            _install_exit_handlers()
            self._closed = False
            try:
                self._prepare(binaries)
                self.etcd.start()
                self._wait(lambda: _http_ok(f"{self.etcd_url}/health"), "etcd", self.etcd, 30.0)
                for c in self._clusters.values():
                    c.apiserver.start()
                for c in self._clusters.values():  # API servers start in parallel; controllers once theirs answers
                    self._wait(lambda c=c: _https_status(c.port, "/readyz", c.token) == 200, c.name, c.apiserver,
                               self.start_timeout)
                    c.controller_manager.start()
                    c.scheduler.start()
                for c in self._clusters.values():
                    self._wait_ready(c)
            except BaseException:
                self.close()
                raise
            return self.endpoints

    def _prepare(self, binaries: dict[str, str]) -> None:
        for owned in (self.work / "etcd", self.work / "clusters", self.logs):  # only our own sub-folders are wiped
            shutil.rmtree(owned, ignore_errors=True)
        self.logs.mkdir(parents=True)
        taken: set[int] = set()
        client, peer = free_port(taken), free_port(taken)
        self.etcd_url = f"http://127.0.0.1:{client}"
        self.etcd = Proc("etcd", [binaries["etcd"], *etcd_args("e2e", self.work / "etcd", client, peer)],
                         self.logs / "etcd.log", go_env=ETCD_GO_ENV)
        for name in self.cluster_names:
            files = ClusterFiles(self.work / "clusters" / name)
            make_cluster_certs(files, name)
            port, token = free_port(taken), secrets.token_hex(24)
            server = f"https://127.0.0.1:{port}"
            kubeconfig = kubeconfig_text(name, server, token)
            files.tokens.write_text(token_auth_line(token))
            files.kubeconfig.write_text(kubeconfig)
            files.scheduler_config.write_text(json.dumps(scheduler_config(files), indent=2))  # JSON is YAML
            for f in (files.tokens, files.kubeconfig, files.ca_key, files.sa_key, files.serving_key):
                f.chmod(0o600)
            log = lambda component: self.logs / f"{name}-{component}.log"  # noqa: E731
            self._clusters[name] = _Cluster(
                name, files, port, token,
                apiserver=Proc(f"{name}-kube-apiserver",
                               [binaries["kube-apiserver"], *apiserver_args(name, files, port, self.etcd_url),
                                *self.gates],
                               log("kube-apiserver"), go_env=API_SERVER_GO_ENV),
                controller_manager=Proc(f"{name}-kube-controller-manager",
                                        [binaries["kube-controller-manager"], *controller_manager_args(files),
                                         *self.gates],
                                        log("kube-controller-manager")),
                scheduler=Proc(f"{name}-kube-scheduler", [binaries["kube-scheduler"], *scheduler_args(files), *self.gates],
                               log("kube-scheduler")),
            )
            self.endpoints[name] = ClusterEndpoint(name, server, token, kubeconfig)

    def _wait(self, ok: Callable[[], bool], who: str, proc: Proc, timeout: float, what: str = "ready") -> None:
        deadline = time.monotonic() + timeout
        while True:
            if ok():
                return
            if not proc.alive():
                raise ControlPlaneError(f"{who}: {proc.label} exited (code {proc.popen and proc.popen.returncode}) "
                                        f"before it was {what}; see {proc.log}:\n{log_tail(proc.log)}")
            if time.monotonic() > deadline:
                raise ControlPlaneError(f"{who}: {proc.label} not {what} after {timeout:.0f}s; see {proc.log}:\n"
                                        f"{log_tail(proc.log)}")
            time.sleep(0.3)

    def _wait_ready(self, c: _Cluster) -> None:
        """/readyz is 200, and the `default` ServiceAccount exists in `default` (the controller-manager works)."""
        self._wait(lambda: _https_status(c.port, "/readyz", c.token) == 200, c.name, c.apiserver, self.start_timeout)
        sa = "/api/v1/namespaces/default/serviceaccounts/default"
        deadline = time.monotonic() + self.start_timeout
        while _https_status(c.port, sa, c.token) != 200:
            for p in (c.apiserver, c.controller_manager):
                if not p.alive():
                    raise ControlPlaneError(f"{c.name}: {p.label} exited before the default ServiceAccount "
                                            f"appeared; see {p.log}:\n{log_tail(p.log)}")
            if time.monotonic() > deadline:
                raise ControlPlaneError(
                    f"{c.name}: no ServiceAccount default/default after {self.start_timeout:.0f}s, so the "
                    f"controller-manager is not working; see {c.controller_manager.log}:\n"
                    f"{log_tail(c.controller_manager.log)}")
            time.sleep(0.3)
        for p in c.procs:
            p.sample()

    def stop_cluster(self, name: str) -> None:
        """The cluster goes away: its three processes stop and its API port refuses connections."""
        with self._lock:
            c = self._cluster(name)
            stop_procs([c.scheduler, c.controller_manager, c.apiserver])

    def running(self) -> list[str]:
        """The clusters whose API server is up (not stopped with `stop_cluster`)."""
        return [name for name, c in self._clusters.items() if c.apiserver.alive()]

    def start_cluster(self, name: str) -> None:
        """Back on the same port with the same certificates, token and data; returns once ready."""
        with self._lock:
            c = self._cluster(name)
            if c.apiserver.alive():
                return
            stop_procs(c.procs)  # a controller still running alone would be restarted with the rest
            c.apiserver.start()
            try:
                self._wait(lambda: _https_status(c.port, "/readyz", c.token) == 200, c.name, c.apiserver,
                           self.start_timeout)
                c.controller_manager.start()
                c.scheduler.start()
                self._wait_ready(c)
            except BaseException:
                stop_procs(c.procs)
                raise

    def _cluster(self, name: str) -> _Cluster:
        if self.etcd is None:
            raise RuntimeError("fleet not started")
        if name not in self._clusters:
            raise KeyError(f"no cluster {name!r} in this fleet ({', '.join(self._clusters)})")
        return self._clusters[name]

    def _procs(self) -> list[Proc]:
        return [p for c in self._clusters.values() for p in c.procs] + ([self.etcd] if self.etcd else [])

    def cpu_seconds(self) -> float:
        """CPU seconds (user + system) every running process of the fleet has used so far: etcd and each kube-*."""
        return sum(self.cpu_seconds_by_component().values())

    def cpu_seconds_by_component(self) -> dict[str, float]:
        """CPU seconds so far per component, summed over the clusters: "etcd", "kube-apiserver", "lws-controller"..."""
        from .pulumi_cli import _cpu_seconds
        names = sorted(self._clusters, key=len, reverse=True)  # the longest first: a cluster name may prefix another
        split: dict[str, float] = {}
        for proc in self._procs():
            if proc.alive() and proc.popen is not None:
                component = next((proc.label[len(n) + 1:] for n in names if proc.label.startswith(f"{n}-")), proc.label)
                split[component] = split.get(component, 0.0) + _cpu_seconds(str(proc.popen.pid))
        return split

    def peak_memory(self) -> dict[str, int]:
        """Process label -> peak RSS in bytes (VmHWM), the highest seen over every run of that process."""
        return {p.label: p.sample() for p in self._procs()}

    def close(self) -> None:
        """Stop everything (kube-* first, etcd last). Idempotent; safe from atexit and signal handlers."""
        if self._closed:
            return
        self._closed = True
        kube = [p for c in self._clusters.values() for p in c.procs]
        stop_procs(kube)
        if self.etcd is not None:
            stop_procs([self.etcd])
        _LIVE_FLEETS.discard(self)


# inotify instances a cluster's processes hold (certificate and config reloaders): kube-apiserver 3,
# kube-controller-manager 5, the LeaderWorkerSet controller 1; measured with 21 clusters. The rest of the machine
# gets a margin.
INOTIFY_PER_CLUSTER = 9
INOTIFY_MARGIN = 16
INOTIFY_LIMIT = Path("/proc/sys/fs/inotify/max_user_instances")


def check_inotify_instances(clusters: int, limit_file: Path = INOTIFY_LIMIT) -> None:
    """Refuse to start a fleet the machine's inotify limit cannot hold: past it a controller dies with "too many
    open files" (the LeaderWorkerSet controller first), far from the cause. Linux's default, 128, holds 12 clusters."""
    try:
        limit = int(limit_file.read_text())
    except (OSError, ValueError):
        return
    needed = clusters * INOTIFY_PER_CLUSTER + INOTIFY_MARGIN
    if limit < needed:
        raise ControlPlaneError(
            f"{clusters} control planes need about {needed} inotify instances and this machine allows {limit} "
            f"(fs.inotify.max_user_instances): raise it first, e.g. `sudo sysctl -w fs.inotify.max_user_instances="
            f"{max(1024, needed)}`")


# --- readiness probes (stdlib only; KubeApi is helper B's and not needed here) --------------------------------------

_INSECURE = ssl.create_default_context()
_INSECURE.check_hostname = False
_INSECURE.verify_mode = ssl.CERT_NONE


def _https_status(port: int, path: str, token: str) -> int | None:
    req = urllib.request.Request(f"https://127.0.0.1:{port}{path}", headers={"Authorization": f"Bearer {token}"})
    try:
        with urllib.request.urlopen(req, context=_INSECURE, timeout=5) as resp:
            return resp.status
    except urllib.error.HTTPError as e:
        return e.code
    except (OSError, ssl.SSLError):
        return None


def _http_ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=3) as resp:
            return resp.status == 200
    except (OSError, urllib.error.HTTPError):
        return False
