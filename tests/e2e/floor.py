"""The floor of `pulumi up`: the same rendered objects and releases applied directly with kubectl and helm.

    python -m tests.e2e.floor --work DIR --bin BIN --venv VENV --crds CRDS [--clusters N --deployments M]

`apply_floor(render_dir, kubeconfigs, bin_dir)` takes the folder `modelplane render --out` wrote and,
per cluster (one thread each, as Pulumi runs one provider per cluster), applies what `pulumi up`
applies, in the order its dependencies impose (modelplane/infra/components/common.py, deploy.py):

1. the remote CRD manifests (`meta/remote-manifests.yaml`, local mirror files) with the objects nothing
   serves (namespaces, quotas, storage classes: every release waits for them), then the CRDs Established;
2. the Helm releases (`meta/helm-releases.yaml`), each once the releases of its `dependsOn` are in
   (independent ones at once): `helm upgrade --install` with the release's chart, version, namespace
   (created) and values, as the program's `helm.v3.Release` installs it (`atomic`, a 900 s timeout; the
   provider's Helm 3 library: its wait, `--wait=legacy`, no `waitForJobs`, client-side apply);
3. every other object in file order (render's apply order), one `kubectl apply --server-side
   --field-manager=modelplane-floor`, then waits for what the provider awaits (`awaits`);
4. on the front door, the objects from the first one that holds a workload cluster's gateway address
   on (gateway aliases, endpoints, service routes) only once those workload clusters are done (their
   Gateway has its address, their replicas are available), the aliases rendered again with the real
   address as `GatewayAlias` does.

`delete_floor(result, kubeconfigs, bin_dir)` removes what it applied and waits until its namespaces
are gone; CRDs and namespaces the cluster had before `apply_floor` are kept (the LeaderWorkerSet CRD
the harness applies, what a `pulumi destroy` keeps). kubectl and helm run with HOME in `work`, so
their caches (discovery, Helm's) stay in the scratch folder. CPU and peak RSS are each child's own
(`os.wait4`), so processes the caller runs meanwhile are not counted.
"""
from __future__ import annotations

import argparse
import contextlib
import functools
import json
import os
import re
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from modelplane.render.front_door_envoy_routes import gateway_alias_objects
from modelplane.render.secrets import PLACEHOLDER
from modelplane.render.types import SKIP_AWAIT, SYSTEM_NAMESPACE, WAIT_FOR, WORKLOAD_GATEWAY, WORKLOAD_GATEWAY_PORT

FIELD_MANAGER = "modelplane-floor"
# Objects nothing serves: every release waits for them (common.install_stack: `unserved`, tenant namespaces).
FIRST_KINDS = frozenset({"Namespace", "ResourceQuota", "LimitRange", "StorageClass", "PriorityClass"})
# What the provider awaits without an annotation (pulumi-kubernetes pkg/await): a Deployment until its new
# ReplicaSet is available, a Job until complete, a PVC until bound, a Pod until ready. Services are left out:
# the provider's Service await is a 10 s settle of the Endpoints, not a state of the cluster (see the report).
DEPLOYMENT_DONE = 'jsonpath={.status.conditions[?(@.type=="Progressing")].reason}=NewReplicaSetAvailable'
BUILT_IN_AWAITS = {("apps/v1", "Deployment"): DEPLOYMENT_DONE, ("batch/v1", "Job"): "condition=Complete",
                   ("v1", "PersistentVolumeClaim"): "jsonpath={.status.phase}=Bound", ("v1", "Pod"): "condition=Ready"}
GATEWAY_ADDRESS = "jsonpath={.status.addresses[0].value}"
DEPLOYED = re.compile(r"<deployed: ([^<>]+)>")
HELM_TIMEOUT, WORKLOAD_TIMEOUT, APPLY_TIMEOUT = 900, 2700, 600  # the program's Release timeout; 45 min workloads
KEEP_NAMESPACES = frozenset({"default", "kube-system", "kube-public", "kube-node-lease"})


class FloorError(RuntimeError):
    """A command of the floor failed; `result` holds what was applied so far (give it to `delete_floor`)."""

    result: FloorResult | None = None


# --- the render folder, read into steps (pure) ----------------------------------------------------------------------

@dataclass(frozen=True)
class ObjectFile:
    path: Path
    obj: dict[str, Any]
    alone: bool = True  # the only document of its file (render writes one object per file)

    @property
    def ref(self) -> str:
        meta = self.obj["metadata"]
        return f"{self.obj['kind']} {meta['namespace'] + '/' if meta.get('namespace') else ''}{meta['name']}"

    def identity(self) -> tuple[str, str, str | None, str]:
        meta = self.obj["metadata"]
        return self.obj["apiVersion"], self.obj["kind"], meta.get("namespace"), meta["name"]


@dataclass(frozen=True)
class Release:
    name: str
    namespace: str
    chart: str
    version: str
    values: dict[str, Any]
    depends_on: tuple[str, ...] = ()
    crds: tuple[str, ...] = ()  # the chart's `crds/` (Helm installs them and never removes them)


@dataclass(frozen=True)
class Placeholder:
    name: str
    token: str


@dataclass
class ClusterSteps:
    """One cluster's folder as the floor applies it (module docstring, steps 1-4)."""

    cluster: str
    manifests: list[Path] = field(default_factory=list)
    crds: list[str] = field(default_factory=list)  # the manifests' CRD names, awaited Established
    first: list[ObjectFile] = field(default_factory=list)
    releases: list[Release] = field(default_factory=list)
    objects: list[ObjectFile] = field(default_factory=list)
    after_fleet: list[ObjectFile] = field(default_factory=list)
    placeholders: list[Placeholder] = field(default_factory=list)

    @property
    def waits_for_clusters(self) -> list[str]:
        """The workload clusters whose gateway address this cluster's objects hold."""
        return sorted(p.name.rsplit(".", 1)[0] for p in self.placeholders if p.name.endswith(".gatewayAddress"))

    def all_objects(self) -> list[ObjectFile]:
        return [*self.first, *self.objects, *self.after_fleet]


def read_steps(render_dir: Path, mirror: Path | None = None) -> dict[str, ClusterSteps]:
    """Every cluster folder of a render, split into the floor's steps (the front door's folder first, as written)."""
    return {folder.name: cluster_steps(folder, mirror)
            for folder in sorted(p for p in render_dir.iterdir() if (p / ".modelplane-render").is_file())}


def cluster_steps(folder: Path, mirror: Path | None = None) -> ClusterSteps:
    meta = folder / "meta"
    steps = ClusterSteps(folder.name)
    for manifest in _yaml_list(meta / "remote-manifests.yaml"):
        path = manifest_path(manifest, mirror)
        steps.manifests.append(path)
        steps.crds += _crd_names(path.read_bytes())
    for r in _yaml_list(meta / "helm-releases.yaml"):
        chart = chart_path(r, mirror)
        steps.releases.append(Release(r["name"], r["namespace"], chart, str(r["version"]), r.get("values") or {},
                                      tuple(r.get("dependsOn") or ()), tuple(chart_crds(chart))))
    steps.placeholders = [Placeholder(p["name"], p["renderedAs"]) for p in _yaml_list(meta / "placeholders.yaml")]
    addresses = [p.token for p in steps.placeholders if p.name.endswith(".gatewayAddress")]
    late = False
    for path in sorted(folder.glob("*.yaml")):
        text = path.read_text()
        late = late or any(token in text for token in addresses)
        documents = [d for d in yaml.safe_load_all(text) if d]
        for obj in documents:
            item = ObjectFile(path, obj, len(documents) == 1)
            if late:
                steps.after_fleet.append(item)
            elif obj["kind"] in FIRST_KINDS:
                steps.first.append(item)
            else:
                steps.objects.append(item)
    return steps


def manifest_path(manifest: Mapping[str, Any], mirror: Path | None) -> Path:
    """A remote manifest's local file: the mirror path render wrote, or its name in `mirror/manifests`."""
    url = str(manifest["url"])
    if url.startswith("file://"):
        url = url[len("file://"):]
    if "://" not in url:
        return Path(url)
    if mirror is None:
        raise FloorError(f"manifest {manifest['name']} is a URL ({url}): render with a folder mirror or pass `mirror`")
    from modelplane.render.sources import manifest_file_name
    from modelplane.render.types import RemoteManifest
    return mirror / "manifests" / manifest_file_name(RemoteManifest(
        manifest["name"], manifest["component"], manifest["version"], url, manifest.get("sha256")))


def chart_path(release: Mapping[str, Any], mirror: Path | None) -> str:
    """A release's chart: the mirror's `.tgz` render wrote, or its name in `mirror/charts`."""
    if not release.get("repository"):
        return str(release["chart"])
    if mirror is None:
        raise FloorError(f"release {release['name']} is from {release['repository']}: render with a folder mirror")
    from modelplane.render.sources import chart_file_name
    return str(mirror / "charts" / chart_file_name(release["chart"], str(release["version"])))


def awaits(obj: Mapping[str, Any]) -> tuple[str, ...]:
    """The `kubectl wait --for` conditions that stand for the provider's await of `obj` (none: not awaited)."""
    annotations = obj.get("metadata", {}).get("annotations") or {}
    if str(annotations.get(SKIP_AWAIT, "")).lower() == "true":
        return ()
    if WAIT_FOR in annotations:
        wait_for = annotations[WAIT_FOR]
        return tuple(json.loads(wait_for)) if wait_for.startswith("[") else (wait_for,)
    condition = BUILT_IN_AWAITS.get((obj["apiVersion"], obj["kind"]))
    return (condition,) if condition else ()


def fill(value: Any, replacements: Mapping[str, str]) -> Any:
    """`value` with every placeholder token replaced; a secret or deploy-time token left without a value is an error."""
    if isinstance(value, dict):
        return {key: fill(item, replacements) for key, item in value.items()}
    if isinstance(value, list):
        return [fill(item, replacements) for item in value]
    if isinstance(value, str):
        for token in sorted(replacements, key=len, reverse=True):
            value = value.replace(token, replacements[token])
        for pattern in (PLACEHOLDER, DEPLOYED):
            if (missing := pattern.search(value)) is not None:
                raise FloorError(f"no value for the placeholder {missing.group(0)}: pass it in `values`")
    return value


def deployed_objects(items: Sequence[ObjectFile], placeholders: Sequence[Placeholder], values: Mapping[str, str],
                     addresses: Mapping[str, str]) -> list[dict[str, Any]]:
    """The objects as `pulumi up` sends them: a workload gateway's alias rendered again with its address
    (`GatewayAlias`), every other placeholder token replaced by its value (`substitute`).

    `values` maps a placeholder's name (meta/placeholders.yaml) to its value; `addresses` a workload
    cluster to its Gateway's address. A placeholder with neither keeps its rendered value (a kind
    MetalLB range, carved from kind's default network) unless it is a secret or a deploy-time value.
    """
    replacements = {p.token: values[p.name] for p in placeholders if p.name in values}
    aliases: dict[tuple, dict[str, Any]] = {}
    for p in placeholders:
        cluster = p.name.rsplit(".", 1)[0]
        if p.name.endswith(".gatewayAddress") and cluster in addresses:
            replacements.setdefault(p.token, addresses[cluster])
            rendered = gateway_alias_objects(cluster, None, WORKLOAD_GATEWAY_PORT)
            real = gateway_alias_objects(cluster, addresses[cluster], WORKLOAD_GATEWAY_PORT)
            aliases.update({ObjectFile(Path(), t).identity(): r for t, r in zip(rendered, real, strict=True)})
    return [aliases.get(item.identity()) or fill(item.obj, replacements) for item in items]


def _yaml_list(path: Path) -> list[dict[str, Any]]:
    return (yaml.safe_load(path.read_text()) or []) if path.is_file() else []


# --- processes, metered ----------------------------------------------------------------------------------------------

@dataclass
class Usage:
    processes: int = 0
    cpu_seconds: float = 0.0
    peak_rss_bytes: int = 0  # the largest single child

    def add(self, cpu: float, rss: int) -> None:
        self.processes += 1
        self.cpu_seconds += cpu
        self.peak_rss_bytes = max(self.peak_rss_bytes, rss)


@dataclass
class Meter:
    by_tool: dict[str, Usage] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add(self, tool: str, cpu: float, rss: int) -> None:
        with self.lock:
            self.by_tool.setdefault(tool, Usage()).add(cpu, rss)

    def total(self) -> Usage:
        out = Usage()
        for usage in self.by_tool.values():
            out.processes += usage.processes
            out.cpu_seconds += usage.cpu_seconds
            out.peak_rss_bytes = max(out.peak_rss_bytes, usage.peak_rss_bytes)
        return out


class Tools:
    """kubectl and helm of `bin_dir` for one cluster, with HOME (their caches) under `home`."""

    def __init__(self, bin_dir: Path, kubeconfig: Path, home: Path, meter: Meter,
                 limit: threading.Semaphore | None = None) -> None:
        self.bin_dir, self.kubeconfig, self.meter = bin_dir, kubeconfig, meter
        self.limit = limit or contextlib.nullcontext()  # at most so many children at once, fleet-wide
        home.mkdir(parents=True, exist_ok=True)
        self.env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home), "TMPDIR": str(home),
                    "HELM_CACHE_HOME": str(home / "helm-cache"), "HELM_CONFIG_HOME": str(home / "helm-config"),
                    "HELM_DATA_HOME": str(home / "helm-data")}

    def kubectl(self, *args: str, timeout: float = APPLY_TIMEOUT) -> str:
        return self.run("kubectl", [str(self.bin_dir / "kubectl"), "--kubeconfig", str(self.kubeconfig), *args],
                        timeout)

    def helm(self, *args: str, timeout: float = HELM_TIMEOUT + 60) -> str:
        return self.run("helm", [str(self.bin_dir / "helm"), "--kubeconfig", str(self.kubeconfig), *args], timeout)

    def run(self, tool: str, argv: list[str], timeout: float) -> str:
        """Run `argv`, add its own CPU time and peak RSS to the meter; its stdout, or FloorError with its stderr."""
        with self.limit, tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
            proc = subprocess.Popen(argv, stdout=out, stderr=err, stdin=subprocess.DEVNULL, env=self.env,
                                    start_new_session=True)
            timer = threading.Timer(timeout, _kill_group, (proc.pid,))
            timer.start()
            try:
                _, status, usage = os.wait4(proc.pid, 0)
            finally:
                timer.cancel()
            proc.returncode = os.waitstatus_to_exitcode(status)
            self.meter.add(tool, usage.ru_utime + usage.ru_stime, usage.ru_maxrss * 1024)
            out.seek(0)
            err.seek(0)
            stdout, stderr = out.read().decode(errors="replace"), err.read().decode(errors="replace")
        if proc.returncode != 0:
            shown = " ".join(a if len(a) < 80 else a[:77] + "..." for a in argv[3:12])
            raise FloorError(f"{tool} {shown} ... exited {proc.returncode}: {stderr.strip()[-1500:]}")
        return stdout


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, 9)


# --- applying --------------------------------------------------------------------------------------------------------

@dataclass
class ClusterReport:
    cluster: str
    objects: int = 0
    releases: int = 0
    awaited: int = 0
    seconds: dict[str, float] = field(default_factory=dict)  # step -> wall seconds
    before: set[str] = field(default_factory=set)  # CRDs and namespaces it had before (`kubectl get -o name`)
    error: str = ""


@dataclass
class FloorResult:
    wall_seconds: float
    objects: int
    releases: int
    awaited: int
    cpu_seconds: float  # kubectl and helm children, user + system
    peak_rss_bytes: int  # the largest kubectl or helm child
    by_tool: dict[str, Usage]
    clusters: dict[str, ClusterReport]
    steps: dict[str, ClusterSteps] = field(repr=False)
    work: Path = field(repr=False)

    def summary(self) -> str:
        tools = ", ".join(f"{t} {u.processes} runs {u.cpu_seconds:.1f} s CPU peak {u.peak_rss_bytes / 2**20:.0f} MB"
                          for t, u in sorted(self.by_tool.items()))
        return (f"floor: {self.wall_seconds:.1f} s wall, {self.objects} objects, {self.releases} releases, "
                f"{self.awaited} awaited, {self.cpu_seconds:.1f} s CPU, peak RSS {self.peak_rss_bytes / 2**20:.0f} MB "
                f"({tools})")


class _Fleet:
    """What the cluster threads share: each workload cluster's gateway address, and which clusters are done."""

    def __init__(self, clusters: Sequence[str]) -> None:
        self.addresses: dict[str, str] = {}
        self.done = {c: threading.Event() for c in clusters}
        self.failed: set[str] = set()


def apply_floor(render_dir: Path, kubeconfigs: Mapping[str, Path], bin_dir: Path, work: Path | None = None, *,
                mirror: Path | None = None, values: Mapping[str, str] | None = None, parallel: bool = True,
                max_processes: int | None = None) -> FloorResult:
    """Apply the render folder's clusters as `pulumi up` does (module docstring); raises FloorError on a failure.

    `kubeconfigs`: cluster -> admin kubeconfig file; `work`: scratch for kubectl/helm homes and filled-in
    objects (default: `<render_dir>/../floor`); `mirror`: the folder mirror, only for a render made without
    one; `values`: placeholder name -> value (secrets, deploy-time values); `parallel=False` applies
    the clusters one after another (the workload clusters first), their releases one at a time;
    `max_processes` bounds the kubectl and helm children running at once, fleet-wide (a `kubectl wait`
    holds its slot while it waits, as an awaited resource holds one of the engine's `--parallel` slots).
    """
    steps = read_steps(render_dir, mirror)
    work = (work or render_dir.parent / "floor").resolve()
    missing = sorted(set(steps) - set(kubeconfigs))
    if missing:
        raise FloorError(f"no kubeconfig for {', '.join(missing)}")
    meter, fleet = Meter(), _Fleet(list(steps))
    reports = {c: ClusterReport(c) for c in steps}
    limit = threading.BoundedSemaphore(max_processes) if max_processes else None
    tools = {c: Tools(bin_dir, kubeconfigs[c], work / "home" / c, meter, limit) for c in steps}
    for cluster, report in reports.items():  # outside the timed window and the meter
        report.before = set(Tools(bin_dir, kubeconfigs[cluster], work / "home" / cluster, Meter())
                            .kubectl("get", "crd,namespace", "-o", "name").split())
    order = sorted(steps, key=lambda c: bool(steps[c].after_fleet))  # clusters that wait for others last
    started = time.monotonic()

    def one(cluster: str) -> None:
        try:
            _apply_cluster(steps[cluster], tools[cluster], reports[cluster], fleet, work / "objects" / cluster,
                           values or {}, parallel)
        except Exception as error:  # reported; the other clusters stop waiting for this one
            reports[cluster].error = str(error)
            fleet.failed.add(cluster)
        finally:
            fleet.done[cluster].set()

    _each(order, one, parallel)
    usage = meter.total()
    result = FloorResult(time.monotonic() - started, sum(r.objects for r in reports.values()),
                         sum(r.releases for r in reports.values()), sum(r.awaited for r in reports.values()),
                         usage.cpu_seconds, usage.peak_rss_bytes, meter.by_tool, reports, steps, work)
    if fleet.failed:
        error = FloorError("; ".join(f"{c}: {reports[c].error}" for c in sorted(fleet.failed)))
        error.result = result
        raise error
    return result


def _apply_cluster(steps: ClusterSteps, tools: Tools, report: ClusterReport, fleet: _Fleet, objects_dir: Path,
                   values: Mapping[str, str], parallel: bool) -> None:
    """Long: one cluster's four steps, timed one by one (the module docstring lists them)."""
    t = time.monotonic()

    def lap(step: str) -> None:
        nonlocal t
        now = time.monotonic()
        report.seconds[step] = round(now - t, 2)
        t = now

    first = _files(steps.first, steps, values, {}, objects_dir / "first")
    if steps.manifests or first:
        tools.kubectl("apply", "--server-side", f"--field-manager={FIELD_MANAGER}", "--force-conflicts",
                      *_dash_f([*steps.manifests, *first]))
        report.objects += len(steps.first)
    if steps.crds:
        tools.kubectl("wait", "--for=condition=Established", "--timeout=120s",
                      *[f"customresourcedefinition/{name}" for name in steps.crds])
    lap("crds and namespaces")
    _install_releases(steps.releases, tools, report, parallel)
    lap("releases")
    rest = _files(steps.objects, steps, values, {}, objects_dir / "objects")
    if rest:
        tools.kubectl("apply", "--server-side", f"--field-manager={FIELD_MANAGER}", "--force-conflicts",
                      *_dash_f(rest))
        report.objects += len(steps.objects)
    lap("objects")
    gateway = [path for item, path in zip(steps.objects, rest, strict=True) if item.identity()[1:] == (
        "Gateway", SYSTEM_NAMESPACE, WORKLOAD_GATEWAY)]
    if gateway:  # first, so the front door can go on while the replicas come up
        fleet.addresses[steps.cluster] = tools.kubectl(
            "wait", f"--for={GATEWAY_ADDRESS}", f"--timeout={WORKLOAD_TIMEOUT}s", "-o",
            "jsonpath={.status.addresses[0].value}", *_dash_f(gateway), timeout=WORKLOAD_TIMEOUT + 60).strip()
    report.awaited += len(gateway) + _await(steps.objects, rest, tools, skip=set(gateway))
    lap("awaits")
    if steps.after_fleet:
        for other in steps.waits_for_clusters:
            fleet.done[other].wait()
        if failed := sorted(set(steps.waits_for_clusters) & fleet.failed):
            raise FloorError(f"not applying the objects that wait for {', '.join(failed)}: it failed")
        lap("waiting for the workload clusters")
        late = _files(steps.after_fleet, steps, values, fleet.addresses, objects_dir / "after-fleet")
        tools.kubectl("apply", "--server-side", f"--field-manager={FIELD_MANAGER}", "--force-conflicts",
                      *_dash_f(late))
        report.objects += len(steps.after_fleet)
        report.awaited += _await(steps.after_fleet, late, tools)
        lap("after the workload clusters")


def _install_releases(releases: Sequence[Release], tools: Tools, report: ClusterReport, parallel: bool) -> None:
    """Each release once its `dependsOn` are installed, independent ones at once (as the engine runs them)."""
    done = {r.name: threading.Event() for r in releases}
    errors: list[str] = []
    installed: list[str] = []

    def install(release: Release) -> None:
        try:
            for name in release.depends_on:
                done[name].wait()
            if errors:
                return
            values_file = Path(tools.env["HOME"]) / f"values-{release.name}.yaml"
            values_file.write_text(yaml.safe_dump(release.values))
            tools.helm("upgrade", "--install", release.name, release.chart, "--namespace", release.namespace,
                       "--create-namespace", "--version", release.version, "--values", str(values_file),
                       "--wait=legacy", f"--timeout={HELM_TIMEOUT}s", "--rollback-on-failure", "--server-side=false")
            installed.append(release.name)
        except Exception as error:  # collected, raised below
            errors.append(f"release {release.name}: {error}")
        finally:
            done[release.name].set()

    _each(list(releases), install, parallel)
    report.releases += len(installed)
    if errors:
        raise FloorError("; ".join(errors))


def _await(items: Sequence[ObjectFile], files: Sequence[Path], tools: Tools, skip: set[Path] | None = None) -> int:
    """`kubectl wait` per await condition over the objects that have it (but `skip`); returns how many it awaited."""
    by_condition: dict[str, list[Path]] = {}
    for item, path in zip(items, files, strict=True):
        for condition in awaits(item.obj) if path not in (skip or set()) else ():
            by_condition.setdefault(condition, []).append(path)
    for condition, paths in by_condition.items():
        tools.kubectl("wait", f"--for={condition}", f"--timeout={WORKLOAD_TIMEOUT}s", *_dash_f(paths),
                      timeout=WORKLOAD_TIMEOUT + 60)
    return len({path for paths in by_condition.values() for path in paths})


def _files(items: Sequence[ObjectFile], steps: ClusterSteps, values: Mapping[str, str], addresses: Mapping[str, str],
           folder: Path) -> list[Path]:
    """One file per object, in order: the rendered file itself, or a filled-in copy in `folder` when it changed."""
    objects = deployed_objects(items, steps.placeholders, values, addresses)
    out = []
    for i, (item, obj) in enumerate(zip(items, objects, strict=True)):
        if obj == item.obj and item.alone:
            out.append(item.path)
            continue
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{i:04d}-{item.path.name}"
        path.write_text(yaml.safe_dump(obj, sort_keys=False))
        out.append(path)
    return out


def _dash_f(paths: Sequence[Path]) -> list[str]:
    return [arg for path in paths for arg in ("-f", str(path))]


def _each(items: Sequence[Any], run: Callable[[Any], None], parallel: bool) -> None:
    if not parallel:
        for item in items:
            run(item)
        return
    threads = [threading.Thread(target=run, args=(item,), daemon=True) for item in items]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


# --- removing it -----------------------------------------------------------------------------------------------------

@dataclass
class DeleteResult:
    wall_seconds: float
    cpu_seconds: float
    peak_rss_bytes: int
    namespaces: int  # deleted and waited for until gone
    crds: int
    by_tool: dict[str, Usage]

    def summary(self) -> str:
        return (f"floor delete: {self.wall_seconds:.1f} s wall ({self.namespaces} namespaces gone, {self.crds} CRDs), "
                f"{self.cpu_seconds:.1f} s CPU, peak RSS {self.peak_rss_bytes / 2**20:.0f} MB")


def delete_floor(result: FloorResult, kubeconfigs: Mapping[str, Path], bin_dir: Path, *, parallel: bool = True,
                 timeout: float = 900) -> DeleteResult:
    """Remove what `apply_floor` applied and wait until its namespaces are gone, leaving what was there before.

    Per cluster: the objects (reverse apply order), the releases (`helm uninstall --wait`), the CRDs
    of the manifests and of the charts' `crds/` (which Helm never removes), then the namespaces it
    created (rendered and release namespaces), awaited until deleted. Raises FloorError on a failure.
    """
    meter = Meter()
    counts: dict[str, tuple[int, int]] = {}
    errors: list[str] = []
    started = time.monotonic()

    def one(cluster: str) -> None:
        try:
            tools = Tools(bin_dir, kubeconfigs[cluster], result.work / "home" / cluster, meter)
            counts[cluster] = _delete_cluster(result.steps[cluster], result.clusters[cluster].before, tools, timeout)
        except Exception as error:  # collected, raised below
            errors.append(f"{cluster}: {error}")

    _each(sorted(result.steps, key=lambda c: not result.steps[c].after_fleet), one, parallel)
    usage = meter.total()
    if errors:
        raise FloorError("; ".join(errors))
    return DeleteResult(time.monotonic() - started, usage.cpu_seconds, usage.peak_rss_bytes,
                        sum(n for n, _ in counts.values()), sum(c for _, c in counts.values()), meter.by_tool)


def _delete_cluster(steps: ClusterSteps, before: set[str], tools: Tools, timeout: float) -> tuple[int, int]:
    objects = [i for i in reversed(steps.all_objects()) if i.obj["kind"] != "Namespace"]
    if objects:
        tools.kubectl("delete", "--ignore-not-found", f"--timeout={timeout:.0f}s",
                      *_dash_f(list(dict.fromkeys(i.path for i in objects))), timeout=timeout + 60)
    for release in reversed(steps.releases):
        tools.helm("uninstall", release.name, "--namespace", release.namespace, "--ignore-not-found", "--wait=legacy",
                   f"--timeout={timeout:.0f}s", timeout=timeout + 60)
    crds = [n for n in dict.fromkeys([*steps.crds, *(c for r in steps.releases for c in r.crds)])
            if f"customresourcedefinition.apiextensions.k8s.io/{n}" not in before]
    if crds:
        tools.kubectl("delete", "--ignore-not-found", f"--timeout={timeout:.0f}s",
                      *[f"customresourcedefinition/{n}" for n in crds], timeout=timeout + 60)
    namespaces = [n for n in dict.fromkeys([*(i.obj["metadata"]["name"] for i in steps.all_objects()
                                              if i.obj["kind"] == "Namespace"),
                                            *(r.namespace for r in steps.releases)])
                  if f"namespace/{n}" not in before and n not in KEEP_NAMESPACES]
    if namespaces:
        tools.kubectl("delete", "--ignore-not-found", "--wait=false", *[f"namespace/{n}" for n in namespaces])
        tools.kubectl("wait", "--for=delete", f"--timeout={timeout:.0f}s", *[f"namespace/{n}" for n in namespaces],
                      timeout=timeout + 60)
    return len(namespaces), len(crds)


@functools.cache
def chart_crds(chart: str) -> tuple[str, ...]:
    """The CRD names in a local chart archive's `crds/` folder (installed by Helm, never removed by it)."""
    names: list[str] = []
    with tarfile.open(chart) as tar:
        for member in tar.getmembers():
            parts = member.name.split("/")
            if member.isfile() and len(parts) == 3 and parts[1] == "crds" and parts[2].endswith((".yaml", ".yml")):
                data = tar.extractfile(member)
                assert data is not None
                names += _crd_names(data.read())
    return tuple(names)


@functools.lru_cache(maxsize=64)
def _crd_names(text: bytes) -> tuple[str, ...]:
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # CRD files run to megabytes
    return tuple(d["metadata"]["name"] for d in yaml.load_all(text, Loader=loader)
                 if d and d.get("kind") == "CustomResourceDefinition")


def write_kubeconfigs(kubeconfigs: Mapping[str, str], folder: Path) -> dict[str, Path]:
    """Each cluster's kubeconfig text (e.g. `ClusterEndpoint.kubeconfig`) in a file of its own, mode 600."""
    folder.mkdir(parents=True, exist_ok=True)
    out = {}
    for cluster, text in kubeconfigs.items():
        path = folder / f"{cluster}.kubeconfig"
        path.touch(mode=0o600)
        path.write_text(text)
        out[cluster] = path
    return out


# --- standalone: a local fleet, rendered, the floor applied and removed -------------------------------------------

def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work", type=Path, required=True, help="scratch folder (control planes, render, logs)")
    parser.add_argument("--bin", type=Path, required=True, help="the toolchain folder scripts/e2e-tools.sh built")
    parser.add_argument("--venv", type=Path, required=True, help="the e2e virtualenv")
    parser.add_argument("--crds", type=Path, required=True, help="the pinned CRDs (scripts/fetch_crds.py's cache)")
    parser.add_argument("--clusters", type=int, default=10)
    parser.add_argument("--deployments", type=int, default=50)
    parser.add_argument("--serial", action="store_true", help="one cluster, one release at a time")
    parser.add_argument("--max-processes", type=int, help="at most so many kubectl/helm children at once")
    args = parser.parse_args(argv)
    from modelplane.render.fleet import cluster_stacks

    from .charts import mirror_config, stand_in_report, write_mirror
    from .expected import read_render
    from .kubelet import FakeKubelet, node_groups
    from .scale import scale_stack
    from .scenario import Scenario

    work = args.work.resolve()
    work.mkdir(parents=True, exist_ok=True)
    document = scale_stack(args.clusters, args.deployments)  # kubeconfigs stay stand-ins: render needs none
    template = work / "Pulumi.scale.yaml"
    template.write_text(yaml.safe_dump(document, sort_keys=False))
    scenario = Scenario(work, args.bin.resolve(), args.venv.resolve(), args.crds.resolve(), template)
    report = scenario.report
    try:
        started = time.monotonic()
        scenario.control_planes.start()
        for cluster in scenario.cluster_names:
            scenario.kubelets[cluster] = FakeKubelet(scenario.api(cluster), cluster, node_groups(scenario.fleet, cluster))
            scenario.kubelets[cluster].start()
        for kubelet in scenario.kubelets.values():
            kubelet.wait_schedulable()
        report.note(f"{len(scenario.cluster_names)} control planes and kubelets ready in {time.monotonic() - started:.1f} s")
        print(stand_in_report(write_mirror(cluster_stacks(scenario.fleet), work / "mirror", scenario.crd_dir)), flush=True)
        document["config"]["modelplane:mirror"] = mirror_config(work / "mirror")
        stack_file = work / "Pulumi.floor.yaml"
        stack_file.write_text(yaml.safe_dump(document, sort_keys=False))
        out = work / "render" / "floor"
        rendered = scenario.modelplane("render", "--config", str(stack_file), "--out", str(out))
        if rendered.returncode != 0:
            raise RuntimeError(f"modelplane render failed: {rendered.stderr}")
        kubeconfigs = write_kubeconfigs({c: e.kubeconfig for c, e in scenario.control_planes.endpoints.items()},
                                        work / "kubeconfigs")
        try:
            result = apply_floor(out, kubeconfigs, scenario.bin_dir, work / "floor", parallel=not args.serial,
                                 max_processes=args.max_processes)
        except FloorError as error:
            report.check("the floor applies every object and release", False, str(error)[:600])
            result = error.result
        if result is not None:
            print(result.summary(), flush=True)
            for cluster, r in result.clusters.items():
                print(f"  {cluster}: {r.objects} objects, {r.releases} releases, {r.awaited} awaited; {r.seconds}")
            report.note(result.summary())
            scenario.objects_match(read_render(out), "every rendered object and release is in its cluster")
            report.check(*_workloads_available(scenario))
            deleted = delete_floor(result, kubeconfigs, scenario.bin_dir, parallel=not args.serial)
            report.note(deleted.summary())
            leftovers, terminating, kept = scenario._leftovers(scenario.cluster_names)
            report.check("delete_floor leaves no modelplane object, namespace or release namespace", not (
                leftovers or terminating or kept), f"left: {leftovers[:5]}, terminating {terminating}, kept {kept}")
    except Exception as error:  # a failed check, then the fleet is torn down
        import traceback
        traceback.print_exc()
        report.check("the floor ran to the end", False, f"{type(error).__name__}: {str(error)[:600]}")
    finally:
        scenario.close()
    print(report.summary(), flush=True)
    return 1 if report.failed else 0


def _workloads_available(scenario: Any) -> tuple[str, bool, str]:
    """Every modelplane Deployment and LeaderWorkerSet of the fleet reports Available (read from the API servers)."""
    from .kube_api import object_path
    total, unavailable = 0, []
    for cluster in scenario.cluster_names:
        api = scenario.api(cluster)
        for api_version, plural in (("apps/v1", "deployments"), ("leaderworkerset.x-k8s.io/v1", "leaderworkersets")):
            try:
                items = api.list(object_path(api_version, plural), label_selector="app.kubernetes.io/managed-by=modelplane")
            except Exception:  # the kind is not served on this cluster
                continue
            for item in items:
                total += 1
                conditions = item.get("status", {}).get("conditions") or []
                if not any(c["type"] == "Available" and c["status"] == "True" for c in conditions):
                    unavailable.append(f"{cluster}: {plural} {item['metadata']['namespace']}/{item['metadata']['name']}")
    return ("every Deployment and LeaderWorkerSet the floor applied is Available", total > 0 and not unavailable,
            f"{total} workloads; unavailable: {unavailable[:5]}" if unavailable else f"{total} workloads Available")


if __name__ == "__main__":
    sys.exit(main())
