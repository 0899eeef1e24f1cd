"""The command line: every command, its options and its help (examples and the docs page), as argparse builds them."""

from __future__ import annotations

import argparse
from pathlib import Path

from . import runbook
from .cli_common import EXIT_INVALID, EXIT_SHORT
from .version import VERSION

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
    "up": (
        "`pulumi up` on the stack, leaving out the workload clusters in which nothing changed",
        "Runs `pulumi up` with its own output and prompts, the program served from this process, and `--exclude` "
        "for every Existing workload cluster whose fingerprint equals the one the last `modelplane up` recorded "
        "(its config, credentials, rendered objects and replicas, and modelplane's code). Flags after -- go to "
        "`pulumi up` as they are.",
        "scripts/private-tmpdir.sh modelplane up -s prod\n"
        "scripts/private-tmpdir.sh modelplane up -s prod -- --yes --skip-preview --non-interactive\n"
        "scripts/private-tmpdir.sh modelplane up -s prod --full      # every cluster, as `pulumi up`\n|pulumi.md",
    ),
    "preview": (
        "`pulumi preview` on the stack, leaving out the workload clusters in which nothing changed",
        "The preview `modelplane up` would make: the same clusters left out. Flags after -- go to `pulumi preview`.",
        "scripts/private-tmpdir.sh modelplane preview -s prod\n|pulumi.md",
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
    _add_reading_commands(commands)
    _add_editing_and_other_commands(commands)
    return parser


def _add_reading_commands(commands) -> None:
    """validate, plan, explain, render, sources, status: the commands that read a stack."""
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


def _add_editing_and_other_commands(commands) -> None:
    """scale, drain, undrain (they edit the stack file), mock-engine and completion."""
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
    from .cli_up import add_parser as add_up_commands

    add_up_commands(commands, _command)
    mock = _command(commands, "mock-engine")
    mock.add_argument("--host", help="the address to listen on (default $HOST, else 0.0.0.0)")
    mock.add_argument("--port", help="the port (default $PORT, else 8000; 0 picks a free one)")
    completion = _command(commands, "completion")
    completion.add_argument("shell", choices=SHELLS)


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
