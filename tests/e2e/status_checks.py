"""`modelplane status` against the live local fleet: what it reports must be what the API servers hold.

The scenario calls, each returning `(check name, ok, detail)` for `Report.check`:

    status_matches_the_fleet(project, endpoints, python)            after `pulumi up`
    status_reports_a_stopped_cluster(project, endpoints, python, c)  right after stopping cluster c

Status runs as a user runs it: `modelplane status --stack e2e` in the scratch project with the real
`pulumi` (the placement from the stack output `placement`, the kubeconfigs from the secret stack output
`kubeconfigs`, else the stack's secret config), and, after `up`, a second time offline with
`--kubeconfig-dir` (the fleet's kubeconfigs written to a folder) and `--previous` (the stack output);
the two must agree. Always `--no-probe`: the stand-in kubelet gives each Gateway an address in
198.18.0.0/15 that nothing listens on (no Envoy runs here), so every probe would fail by design.
"""
from __future__ import annotations

import json
import os
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Mapping

from .kube_api import KubeApi, object_path
from .pulumi_cli import STACK, PulumiProject

REPO = Path(__file__).resolve().parents[2]
SERVING = "modelplane.ai/serving"


def status_matches_the_fleet(project: PulumiProject, endpoints: Mapping, python: Path) -> tuple[str, bool, str]:
    """After `pulumi up`: exit 0, no drift, and each replica's PODS and CLAIMS columns as the API servers say."""
    name = "modelplane status: every replica healthy, its pods and claims columns as the API servers hold them, exit 0"
    problems: list[str] = []
    table, table_seconds = run_status(project, python, "--output", "table")
    data, json_run = _json(project, python, problems)
    problems += _exit(table, 0, "status --stack") + _exit(json_run, 0, "status --stack --output json")
    if data is not None:
        problems += _summary(data, "healthy", [])
        problems += _columns_match(data, table.stdout, endpoints, skip=set())
        offline = _offline(project, endpoints, python, problems)
        if offline is not None and offline.get("deployments") != data.get("deployments"):
            problems.append("status with --kubeconfig-dir and --previous disagrees with status --stack")
    problems += _leaks(endpoints, table, json_run)
    replicas = len([r for d in (data or {}).get("deployments", []) for r in d["replicas"]])
    return name, not problems, "; ".join(problems[:6]) or (
        f"{replicas} replicas on {len((data or {}).get('clusters', []))} clusters match; {table_seconds:.1f} s")


def status_reports_a_stopped_cluster(project: PulumiProject, endpoints: Mapping, python: Path,
                                     stopped: str) -> tuple[str, bool, str]:
    """With `stopped`'s control plane down: it is unreachable with the drain suggestion, exit 1, in seconds."""
    name = f"modelplane status with {stopped} stopped: unreachable, the drain suggestion, exit 1"
    problems: list[str] = []
    table, seconds = run_status(project, python, "--output", "table")
    data, json_run = _json(project, python, problems)
    problems += _exit(table, 1, "status --stack") + _exit(json_run, 1, "status --stack --output json")
    drain = f"modelplane drain {stopped} --effect NoExecute --stack {STACK}"
    if f"{stopped} is unreachable: if it stays down, move its replicas away:\n  {drain}\n  pulumi up --stack {STACK}\n" \
            not in table.stdout:
        problems.append(f"the table lacks the drain suggestion for {stopped}: {_tail(table.stdout)}")
    if seconds > 30:
        problems.append(f"status took {seconds:.0f} s with one cluster down")
    if data is not None:
        problems += _summary(data, "degraded", [stopped])
        cluster = next((c for c in data.get("clusters", []) if c["name"] == stopped), {})
        if cluster.get("state") != "unreachable" or cluster.get("commands") != [drain, f"pulumi up --stack {STACK}"]:
            problems.append(f"{stopped} reported as {cluster.get('state')} with commands {cluster.get('commands')}")
        on_it = [r for d in data["deployments"] for r in d["replicas"] if r["cluster"] == stopped]
        if not on_it or any(r["health"] != "unreachable" for r in on_it):
            problems.append(f"replicas on {stopped}: {[(r['name'], r['health']) for r in on_it]}")
        problems += _columns_match(data, table.stdout, endpoints, skip={stopped})
    problems += _leaks(endpoints, table, json_run)
    return name, not problems, "; ".join(problems[:6]) or (
        f"{stopped} unreachable ({_detail(data, stopped)}); the others read; {seconds:.1f} s")


# --- running it ------------------------------------------------------------------------------------------------

def run_status(project: PulumiProject, python: Path, *args: str) -> tuple[subprocess.CompletedProcess, float]:
    """`modelplane status --stack e2e --no-probe ARGS` in the scratch project, with the scenario's Pulumi environment."""
    env = {**project.env, "PYTHONPATH": str(REPO)}
    started = time.monotonic()
    result = subprocess.run([str(python), "-m", "modelplane", "status", "--stack", STACK, "--no-probe", *args],
                            cwd=project.dir, env=env, capture_output=True, text=True, timeout=300)
    return result, time.monotonic() - started


def _json(project: PulumiProject, python: Path, problems: list[str]) -> tuple[dict | None, subprocess.CompletedProcess]:
    result, _ = run_status(project, python, "--output", "json")
    try:
        return json.loads(result.stdout), result
    except ValueError:
        problems.append(f"status --output json printed no JSON: {_tail(result.stderr or result.stdout)}")
        return None, result


def _offline(project: PulumiProject, endpoints: Mapping, python: Path, problems: list[str]) -> dict | None:
    """The same status from files: the fleet's kubeconfigs in a folder (0700) and the stack's placement output."""
    placement = project.run("stack", "output", "placement", "--json", "--stack", STACK)
    if not placement.ok:
        problems.append(f"pulumi stack output placement failed: {placement.tail(3)}")
        return None
    with tempfile.TemporaryDirectory(prefix="status-kubeconfigs-") as folder:
        for cluster, endpoint in endpoints.items():
            path = Path(folder) / f"{cluster}.yaml"
            path.write_text(endpoint.kubeconfig)
            os.chmod(path, 0o600)
        previous = Path(folder) / "placement.json"
        previous.write_text(placement.stdout)
        result, _ = run_status(project, python, "--output", "json", "--kubeconfig-dir", folder,
                               "--previous", str(previous))
    problems += _exit(result, 0, "status --kubeconfig-dir --previous")
    try:
        return json.loads(result.stdout)
    except ValueError:
        problems.append(f"status --kubeconfig-dir printed no JSON: {_tail(result.stderr)}")
        return None


# --- what the API servers hold -----------------------------------------------------------------------------------

def held(api: KubeApi, namespace: str, replica: str) -> dict[str, int]:
    """A replica's serving pods, Ready ones, the serving pods its Deployments and LeaderWorkerSets want (one leader
    per group), claims and allocated claims."""
    pods = [p for p in api.list(object_path("v1", "pods", namespace), label_selector=f"{SERVING}={replica}")
            if p.get("status", {}).get("phase") not in ("Succeeded", "Failed")]
    deployments = [d for d in api.list(object_path("apps/v1", "deployments", namespace))
                   if d["spec"]["template"]["metadata"].get("labels", {}).get(SERVING) == replica]
    leader_sets = [s for s in api.list(object_path("leaderworkerset.x-k8s.io/v1", "leaderworkersets", namespace))
                   if s["spec"]["leaderWorkerTemplate"]["leaderTemplate"]["metadata"].get("labels", {}).get(SERVING) == replica]
    claims = allocated = 0
    for pod in pods:
        names = {s["name"]: s.get("resourceClaimName") for s in pod.get("status", {}).get("resourceClaimStatuses") or []}
        for reference in pod["spec"].get("resourceClaims") or []:
            claims += 1
            claim_name = names.get(reference["name"])
            claim = api.get(object_path("resource.k8s.io/v1", "resourceclaims", namespace, claim_name)) if claim_name else None
            allocated += bool((claim or {}).get("status", {}).get("allocation"))
    ready = sum(any(c["type"] == "Ready" and c["status"] == "True" for c in p.get("status", {}).get("conditions") or [])
                for p in pods)
    desired = sum(w["spec"].get("replicas", 1) for w in deployments + leader_sets)
    return {"pods": len(pods), "ready": ready, "desired": desired,
            "claims": claims, "allocated": allocated}


def _columns_match(data: dict, table: str, endpoints: Mapping, skip: set[str]) -> list[str]:
    rows = {line.split()[0]: line.split() for line in table.splitlines() if line.startswith("  ") and len(line.split()) >= 8}
    problems = []
    for deployment in data.get("deployments", []):
        for replica in deployment["replicas"]:
            if replica["cluster"] in skip:
                continue
            truth = held(endpoints[replica["cluster"]].api(), deployment["namespace"], replica["name"])
            pods = f"{truth['ready']}/{truth['desired']}"
            claims = f"{truth['allocated']}/{truth['claims']}" if truth["claims"] else "-"
            row = rows.get(replica["name"], [])
            shown = (row[3], row[4], row[6]) if len(row) >= 8 else None
            if shown != (pods, claims, "healthy"):
                problems.append(f"{replica['name']} on {replica['cluster']}: table shows {shown}, the API server "
                                f"holds pods {pods}, claims {claims}")
            if (replica["pods"] or {}).get("observed") != truth["pods"] or \
                    (replica["claims"] or {}).get("allocated") != truth["allocated"]:
                problems.append(f"{replica['name']}: JSON pods {replica['pods']}, claims {replica['claims']}; "
                                f"API server {truth}")
    return problems


# --- small checks ------------------------------------------------------------------------------------------------

def _exit(result: subprocess.CompletedProcess, expected: int, what: str) -> list[str]:
    problems = [] if result.returncode == expected else [
        f"{what} exited {result.returncode}, expected {expected}: {_tail(result.stderr or result.stdout)}"]
    if "Traceback" in result.stderr:
        problems.append(f"{what} printed a traceback")
    return problems


def _summary(data: dict, state: str, unreachable: list[str]) -> list[str]:
    summary = data.get("summary", {})
    drift = summary.get("drift", {})
    problems = []
    if summary.get("state") != state or summary.get("unreachableClusters") != unreachable:
        problems.append(f"summary {summary}, expected state {state}, unreachable {unreachable}")
    if any(drift.values()):
        problems.append(f"drift after pulumi up: {drift}")
    return problems


def _leaks(endpoints: Mapping, *runs: subprocess.CompletedProcess) -> list[str]:
    text = "".join(r.stdout + r.stderr for r in runs)
    return [f"{cluster}: {what} printed" for cluster, e in endpoints.items()
            for what, value in (("token", e.token), ("kubeconfig", e.kubeconfig.strip())) if value in text]


def _detail(data: dict | None, cluster: str) -> str:
    return next((c.get("detail", "") for c in (data or {}).get("clusters", []) if c["name"] == cluster), "")


def _tail(text: str, limit: int = 300) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else "… " + text[-limit:]
