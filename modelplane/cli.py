"""`modelplane` command line: works offline, without the Pulumi CLI or any cloud SDK.

Exit codes: 0 success, 2 invalid input (every problem listed, no traceback); `status` exits 1 when the
live fleet is degraded (docs/status.md); `plan --detailed-exitcode` exits 3 when a deployment is short
of replicas; 130 on Ctrl-C and 141 when the reader of the output went away (`| head`), as a shell
reports a command killed by SIGINT or SIGPIPE, quietly.
"""

from __future__ import annotations

import argparse
import contextlib
import difflib
import json
import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, NoReturn

from . import gc_policy, views
from .api import ConfigError, ConfigIssue, Fleet, ModelplaneError, NamespacedName
from .api.stackfile import StackFile
from .cli_common import (
    EXIT_BROKEN_PIPE,
    EXIT_INTERRUPTED,
    EXIT_INVALID,
    EXIT_OK,
    EXIT_SHORT,
    load,
    load_file,
    located,
    resolve_stack,
    shown,
    warn,
)
from .cli_edit import cmd_drain, cmd_scale, cmd_undrain
from .cli_parser import build_parser
from .cli_up import cmd_up
from .progress import Progress
from .scheduling import load_previous, schedule

if TYPE_CHECKING:
    from .api.inference_gateway import Proxy


# --- which stack: --stack, --config, else Pulumi's selected stack -------------------------------------


def cmd_validate(args: argparse.Namespace) -> int:
    stack_file, fleet = load(args)
    warn(stack_file, fleet)
    for line in _existing_cluster_notes(stack_file, fleet):
        print(line, file=sys.stderr)
    print(f"valid: {shown(stack_file.path)}: {fleet.summary()}")
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
        releases = "; ".join(
            f"{component}: " + ", ".join(map(_release_text, group))
            for component, group in by_component(rendered.releases)
        )
        crds = _manifests_text(rendered)
        cluster_scoped = ", ".join(
            f"{o['kind']} {o['metadata']['name']}"
            for o in rendered.cluster_objects + rendered.objects
            if "namespace" not in o["metadata"]
        )
        stack = fleet.serving_stack_for(name)
        header = ConfigIssue(
            ("inferenceClusters", name, "cluster", "source"),
            f"an Existing cluster: it needs Kubernetes {MIN_KUBERNETES_VERSION}+ with "
            "resource.k8s.io/v1 (not checked offline), and modelplane installs there:",
        )
        preinstalled = [c for c in COMPONENTS if c in stack.preinstalled]
        lines += [
            f"warning: {located(stack_file, header)}",
            f"  Helm releases: {releases or 'none'}",
            f"  CRD manifests: {crds}; cluster-scoped objects: {cluster_scoped}",
            f"  left alone (servingStack.preinstalled): {', '.join(preinstalled) or 'nothing'}; if the cluster "
            f"already runs more of these, add them to inferenceClusters.{name}.servingStack.preinstalled "
            f"(known: {', '.join(COMPONENTS)})",
        ]
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
    header = ConfigIssue(
        ("inferenceGateway", "cluster", "source"), "an Existing front-door cluster: modelplane installs there:"
    )
    return [
        f"warning: {located(stack_file, header)}",
        f"  Helm releases: {releases or 'none'}",
        f"  CRD manifests: {crds}",
        f"  left alone (inferenceGateway.preinstalled): {', '.join(gateway.preinstalled) or 'nothing'}"
        + ("" if gateway.preinstalled else _preinstalled_hint(gateway.proxy)),
    ]


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
    stack_file, fleet = load(args)
    warn(stack_file, fleet)
    return fleet, schedule(fleet, load_previous(args.previous))


def _as_yaml(data) -> str:
    import yaml

    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=1 << 16)


def cmd_plan(args: argparse.Namespace) -> int:
    _, result = _planned(args)
    if args.output == "json":
        sys.stdout.write(result.to_json())
    elif args.output == "yaml":
        sys.stdout.write(_as_yaml(json.loads(result.to_json())))
    else:
        sys.stdout.write(views.plan_table(result))
    short = [plan for plan in result.deployments.values() if plan.short]
    for plan in short:
        print(f"warning: {views.shortfall_warning(result, plan)}", file=sys.stderr)
    return EXIT_SHORT if short and args.detailed_exitcode else EXIT_OK


def cmd_explain(args: argparse.Namespace) -> int:
    _, result = _planned(args)
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

    progress = Progress()
    progress("render: reading and validating the stack...")
    stack_file, fleet = load(args)
    progress.done()
    warn(stack_file, fleet)
    progress(f"render: placing the replicas of {len(fleet.model_deployments)} deployments...")
    result = schedule(fleet, load_previous(args.previous))
    progress(f"render: rendering {len(fleet.inference_clusters)} workload clusters...")
    manifests = render_fleet(fleet, result)
    progress(f"render: writing {sum(len(m.objects) for m in manifests)} objects under {args.out}...")
    try:
        written, removed = write_manifests(manifests, args.out)  # refuses folders it did not write
    finally:
        progress.done()
    for w in written:
        print(
            f"{args.out / w.cluster}: {w.remote_manifests} remote manifests, {w.objects} objects, "
            f"{w.releases} Helm releases, {w.placeholders} placeholders"
        )
    if any(w.placeholders for w in written):
        print(
            "placeholders (meta/placeholders.yaml in each folder) stand for values known only once deployed, and secrets; "
            "kind MetalLB ranges are carved from kind's default network here, from the real one by `pulumi up`"
        )
    for folder in removed:
        print(f"{folder}: removed (its cluster is no longer in the fleet)")
    return EXIT_OK


def cmd_sources(args: argparse.Namespace) -> int:
    """What the mirror must hold (from the fleet's upstream render), then the commands that fill it."""
    from .render.fleet import fleet_sources
    from .render.sources import fill_commands, sources_table

    stack_file, fleet = load(args)
    warn(stack_file, fleet)
    sources = fleet_sources(fleet)
    if args.output == "json":
        print(json.dumps(sources.to_dict(), indent=2))
    elif args.output == "yaml":
        sys.stdout.write(_as_yaml(sources.to_dict()))
    else:
        sys.stdout.write(sources_table(sources) + "\n" + fill_commands(sources))
    return EXIT_OK


def cmd_status(args: argparse.Namespace) -> int:
    """The live fleet: exit 0 healthy (drift is shown, not a failure), 1 degraded (docs/status.md)."""
    from .status import command as status  # reads live clusters; only this command needs it

    path = resolve_stack(args)
    stack_file, fleet = load_file(path)
    warn(stack_file, fleet)
    progress = Progress()  # the reads take seconds per unreachable cluster: say what is going on, on a terminal
    try:
        return status.run(fleet, path, args, progress)
    finally:
        progress.done()


def cmd_mock_engine(args: argparse.Namespace) -> int:
    from . import mock_engine

    passed = [(flag, value) for flag, value in (("--host", args.host), ("--port", args.port)) if value is not None]
    sys.argv[0] = "modelplane mock-engine"  # its usage line names the command the user typed
    mock_engine.main([word for pair in passed for word in pair])
    return EXIT_OK


def cmd_completion(args: argparse.Namespace) -> int:
    from .completion import script

    sys.stdout.write(script(build_parser(), args.shell))
    return EXIT_OK


def main(argv: Sequence[str] | None = None) -> int:
    gc_policy.for_batch_run()
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        commands = {
            "validate": cmd_validate,
            "plan": cmd_plan,
            "explain": cmd_explain,
            "render": cmd_render,
            "sources": cmd_sources,
            "status": cmd_status,
            "scale": cmd_scale,
            "drain": cmd_drain,
            "undrain": cmd_undrain,
            "up": cmd_up,
            "preview": cmd_up,
            "mock-engine": cmd_mock_engine,
            "completion": cmd_completion,
        }
        return commands[args.command](args)
    except ConfigError as error:
        stack_file = error.stack_file
        noun = "error" if len(error.issues) == 1 else "errors"
        where = f" in {shown(stack_file.path)}" if stack_file else ""
        print(f"error: {len(error.issues)} {noun}{where}:", file=sys.stderr)
        for issue in error.issues:
            print(f"  {located(stack_file, issue)}", file=sys.stderr)
        if error.unchanged and stack_file is not None:
            print(
                f"nothing written: the edit would make the stack invalid; {shown(stack_file.path)} is unchanged",
                file=sys.stderr,
            )
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
    try:
        try:
            code = main()
        except SystemExit as exit:  # argparse: --help, --version and usage errors (already printed)
            code = exit.code if isinstance(exit.code, int) else 0 if exit.code is None else EXIT_INVALID
        sys.stdout.flush()  # a reader that left shows here when the output was buffered
    except KeyboardInterrupt:  # Ctrl-C: quietly, as a shell reports a command SIGINT ended
        code = EXIT_INTERRUPTED
    except BrokenPipeError:  # `modelplane plan | head`: the reader left; nothing to say, and no one to say it to
        code = EXIT_BROKEN_PIPE
    with contextlib.suppress(BrokenPipeError, KeyboardInterrupt):
        sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    run()
