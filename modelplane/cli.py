"""`modelplane` command line: works offline, without the Pulumi CLI or any cloud SDK.

Exit codes: 0 success, 2 invalid input (every problem listed, no traceback); `status` exits 1 when the
live fleet is degraded (docs/status.md).
"""
from __future__ import annotations

import argparse
import dataclasses
import difflib
import os
import re
import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn, Sequence

from . import gc_policy, runbook, views
from .version import VERSION
from .api import ConfigError, ConfigIssue, Fleet, ModelplaneError, NamespacedName, load_fleet
from .api.stackfile import StackFile, find_project_dir, read_stack_file, stack_file_path
from .scheduling import load_previous, schedule

if TYPE_CHECKING:
    from .api.inference_gateway import Proxy

EXIT_OK, EXIT_INVALID = 0, 2


def _stack_source(parser: argparse.ArgumentParser) -> None:
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--stack", help="stack name: reads <project>/stacks/Pulumi.<stack>.yaml")
    source.add_argument("--config", type=Path, metavar="FILE", help="any stack file in Pulumi's format")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="modelplane", description="Fleet control plane for AI inference.")
    parser.add_argument("--version", action="version", version=f"modelplane {VERSION}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    validate = commands.add_parser("validate", help="check a stack's config and list every problem")
    _stack_source(validate)
    plan = commands.add_parser("plan", help="show where every replica goes (the placement preview)")
    _stack_source(plan)
    plan.add_argument("--previous", type=Path, metavar="FILE",
                      help="the last placement (`pulumi stack output placement --json` or `plan --output json`)")
    plan.add_argument("--output", choices=("table", "json"), default="table")
    explain = commands.add_parser("explain", help="why each cluster does or does not take a deployment's replicas")
    explain.add_argument("deployments", nargs="+", metavar="NAMESPACE/DEPLOYMENT")
    _stack_source(explain)
    explain.add_argument("--previous", type=Path, metavar="FILE")
    render = commands.add_parser("render", help="write every Kubernetes object and Helm release of the fleet as YAML")
    _stack_source(render)
    render.add_argument("--previous", type=Path, metavar="FILE")
    render.add_argument("--out", type=Path, required=True, metavar="DIR", help="one folder per cluster is written here")
    sources = commands.add_parser("sources", help="list every Helm chart and CRD manifest the fleet fetches, and "
                                                  "the commands that fill a mirror for air-gapped sites")
    _stack_source(sources)
    sources.add_argument("--output", choices=("table", "json"), default="table")
    status = commands.add_parser("status", help="the live fleet after `pulumi up`: per replica its pods, claims, "
                                                "endpoint health and drift from the last placement")
    _stack_source(status)
    status.add_argument("--previous", type=Path, metavar="FILE",
                        help="the last `pulumi up`'s placement (default: the stack output `placement`, read with pulumi)")
    status.add_argument("--kubeconfig-dir", type=Path, metavar="DIR",
                        help="one kubeconfig per cluster, named <cluster>, <cluster>.yaml or <cluster>.kubeconfig "
                             "(default: the stack output `kubeconfigs`, else the stack's secret config)")
    status.add_argument("--no-probe", action="store_true",
                        help="skip the endpoint probe (the front door's health check, made from this machine)")
    status.add_argument("--output", choices=("table", "json"), default="table")
    scale = commands.add_parser("scale", help="set a deployment's replicas in the stack file")
    scale.add_argument("deployment", metavar="NAMESPACE/DEPLOYMENT")
    scale.add_argument("--replicas", type=int, required=True, metavar="N")
    _edit_options(scale)
    drain = commands.add_parser("drain", help="taint a cluster in the stack file: no new replicas (NoSchedule), "
                                              "or move its replicas away (NoExecute)")
    drain.add_argument("cluster", metavar="CLUSTER")
    drain.add_argument("--effect", choices=runbook.EFFECTS, default="NoSchedule")
    drain.add_argument("--key", default=runbook.DRAIN_KEY, help=f"the taint key (default {runbook.DRAIN_KEY})")
    _edit_options(drain)
    undrain = commands.add_parser("undrain", help="remove a cluster's drain taint from the stack file")
    undrain.add_argument("cluster", metavar="CLUSTER")
    undrain.add_argument("--key", default=runbook.DRAIN_KEY, help=f"the taint key (default {runbook.DRAIN_KEY})")
    _edit_options(undrain)
    return parser


def _edit_options(parser: argparse.ArgumentParser) -> None:
    _stack_source(parser)
    parser.add_argument("--previous", type=Path, metavar="FILE",
                        help="the last placement: the new plan is shown against it")


def resolve_stack_file(stack: str | None, config: Path | None) -> Path:
    if config is not None:
        return config
    project_dir = find_project_dir(Path.cwd())
    if project_dir is None:
        raise ModelplaneError("no Pulumi.yaml here or above; run from the project folder or pass --config FILE")
    return stack_file_path(stack or "", project_dir)


def load(stack: str | None, config: Path | None) -> tuple[StackFile, Fleet]:
    return load_file(resolve_stack_file(stack, config))


def load_file(path: Path) -> tuple[StackFile, Fleet]:
    stack_file = read_stack_file(path)
    issues = list(stack_file.issues)
    fleet = None
    try:
        fleet = load_fleet(stack_file.config, origin="stack-file")
    except ConfigError as error:
        issues += error.issues
    if issues or fleet is None:
        error = ConfigError(issues)
        error.stack_file = stack_file  # lets the printer add line numbers
        raise error
    return stack_file, fleet


def _shown(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def _located(stack_file: StackFile | None, issue) -> str:
    line = stack_file.line_of(issue.path) if stack_file else None
    return f"{issue}" + (f"  [{_shown(stack_file.path)}:{line}]" if line else "")


def cmd_validate(args: argparse.Namespace) -> int:
    stack_file, fleet = load(args.stack, args.config)
    for warning in fleet.warnings:
        print(f"warning: {_located(stack_file, warning)}", file=sys.stderr)
    for line in _existing_cluster_notes(stack_file, fleet):
        print(line, file=sys.stderr)
    print(f"valid: {_shown(stack_file.path)}: {fleet.summary()}")
    return EXIT_OK


def _existing_cluster_notes(stack_file: StackFile, fleet: Fleet) -> list[str]:
    """What modelplane installs on each Existing cluster, and how to declare what the cluster already runs."""
    from .api.serving_stack import COMPONENTS, MIN_KUBERNETES_VERSION
    from .render.fleet import workload_stack
    from .render.serving_stack import by_component

    lines = []
    for name, cluster in sorted(fleet.inference_clusters.items()):
        if cluster.cluster.source != "Existing":
            continue
        rendered = workload_stack(fleet, name)  # what `modelplane render` and `pulumi up` deploy there
        releases = "; ".join(f"{component}: " + ", ".join(map(_release_text, group))
                             for component, group in by_component(rendered.releases))
        crds = _manifests_text(rendered)
        cluster_scoped = ", ".join(f"{o['kind']} {o['metadata']['name']}"
                                   for o in rendered.cluster_objects + rendered.objects if "namespace" not in o["metadata"])
        stack = fleet.serving_stack_for(name)
        header = ConfigIssue(("inferenceClusters", name, "cluster", "source"),
                             f"an Existing cluster: it needs Kubernetes {MIN_KUBERNETES_VERSION}+ with "
                             "resource.k8s.io/v1 (not checked offline), and modelplane installs there:")
        preinstalled = [c for c in COMPONENTS if c in stack.preinstalled]
        lines += [f"warning: {_located(stack_file, header)}",
                  f"  Helm releases: {releases or 'none'}",
                  f"  CRD manifests: {crds}; cluster-scoped objects: {cluster_scoped}",
                  f"  left alone (servingStack.preinstalled): {', '.join(preinstalled) or 'nothing'}; if the cluster "
                  f"already runs more of these, add them to inferenceClusters.{name}.servingStack.preinstalled "
                  f"(known: {', '.join(COMPONENTS)})"]
    return lines + _existing_front_door_notes(stack_file, fleet)


def _existing_front_door_notes(stack_file: StackFile, fleet: Fleet) -> list[str]:
    """What modelplane installs on an Existing front-door cluster."""
    from .render.front_door import front_door_stack

    gateway = fleet.inference_gateway
    if gateway is None or gateway.cluster.source != "Existing":
        return []
    rendered = front_door_stack(fleet)  # what `modelplane render` and `pulumi up` deploy there
    releases = ", ".join(map(_release_text, rendered.releases))
    crds = _manifests_text(rendered)
    header = ConfigIssue(("inferenceGateway", "cluster", "source"),
                         "an Existing front-door cluster: modelplane installs there:")
    return [f"warning: {_located(stack_file, header)}",
            f"  Helm releases: {releases or 'none'}",
            f"  CRD manifests: {crds}",
            f"  left alone (inferenceGateway.preinstalled): {', '.join(gateway.preinstalled) or 'nothing'}"
            + ("" if gateway.preinstalled else _preinstalled_hint(gateway.proxy))]


def _preinstalled_hint(proxy: Proxy) -> str:
    from .api.inference_gateway import PREINSTALLABLE
    from .render.front_door import PROXIES

    what = PROXIES[proxy].preinstalled_hint()
    return f"; if the cluster already runs {what} (known: {', '.join(PREINSTALLABLE[proxy])})"


def _release_text(release) -> str:
    return f"{release.name} ({release.chart} {release.version}, namespace {release.namespace})"


def _manifests_text(stack) -> str:
    return "; ".join(f"{m.component}: {m.url}" for m in stack.remote_manifests) or "none"


def _planned(args: argparse.Namespace):
    stack_file, fleet = load(args.stack, args.config)
    for warning in fleet.warnings:
        print(f"warning: {_located(stack_file, warning)}", file=sys.stderr)
    return fleet, schedule(fleet, load_previous(args.previous))


def cmd_plan(args: argparse.Namespace) -> int:
    fleet, result = _planned(args)
    if args.output == "json":
        sys.stdout.write(result.to_json())
    else:
        sys.stdout.write(views.plan_table(result))
    for plan in result.deployments.values():
        if plan.short:
            print(f"warning: {views.shortfall_warning(result, plan)}", file=sys.stderr)
    return EXIT_OK


def cmd_explain(args: argparse.Namespace) -> int:
    fleet, result = _planned(args)
    keys = []
    for text in args.deployments:
        namespace, slash, name = text.partition("/")
        key = NamespacedName(namespace, name)
        if not slash or key not in result.deployments:
            known = sorted(str(k) for k in result.deployments)
            close = difflib.get_close_matches(text, known, n=1)
            hint = f"; did you mean {close[0]}?" if close else f"; deployments: {', '.join(known) or 'none'}"
            raise ModelplaneError(f"no ModelDeployment {text} (write NAMESPACE/NAME){hint}")
        keys.append(key)
    sys.stdout.write("\n".join(views.explain_table(result.explain(key)) for key in keys))
    return EXIT_OK


def cmd_render(args: argparse.Namespace) -> int:
    from .render import render_fleet, write_manifests  # only this command needs the renderers

    fleet, result = _planned(args)
    written, removed = write_manifests(render_fleet(fleet, result), args.out)  # refuses folders it did not write
    for w in written:
        print(f"{args.out / w.cluster}: {w.remote_manifests} remote manifests, {w.objects} objects, "
              f"{w.releases} Helm releases, {w.placeholders} placeholders")
    if any(w.placeholders for w in written):
        print("placeholders (placeholders.yaml in each folder) stand for values known only once deployed, and secrets; "
              "kind MetalLB ranges are carved from kind's default network here, from the real one by `pulumi up`")
    for folder in removed:
        print(f"{folder}: removed (its cluster is no longer in the fleet)")
    return EXIT_OK


def cmd_sources(args: argparse.Namespace) -> int:
    """What the mirror must hold (from the fleet's upstream render), then the commands that fill it."""
    import json

    from .render.fleet import fleet_sources
    from .render.sources import fill_commands, sources_table

    stack_file, fleet = load(args.stack, args.config)
    for warning in fleet.warnings:
        print(f"warning: {_located(stack_file, warning)}", file=sys.stderr)
    sources = fleet_sources(fleet)
    if args.output == "json":
        print(json.dumps(sources.to_dict(), indent=2))
    else:
        sys.stdout.write(sources_table(sources) + "\n" + fill_commands(sources))
    return EXIT_OK


def cmd_status(args: argparse.Namespace) -> int:
    """The live fleet: exit 0 healthy (drift is shown, not a failure), 1 degraded (docs/status.md)."""
    from .status import command as status  # reads live clusters; only this command needs it

    path = resolve_stack_file(args.stack, args.config)
    stack_file, fleet = load_file(path)
    for warning in fleet.warnings:
        print(f"warning: {_located(stack_file, warning)}", file=sys.stderr)
    return status.run(fleet, path, args)


def cmd_scale(args: argparse.Namespace) -> int:
    return _edit_stack(args, lambda text: runbook.scale(text, args.deployment, args.replicas))


def cmd_drain(args: argparse.Namespace) -> int:
    return _edit_stack(args, lambda text: runbook.drain(text, args.cluster, args.effect, args.key))


def cmd_undrain(args: argparse.Namespace) -> int:
    return _edit_stack(args, lambda text: runbook.undrain(text, args.cluster, args.key))


def _edit_stack(args: argparse.Namespace, make_edit) -> int:
    """Edit the stack file in place: validated like `validate` before it is written, atomically."""
    path = resolve_stack_file(args.stack, args.config)
    with runbook.locked(path):  # from reading to replacing: a concurrent scale/drain/undrain waits, no edit is lost
        original = read_stack_file(path)  # a missing file or broken YAML stops here
        previous = load_previous(args.previous)  # so does a bad --previous: nothing is written
        text = runbook.read_text(path)
        try:
            edit = make_edit(text)
        except ConfigError as error:
            error.stack_file = original
            raise
        if not edit.changed:
            print(f"{_shown(path)}: {edit.note}; nothing changed")
            return EXIT_OK
        try:
            stack_file, fleet = runbook.write_atomically(path, edit.text, text, load_file)
        except ConfigError as error:
            error.stack_file = original  # the file is untouched: point at its lines
            error.unchanged = True
            raise
    stack_file = dataclasses.replace(stack_file, path=path)
    for warning in fleet.warnings:
        print(f"warning: {_located(stack_file, warning)}", file=sys.stderr)
    stack = args.stack or _stack_name(path)
    flags = [f"--stack {shlex.quote(stack)}"] + ([] if args.stack else [f"--config-file {shlex.quote(str(path))}"])
    print(f"edited {_shown(path)}:")
    for change in edit.changes:
        print(f"  {change}")
    print("the same edit with the Pulumi CLI:")
    for command in edit.commands:
        words = command.words()
        print(f"  pulumi config {words[0]} {' '.join(flags)} {words[1]} '{words[2]}'"
              + "".join(f" {shlex.quote(w)}" for w in words[3:]))
    result = schedule(fleet, previous)
    target = args.deployment if args.command == "scale" else args.cluster
    print(f"plan against {_shown(args.previous)}:" if args.previous else
          "plan as a first deployment (no --previous placement given):")
    for line in views.plan_lines(result, previous, args.command, target):
        print(f"  {line}")
    source = f"--stack {shlex.quote(args.stack)}" if args.stack else f"--config {shlex.quote(_shown(path))}"
    placement = shlex.quote(_shown(args.previous)) if args.previous else "<placement.json>"
    print(f"next: pulumi up {' '.join(flags)}  "
          f"(to preview the placement offline: modelplane plan {source} --previous {placement})")
    return EXIT_OK


def _stack_name(path: Path) -> str:
    match = re.fullmatch(r"Pulumi\.(.+)\.ya?ml", path.name)
    return match.group(1) if match else "<stack>"


def main(argv: Sequence[str] | None = None) -> int:
    gc_policy.for_batch_run()
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        commands = {"validate": cmd_validate, "plan": cmd_plan, "explain": cmd_explain, "render": cmd_render,
                    "sources": cmd_sources, "status": cmd_status, "scale": cmd_scale, "drain": cmd_drain,
                    "undrain": cmd_undrain}
        return commands[args.command](args)
    except ConfigError as error:
        stack_file = getattr(error, "stack_file", None)
        noun = "error" if len(error.issues) == 1 else "errors"
        where = f" in {_shown(stack_file.path)}" if stack_file else ""
        print(f"error: {len(error.issues)} {noun}{where}:", file=sys.stderr)
        for issue in error.issues:
            print(f"  {_located(stack_file, issue)}", file=sys.stderr)
        if getattr(error, "unchanged", False):
            print(f"nothing written: the edit would make the stack invalid; {_shown(stack_file.path)} is unchanged",
                  file=sys.stderr)
        return EXIT_INVALID
    except ModelplaneError as error:
        print(f"error: {error}", file=sys.stderr)
        return EXIT_INVALID


def run() -> NoReturn:
    """The `modelplane` command: `main`, then exit without tearing the heap down.

    A plan of 400 clusters x 4,000 deployments holds about 150 MB of small objects until the end;
    freeing them one by one as the interpreter shuts down took 0.7 s of a 3.5 s run, for nothing.
    Every file is closed and every thread joined by then; what is printed is flushed here.
    """
    code = main()
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except BrokenPipeError:  # `modelplane plan | head`: the reader left, as with any command
        pass
    os._exit(code)


if __name__ == "__main__":
    run()
