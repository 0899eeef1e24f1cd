"""`modelplane status`: the thin shell around the pure report.

last placement (--previous, else the stack output)  ->  plan + drift  ->  kubeconfigs
->  read the clusters (threads)  ->  probe the endpoints (threads)  ->  report  ->  table or JSON
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import sys
from pathlib import Path

from ..api import Fleet, syntax
from ..api.errors import ModelplaneError
from ..api.stackfile import find_project_dir
from ..api.textfile import read_text
from ..progress import Progress
from ..render.types import replica_host
from ..scheduling import PlacementDocument, load_previous, schedule
from .fallback import fallback_lines
from .kubeconfig import (
    ClusterAccess,
    KubeconfigError,
    access_from_document,
    context_names,
    merged_kubeconfig,
    parse_kubeconfig,
)
from .live import read_clusters
from .probe import ProbeTarget, probe_all
from .replicas import WatchedReplica, watched_replicas
from .report import Runbook, StatusReport, build_report
from .stack import (
    INSTEAD_OF_BOTH,
    INSTEAD_OF_KUBECONFIGS,
    INSTEAD_OF_PLACEMENT,
    PulumiError,
    PulumiStack,
    kubeconfigs_from_config,
    kubeconfigs_from_outputs,
)
from .table import status_table

KUBECONFIG_NAMES = ("{}", "{}.yaml", "{}.yml", "{}.kubeconfig")
MAX_KUBECONFIG_BYTES = 1 << 20


def run(fleet: Fleet, stack_path: Path, args: argparse.Namespace, progress: Progress | None = None) -> int:
    progress = progress or Progress()
    stack = Stack.of(stack_path, args.stack)
    if args.previous is None:
        progress(f"status: reading the last placement of stack {stack.label} (pulumi stack output)...")
    previous, outputs, notes = last_placement(stack, args.previous, needs_kubeconfigs=args.kubeconfig_dir is None)
    check_names(previous)
    result = schedule(fleet, previous)
    watched = watched_replicas(result, previous)
    rows = [r for group in watched.values() for r in group]
    accesses = cluster_accesses(stack, fleet, sorted({r.cluster for r in rows}), args.kubeconfig_dir, outputs)
    namespaces: dict[str, set[str]] = {}
    for r in rows:
        namespaces.setdefault(r.cluster, set()).add(r.namespace)
    readings = read_clusters(accesses, namespaces, on_done=progress.counter("status: reading clusters", len(accesses)))
    probes = None
    if not args.no_probe:
        targets = probe_targets(rows, readings, fleet)
        probes = probe_all(targets, on_done=progress.counter("status: probing replicas", len(targets)))
    progress.done()
    report = build_report(
        stack.label, result, watched, readings, probes, stack.runbook(), tuple(notes), tuple(fallback_lines(fleet))
    )
    write(report, args.output)
    return report.exit_code


def last_placement(
    stack: Stack, previous: Path | None, needs_kubeconfigs: bool
) -> tuple[PlacementDocument, dict | None, list[str]]:
    """The last `pulumi up`'s placement, the stack's outputs when they were read for it, and notes."""
    if previous is not None:
        return load_previous(previous), None, []
    instead = INSTEAD_OF_BOTH if needs_kubeconfigs else INSTEAD_OF_PLACEMENT
    outputs = stack.pulumi(instead).outputs(needs_kubeconfigs, instead)  # the kubeconfigs too, in one call
    document, notes = placement_of(outputs, stack.label)
    return document, outputs, notes


def cluster_accesses(
    stack: Stack,
    fleet: Fleet,
    clusters: list[str],
    folder: Path | None,
    outputs: dict | None,
    environ: dict[str, str] | None = None,
) -> dict[str, ClusterAccess]:
    """How to reach each cluster holding a replica; a cluster of the fleet without a kubeconfig is an error.

    A kubeconfig that is there but cannot be used makes only its own cluster unreadable."""
    environ = dict(os.environ) if environ is None else environ
    texts = kubeconfigs_in_dir(folder, clusters) if folder is not None else stack.kubeconfigs(clusters, fleet, outputs)
    accesses = {c: access_of(c, texts[c], fleet, environ) for c in clusters if c in texts}
    lacking = [c for c in clusters if c not in accesses and c in fleet.inference_clusters]
    if lacking and environ.get("KUBECONFIG"):
        accesses.update(accesses_from_kubeconfig_env(fleet, lacking, environ))
    missing = [c for c in lacking if c not in accesses]
    if missing:
        raise ModelplaneError(missing_kubeconfigs(missing, folder, stack.label))
    return accesses


def accesses_from_kubeconfig_env(
    fleet: Fleet, clusters: list[str], environ: dict[str, str]
) -> dict[str, ClusterAccess]:
    """Clusters `$KUBECONFIG` (one file or several) has a context for: the cluster's `existing.context`, else a
    context named like the cluster."""
    try:
        document = merged_kubeconfig(environ["KUBECONFIG"])
    except KubeconfigError as error:
        return {c: ClusterAccess.unusable(c, "$KUBECONFIG", str(error)) for c in clusters}
    names = context_names(document)
    found = {}
    for cluster in clusters:
        context = _existing_context(fleet, cluster) or cluster
        if context in names:
            origin = f"context {context} in $KUBECONFIG"
            try:
                found[cluster] = access_from_document(document, cluster, origin, context, None, environ)
            except KubeconfigError as error:
                found[cluster] = ClusterAccess.unusable(cluster, origin, str(error))
    return found


def check_names(document: PlacementDocument) -> None:
    """Every name status builds a request, a file name or a Host header from: a cluster, namespace and
    replica of the last placement must be a DNS label, as the config's own are (exit 2 otherwise)."""
    problems = []
    for i, replica in enumerate(document.replicas):
        for field, value in (("cluster", replica.cluster), ("namespace", replica.namespace), ("name", replica.name)):
            if (problem := syntax.dns_label_problem(value)) is not None:
                problems.append(f"replicas[{i}].{field} {value!a}: {problem}")
    if problems:
        shown = "; ".join(problems[:5]) + (f"; and {len(problems) - 5} more" if len(problems) > 5 else "")
        raise ModelplaneError(f"the last placement holds names that are not Kubernetes names: {shown}")


def write(report: StatusReport, output: str) -> None:
    if output == "json":
        sys.stdout.write(json.dumps(report.to_dict(), indent=2) + "\n")
    else:
        sys.stdout.write(status_table(report))


def placement_of(outputs: dict, stack: str) -> tuple[PlacementDocument, list[str]]:
    data = outputs.get("placement")
    if not data:
        return PlacementDocument(), [
            f"stack {stack} has no `placement` output: it has not been deployed with "
            "`pulumi up` yet, so every replica is drift to add"
        ]
    try:
        return load_previous(data), []
    except ModelplaneError as error:
        raise ModelplaneError(
            f"the stack output `placement` of stack {stack}: {error}; {INSTEAD_OF_PLACEMENT}"
        ) from None


def kubeconfigs_in_dir(folder: Path, clusters: list[str]) -> dict[str, tuple[str | KubeconfigError, str, Path]]:
    """{cluster: (text, origin, folder)} for every cluster with a file in `folder` (the text is the error when the
    file cannot be read: not a regular file, too large, not UTF-8)."""
    if not folder.is_dir():
        raise ModelplaneError(
            f"--kubeconfig-dir {folder} is not a folder; it must hold one kubeconfig per cluster, "
            "named <cluster>, <cluster>.yaml or <cluster>.kubeconfig"
        )
    found = {}
    for cluster in clusters:
        for pattern in KUBECONFIG_NAMES:
            path = folder / pattern.format(cluster)
            if path.exists() and not path.is_dir():
                origin = f"{path.name} in --kubeconfig-dir"
                try:
                    text: str | KubeconfigError = read_text(
                        path,
                        f"the kubeconfig of cluster {cluster} ({origin})",
                        MAX_KUBECONFIG_BYTES,
                        error=KubeconfigError,
                    )
                except KubeconfigError as error:
                    text = error
                found[cluster] = (text, origin, folder)
                break
    return found


def missing_kubeconfigs(clusters: list[str], folder: Path | None, stack: str) -> str:
    names = ", ".join(clusters)
    if folder is not None:
        files = ", ".join(f"{folder / c}" for c in clusters)
        return (
            f"no kubeconfig for cluster{'s' if len(clusters) > 1 else ''} {names} in --kubeconfig-dir {folder}: "
            f"add {files} (or <cluster>.yaml / <cluster>.kubeconfig)"
        )
    them = "them" if len(clusters) > 1 else "it"
    return (
        f"no kubeconfig for cluster{'s' if len(clusters) > 1 else ''} {names}: stack {stack} has no `kubeconfigs` "
        f"output for {them} (written by `pulumi up`), and its config holds one only for Existing clusters "
        f"(modelplane:inferenceClusters.<cluster>.cluster.existing.kubeconfig); {INSTEAD_OF_KUBECONFIGS}"
    )


def access_of(
    cluster: str,
    found: tuple[str | KubeconfigError, str, Path | None],
    fleet: Fleet,
    environ: dict[str, str] | None = None,
) -> ClusterAccess:
    """How to reach `cluster`, or (`problem` set) why its kubeconfig cannot be used: that cluster alone is then
    reported unreadable, and the others are still read."""
    text, origin, base_dir = found
    if isinstance(text, KubeconfigError):
        return ClusterAccess.unusable(cluster, origin, str(text))
    try:
        return parse_kubeconfig(
            text, cluster, origin, context=_existing_context(fleet, cluster), base_dir=base_dir, environ=environ
        )
    except KubeconfigError as error:
        return ClusterAccess.unusable(cluster, origin, str(error))


def _existing_context(fleet: Fleet, cluster: str) -> str | None:
    spec = fleet.inference_clusters.get(cluster)
    existing = spec.cluster.existing if spec is not None and spec.cluster.source == "Existing" else None
    return getattr(existing, "context", None)


def probe_targets(rows: list[WatchedReplica], readings: dict, fleet: Fleet) -> list[ProbeTarget]:
    """Deployed replicas on clusters that were read and whose gateway has an address."""
    targets, ports = [], {}
    for r in rows:
        reading = readings.get(r.cluster)
        if r.deployed and reading is not None and reading.read and reading.gateway_address:
            if r.cluster not in ports:
                ports[r.cluster] = gateway_port(fleet, r.cluster)
            targets.append(
                ProbeTarget(r.key, reading.gateway_address, ports[r.cluster], replica_host(r.namespace, r.name))
            )
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
    def of(cls, path: Path, stack: str | None) -> Stack:
        if stack:
            return cls(path, stack, stack, True)
        match = re.fullmatch(r"Pulumi\.(.+)\.ya?ml", path.name)
        return cls(path, match.group(1) if match else "", str(path), False)

    def runbook(self) -> Runbook:
        name = shlex.quote(self.name or "<stack>")
        if self.given_by_name:
            return Runbook(f"--stack {name}", f"--stack {name}")
        return Runbook(
            f"--config {shlex.quote(str(self.path))}", f"--stack {name} --config-file {shlex.quote(str(self.path))}"
        )

    def pulumi(self, instead: str) -> PulumiStack:
        if not self.name:
            raise PulumiError(
                f"{self.path} is not named Pulumi.<stack>.yaml, so status cannot ask Pulumi for its outputs; {instead}"
            )
        start = Path.cwd() if self.given_by_name else self.path.resolve().parent
        project = find_project_dir(start) or find_project_dir(Path.cwd())
        if project is None:
            raise PulumiError(
                f"no Pulumi project (Pulumi.yaml) above {start}, so status cannot ask Pulumi for stack "
                f"{self.name}'s outputs; {instead}"
            )
        return PulumiStack(self.name, project, None if self.given_by_name else self.path)

    def kubeconfigs(self, clusters: list[str], fleet: Fleet, outputs: dict | None) -> dict[str, tuple[str, str, None]]:
        """From the secret stack output `kubeconfigs`, then the stack's secret config for the clusters it lacks."""
        if not clusters:
            return {}
        pulumi = self.pulumi(INSTEAD_OF_KUBECONFIGS)
        if outputs is None:
            outputs = pulumi.outputs(True, INSTEAD_OF_KUBECONFIGS)
        found = {
            c: (text, "the stack output kubeconfigs", None)
            for c, text in kubeconfigs_from_outputs(outputs).items()
            if c in clusters
        }
        if any(c not in found and _existing(fleet, c) for c in clusters):
            config = kubeconfigs_from_config(pulumi.config(INSTEAD_OF_KUBECONFIGS))
            for c in clusters:
                if c not in found and c in config:
                    found[c] = (config[c], f"modelplane:inferenceClusters.{c}.cluster.existing.kubeconfig", None)
        return found


def _existing(fleet: Fleet, cluster: str) -> bool:
    spec = fleet.inference_clusters.get(cluster)
    return spec is not None and spec.cluster.source == "Existing"
