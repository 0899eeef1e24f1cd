"""Measure the real engine on a fleet: `scripts/e2e.sh --scale [--clusters N --deployments M] [--env K=V ...]`.

The fleet is the scheduler benchmark's generator (benchmarks/bench_scheduler.py) with every cluster
`source: Existing` on a local control plane, a front door (as the e2e stack has) and a ModelService
per deployment, and the generator's NVIDIA driver renamed to the dra-example-driver's
`gpu.example.com` (its stand-in chart creates that DeviceClass; every selector is renamed with it).
Its multi-node replicas are LeaderWorkerSets, which the LeaderWorkerSet controller beside each
cluster (tests/e2e/lws_controller.py) makes Available, as in the scenario.

The operations are an operator's: the first preview and `up`, a preview and an `up` of the unchanged
fleet, `modelplane scale` of one deployment then `up`, `modelplane drain <cluster> --effect NoExecute`
then `up` (make-before-break checked in the engine's event order), and `destroy`. Each prints its
wall time, the resources it changed, the CPU seconds and peak RSS of the engine, the providers and the
program, the CPU the local fleet itself used meanwhile, and its ratio to the **floor**: the first `up`'s rendered objects and Helm releases applied
straight to the same fresh fleet with `kubectl apply --server-side` and `helm` (tests/e2e/floor.py),
then removed, before the first preview. The state file is weighed after the first `up`: bytes per resource, and by
type. The day-2 operations start once the fleet has settled (its CPU use back near what it was before the first preview).
"""
from __future__ import annotations

import argparse
import contextlib
import json
import resource
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from .kube_api import ApiError
from .engine import STACK, VIA_MODELPLANE_UP
from .pulumi_cli import Run
from .scenario import REPO, TEMPLATE, Scenario, _changed, _engine_error, _short

sys.path.insert(0, str(REPO / "benchmarks"))
from bench_scheduler import synthetic_fleet

PROCESSES = ("engine (pulumi)", "provider", "program (python)")
# What the local fleet itself used during an operation: its control planes and LeaderWorkerSet controllers, and this
# process (the stand-in kubelets are its threads). A real fleet's control planes are not on the machine.
FLEET = "fleet"
# In an engine run's environment: the `pulumi` command runs in a pseudo-terminal, as in a user's (tests/e2e/engine.py).
TERMINAL = "MODELPLANE_E2E_TERMINAL"
HARNESS = "stand-in kubelets"  # this process: the harness's kubelet threads (and its own sampling)
OPENAPI_PROTOBUF = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"  # client-go's OpenAPISchema()
# A day-2 mode: its label in the table and the engine environment it adds.
DAY2_MODES = {"checkpoints": ("", {}), "skip": ("[skip checkpoints]", {"PULUMI_SKIP_CHECKPOINTS": "true"})}


def scale_stack(clusters: int, deployments: int) -> dict:
    fleet = json.loads(json.dumps(synthetic_fleet(clusters, deployments)).replace("gpu.nvidia.com", "gpu.example.com"))
    front_door = yaml.safe_load(TEMPLATE.read_text())["config"]["modelplane:inferenceGateway"]
    for cluster in fleet["inferenceClusters"].values():
        cluster["cluster"] = {"source": "Existing", "existing": {"kubeconfig": {"secure": "v1:set-by-the-e2e-harness"}}}
    services = {ns: {name: {"endpoints": [{"selector": {"matchLabels": {"modelplane.ai/deployment": name}}}]}
                     for name in deployments_of} for ns, deployments_of in fleet["modelDeployments"].items()}
    return {"config": {f"modelplane:{key}": value for key, value in fleet.items()}
            | {"modelplane:inferenceGateway": front_door, "modelplane:modelServices": services}}


def _changes(run: Run) -> dict[str, int]:
    return {op: n for op, n in (run.result.get("changes") or {}).items() if op not in ("same", "read")}


@dataclass
class Measured:
    """One operation: what an operator waits for, and what it cost."""

    what: str
    seconds: float
    changed: int | None
    cpu: dict[str, float] = field(default_factory=dict)
    peak_rss: dict[str, int] = field(default_factory=dict)
    ok: bool = True
    fleet_split: dict[str, float] = field(default_factory=dict)  # the fleet's CPU seconds by component

    harness_seconds: float | None = None  # the whole Automation API call, `stack output` and `stack history` after it

    @classmethod
    def of(cls, what: str, run: Run) -> Measured:
        """`seconds`: the `pulumi <op>` command's own wall time when the engine run reports it (tests/e2e/engine.py)."""
        command = run.result.get("command_seconds")
        if command is not None and run.result.get("decide_seconds") is not None:  # `modelplane up`: its reads and plan too
            command += run.result["decide_seconds"]
        return cls(what, command or run.seconds, _changed(run), dict(run.cpu), dict(run.peak_rss),
                   bool(run.result.get("ok")), harness_seconds=run.seconds)


def state_weight(state_file: Path) -> tuple[str, dict]:
    """The state file's size, per resource and by type (the types that fill it first)."""
    raw = state_file.read_bytes()
    resources = json.loads(raw).get("checkpoint", {}).get("latest", {}).get("resources") or []
    by_type: dict[str, list[int]] = {}
    for state in resources:  # not `resource`: the module measures CPU with it
        entry = by_type.setdefault(state["type"], [0, 0])
        entry[0] += 1
        entry[1] += len(json.dumps(state, separators=(",", ":")))
    total = sum(size for _, size in by_type.values()) or 1
    top = sorted(by_type.items(), key=lambda kv: -kv[1][1])[:10]
    lines = [f"state file {len(raw) / 2**20:.1f} MB, {len(resources)} resources, "
             f"{len(raw) / max(len(resources), 1) / 1024:.1f} KB per resource; by type (count, share, KB each):"]
    lines += [f"  {kind.split(':')[-1]:<32} {count:>6} {size / total:>6.1%} {size / count / 1024:>7.1f}"
              for kind, (count, size) in top]
    return "\n".join(lines), {"bytes": len(raw), "resources": len(resources),
                              "by_type": {kind: {"count": c, "bytes": s} for kind, (c, s) in by_type.items()}}


class ScaleRun:
    def __init__(self, scenario: Scenario):
        self.scenario = scenario
        self.report = scenario.report
        self.measured: list[Measured] = []
        self.floor: Measured | None = None
        self.scaled: set[str] = set()
        self.drained: set[str] = set()
        self.mode, self.mode_env = "", {}  # the day-2 mode: its label (e.g. "[skip checkpoints]"), its environment

    def engine(self, what: str, op: str, events: bool = False, extra_env: dict[str, str] | None = None,
               **kwargs) -> Run:
        """An engine run, measured; without the event stream (a user's `pulumi up` has none) unless a check reads it."""
        what = f"{what} {self.mode}".strip()
        before = self.fleet_cpu_split()
        env = {**self.mode_env, **(extra_env or {})}
        run = self.scenario.engine(what, op, env=env or None, events=events, **kwargs)
        measured = Measured.of(what, run)
        after = self.fleet_cpu_split()
        measured.fleet_split = {name: round(after[name] - before.get(name, 0.0), 1) for name in after}
        measured.cpu[FLEET] = sum(measured.fleet_split.values())
        self.measured.append(measured)
        self.report.note(f"{what}: the fleet's CPU s by component: " + ", ".join(
            f"{name} {cpu:.0f}" for name, cpu in sorted(measured.fleet_split.items(), key=lambda item: -item[1])))
        if "skipped" in run.result:  # `modelplane up` (tests/e2e/engine.py): which clusters it left out, and why not others
            self.report.note(f"{what}: left out {run.result['skipped'] or 'no cluster'}, decided in "
                             f"{run.result.get('decide_seconds', 0):.1f} s; {run.result.get('notes') or ''}")
        return run

    def fleet_cpu_rate(self, seconds: float) -> float:
        """The fleet's own CPU use over the next `seconds`, in cores."""
        before = self.fleet_cpu()
        time.sleep(seconds)
        return (self.fleet_cpu() - before) / seconds

    def settle(self, idle: float, window: float = 3.0, limit: float = 300.0) -> None:
        """Until the fleet's CPU use is back near `idle` (cores, measured on the fresh fleet): the first `up`'s
        aftermath on the local control planes is not part of the next operation's time.

        That aftermath includes each API server's OpenAPI document, rebuilt on its first request once CRDs changed
        (the charts installed about 20 per cluster): every provider fetches it when it starts, and 10 API servers
        rebuilding it at once on 2 cores took longer than the provider's 32 s timeout ("unable to load schema
        information from the API server"). Each is requested here, one cluster at a time, as a real cluster would
        have rebuilt it on its own CPUs.
        """
        started = time.monotonic()
        for cluster in self.scenario.cluster_names:
            api = self.scenario.api(cluster)
            try:  # in the form the provider's client asks for: the API server caches each form apart
                api._send("GET", "/openapi/v2", None, "", None, api.timeout, accept=OPENAPI_PROTOBUF)
            except (OSError, ApiError) as error:  # the operations then show what it costs
                self.report.note(f"{cluster}: its OpenAPI document could not be read: {error}")
        warmed = time.monotonic() - started
        rate = float("inf")
        while rate > idle * 1.5 + 0.1 and time.monotonic() - started < limit:
            rate = self.fleet_cpu_rate(window)
        self.report.note(f"the fleet settled in {time.monotonic() - started:.0f} s ({warmed:.0f} s of it the API servers' "
                         f"OpenAPI documents): {rate:.2f} cores (idle before the first preview: {idle:.2f}); "
                         f"in cores, {self.idle_split(10.0)}")

    def fleet_cpu(self) -> float:
        return sum(self.fleet_cpu_split().values())

    def fleet_cpu_split(self) -> dict[str, float]:
        """CPU seconds so far per fleet component (summed over clusters), and this process: the stand-in kubelets."""
        own = resource.getrusage(resource.RUSAGE_SELF)
        return {**self.scenario.control_planes.cpu_seconds_by_component(), HARNESS: own.ru_utime + own.ru_stime}

    def idle_split(self, seconds: float) -> str:
        """What the idle fleet spends its CPU on over the next `seconds`: cores per component, the largest first."""
        before = self.fleet_cpu_split()
        time.sleep(seconds)
        after = self.fleet_cpu_split()
        rates = {name: (after[name] - before.get(name, 0.0)) / seconds for name in after}
        return ", ".join(f"{name} {rate:.2f}" for name, rate in sorted(rates.items(), key=lambda item: -item[1]))

    def edit(self, *command: str) -> bool:
        result = self.scenario.modelplane(*command)
        if result.returncode != 0:
            self.report.check(f"modelplane {command[0]}", False, _short(result.stderr))
        return result.returncode == 0

    def placement(self) -> list[dict]:
        return self.scenario.project.outputs().get("placement", {}).get("replicas", [])

    # --- the day-2 operations --------------------------------------------------------------------------
    def unchanged(self) -> None:
        preview = self.engine("pulumi preview (unchanged fleet)", "preview", expect_no_changes=True)
        self.report.check(f"a preview of the unchanged fleet proposes nothing {self.mode}".strip(),
                          preview.result.get("ok"), _engine_error(preview))
        self.unchanged_up("pulumi up (no changes)", "an up of the unchanged fleet changes nothing")
        self.unchanged_up("pulumi up (no changes; in a terminal)",
                          "an up of the unchanged fleet in a terminal changes nothing", {TERMINAL: "1"})

    def unchanged_up(self, what: str, check: str, extra_env: dict[str, str] | None = None) -> None:
        """An `up` of the unchanged fleet, measured as `what`, and the check that it changed nothing."""
        run = self.engine(what, "up", expect_no_changes=True, extra_env=extra_env)
        self.report.check(f"{check} {self.mode}".strip(), run.result.get("ok") and not _changes(run),
                          _engine_error(run) or f"changes: {_changes(run)}")

    @contextlib.contextmanager
    def in_mode(self, label: str, env: dict[str, str]) -> Iterator[None]:
        """The engine runs inside carry one checkpoint mode: its label in the table, its environment."""
        self.mode, self.mode_env = label, env
        try:
            yield
        finally:
            self.mode, self.mode_env = "", {}

    def day2(self, plan: dict, label: str, env: dict[str, str]) -> None:
        """The operator's day-2 operations, with the engine environment of one checkpoint mode."""
        with self.in_mode(label, env):
            self.unchanged()
            self.scale_one(plan)
            self.drain_one()

    def variants(self, variants: list[tuple[str, dict[str, str]]]) -> None:
        """The unchanged `up` once per variant, with the variant's engine environment added to the skip mode's: e.g.
        `MODELPLANE_E2E_EXCLUDE` (tests/e2e/engine.py), `GOGC`, or a setting a patched program reads."""
        with self.in_mode(*DAY2_MODES["skip"]):
            for label, env in variants:
                self.unchanged_up(f"pulumi up (no changes; {label})",
                                  f"an up of the unchanged fleet changes nothing ({label})", env)

    def via_modelplane_up(self, plan: dict, clusters: int) -> None:
        """`modelplane up` (modelplane/cli_up.py): the first records every cluster's fingerprint, the second leaves
        every workload cluster out, a scale and a drain then change a few; a full `pulumi up` after them changes
        nothing, so what was left out was as a full `up` would have left it."""
        via = {VIA_MODELPLANE_UP: "1"}
        with self.in_mode(*DAY2_MODES["skip"]):
            first = self.engine("modelplane up (no changes; records fingerprints)", "up", expect_no_changes=True,
                                extra_env=via)
            self.report.check("modelplane up of the unchanged fleet changes nothing", first.result.get("ok")
                              and not _changes(first), _engine_error(first) or f"changes: {_changes(first)}")
            second = self.engine("modelplane up (no changes)", "up", expect_no_changes=True, extra_env=via)
            skipped = second.result.get("skipped") or []
            self.report.check(f"the next modelplane up leaves all {clusters} workload clusters out and changes nothing",
                              second.result.get("ok") and not _changes(second) and len(skipped) == clusters,
                              _engine_error(second) or f"left out {skipped}; notes {second.result.get('notes')}; "
                              f"changes: {_changes(second)}")
            preview = self.engine("modelplane preview (unchanged fleet)", "preview", expect_no_changes=True,
                                  extra_env=via)
            self.report.check(f"modelplane preview leaves all {clusters} workload clusters out and proposes nothing",
                              preview.result.get("ok") and len(preview.result.get("skipped") or []) == clusters,
                              _engine_error(preview) or f"left out {preview.result.get('skipped')}")
            self.command_up(clusters)
            self.scale_one(plan, "modelplane up", via)
            self.drain_one("modelplane up", via)
            self.unchanged_up("pulumi up (no changes; after modelplane up)",
                              "a full up after modelplane up's changes nothing")

    def command_up(self, clusters: int) -> None:
        """`modelplane up` as a user runs it: the command, which runs the `pulumi` CLI with the program served from its
        own process (no Automation API). WALL is the whole command, its reads and plan included."""
        what = f"modelplane up (no changes; the command) {self.mode}".strip()
        before = self.fleet_cpu()
        run = self.scenario.project.modelplane("up", "--stack", STACK, "--", "--yes", "--skip-preview",
                                               "--non-interactive", "--expect-no-changes")
        measured = Measured(what, run.seconds, None, dict(run.cpu), dict(run.peak_rss), run.ok)
        measured.cpu[FLEET] = self.fleet_cpu() - before
        self.measured.append(measured)
        left_out = f"{clusters} unchanged clusters left out of this update"
        self.report.check(f"the modelplane up command leaves all {clusters} workload clusters out and changes nothing",
                          run.ok and left_out in run.stderr, run.tail())

    def scale_one(self, plan: dict, via: str = "pulumi up", extra_env: dict[str, str] | None = None) -> None:
        """One more replica of the first fully scheduled deployment whose extra replica fits somewhere.

        "Fits" as the program will plan it: with the placement the last `up` left (replicas stay put).
        """
        stack = str(self.scenario.project.stack_file)
        previous = self.scenario.work / "placement.json"
        previous.write_text(json.dumps(self.scenario.project.outputs().get("placement") or {}))
        for target in [d for d in plan["deployments"] if d["scheduled"] and d["scheduled"] == d["replicas"] < 10][:8]:
            name = f"{target['namespace']}/{target['name']}"
            if target["name"] in self.scaled:
                continue
            if not self.edit("scale", "--config", stack, name, "--replicas", str(target["replicas"] + 1)):
                return
            if all(d["scheduled"] == d["replicas"] for d in self.scenario.plan(previous)["deployments"]
                   if f"{d['namespace']}/{d['name']}" == name):
                self.scaled.add(target["name"])
                break
            self.edit("scale", "--config", stack, name, "--replicas", str(target["replicas"]))
        else:
            self.report.check("scale one deployment", False, "no deployment has room for one more replica")
            return
        before = {r["name"] for r in self.placement() if f"{r['namespace']}/{r['deployment']}" == name}
        run = self.engine(f"{via} (scale {name} {target['replicas']} -> {target['replicas'] + 1})", "up",
                          extra_env=extra_env)
        after = {r["name"] for r in self.placement() if f"{r['namespace']}/{r['deployment']}" == name}
        self.report.check(f"scale one deployment: one replica more, nothing else replaced or deleted {self.mode}".strip(),
                          bool(run.result.get("ok")) and len(after) == len(before) + 1 and before <= after
                          and not (run.result.get("changes") or {}).get("delete"),
                          _engine_error(run) or f"replicas {sorted(before)} -> {sorted(after)}; "
                          f"changes {run.result.get('changes')}")

    def drain_one(self, via: str = "pulumi up", extra_env: dict[str, str] | None = None) -> None:
        placed = self.placement()
        per_cluster: dict[str, int] = {}
        for replica in placed:
            per_cluster[replica["cluster"]] = per_cluster.get(replica["cluster"], 0) + 1
        # the cluster with the fewest replicas that has some: the others have the most room to take them
        cluster = min((n, c) for c, n in per_cluster.items() if n and c not in self.drained)[1]
        self.drained.add(cluster)
        if not self.edit("drain", "--config", str(self.scenario.project.stack_file), "--effect", "NoExecute", cluster):
            return
        run = self.engine(f"{via} (drain {cluster} NoExecute, {per_cluster[cluster]} replicas)", "up", events=True,
                          extra_env=extra_env)
        left = [r for r in self.placement() if r["cluster"] == cluster]
        done = [(e["seq"], e["op"], e["type"], e["urn"].rsplit("::", 1)[-1]) for e in run.result.get("events", [])
                if e["kind"] == "done"]
        created = [seq for seq, op, typ, name in done if op == "create" and typ.endswith((":Deployment", ":LeaderWorkerSet"))]
        removed = [seq for seq, op, _, name in done if op == "delete" and name.startswith(f"{cluster}/")]
        order_ok = not created or not removed or max(created) < min(removed)
        self.report.check(f"drain {cluster} NoExecute: its replicas leave it, every replacement ready before the first "
                          f"removal (engine event order) {self.mode}".strip(), bool(run.result.get("ok")) and not left and order_ok,
                          _engine_error(run) or f"{len(created)} workloads created (last at event {max(created, default=None)}), "
                          f"{len(removed)} objects removed (first at event {min(removed, default=None)}); "
                          f"left on {cluster}: {len(left)}")

    # --- the table -------------------------------------------------------------------------------------
    def table(self) -> str:
        floor = self.floor.seconds if self.floor else None
        head = (f"{'OPERATION':<52} {'WALL':>8} {'CHANGED':>8} {'x FLOOR':>8}  {'CPU s engine/provider/program':>30}"
                f"  {'FLEET CPU s':>11}  PEAK RSS MB engine/provider/program")
        lines = [head]
        for m in ([self.floor] if self.floor else []) + self.measured:
            cpu = "/".join(f"{m.cpu.get(p, 0):.0f}" for p in PROCESSES)
            rss = "/".join(f"{m.peak_rss.get(p, 0) / 2**20:.0f}" for p in PROCESSES)
            ratio = f"{m.seconds / floor:.1f}" if floor and m is not self.floor else "-"
            changed = "-" if m.changed is None else str(m.changed)
            fleet = f"{m.cpu[FLEET]:.0f}" if FLEET in m.cpu else "-"
            lines.append(f"{m.what:<52} {m.seconds:>7.1f}s {changed:>8} {ratio:>8}  {cpu:>30}  {fleet:>11}  {rss}"
                         + ("" if m.ok else "  (FAILED)"))
        if self.floor:
            lines.append("(floor CPU and RSS are kubectl's and helm's, under 'provider')")
        lines.append("(FLEET CPU s: the local control planes and the stand-in kubelets during the operation, not Pulumi's)")
        extra = [m.harness_seconds - m.seconds for m in self.measured if m.harness_seconds is not None]
        if extra:
            lines.append(f"(WALL: the pulumi command itself; the Automation API's `stack output` and `stack history` "
                         f"after each added {min(extra):.1f}-{max(extra):.1f} s; CPU and RSS include them)")
        return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work", type=Path, required=True)
    parser.add_argument("--bin", type=Path, required=True)
    parser.add_argument("--venv", type=Path, required=True)
    parser.add_argument("--crds", type=Path, required=True)
    parser.add_argument("--clusters", type=int, default=10)
    parser.add_argument("--deployments", type=int, default=50)
    parser.add_argument("--env", action="append", default=[], metavar="KEY=VALUE",
                        help="an environment variable for every engine run (e.g. PULUMI_SKIP_CHECKPOINTS=false)")
    parser.add_argument("--modes", default="checkpoints,skip",
                        help="the day-2 operations' engine modes, in order: checkpoints (every step saved, Pulumi's "
                             "default), skip (PULUMI_SKIP_CHECKPOINTS=true; the program refuses it for an up that builds)")
    parser.add_argument("--first", choices=sorted(DAY2_MODES), default="skip",
                        help="the first preview's and up's engine mode (default skip: every cluster of the scale fleet "
                             "is Existing, which the program lets build while skipping checkpoints)")
    parser.add_argument("--no-floor", action="store_true", help="skip the kubectl/helm floor")
    parser.add_argument("--floor-only", action="store_true",
                        help="measure the floor and stop: applying and removing it disturbs the fleet for minutes "
                             "afterwards (docs/e2e.md), so measure the operations in another run, with --no-floor")
    parser.add_argument("--json", type=Path, help="also write the measurements here")
    parser.add_argument("--modelplane-up", action="store_true",
                        help="then `modelplane up` twice (the second leaves the unchanged clusters out), a scale and a "
                             "drain through it, and a full `pulumi up` that must change nothing")
    parser.add_argument("--variants", type=Path, metavar="FILE",
                        help="after the day-2 modes, the unchanged `up` once per variant: a JSON list of "
                             "[label, {engine environment}] pairs (docs/e2e.md)")
    args = parser.parse_args(argv)
    variants = read_variants(args.variants) if args.variants else []
    work = args.work.resolve()
    work.mkdir(parents=True, exist_ok=True)
    template = work / "Pulumi.scale.yaml"
    template.write_text(yaml.safe_dump(scale_stack(args.clusters, args.deployments), sort_keys=False))
    scenario = Scenario(work, args.bin.resolve(), args.venv.resolve(), args.crds.resolve(), template)
    scenario.project.env.update(dict(item.split("=", 1) for item in args.env))
    measure = ScaleRun(scenario)
    report = scenario.report
    state: dict = {}
    try:
        scenario.start()
        plan = scenario.plan()
        scheduled = sum(d["scheduled"] for d in plan["deployments"])
        report.note(f"{args.clusters} clusters x {args.deployments} deployments: {scheduled} replicas scheduled; "
                    f"engine environment {args.env or 'as the project sets it'}")
        first_render = work / "render" / "first"
        rendered = scenario.modelplane("render", "--config", str(scenario.project.stack_file), "--out", str(first_render))
        if rendered.returncode != 0:
            raise RuntimeError(f"modelplane render failed: {rendered.stderr}")
        if not args.no_floor:
            # on the fresh fleet, then removed: after a destroy the charts' CRDs and namespaces would still be there
            measure.floor = run_floor(scenario, first_render)
        if not args.floor_only:
            idle = measure.fleet_cpu_rate(5.0)
            report.note(f"the fresh fleet idles at {idle:.2f} cores: {measure.idle_split(5.0)}")
            with measure.in_mode(*DAY2_MODES[args.first]):
                preview = measure.engine("pulumi preview (first)", "preview")
                report.check("preview succeeds", preview.result.get("ok"), _engine_error(preview))
                up = measure.engine("pulumi up (first)", "up", timeout=7200)
                report.check("up succeeds", up.result.get("ok"), _engine_error(up))
            if up.result.get("ok"):
                text, state = state_weight(scenario.project.state_file())
                report.note(text)
                modes = [mode for mode in args.modes.split(",") if mode]  # none: the first preview and up only
                if modes or variants or args.modelplane_up:
                    measure.settle(idle)
                for mode in modes:
                    measure.day2(plan, *DAY2_MODES[mode])
                measure.variants(variants)
                if args.modelplane_up:
                    measure.via_modelplane_up(plan, args.clusters)
            started = time.monotonic()
            # destroy runs no program; skipping checkpoints, an interrupted destroy leaves the state, and the next deletes again
            with measure.in_mode(*DAY2_MODES["skip"]):
                destroy = measure.engine("pulumi destroy", "destroy", timeout=7200)
            report.check("destroy succeeds", destroy.result.get("ok"), _engine_error(destroy))
            report.note(f"destroy took {time.monotonic() - started:.0f} s")
    finally:
        memory = scenario.control_planes.peak_memory() if scenario.control_planes.endpoints else {}
        if memory:
            report.note(f"control planes: {len(memory)} processes, peak RSS {sum(memory.values()) / 2**30:.1f} GiB in all")
        scenario.close()
    print(report.summary(), flush=True)
    print("\n" + measure.table(), flush=True)
    if args.json:
        args.json.write_text(json.dumps({"clusters": args.clusters, "deployments": args.deployments, "env": args.env,
                                         "state": state, "floor": measure.floor and measure.floor.__dict__,
                                         "operations": [m.__dict__ for m in measure.measured]}, indent=1))
    return 1 if report.failed else 0


def read_variants(path: Path) -> list[tuple[str, dict[str, str]]]:
    """`--variants FILE`: [[label, {"NAME": "value", ...}], ...], checked before the fleet starts."""
    try:
        document = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as error:
        raise SystemExit(f"--variants {path}: {error}") from None
    if not isinstance(document, list) or not all(
        isinstance(item, list) and len(item) == 2 and isinstance(item[0], str) and isinstance(item[1], dict)
        and all(isinstance(k, str) and isinstance(v, str) for k, v in item[1].items()) for item in document
    ):
        raise SystemExit(f'--variants {path}: give a JSON list of [label, {{"NAME": "value"}}] pairs')
    return [(label, env) for label, env in document]


def run_floor(scenario: Scenario, render_dir: Path) -> Measured | None:
    """The same objects and releases as the first `up`, applied with kubectl and helm (tests/e2e/floor.py)."""
    try:
        from . import floor
    except ImportError:
        scenario.report.note("no floor: tests/e2e/floor.py is not there")
        return None
    kubeconfigs = floor.write_kubeconfigs({c: e.kubeconfig for c, e in scenario.control_planes.endpoints.items()},
                                          scenario.work / "kubeconfigs")
    try:
        result = floor.apply_floor(render_dir, kubeconfigs, scenario.bin_dir, scenario.work / "floor")
    except floor.FloorError as error:
        scenario.report.check("the floor applies every object and release", False, str(error)[:600])
        result = error.result
    if result is None:
        return None
    scenario.report.note(result.summary())
    deleted = floor.delete_floor(result, kubeconfigs, scenario.bin_dir)
    scenario.report.note(f"the floor removed again: {deleted.summary()}")
    return Measured("floor: the same objects and releases, kubectl --server-side and helm", result.wall_seconds,
                    result.objects + result.releases, {"provider": result.cpu_seconds},
                    {"provider": result.peak_rss_bytes})


if __name__ == "__main__":
    sys.exit(main())
