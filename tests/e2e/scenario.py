"""The end-to-end scenario: the real engine and provider against a local fleet of real control planes.

    python -m tests.e2e.scenario --work DIR --bin DIR --venv DIR --crds DIR     (scripts/e2e.sh runs it in the e2e venv)

Every check is observed through the API servers, the engine's own events and the stack's exported
outputs, never through our own plan alone. Exit status 1 when any check fails; a summary table last.
"""
from __future__ import annotations

import argparse
import base64
import json
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import yaml
from pulumi_kubernetes._utilities import get_version as kubernetes_sdk_version

from modelplane.cli import load_file
from modelplane.render.fleet import cluster_stacks

from .charts import mirror_config, stand_in_report, write_mirror
from .expected import Discovery, Rendered, fetch, read_render
from .gang_checks import gangs_on_real_nodes, pod_placement_problems
from .kube_api import ApiError, KubeApi, object_path
from .kubelet import FakeKubelet, node_groups
from .lws_controller import LwsFleet, clusters_running_lws
from .engine import VIA_MODELPLANE_UP
from .pulumi_cli import STACK, PulumiProject, Run
from . import packing_cases, selector_cases, tiers_story
from .front_door_xds import TranslateError, expected_from, front_door_problems, translate
from .status_checks import status_matches_the_fleet, status_reports_a_stopped_cluster

REPO = Path(__file__).resolve().parents[2]
TEMPLATE = Path(__file__).with_name("Pulumi.e2e.yaml")
GATEWAY_API_CRDS = ("gateway-api-v1.5.1/gateway.networking.k8s.io_gatewayclasses.yaml",
                    "gateway-api-v1.5.1/gateway.networking.k8s.io_gateways.yaml",
                    "gateway-api-v1.5.1/gateway.networking.k8s.io_httproutes.yaml")
DEPLOYMENT = "ml-team/mock-demo"
# docs/runbook.md, "A cluster that is gone for good", step 2 (tests/test_e2e_runbook_unit.py keeps them equal)
RUNBOOK_FORGET_RELEASES = (
    'pulumi stack --stack <stack> --show-urns | grep -o "urn:pulumi:[^ ]*helm.sh/v3:Release::<cluster>/[^ ]*" |\n'
    '  while read -r urn; do pulumi state delete --stack <stack> --yes --target-dependents "$urn" || true; done')
# docs/runbook.md, "An `up` that was killed": what a killed update leaves (the same test keeps them equal)
RUNBOOK_AFTER_A_KILL = (
    'pulumi cancel --yes --stack <stack>   # the killed update\'s lock ("the stack is currently locked")\n'
    "backend=${PULUMI_BACKEND_URL:-file://$HOME}   # the folder you logged in to (`pulumi login --local`: your home)\n"
    "find \"${backend#file://}/.pulumi\" -name '*.attrs' -size 0 -print -delete   # a sidecar the kill left empty\n"
    "PULUMI_SKIP_CHECKPOINTS=true scripts/private-tmpdir.sh pulumi refresh --clear-pending-creates --yes --skip-preview "
    "--stack <stack>")
SAAS_TOKEN = "sk-e2e-saas-token-must-stay-secret"  # the hand-made endpoint's credential (only in a Secret on the cluster)


@dataclass
class Report:
    checks: list[tuple[str, bool, str]] = field(default_factory=list)
    timings: list[tuple[str, Run]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def check(self, name: str, ok: bool, detail: str = "") -> bool:
        self.checks.append((name, bool(ok), detail))
        print(f"{'PASS' if ok else 'FAIL'}  {name}" + (f"\n      {detail}" if detail else ""), flush=True)
        return bool(ok)

    def time(self, what: str, run: Run) -> Run:
        self.timings.append((what, run))
        print(f"      {what}: {run.seconds:.1f} s, exit {run.returncode}", flush=True)
        return run

    def note(self, text: str) -> None:
        self.notes.append(text)
        print(f"NOTE  {text}", flush=True)

    @property
    def failed(self) -> list[str]:
        return [name for name, ok, _ in self.checks if not ok]

    def summary(self) -> str:
        lines = ["", "=" * 100, "END TO END SUMMARY", "=" * 100, f"{'RESULT':<6}  CHECK"]
        lines += [f"{'pass' if ok else 'FAIL':<6}  {name}" for name, ok, _ in self.checks]
        lines += ["", f"{'ENGINE RUN':<48} {'WALL':>8} {'RESOURCES':>10} {'RES/S':>7}  PEAK RSS (MB)"]
        for what, run in self.timings:
            changed = _changed(run)
            rate = f"{changed / run.seconds:.1f}" if changed and run.seconds else "-"
            memory = ", ".join(f"{name} {rss / 2**20:.0f}" for name, rss in sorted(run.peak_rss.items(), key=lambda kv: -kv[1])[:4])
            lines.append(f"{what:<48} {run.seconds:>7.1f}s {changed or '-':>10} {rate:>7}  {memory}")
        if self.notes:
            lines += ["", "NOTES"] + [f"- {note}" for note in self.notes]
        passed = len(self.checks) - len(self.failed)
        lines += ["", f"{passed}/{len(self.checks)} checks passed" + (f"; FAILED: {', '.join(self.failed)}" if self.failed else "")]
        return "\n".join(lines)


def _changed(run: Run) -> int:
    changes = run.result.get("changes") or {}
    return sum(n for op, n in changes.items() if op not in ("same", "read"))


class Scenario:
    def __init__(self, work: Path, bin_dir: Path, venv: Path, crd_dir: Path, template: Path = TEMPLATE):
        self.work, self.bin_dir, self.venv, self.crd_dir = work, bin_dir, venv, crd_dir
        self.report = Report()
        self.discovery = Discovery()
        self.template = yaml.safe_load(template.read_text())
        self.fleet = self._load(template)
        self.gateway_cluster = self.fleet.inference_gateway.cluster_name
        self.cluster_names = [*self.fleet.inference_clusters, self.gateway_cluster]
        self.control_planes = LwsFleet(work / "fleet", bin_dir, self.cluster_names,
                                       clusters_running_lws(cluster_stacks(self.fleet)), crd_dir)
        self.kubelets: dict[str, FakeKubelet] = {}
        self.project = PulumiProject(REPO, work, bin_dir, venv)

    # --- plumbing --------------------------------------------------------------------------------
    @staticmethod
    def _load(path: Path):
        return load_file(path)[1]

    def api(self, cluster: str) -> KubeApi:
        return self.control_planes.endpoints[cluster].api()

    def modelplane(self, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run([str(self.venv / "bin" / "python"), "-m", "modelplane", *args], cwd=REPO,
                              capture_output=True, text=True, timeout=300)

    def plan(self, previous: Path | None = None) -> dict:
        args = ["plan", "--config", str(self.project.stack_file), "--output", "json"]
        result = self.modelplane(*args, *(["--previous", str(previous)] if previous else []))
        if result.returncode != 0:
            raise RuntimeError(f"modelplane plan failed: {result.stderr}")
        return json.loads(result.stdout)

    def render(self, name: str) -> Rendered:
        out = self.work / "render" / name
        result = self.modelplane("render", "--config", str(self.project.stack_file), "--out", str(out))
        if result.returncode != 0:
            raise RuntimeError(f"modelplane render failed: {result.stderr}")
        return read_render(out)

    def engine(self, what: str, op: str, **kwargs: Any) -> Run:
        run = self.report.time(what, self.project.engine(op, **kwargs))
        if not run.result.get("ok"):
            print(f"      engine error: {_engine_error(run)}", flush=True)
        return run

    # --- setup -----------------------------------------------------------------------------------
    def start(self) -> None:
        started = time.monotonic()
        self.control_planes.start()
        self.report.note(f"{len(self.cluster_names)} control planes ready in {time.monotonic() - started:.1f} s")
        if "gatewayApi" in (self.fleet.inference_gateway.preinstalled if self.fleet.inference_gateway else []):
            self._install_gateway_api(self.api(self.gateway_cluster))
        for cluster in self.cluster_names:
            kubelet = FakeKubelet(self.api(cluster), cluster, node_groups(self.fleet, cluster))
            kubelet.start()
            self.kubelets[cluster] = kubelet
        for kubelet in self.kubelets.values():
            kubelet.wait_schedulable()
        stand_ins = write_mirror(cluster_stacks(self.fleet), self.work / "mirror", self.crd_dir)
        print(stand_in_report(stand_ins), flush=True)
        self._init_stack()

    def _install_gateway_api(self, api: KubeApi) -> None:
        """The front door's `preinstalled: [gatewayApi]`: what a platform team applies before modelplane."""
        path = object_path("apiextensions.k8s.io/v1", "customresourcedefinitions")
        for file in GATEWAY_API_CRDS:
            crd = yaml.safe_load((self.crd_dir / file).read_text())
            api.apply(f"{path}/{crd['metadata']['name']}", crd)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if all(_established(api.get(f"{path}/{yaml.safe_load((self.crd_dir / f).read_text())['metadata']['name']}"))
                   for f in GATEWAY_API_CRDS):
                return
            time.sleep(0.5)
        raise RuntimeError("the Gateway API CRDs were not established within 60 s")

    def _init_stack(self) -> None:
        document = json.loads(json.dumps(self.template))
        config = document["config"]
        for cluster in config["modelplane:inferenceClusters"].values():
            cluster["cluster"]["existing"].pop("kubeconfig")
        config["modelplane:inferenceGateway"]["cluster"]["existing"].pop("kubeconfig")
        for endpoints in config.get("modelplane:modelEndpoints", {}).values():
            for endpoint in endpoints.values():
                if "auth" in endpoint:
                    endpoint["auth"].pop("token")
        config["modelplane:mirror"] = mirror_config(self.work / "mirror")
        self.project.stack_file.write_text(yaml.safe_dump(document, sort_keys=False))
        self.project.install_provider(kubernetes_sdk_version())
        run = self.project.run("stack", "init", STACK, "--secrets-provider", "passphrase")
        if not run.ok:
            raise RuntimeError(f"pulumi stack init failed: {run.tail()}")
        for cluster in self.cluster_names:
            key = ("modelplane:inferenceGateway.cluster.existing.kubeconfig" if cluster == self.gateway_cluster
                   else f"modelplane:inferenceClusters.{cluster}.cluster.existing.kubeconfig")
            run = self.project.run("config", "set", "--secret", "--path", "--stack", STACK, key,
                                   stdin=self.control_planes.endpoints[cluster].kubeconfig)
            if not run.ok:
                raise RuntimeError(f"pulumi config set {key} failed: {run.tail()}")
        if "saas" in config.get("modelplane:modelEndpoints", {}).get("ml-team", {}):  # not in the scale stack
            key = "modelplane:modelEndpoints.ml-team.saas.auth.token"
            run = self.project.run("config", "set", "--secret", "--path", "--stack", STACK, key, stdin=SAAS_TOKEN)
            if not run.ok:
                raise RuntimeError(f"pulumi config set {key} failed: {run.tail()}")

    def close(self) -> None:
        for kubelet in self.kubelets.values():
            kubelet.stop()
        self.control_planes.close()

    # --- the checks ------------------------------------------------------------------------------
    def envoy_makes_the_front_door_promised(self, name: str) -> None:
        """Envoy Gateway's own translator (egctl) on the rendered front door: every object accepted, and each
        service one Envoy cluster with health checks, ejection, one retry on another host and its fallback tier."""
        folder = self.work / "render" / name / self.gateway_cluster
        objects = [yaml.safe_load(path.read_text()) for path in sorted(folder.glob("[0-9]*.yaml"))]
        for obj in objects:  # egctl reads a Secret's `data` only; the value is the render's placeholder
            if obj["kind"] == "Secret" and "stringData" in obj:
                obj["data"] = {k: base64.b64encode(v.encode()).decode() for k, v in obj.pop("stringData").items()}
        try:
            translation = translate(objects, self.bin_dir / "egctl")
        except TranslateError as error:
            self.report.check("Envoy Gateway's translator accepts the front door as promised", False, _short(str(error)))
            return
        expected = expected_from(objects)
        problems = front_door_problems(translation, expected)
        self.report.check("Envoy Gateway's translator accepts the front door as promised (egctl v1.8.1)", not problems,
                          "; ".join(problems[:5]) if problems else
                          f"{len(expected.service_rules)} service rules, each one Envoy cluster with active and passive "
                          "health checks, one retry on another host, fallback at priority 1; the model router on "
                          "every route")

    def preview_shows_the_plan(self, rendered: Rendered, plan: dict) -> None:
        run = self.engine("pulumi preview (first)", "preview")
        if not self.report.check("preview succeeds", run.result.get("ok"), _engine_error(run)):
            return
        creates = {(e["type"], e["urn"].rsplit("::", 1)[-1]) for e in run.result["events"]
                   if e["kind"] == "pre" and e["op"] == "create"}
        missing = [str(o) for o in rendered.objects if (o.type_token, o.resource_name) not in creates]
        missing += [f"{c}: release {r}" for c, r, _ in rendered.releases
                    if ("kubernetes:helm.sh/v3:Release", f"{c}/{r}") not in creates]
        replicas = [r["name"] for r in plan["replicas"]]
        detail = (f"{len(rendered.objects)} objects, {len(rendered.releases)} releases; replicas {', '.join(replicas)}; "
                  f"{len(rendered.of_kind('EndpointSlice', self.gateway_cluster))} front-door endpoints, "
                  f"{len(rendered.of_kind('HTTPRoute'))} routes")
        self.report.check("preview shows every object, replica, endpoint and route of the plan", not missing,
                          f"missing: {missing[:8]}" if missing else detail)

    # --- a crash in the middle of an up ------------------------------------------------------------------
    # The first replica workload done, and no Helm operation in flight: replicas wait only for what their kinds need
    # (render.fleet.replica_waits_for), so a release can still be upgrading then, and a kill mid-operation leaves it
    # pending on its cluster, which needs the runbook's `helm rollback` (docs/runbook.md), not only the next `up`.
    CRASH_AFTER = "ModelReplica$kubernetes:apps/v1:Deployment"

    RELEASE = "kubernetes:helm.sh/v3:Release"

    def crash_mid_first_up_skipping_checkpoints(self, rendered: Rendered) -> None:
        """With PULUMI_SKIP_CHECKPOINTS (allowed: every cluster is Existing) the first `up` is killed once every Helm
        release is installed: nothing was saved, so the next `up` finds releases it never recorded and imports them
        (release_adoption.py) instead of failing on "cannot re-use a name"."""
        run = self.engine("pulumi up (first, skipping checkpoints, engine killed once every release is installed)",
                          "up", env={"PULUMI_SKIP_CHECKPOINTS": "true"}, kill_engine_after=len(rendered.releases),
                          kill_matching=self.RELEASE)
        state = json.loads(self.project.state_file().read_text()) if self.project.state_file().exists() else {}
        saved = [r for r in (state.get("checkpoint", {}).get("latest") or {}).get("resources") or []
                 if r["type"] == self.RELEASE]
        installed = self.helm_releases()
        expected = {f"{cluster}/{name}" for cluster, name, _ in rendered.releases}
        self.report.check("skipping checkpoints, the first up killed once its releases are installed saved none of them",
                          bool((run.result.get("killed") or {}).get("pid")) and not saved and installed == expected,
                          f"{len(installed)} releases deployed on the clusters, {len(saved)} in state; "
                          f"missing {sorted(expected - installed)[:4]}, unexpected {sorted(installed - expected)[:4]}")
        self.after_a_kill_as_the_runbook_says()

    def helm_releases(self) -> set[str]:
        """`<cluster>/<release>` of every Helm release deployed on the fleet's clusters."""
        out = set()
        for cluster in self.cluster_names:
            for secret in self.api(cluster).list("/api/v1/secrets", label_selector="owner=helm,status=deployed",
                                                metadata_only=True):
                out.add(f"{cluster}/{secret['metadata']['labels']['name']}")
        return out

    def crash_mid_up(self) -> None:
        """The engine is killed (SIGKILL, no chance to save) in the middle of the first `up`; the next `up` recovers."""
        run = self.engine("pulumi up (engine killed mid-up)", "up", kill_engine_after=1, kill_matching=self.CRASH_AFTER,
                          kill_outside=self.RELEASE)
        killed = run.result.get("killed") or {}
        state = json.loads(self.project.state_file().read_text()) if self.project.state_file().exists() else {}
        latest = state.get("checkpoint", {}).get("latest") or {}
        pending = [f"{op.get('type')} {op.get('resource', {}).get('urn', '').rsplit('::', 1)[-1]}"
                   for op in latest.get("pending_operations") or []]
        self.crashed_pending = pending
        self.report.check("the engine is killed in the middle of the first up", bool(killed.get("pid"))
                          and not run.result.get("ok"),
                          f"killed after {killed.get('after_steps')} replica workload(s), at event {killed.get('at_event')}; "
                          f"state then held {len(latest.get('resources') or [])} resources and {len(pending)} pending "
                          f"operations {pending[:6]}; still running after it, killed: {run.reaped or 'nothing'}")
        self.after_a_kill_as_the_runbook_says()

    def after_a_kill_as_the_runbook_says(self) -> None:
        """docs/runbook.md's commands after a killed update, as written: the lock, an emptied `.attrs` sidecar."""
        emptied = sorted(str(p.relative_to(self.project.state)) for p in self.project.state.rglob("*.attrs")
                         if not p.stat().st_size)
        # run in the scratch project, which has no scripts/ of its own
        step = RUNBOOK_AFTER_A_KILL.replace("<stack>", STACK).replace("scripts/", f"{REPO}/scripts/")
        shell = subprocess.run(["bash", "-c", step], cwd=self.project.dir, env=self.project.env, capture_output=True,
                               text=True, timeout=120)
        self.report.check("after a kill, the runbook's commands run as written", shell.returncode == 0,
                          f"exit {shell.returncode}; empty sidecars: {emptied or 'none'}; "
                          f"{_short(shell.stdout + shell.stderr, 400)}")

    def crash_mid_day2_up(self) -> None:
        """With PULUMI_SKIP_CHECKPOINTS (allowed: the update only changes replicas) the engine is killed once the new
        replica's workload is created; nothing was saved, and the next `up` adopts what the killed one created."""
        skip = {"PULUMI_SKIP_CHECKPOINTS": "true"}
        stack = str(self.project.stack_file)
        steps = []
        for replicas in ("1", "2"):
            edit = self.modelplane("scale", "--config", stack, DEPLOYMENT, "--replicas", replicas)
            if edit.returncode != 0:
                self.report.check("a crash mid-up while skipping checkpoints", False, _short(edit.stderr))
                return
            if replicas == "1":
                steps.append(self.engine("pulumi up (mock-demo to 1, skipping checkpoints)", "up", env=skip))
        before = self.project.state_file().read_bytes()
        killed = self.engine("pulumi up (mock-demo to 2, skipping checkpoints, engine killed)", "up", env=skip,
                             kill_engine_after=1, kill_matching=self.CRASH_AFTER)
        self.crashed_pending = []
        unchanged = self.project.state_file().read_bytes() == before
        self.after_a_kill_as_the_runbook_says()
        recovered = self.engine("pulumi up (after the crash, skipping checkpoints)", "up", env=skip)
        now = self.replicas_in_clusters()
        self.report.check(
            "skipping checkpoints: an up killed mid-way saved nothing, and the next up converges",
            all(r.result.get("ok") for r in steps) and bool((killed.result.get("killed") or {}).get("pid"))
            and unchanged and recovered.result.get("ok") and sum(len(v) for v in now.values()) == 2,
            _engine_error(recovered) or f"state {'unchanged' if unchanged else 'CHANGED'} by the killed up; "
            f"the next up: {recovered.result.get('changes')}; replicas now {now}")
        self.nothing_orphaned_or_duplicated("after a crash mid-up skipping checkpoints")

    def nothing_orphaned_or_duplicated(self, after: str = "after a crash mid-up") -> bool:
        """After the crash and the recovering `up`: every modelplane object on the clusters is in state, once; no pending operation."""
        state = json.loads(self.project.state_file().read_text())["checkpoint"]["latest"]
        names = [(r["type"].rsplit(":", 1)[-1], r["urn"].rsplit("::", 1)[-1]) for r in state.get("resources") or []]
        duplicated = sorted({n for n in names if names.count(n) > 1})
        known = {name for _, name in names}
        orphans = []
        for cluster in self.cluster_names:
            api = self.api(cluster)
            for api_version, plural in (("apps/v1", "deployments"), ("v1", "services"), ("v1", "configmaps"),
                                        ("discovery.k8s.io/v1", "endpointslices"),
                                        ("gateway.networking.k8s.io/v1", "httproutes"),
                                        ("resource.k8s.io/v1", "resourceclaimtemplates")):
                for obj in api.list(object_path(api_version, plural), label_selector="app.kubernetes.io/managed-by=modelplane"):
                    meta = obj["metadata"]
                    if meta.get("ownerReferences"):
                        continue  # a controller's (a Service's EndpointSlices copy its labels), not modelplane's
                    name = f"{cluster}/{meta['namespace']}/{meta['name']}" if meta.get("namespace") else f"{cluster}/{meta['name']}"
                    if name not in known:
                        orphans.append(f"{plural} {name}")
        releases = {name for kind, name in names if kind == "Release"}
        orphans += [f"helm release {name}" for name in sorted(self.helm_releases() - releases)]
        imported = sum(1 for r in state.get("resources") or [] if r["type"] == self.RELEASE and r.get("importID"))
        pending = state.get("pending_operations") or []
        return self.report.check(f"{after} the next up converges: nothing orphaned, nothing duplicated, "
                                 "no pending operation", not orphans and not duplicated and not pending,
                                 f"orphans {orphans[:6]}, duplicated {duplicated[:6]}, pending {len(pending)}"
                                 if orphans or duplicated or pending else
                                 f"{len(names)} resources in state, each once ({len(releases)} Helm releases, "
                                 f"{imported} of them imported); the crash had left "
                                 f"{len(self.crashed_pending)} pending operations")

    def up_creates_everything(self, rendered: Rendered) -> bool:
        run = self.engine("pulumi up (create)", "up")
        ok = self.report.check("up succeeds", run.result.get("ok"), _engine_error(run))
        self.objects_match(rendered, "every rendered object exists in its cluster after up")
        # every engine command runs through scripts/private-tmpdir.sh, as users are told to; the program agrees
        warned = [e["message"] for e in run.result.get("events", [])
                  if e["kind"] == "diagnostic" and "scripts/private-tmpdir.sh" in e.get("message", "")]
        self.report.check("up runs with a private TMPDIR for the provider's kubeconfig files (no warning)", not warned,
                          _short(warned[0]) if warned else "TMPDIR is the wrapper's private folder")
        return ok

    def objects_match(self, rendered: Rendered, name: str) -> bool:
        missing = [str(o) for o in rendered.objects if fetch(self.api(o.cluster), self.discovery, o) is None]
        for cluster, release, namespace in rendered.releases:
            secrets = self.api(cluster).list(object_path("v1", "secrets", namespace),
                                             label_selector=f"owner=helm,name={release},status=deployed")
            if not secrets:
                missing.append(f"{cluster}: release {release}")
        return self.report.check(name, not missing, f"missing: {missing[:8]}" if missing else
                                 f"{len(rendered.objects)} objects and {len(rendered.releases)} releases found")

    def second_up_changes_nothing(self) -> None:
        run = self.engine("pulumi up (no changes)", "up", expect_no_changes=True)
        # `read` is the stack's reference to its own previous outputs, read on every run
        changes = {op: n for op, n in (run.result.get("changes") or {}).items() if op not in ("same", "read")}
        self.report.check("a second up changes nothing", run.result.get("ok") and not changes,
                          f"proposed: {_proposed(run)}" if not run.result.get("ok") else f"changes: {changes}")

    def modelplane_up_leaves_unchanged_clusters_out(self) -> None:
        """`modelplane up` (modelplane/cli_up.py): the first records each workload cluster's fingerprint; the command
        run next, as a user runs it, leaves every workload cluster out and changes nothing; a full `up` after it
        changes nothing either, so what was left out is as a full `up` leaves it."""
        first = self.engine("modelplane up (records fingerprints)", "up", expect_no_changes=True,
                            env={VIA_MODELPLANE_UP: "1"})
        self.report.check("modelplane up records each workload cluster's fingerprint and changes nothing",
                          first.result.get("ok") and not _changed(first), _engine_error(first))
        workload = sorted(self.fleet.inference_clusters)
        command = self.report.time("modelplane up (no changes; the command)", self.project.modelplane(
            "up", "--stack", STACK, "--", "--yes", "--skip-preview", "--non-interactive", "--expect-no-changes"))
        left_out = f"{len(workload)} unchanged clusters left out of this update: {', '.join(workload)}"
        self.report.check("the modelplane up command leaves every unchanged workload cluster out and changes nothing",
                          command.ok and left_out in command.stderr, command.tail())
        full = self.engine("pulumi up (no changes; after modelplane up)", "up", expect_no_changes=True)
        self.report.check("a full up after modelplane up changes nothing", full.result.get("ok") and not _changed(full),
                          _engine_error(full) or f"proposed: {_proposed(full)}")

    def dra_allocation(self, plan: dict) -> None:
        """Every replica's pods bound by kube-scheduler to the planned pool, claims allocated from its devices."""
        problems, seen = [], 0
        for replica in plan["replicas"]:
            api = self.api(replica["cluster"])
            pools = {m["nodePool"] for e in replica["engines"] for m in e["members"]}
            pods = [p for p in api.list(object_path("v1", "pods", replica["namespace"]),
                                        label_selector=f"modelplane.ai/serving={replica['name']}")
                    if p["spec"].get("resourceClaims")]
            if not pods:
                problems.append(f"{replica['name']}: no pod with a resource claim on {replica['cluster']}")
            for pod in pods:
                seen += 1
                problems += pod_placement_problems(api, pod, pools)
        self.report.check("real DRA: every replica's pods bound to the planned pool, claims allocated there", not problems,
                          "; ".join(problems[:6]) if problems else f"{seen} pods checked")
        short = [d for d in plan["deployments"] if d["scheduled"] < d["replicas"]]
        stray = []
        for deployment in short:
            for cluster in self.fleet.inference_clusters:
                objects = self.api(cluster).list(object_path("apps/v1", "deployments", deployment["namespace"]),
                                                 label_selector=f"modelplane.ai/deployment={deployment['name']}")
                stray += [f"{cluster}/{o['metadata']['name']}" for o in objects][deployment["scheduled"]:]
        self.report.check("a deployment no device satisfies is short in the plan and never scheduled",
                          bool(short) and not stray,
                          f"short: {[d['name'] for d in short]}" + (f"; scheduled anyway: {stray}" if stray else ""))

    def selectors_agree(self) -> None:
        results = selector_cases.run_cases(self.api(self.gateway_cluster))
        print(selector_cases.report(results), flush=True)
        disagree = [r.name for r in results if not r.agree]
        self.report.check(f"our CEL answers agree with kube-scheduler's allocator on {len(results)} purpose-built cases",
                          not disagree, f"disagree: {disagree}" if disagree else "")

    def packing_agrees(self) -> None:
        """Device-granular plans against the allocator: planned pods bound, short ones Pending (tests/e2e/packing_cases.py)."""
        results = packing_cases.run_cases(self.api(self.gateway_cluster))
        print(packing_cases.report(results), flush=True)
        disagree = [r.name for r in results if not r.agree]
        self.report.check(f"device-granular plans agree with kube-scheduler's allocator on {len(results)} packing cases "
                          "(8 one-device pods on one 8-device node, 4+2+1+1, a fragmented pool short)",
                          not disagree, f"disagree: {disagree}" if disagree else "")

    def secrets_stay_secret(self) -> None:
        text = self.project.state_file().read_text()
        leaks = [f"{c}: {what}" for c, e in self.control_planes.endpoints.items()
                 for what, value in (("token", e.token), ("kubeconfig", e.kubeconfig.strip()), ("server", e.server))
                 if value in text and what != "server"]
        leaks += ["the SaaS endpoint's token"] if SAAS_TOKEN in text else []
        ciphertexts = text.count('"ciphertext"')
        self.report.check("the state file holds no kubeconfig or token in clear", not leaks and ciphertexts > 0,
                          f"leaked: {leaks}" if leaks else f"{ciphertexts} secret values stored encrypted")

    # --- the seed's drain story --------------------------------------------------------------------
    def replicas_in_clusters(self) -> dict[str, list[str]]:
        """mock-demo's replicas per cluster, as the API servers report them: engine Deployments that are available."""
        namespace, name = DEPLOYMENT.split("/")
        out: dict[str, list[str]] = {}
        for cluster in self.fleet.inference_clusters:
            if cluster not in self.control_planes.running():
                continue
            objects = self.api(cluster).list(object_path("apps/v1", "deployments", namespace),
                                             label_selector=f"modelplane.ai/deployment={name}")
            ready = [o["spec"]["template"]["metadata"]["labels"]["modelplane.ai/serving"] for o in objects
                     if "modelplane.ai/serving" in o["spec"]["template"]["metadata"].get("labels", {})
                     and (o.get("status", {}).get("availableReplicas") or 0) >= (o["spec"].get("replicas") or 1)]
            if ready:
                out[cluster] = sorted(ready)
        return out

    def output_status(self) -> tuple[dict, list[tuple[str, str]]]:
        outputs = self.project.outputs()
        status = outputs.get("deployments", {}).get(DEPLOYMENT, {})
        placed = sorted((r["cluster"], r["name"]) for r in outputs.get("placement", {}).get("replicas", [])
                        if f"{r['namespace']}/{r['deployment']}" == DEPLOYMENT)
        return status, placed

    def drain_story(self) -> None:
        stack = str(self.project.stack_file)
        steps: list[tuple[str, list[str], Callable[[dict, dict, list], tuple[bool, str]]]] = [
            ("drain gpu-eu-west NoSchedule: nothing moves", ["drain", "--config", stack, "--effect", "NoSchedule", "gpu-eu-west"],
             lambda before, now, placed: (now == before and len(placed) == 2, "")),
            ("scale mock-demo to 1", ["scale", "--config", stack, DEPLOYMENT, "--replicas", "1"],
             lambda before, now, placed: (sum(len(v) for v in now.values()) == 1 and len(placed) == 1, "")),
            ("drain gpu-eu-west NoExecute: the replica moves to gpu-us-east",
             ["drain", "--config", stack, "--effect", "NoExecute", "gpu-eu-west"],
             lambda before, now, placed: (list(now) == ["gpu-us-east"] and [c for c, _ in placed] == ["gpu-us-east"], "")),
            ("scale mock-demo to 2 while drained: Scheduled 1 of 2", ["scale", "--config", stack, DEPLOYMENT, "--replicas", "2"],
             lambda before, now, placed: (list(now) == ["gpu-us-east"] and len(placed) == 1, "")),
            ("undrain gpu-eu-west: the second replica comes back", ["undrain", "--config", stack, "gpu-eu-west"],
             lambda before, now, placed: (sorted(now) == ["gpu-eu-west", "gpu-us-east"] and len(placed) == 2, "")),
        ]
        first_names = dict(self.output_status()[1])
        for title, command, expect in steps:
            before = self.replicas_in_clusters()
            edit = self.modelplane(*command)
            if edit.returncode != 0:
                self.report.check(title, False, f"modelplane {' '.join(command[:1])} failed: {_short(edit.stderr)}")
                return
            run = self.engine(f"pulumi up ({title.split(':')[0]})", "up")
            now = self.replicas_in_clusters()
            status, placed = self.output_status()
            ok, _ = expect(before, now, placed)
            detail = (f"API servers: {now}; outputs: scheduled {status.get('scheduled')} of {status.get('replicas')}, "
                      f"placement {placed}")
            if "NoExecute" in title:
                ok = self._replacement_before_removal(run) and ok
            if "undrain" in title:
                back = dict(placed).get("gpu-eu-west")
                ok = ok and back == first_names.get("gpu-eu-west")
                detail += f"; eu-west replica name {back} (first run: {first_names.get('gpu-eu-west')})"
            if "while drained" in title:
                condition = (status.get("conditions") or [{}])[0]
                ok = ok and status.get("scheduled") == 1 and condition.get("status") == "False"
                detail += f"; condition {condition.get('type')}={condition.get('status')} {condition.get('reason')}"
            self.report.check(title, ok and run.result.get("ok"), _engine_error(run) or detail)

    def _replacement_before_removal(self, run: Run) -> bool:
        """In the engine's own event order: the new replica (Deployment ready) completes before the old one and its route go."""
        done = [(e["seq"], e["op"], e["type"], e["urn"].rsplit("::", 1)[-1]) for e in run.result.get("events", [])
                if e["kind"] == "done"]
        created = [seq for seq, op, typ, name in done if op == "create" and typ.endswith(":Deployment")
                   and name.startswith("gpu-us-east/") and "mock-demo" in name and not name.endswith("-epp")]
        removed = [(seq, typ, name) for seq, op, typ, name in done if op == "delete" and "mock-demo" in name
                   and (name.startswith("gpu-eu-west/") or name.startswith(f"{self.gateway_cluster}/"))]
        ok = bool(created) and bool(removed) and max(created) < min(seq for seq, _, _ in removed)
        return self.report.check("NoExecute: the replacement is created and ready before the old replica and its "
                                 "route are deleted (engine event order)", ok,
                                 f"replacement done at event {created}, first removal at "
                                 f"{min((s for s, _, _ in removed), default=None)}: "
                                 f"{sorted({t.split(':')[-1] for _, t, _ in removed})}")

    # --- a cluster that goes away --------------------------------------------------------------------
    LOST = "gpu-us-east"

    def cluster_goes_away(self) -> None:
        """A cluster unreachable mid-life (control plane stopped), then back: nothing is lost, nothing half-done."""
        lost = self.LOST
        before = self._urns_of(lost)
        self.control_planes.stop_cluster(lost)
        self.report.check(*status_reports_a_stopped_cluster(self.project, self.control_planes.endpoints,
                                                            self.venv / "bin" / "python", lost))
        for op in ("preview", "up", "refresh"):
            run = self.engine(f"pulumi {op} ({lost} stopped)", op)
            self._stops_naming(op, run, lost)
        after = self._urns_of(lost)
        self.report.check(f"no state is lost while {lost} is unreachable (preview, up, refresh)", after == before,
                          f"{len(before)} resources of {lost} in state before, {len(after)} after")
        self.control_planes.start_cluster(lost)
        self.kubelets[lost].wait_schedulable()
        again = self.engine(f"pulumi up ({lost} back)", "up")
        self.report.check(f"after {lost} comes back, up succeeds", again.result.get("ok"), _engine_error(again))
        self.second_up_changes_nothing()

    def _stops_naming(self, op: str, run: Run, cluster: str) -> None:
        text = run.result.get("error", "") + "\n" + "\n".join(
            f"{e['urn']}: {e.get('message', '')}" for e in run.result.get("events", [])
            if e["kind"] == "diagnostic" and e["severity"] in ("error", "warning"))
        line = next((line for line in text.splitlines() if cluster in line and "unreachable" in line), "")
        self.report.check(f"{op} with {cluster} stopped stops with a message naming the cluster", not run.result.get("ok")
                          and bool(line), _short(line or text))

    def _urns_of(self, cluster: str) -> set[str]:
        return {urn for urn in self.project.urns() if f"::{cluster}/" in urn or urn.endswith(f"::{cluster}")}

    def destroy_with_a_cluster_gone(self) -> None:
        """`pulumi destroy` while a cluster is down stops on it, keeping its state; then the runbook's steps
        for a cluster gone for good (docs/runbook.md): out of the stack, forget it, finish; then destroy."""
        lost = self.LOST
        self.control_planes.stop_cluster(lost)
        run = self.engine(f"pulumi destroy ({lost} stopped)", "destroy")
        self._stops_naming("destroy", run, lost)
        kept = self._urns_of(lost)
        self.report.check(f"a destroy with {lost} down keeps every resource of {lost} in state", bool(kept),
                          f"{len(kept)} resources of {lost} still in state")
        document = yaml.safe_load(self.project.stack_file.read_text())
        del document["config"]["modelplane:inferenceClusters"][lost]
        self.project.stack_file.write_text(yaml.safe_dump(document, sort_keys=False))
        releases = sorted(u for u in self._urns_of(lost) if ":helm.sh/v3:Release::" in u)
        # step 2 of docs/runbook.md, as written there
        step = RUNBOOK_FORGET_RELEASES.replace("<stack>", STACK).replace("<cluster>", lost)
        shell = subprocess.run(["bash", "-c", step], cwd=self.project.dir, env=self.project.env, capture_output=True,
                               text=True, timeout=300)
        if shell.returncode != 0:
            self.report.note(f"runbook step 2 exited {shell.returncode}: {_short(shell.stderr)}")
        forget = self.engine(f"pulumi up ({lost} out of the stack, PULUMI_K8S_DELETE_UNREACHABLE=true)", "up",
                             env={"PULUMI_K8S_DELETE_UNREACHABLE": "true"})
        left = sorted(self._urns_of(lost))
        # the SDK reads the variable as the providers' deleteUnreachable: the next up sets it back, nothing else
        again = self.engine(f"pulumi up (after forgetting {lost})", "up")
        only_providers = all(step.startswith("update kubernetes ") for step in _proposed(again))
        self.report.check("the runbook's steps for a cluster gone for good bring the fleet back without it",
                          forget.result.get("ok") and again.result.get("ok") and only_providers and not left
                          and self.replicas_in_clusters() == {"gpu-eu-west": ["mock-demo-be445"]},
                          f"{len(releases)} Helm releases removed with `pulumi state delete`; up with the variable "
                          f"{'ok' if forget.result.get('ok') else _engine_error(forget)}; {len(left)} resources of {lost} "
                          f"left in state; the next up: {_proposed(again) or 'no changes'}; "
                          f"replicas now {self.replicas_in_clusters()}")
        self.second_up_changes_nothing()
        destroy = self.engine("pulumi destroy", "destroy")
        self.report.check("destroy succeeds", destroy.result.get("ok"), _engine_error(destroy))
        self.control_planes.start_cluster(lost)

    # --- destroy ---------------------------------------------------------------------------------------
    def destroy_leaves_nothing(self, clusters: list[str]) -> None:
        leftovers, terminating, kept = [], [], []
        deadline = time.monotonic() + 120
        while True:
            leftovers, terminating, kept = self._leftovers(clusters)
            if (not leftovers and not terminating) or time.monotonic() > deadline:
                break
            time.sleep(2)
        self.report.check(f"destroy leaves no modelplane objects and no namespace stuck Terminating on {', '.join(clusters)}",
                          not leftovers and not terminating,
                          f"left: {leftovers[:8]}; terminating: {terminating}" if leftovers or terminating
                          else f"kept on purpose (retain_on_delete / Helm): {kept}")
        orphans = self._leftovers([self.LOST])[0]
        self.report.note(f"{self.LOST}, forgotten while down, still holds {len(orphans)} modelplane objects when it comes "
                         "back (expected: a cluster declared gone is not cleaned; docs/runbook.md)")

    def _leftovers(self, clusters: list[str]) -> tuple[list[str], list[str], list[str]]:
        leftovers, terminating, kept = [], [], []
        for cluster in clusters:
            api = self.api(cluster)
            for namespace in api.list(object_path("v1", "namespaces")):
                name = namespace["metadata"]["name"]
                if namespace.get("status", {}).get("phase") == "Terminating":
                    terminating.append(f"{cluster}/{name}")
                elif name not in ("default", "kube-system", "kube-public", "kube-node-lease", "selector-cases"):
                    kept.append(f"{cluster}/{name}")
            for api_version, plural in (("apps/v1", "deployments"), ("v1", "services"), ("discovery.k8s.io/v1", "endpointslices"),
                                        ("gateway.networking.k8s.io/v1", "httproutes"), ("gateway.networking.k8s.io/v1", "gateways"),
                                        ("resource.k8s.io/v1", "resourceclaimtemplates")):
                try:
                    objects = api.list(object_path(api_version, plural), label_selector="app.kubernetes.io/managed-by=modelplane")
                except ApiError:
                    continue  # the kind is no longer served (its CRD went with its release)
                leftovers += [f"{cluster}: {plural} {o['metadata'].get('namespace')}/{o['metadata']['name']}" for o in objects]
        return leftovers, terminating, kept

    # --- the whole story -------------------------------------------------------------------------------
    def run(self) -> int:
        try:
            self.start()
            plan = self.plan()
            rendered = self.render("first")
            self.envoy_makes_the_front_door_promised("first")
            self.preview_shows_the_plan(rendered, plan)
            self.crash_mid_first_up_skipping_checkpoints(rendered)
            self.crash_mid_up()
            if self.up_creates_everything(rendered) and self.nothing_orphaned_or_duplicated():
                self.second_up_changes_nothing()
                self.modelplane_up_leaves_unchanged_clusters_out()
                self.dra_allocation(plan)
                self.report.check(*gangs_on_real_nodes(plan, self.api))
                self.report.check(*status_matches_the_fleet(self.project, self.control_planes.endpoints,
                                                            self.venv / "bin" / "python"))
                self.secrets_stay_secret()
                self.selectors_agree()
                self.packing_agrees()
                self.crash_mid_day2_up()
                self.drain_story()
                tiers_story.run(self)  # preference tiers on their own pools; removes its deployments at the end
                self.cluster_goes_away()
                self.destroy_with_a_cluster_gone()
                self.destroy_leaves_nothing([c for c in self.cluster_names if c != self.LOST])
            else:
                self.engine("pulumi destroy", "destroy")
        except Exception as error:  # noqa: BLE001 - reported as a failed check, then the fleet is torn down
            import traceback
            traceback.print_exc()
            self.report.check("the scenario ran to the end", False, f"{type(error).__name__}: {_short(str(error))}")
        finally:
            memory = self.control_planes.peak_memory() if self.control_planes.endpoints else {}
            if memory:
                top = sorted(memory.items(), key=lambda kv: -kv[1])
                self.report.note("control-plane peak RSS (MB): " + ", ".join(f"{k} {v / 2**20:.0f}" for k, v in top[:6])
                                 + f"; all {len(top)} processes {sum(memory.values()) / 2**20:.0f}")
            self.close()
        print(self.report.summary(), flush=True)
        return 1 if self.report.failed else 0


def _established(crd: dict | None) -> bool:
    return any(c["type"] == "Established" and c["status"] == "True" for c in (crd or {}).get("status", {}).get("conditions", []))


def _proposed(run: Run) -> list[str]:
    """The steps an engine run proposed other than `same` and `read`: "op type name"."""
    return sorted({f"{e['op']} {e['type'].split(':')[-1]} {e['urn'].rsplit('::', 1)[-1]}" for e in run.result.get("events", [])
                   if e["kind"] == "pre" and e["op"] not in ("same", "read")})


def _engine_error(run: Run) -> str:
    """The engine's own error lines from a failed run (the CLI's progress output left out)."""
    error = run.result.get("error", "")
    lines = [line.strip() for line in error.splitlines() if "error:" in line and "warning:" not in line]
    return _short(" | ".join(dict.fromkeys(lines)) or error)


def _short(text: str, limit: int = 600) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[:limit] + " …"


def _first_line_with(text: str, needle: str) -> str:
    return next((line for line in text.splitlines() if needle in line), "")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work", type=Path, required=True, help="scratch folder (control planes, state, logs)")
    parser.add_argument("--bin", type=Path, required=True, help="the toolchain folder scripts/e2e-tools.sh built")
    parser.add_argument("--venv", type=Path, required=True, help="the e2e virtualenv")
    parser.add_argument("--crds", type=Path, required=True, help="the pinned CRDs (scripts/fetch_crds.py's cache)")
    args = parser.parse_args(argv)
    args.work.mkdir(parents=True, exist_ok=True)
    return Scenario(args.work.resolve(), args.bin.resolve(), args.venv.resolve(), args.crds.resolve()).run()


if __name__ == "__main__":
    sys.exit(main())
