"""`modelplane` command line: works offline, without the Pulumi CLI or any cloud SDK.

Exit codes: 0 success, 2 invalid input (every problem listed, no traceback); `status` exits 1 when the
live fleet is degraded (docs/status.md); `plan --detailed-exitcode` exits 3 when a deployment is short
of replicas; 130 on Ctrl-C and 141 when the reader of the output went away (`| head`), as a shell
reports a command killed by SIGINT or SIGPIPE, quietly.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import difflib
import hashlib
import json
import os
import re
import shlex
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

from . import gc_policy, runbook, views
from .api import ConfigError, ConfigIssue, Fleet, ModelplaneError, NamespacedName, load_fleet, locked_write
from .api.errors import SourceFile
from .api.stackfile import StackFile, find_project_dir, read_stack_file, stack_file_path
from .progress import Progress
from .scheduling import load_previous, schedule
from .version import VERSION

if TYPE_CHECKING:
    from .api.inference_gateway import Proxy

EXIT_OK, EXIT_INVALID = 0, 2
EXIT_SHORT = 3  # plan --detailed-exitcode: valid, but a deployment is short of replicas (2 stays "bad input")
EXIT_INTERRUPTED, EXIT_BROKEN_PIPE = 130, 141  # 128 + SIGINT, 128 + SIGPIPE: what a shell reports for them
DOCS = "docs"  # the docs/ folder of the modelplane checkout

# Per command: its description and examples for `--help` (the docs page is named after it).
HELP: dict[str, tuple[str, str, str]] = {
    "validate": (
        "check a stack's config and list every problem",
        "Checks the stack file offline (no Pulumi CLI, no cluster) and lists every problem with its config "
        "path and line; exit 2 if there is any.",
        "modelplane validate -s demo\nmodelplane validate --config stacks/Pulumi.prod.yaml\n"
        "modelplane validate            # the stack `pulumi stack select` chose\n|config.md",
    ),
    "plan": (
        "show where every replica goes (the placement preview)",
        "Validates the stack, runs the fleet scheduler and prints where each replica goes.",
        "modelplane plan -s demo\nmodelplane plan -s demo -o yaml\n"
        "modelplane plan -s demo --previous placement.json   # against the last `pulumi up`\n"
        'modelplane plan -s demo --detailed-exitcode || echo "exit $?: short"\n|placement.md',
    ),
    "explain": (
        "why each cluster does or does not take a deployment's replicas",
        "For each deployment named, each cluster and pool: whether it takes replicas, and if not why.",
        "modelplane explain ml-team/mock-demo -s demo\n|placement.md",
    ),
    "render": (
        "write every Kubernetes object and Helm release of the fleet as YAML",
        "Writes one folder per cluster under --out holding only Kubernetes objects, "
        "NNN-<kind>-<namespace>-<name>.yaml in apply order (`kubectl apply -f <folder>` reads them in that "
        "order), and in its meta/ subfolder what `pulumi up` handles itself: remote-manifests.yaml (CRD "
        "manifests), helm-releases.yaml and placeholders.yaml. Shows progress on a terminal.",
        "modelplane render -s demo --out manifests\nkubectl apply -f manifests/gpu-eu-west/\n|rendering.md",
    ),
    "sources": (
        "list every Helm chart and CRD manifest the fleet fetches, and the commands that fill a mirror "
        "for air-gapped sites",
        "Lists what the fleet downloads at `pulumi up` and prints the commands that copy it into a mirror.",
        "modelplane sources -s demo\nmodelplane sources -s demo -o json\n|air-gapped.md",
    ),
    "status": (
        "the live fleet after `pulumi up`: per replica its pods, claims, endpoint health and drift from the "
        "last placement",
        "Reads every cluster of the stack and probes each replica's endpoint; exit 1 when the fleet is degraded.",
        "modelplane status -s demo\nmodelplane status -s demo --kubeconfig-dir ./kubeconfigs -o json\n|status.md",
    ),
    "scale": (
        "set a deployment's replicas in the stack file",
        "Sets modelDeployments.<namespace>.<name>.replicas in the stack file (0 parks the model: no replicas, "
        "its config kept), validated before it is written, and shows the new plan.",
        "modelplane scale ml-team/mock-demo --replicas 3 -s demo\n"
        "modelplane scale ml-team/mock-demo --replicas 0 -s demo --dry-run   # the diff, nothing written\n"
        "|runbook.md",
    ),
    "drain": (
        "taint a cluster in the stack file: no new replicas (NoSchedule), or move its replicas away (NoExecute)",
        "Adds a drain taint to the cluster in the stack file and shows the new plan.",
        "modelplane drain gpu-eu-west -s demo\nmodelplane drain gpu-eu-west --effect NoExecute -s demo --dry-run\n"
        "|runbook.md",
    ),
    "undrain": (
        "remove a cluster's drain taint from the stack file",
        "Removes the drain taint from the cluster in the stack file and shows the new plan.",
        "modelplane undrain gpu-eu-west -s demo\n|runbook.md",
    ),
    "mock-engine": (
        "run the mock OpenAI/Anthropic-compatible engine the demo deploys",
        "Serves /v1/chat/completions, /v1/completions, /v1/embeddings, /v1/messages, /v1/models and "
        "/health until Ctrl-C.",
        "HOSTNAME=laptop modelplane mock-engine --port 8000\n|mock-engine.md",
    ),
    "completion": (
        "print a shell completion script (bash, zsh or fish)",
        "Prints a script that completes modelplane's commands, options and their values.",
        "source <(modelplane completion bash)                       # this shell\n"
        "modelplane completion bash > ~/.local/share/bash-completion/completions/modelplane\n"
        'modelplane completion zsh > "${fpath[1]}/_modelplane"\n'
        "modelplane completion fish > ~/.config/fish/completions/modelplane.fish\n|README.md",
    ),
}
SHELLS = ("bash", "zsh", "fish")
STACK_HELP = (
    "stack name: reads <project>/stacks/Pulumi.<stack>.yaml; a fully-qualified name (org/demo, "
    "org/project/demo) reads Pulumi.demo.yaml. Default: the stack `pulumi stack select` chose"
)


def _command(commands, name: str) -> argparse.ArgumentParser:
    short, description, examples = HELP[name]
    examples, _, page = examples.rpartition("|")
    link = f"{DOCS}/{page}" if page != "README.md" else page
    epilog = (
        "examples:\n"
        + "".join(f"  {line}\n" for line in examples.strip().splitlines())
        + f"\ndocs: {link} in the modelplane checkout"
    )
    return commands.add_parser(
        name, help=short, description=description, epilog=epilog, formatter_class=argparse.RawDescriptionHelpFormatter
    )


def _stack_source(parser: argparse.ArgumentParser) -> None:
    source = parser.add_mutually_exclusive_group()
    source.add_argument("-s", "--stack", help=STACK_HELP)
    source.add_argument("--config", type=Path, metavar="FILE", help="any stack file in Pulumi's format")


def _output(parser: argparse.ArgumentParser, choices: tuple[str, ...] = ("table", "json", "yaml")) -> None:
    parser.add_argument("-o", "--output", choices=choices, default="table")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="modelplane",
        description="Fleet control plane for AI inference.",
        epilog="Every command that reads a stack takes -s/--stack NAME or --config FILE; without either it uses "
        f"the stack `pulumi stack select` chose for this project. Docs: README.md and {DOCS}/ in the "
        "modelplane checkout.",
    )
    parser.add_argument("--version", action="version", version=f"modelplane {VERSION}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    validate = _command(commands, "validate")
    _stack_source(validate)
    plan = _command(commands, "plan")
    _stack_source(plan)
    plan.add_argument(
        "--previous",
        type=Path,
        metavar="FILE",
        help="the last placement (`pulumi stack output placement --json` or `plan --output json`)",
    )
    _output(plan)
    plan.add_argument(
        "--detailed-exitcode",
        action="store_true",
        help=f"exit {EXIT_SHORT} when a deployment is short of replicas (0: every replica placed; "
        f"{EXIT_INVALID}: invalid input, as always)",
    )
    explain = _command(commands, "explain")
    explain.add_argument("deployments", nargs="+", metavar="NAMESPACE/DEPLOYMENT")
    _stack_source(explain)
    explain.add_argument("--previous", type=Path, metavar="FILE")
    render = _command(commands, "render")
    _stack_source(render)
    render.add_argument("--previous", type=Path, metavar="FILE")
    render.add_argument("--out", type=Path, required=True, metavar="DIR", help="one folder per cluster is written here")
    sources = _command(commands, "sources")
    _stack_source(sources)
    _output(sources)
    status = _command(commands, "status")
    _stack_source(status)
    status.add_argument(
        "--previous",
        type=Path,
        metavar="FILE",
        help="the last `pulumi up`'s placement (default: the stack output `placement`, read with pulumi)",
    )
    status.add_argument(
        "--kubeconfig-dir",
        type=Path,
        metavar="DIR",
        help="one kubeconfig per cluster, named <cluster>, <cluster>.yaml, <cluster>.yml or "
        "<cluster>.kubeconfig (default: the stack output `kubeconfigs`, else the stack's secret "
        "config)",
    )
    status.add_argument(
        "--no-probe",
        action="store_true",
        help="skip the endpoint probe (the front door's health check, made from this machine)",
    )
    _output(status, ("table", "json"))
    scale = _command(commands, "scale")
    scale.add_argument("deployment", metavar="NAMESPACE/DEPLOYMENT")
    scale.add_argument("--replicas", type=int, required=True, metavar="N", help="0 to 10; 0 parks the model")
    _edit_options(scale)
    drain = _command(commands, "drain")
    drain.add_argument("cluster", metavar="CLUSTER")
    drain.add_argument("--effect", choices=runbook.EFFECTS, default="NoSchedule")
    drain.add_argument("--key", default=runbook.DRAIN_KEY, help=f"the taint key (default {runbook.DRAIN_KEY})")
    _edit_options(drain)
    undrain = _command(commands, "undrain")
    undrain.add_argument("cluster", metavar="CLUSTER")
    undrain.add_argument("--key", default=runbook.DRAIN_KEY, help=f"the taint key (default {runbook.DRAIN_KEY})")
    _edit_options(undrain)
    mock = _command(commands, "mock-engine")
    mock.add_argument("--host", help="the address to listen on (default $HOST, else 0.0.0.0)")
    mock.add_argument("--port", help="the port (default $PORT, else 8000; 0 picks a free one)")
    completion = _command(commands, "completion")
    completion.add_argument("shell", choices=SHELLS)
    return parser


def _edit_options(parser: argparse.ArgumentParser) -> None:
    _stack_source(parser)
    parser.add_argument(
        "--previous", type=Path, metavar="FILE", help="the last placement: the new plan is shown against it"
    )
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="print the change to the stack file as a diff and the new plan; write nothing",
    )


# --- which stack: --stack, --config, else Pulumi's selected stack -------------------------------------


def stack_short_name(stack: str) -> str:
    """`org/demo` and `org/project/demo` (Pulumi's fully-qualified names) -> `demo`: the stack file's name."""
    return stack.rsplit("/", 1)[-1] if re.fullmatch(r"[^/]+(/[^/]+){1,2}", stack) else stack


def pulumi_workspace_file(project_dir: Path, env=os.environ) -> Path:
    """Where the Pulumi CLI records `pulumi stack select` for this project.

    `$PULUMI_HOME` (else ~/.pulumi) `/workspaces/<project name>-<sha1 of the Pulumi.yaml path>-workspace.json`,
    a JSON object whose `stack` is the selected stack (pulumi's sdk/go/common/workspace: settingsPath).
    """
    project_file = project_dir / "Pulumi.yaml"
    name = _project_name(project_file)
    home = Path(env["PULUMI_HOME"]) if env.get("PULUMI_HOME") else Path(env.get("HOME") or Path.home()) / ".pulumi"
    digest = hashlib.sha1(str(project_file).encode()).hexdigest()
    return home / "workspaces" / f"{name}-{digest}-workspace.json"


def _project_name(project_file: Path) -> str:
    import yaml

    try:
        document = yaml.safe_load(project_file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return "modelplane"
    name = document.get("name") if isinstance(document, dict) else None
    return name if isinstance(name, str) and name else "modelplane"


def selected_stack(project_dir: Path, env=os.environ) -> str | None:
    """The stack `pulumi stack select` chose for the project in `project_dir`, if any."""
    candidates = [project_dir]
    logical = os.environ.get("PWD")  # the Pulumi CLI hashes the path as its working directory spells it
    if logical and Path(logical).resolve() == Path.cwd().resolve():
        relative = os.path.relpath(project_dir, Path.cwd())
        candidates.insert(0, Path(os.path.normpath(os.path.join(logical, relative))))
    for directory in candidates:
        try:
            settings = json.loads(pulumi_workspace_file(directory, env).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        stack = settings.get("stack") if isinstance(settings, dict) else None
        if isinstance(stack, str) and stack.strip():
            return stack.strip()
    return None


def resolve_stack(args: argparse.Namespace) -> Path:
    """The stack file to read; sets `args.stack` to the selected stack when neither --stack nor --config was given."""
    if args.config is not None:
        return args.config
    project_dir = find_project_dir(Path.cwd())
    if project_dir is None:
        raise ModelplaneError("no Pulumi.yaml here or above; run from the project folder or pass --config FILE")
    if args.stack is None:
        args.stack = selected_stack(project_dir)
        if args.stack is None:
            raise ModelplaneError(
                f"no stack given and none selected: pass -s/--stack NAME or --config FILE, or select "
                f"one with `pulumi stack select NAME` (recorded in "
                f"{pulumi_workspace_file(project_dir)})"
            )
    return stack_file_path(stack_short_name(args.stack), project_dir)


def resolve_stack_file(stack: str | None, config: Path | None) -> Path:
    return resolve_stack(argparse.Namespace(stack=stack, config=config))


def load(args: argparse.Namespace) -> tuple[StackFile, Fleet]:
    return load_file(resolve_stack(args))


def load_file(path: Path) -> tuple[StackFile, Fleet]:
    stack_file = read_stack_file(path)
    issues = list(stack_file.issues)
    fleet = None
    try:
        fleet = load_fleet(stack_file.config, origin="stack-file")
    except ConfigError as error:
        issues += error.issues
    if issues or fleet is None:
        invalid = ConfigError(issues)
        invalid.stack_file = stack_file  # lets the printer add line numbers
        raise invalid
    return stack_file, fleet


def _shown(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def _warn(stack_file: StackFile, fleet: Fleet) -> None:
    for warning in fleet.warnings:
        print(f"warning: {_located(stack_file, warning)}", file=sys.stderr)
    if stack_file.environments:
        print(
            f"warning: {_shown(stack_file.path)} imports Pulumi ESC environments ({', '.join(stack_file.environments)}); "
            "modelplane reads only the file's own config:, so values those environments set are not seen here "
            "(`pulumi up` sees them): to check them, `pulumi config --show-secrets --json` shows the merged config",
            file=sys.stderr,
        )


def _located(stack_file: SourceFile | None, issue) -> str:
    line = stack_file.line_of(issue.path) if stack_file else None
    return f"{issue}" + (f"  [{_shown(stack_file.path)}:{line}]" if stack_file and line else "")


def cmd_validate(args: argparse.Namespace) -> int:
    stack_file, fleet = load(args)
    _warn(stack_file, fleet)
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
            f"warning: {_located(stack_file, header)}",
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
        f"warning: {_located(stack_file, header)}",
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
    _warn(stack_file, fleet)
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
    _warn(stack_file, fleet)
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
    _warn(stack_file, fleet)
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
    _warn(stack_file, fleet)
    progress = Progress()  # the reads take seconds per unreachable cluster: say what is going on, on a terminal
    try:
        return status.run(fleet, path, args, progress)
    finally:
        progress.done()


def cmd_scale(args: argparse.Namespace) -> int:
    return _edit_stack(args, lambda text: runbook.scale(text, args.deployment, args.replicas))


def cmd_drain(args: argparse.Namespace) -> int:
    return _edit_stack(args, lambda text: runbook.drain(text, args.cluster, args.effect, args.key))


def cmd_undrain(args: argparse.Namespace) -> int:
    return _edit_stack(args, lambda text: runbook.undrain(text, args.cluster, args.key))


def _checked_text(path: Path, text: str) -> tuple[StackFile, Fleet]:
    """`load_file` on `text` as if it were `path`'s content, without touching `path` (for --dry-run)."""
    with tempfile.TemporaryDirectory(prefix="modelplane-dry-run-") as folder:
        copy = Path(folder) / path.name
        copy.write_text(text, encoding="utf-8")
        return load_file(copy)


def _edit_stack(args: argparse.Namespace, make_edit) -> int:
    """Edit the stack file in place: validated like `validate` before it is written, atomically.

    With --dry-run the same checks run on the edited text, which is shown as a diff; nothing is written.
    """
    path = resolve_stack(args)
    # From reading to replacing: a concurrent scale/drain/undrain waits, no edit is lost.
    with locked_write.locked(path):
        original = read_stack_file(path)  # a missing file or broken YAML stops here
        previous = load_previous(args.previous)  # so does a bad --previous: nothing is written
        text = locked_write.read_for_edit(path)
        try:
            edit = make_edit(text)
        except ConfigError as error:
            error.stack_file = original
            raise
        if not edit.changed:
            print(f"{_shown(path)}: {edit.note}; nothing changed")
            return EXIT_OK
        try:
            if args.dry_run:
                stack_file, fleet = _checked_text(path, edit.text)
            else:
                stack_file, fleet = locked_write.write_atomically(path, edit.text, text, load_file)
        except ConfigError as error:
            error.stack_file = original  # the file is untouched: point at its lines
            error.unchanged = True
            raise
    stack_file = dataclasses.replace(stack_file, path=path)
    _warn(stack_file, fleet)
    stack = args.stack or _stack_name(path)
    flags = [f"--stack {shlex.quote(stack)}"] + ([] if args.stack else [f"--config-file {shlex.quote(str(path))}"])
    if args.dry_run:
        print(f"dry run: {_shown(path)} would change as follows; nothing written")
        sys.stdout.writelines(
            difflib.unified_diff(
                text.splitlines(keepends=True),
                edit.text.splitlines(keepends=True),
                f"{_shown(path)}",
                f"{_shown(path)} (edited)",
            )
        )
    else:
        print(f"edited {_shown(path)}:")
    for change in edit.changes:
        print(f"  {change}")
    print("the same edit with the Pulumi CLI:")
    for command in edit.commands:
        words = command.words()
        print(
            f"  pulumi config {words[0]} {' '.join(flags)} {words[1]} '{words[2]}'"
            + "".join(f" {shlex.quote(w)}" for w in words[3:])
        )
    result = schedule(fleet, previous)
    target = args.deployment if args.command == "scale" else args.cluster
    print(
        f"plan against {_shown(args.previous)}:"
        if args.previous
        else "plan as a first deployment (no --previous placement given):"
    )
    for line in views.plan_lines(result, previous, args.command, target):
        print(f"  {line}")
    source = f"--stack {shlex.quote(args.stack)}" if args.stack else f"--config {shlex.quote(_shown(path))}"
    placement = shlex.quote(_shown(args.previous)) if args.previous else "<placement.json>"
    if args.dry_run:
        print("next: the same command without --dry-run writes it")
        return EXIT_OK
    print(
        f"next: pulumi up {' '.join(flags)}  "
        f"(to preview the placement offline: modelplane plan {source} --previous {placement})"
    )
    return EXIT_OK


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


def _stack_name(path: Path) -> str:
    match = re.fullmatch(r"Pulumi\.(.+)\.ya?ml", path.name)
    return match.group(1) if match else "<stack>"


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
            "mock-engine": cmd_mock_engine,
            "completion": cmd_completion,
        }
        return commands[args.command](args)
    except ConfigError as error:
        stack_file = error.stack_file
        noun = "error" if len(error.issues) == 1 else "errors"
        where = f" in {_shown(stack_file.path)}" if stack_file else ""
        print(f"error: {len(error.issues)} {noun}{where}:", file=sys.stderr)
        for issue in error.issues:
            print(f"  {_located(stack_file, issue)}", file=sys.stderr)
        if error.unchanged and stack_file is not None:
            print(
                f"nothing written: the edit would make the stack invalid; {_shown(stack_file.path)} is unchanged",
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
