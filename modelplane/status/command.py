"""`modelplane status`: the thin shell around the pure report.

    last placement (--previous, else the stack output)  ->  plan + drift  ->  kubeconfigs
    ->  read the clusters (threads)  ->  probe the endpoints (threads)  ->  report  ->  table or JSON
"""
from __future__ import annotations

import argparse
import json
import re
import shlex
import sys
from pathlib import Path

from ..api import Fleet
from ..api.errors import ModelplaneError
from ..api.stackfile import find_project_dir
from ..api.textfile import read_text
from ..render.types import replica_host
from ..scheduling import PlacementDocument, load_previous, schedule
from .kubeconfig import ClusterAccess, parse_kubeconfig
from .live import read_clusters
from .probe import ProbeTarget, probe_all
from .replicas import WatchedReplica, watched_replicas
from .report import Runbook, StatusReport, build_report
from .stack import (INSTEAD_OF_BOTH, INSTEAD_OF_KUBECONFIGS, INSTEAD_OF_PLACEMENT, PulumiError, PulumiStack,
                    kubeconfigs_from_config, kubeconfigs_from_outputs)
from .table import status_table

KUBECONFIG_NAMES = ("{}", "{}.yaml", "{}.yml", "{}.kubeconfig")
MAX_KUBECONFIG_BYTES = 1 << 20


def run(fleet: Fleet, stack_path: Path, args: argparse.Namespace) -> int:
    stack = Stack.of(stack_path, args.stack)
    previous, outputs, notes = last_placement(stack, args.previous, needs_kubeconfigs=args.kubeconfig_dir is None)
    result = schedule(fleet, previous)
    watched = watched_replicas(result, previous)
    rows = [r for group in watched.values() for r in group]
    accesses = cluster_accesses(stack, fleet, sorted({r.cluster for r in rows}), args.kubeconfig_dir, outputs)
    namespaces: dict[str, set[str]] = {}
    for r in rows:
        namespaces.setdefault(r.cluster, set()).add(r.namespace)
    readings = read_clusters(accesses, namespaces)
    probes = None if args.no_probe else probe_all(probe_targets(rows, readings, fleet))
    report = build_report(stack.label, result, watched, readings, probes, stack.runbook(), tuple(notes))
    write(report, args.output)
    return report.exit_code


def last_placement(stack: "Stack", previous: Path | None,
                   needs_kubeconfigs: bool) -> tuple[PlacementDocument, dict | None, list[str]]:
    """The last `pulumi up`'s placement, the stack's outputs when they were read for it, and notes."""
    if previous is not None:
        return load_previous(previous), None, []
    instead = INSTEAD_OF_BOTH if needs_kubeconfigs else INSTEAD_OF_PLACEMENT
    outputs = stack.pulumi(instead).outputs(needs_kubeconfigs, instead)  # the kubeconfigs too, in one call
    document, notes = placement_of(outputs, stack.label)
    return document, outputs, notes


def cluster_accesses(stack: "Stack", fleet: Fleet, clusters: list[str], folder: Path | None,
                     outputs: dict | None) -> dict[str, ClusterAccess]:
    """How to reach each cluster holding a replica; a cluster of the fleet without a kubeconfig is an error."""
    texts = kubeconfigs_in_dir(folder, clusters) if folder is not None else stack.kubeconfigs(clusters, fleet, outputs)
    missing = [c for c in clusters if c not in texts and c in fleet.inference_clusters]
    if missing:
        raise ModelplaneError(missing_kubeconfigs(missing, folder, stack.label))
    return {c: access_of(c, texts[c], fleet) for c in clusters if c in texts}


def write(report: StatusReport, output: str) -> None:
    if output == "json":
        sys.stdout.write(json.dumps(report.to_dict(), indent=2) + "\n")
    else:
        sys.stdout.write(status_table(report))


def placement_of(outputs: dict, stack: str) -> tuple[PlacementDocument, list[str]]:
    data = outputs.get("placement")
    if not data:
        return PlacementDocument(), [f"stack {stack} has no `placement` output: it has not been deployed with "
                                     "`pulumi up` yet, so every replica is drift to add"]
    try:
        return load_previous(data), []
    except ModelplaneError as error:
        raise ModelplaneError(f"the stack output `placement` of stack {stack}: {error}; {INSTEAD_OF_PLACEMENT}") from None


def kubeconfigs_in_dir(folder: Path, clusters: list[str]) -> dict[str, tuple[str, str, Path]]:
    """{cluster: (text, origin, folder)} for every cluster with a file in `folder`."""
    if not folder.is_dir():
        raise ModelplaneError(f"--kubeconfig-dir {folder} is not a folder; it must hold one kubeconfig per cluster, "
                              "named <cluster>, <cluster>.yaml or <cluster>.kubeconfig")
    found = {}
    for cluster in clusters:
        for pattern in KUBECONFIG_NAMES:
            path = folder / pattern.format(cluster)
            if path.is_file():
                text = read_text(path, "kubeconfig", MAX_KUBECONFIG_BYTES)
                found[cluster] = (text, f"{path.name} in --kubeconfig-dir", folder)
                break
    return found


def missing_kubeconfigs(clusters: list[str], folder: Path | None, stack: str) -> str:
    names = ", ".join(clusters)
    if folder is not None:
        files = ", ".join(f"{folder / c}" for c in clusters)
        return (f"no kubeconfig for cluster{'s' if len(clusters) > 1 else ''} {names} in --kubeconfig-dir {folder}: "
                f"add {files} (or <cluster>.yaml / <cluster>.kubeconfig)")
    them = "them" if len(clusters) > 1 else "it"
    return (f"no kubeconfig for cluster{'s' if len(clusters) > 1 else ''} {names}: stack {stack} has no `kubeconfigs` "
            f"output for {them} (written by `pulumi up`), and its config holds one only for Existing clusters "
            f"(modelplane:inferenceClusters.<cluster>.cluster.existing.kubeconfig); {INSTEAD_OF_KUBECONFIGS}")


def access_of(cluster: str, found: tuple[str, str, Path | None], fleet: Fleet) -> ClusterAccess:
    text, origin, base_dir = found
    spec = fleet.inference_clusters.get(cluster)
    existing = spec.cluster.existing if spec is not None and spec.cluster.source == "Existing" else None
    return parse_kubeconfig(text, cluster, origin, context=getattr(existing, "context", None), base_dir=base_dir)


def probe_targets(rows: list[WatchedReplica], readings: dict, fleet: Fleet) -> list[ProbeTarget]:
    """Deployed replicas on clusters that were read and whose gateway has an address."""
    targets, ports = [], {}
    for r in rows:
        reading = readings.get(r.cluster)
        if r.deployed and reading is not None and reading.read and reading.gateway_address:
            if r.cluster not in ports:
                ports[r.cluster] = gateway_port(fleet, r.cluster)
            targets.append(ProbeTarget(r.key, reading.gateway_address, ports[r.cluster],
                                       replica_host(r.namespace, r.name)))
    return targets


def gateway_port(fleet: Fleet, cluster: str) -> int:
    """The workload gateway's first HTTP listener port (80 unless the serving stack says otherwise)."""
    if cluster not in fleet.inference_clusters:
        return 80
    listeners = fleet.serving_stack_for(cluster).gateway.listeners
    return next((listener.port for listener in listeners if listener.protocol == "HTTP"), 80)


class Stack:
    """The stack status reports on: its name, how commands name it, and its Pulumi project."""

    def __init__(self, path: Path, name: str, label: str, given_by_name: bool) -> None:
        self.path, self.name, self.label, self.given_by_name = path, name, label, given_by_name

    @classmethod
    def of(cls, path: Path, stack: str | None) -> "Stack":
        if stack:
            return cls(path, stack, stack, True)
        match = re.fullmatch(r"Pulumi\.(.+)\.ya?ml", path.name)
        return cls(path, match.group(1) if match else "", str(path), False)

    def runbook(self) -> Runbook:
        name = shlex.quote(self.name or "<stack>")
        if self.given_by_name:
            return Runbook(f"--stack {name}", f"--stack {name}")
        return Runbook(f"--config {shlex.quote(str(self.path))}",
                       f"--stack {name} --config-file {shlex.quote(str(self.path))}")

    def pulumi(self, instead: str) -> PulumiStack:
        if not self.name:
            raise PulumiError(f"{self.path} is not named Pulumi.<stack>.yaml, so status cannot ask Pulumi for its "
                              f"outputs; {instead}")
        start = Path.cwd() if self.given_by_name else self.path.resolve().parent
        project = find_project_dir(start) or find_project_dir(Path.cwd())
        if project is None:
            raise PulumiError(f"no Pulumi project (Pulumi.yaml) above {start}, so status cannot ask Pulumi for stack "
                              f"{self.name}'s outputs; {instead}")
        return PulumiStack(self.name, project, None if self.given_by_name else self.path)

    def kubeconfigs(self, clusters: list[str], fleet: Fleet, outputs: dict | None) -> dict[str, tuple[str, str, None]]:
        """From the secret stack output `kubeconfigs`, then the stack's secret config for the clusters it lacks."""
        if not clusters:
            return {}
        pulumi = self.pulumi(INSTEAD_OF_KUBECONFIGS)
        if outputs is None:
            outputs = pulumi.outputs(True, INSTEAD_OF_KUBECONFIGS)
        found = {c: (text, "the stack output kubeconfigs", None)
                 for c, text in kubeconfigs_from_outputs(outputs).items() if c in clusters}
        if any(c not in found and _existing(fleet, c) for c in clusters):
            config = kubeconfigs_from_config(pulumi.config(INSTEAD_OF_KUBECONFIGS))
            for c in clusters:
                if c not in found and c in config:
                    found[c] = (config[c], f"modelplane:inferenceClusters.{c}.cluster.existing.kubeconfig", None)
        return found


def _existing(fleet: Fleet, cluster: str) -> bool:
    spec = fleet.inference_clusters.get(cluster)
    return spec is not None and spec.cluster.source == "Existing"
