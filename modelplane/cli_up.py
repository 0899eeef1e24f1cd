"""`modelplane up` / `modelplane preview`: `pulumi up` / `pulumi preview` on the stack, leaving out the workload
clusters in which nothing changed (unchanged_clusters.py).

The command reads the stack's last update, state and config with the Pulumi CLI (at once), plans as the
program will, and decides which clusters to leave out. It then runs the Pulumi CLI itself, with its own output
and prompts, the user's flags, `--exclude` for those clusters and the update's mark in `--message`. The
program runs in this process, served to the CLI as the Automation API serves an inline program
(`--client`), so no language host is needed; `MODELPLANE_UP` tells it what was decided, and it checks that
again before it registers anything.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from .api import Fleet, ModelplaneError, load_fleet
from .api.errors import CONFIG_NAMESPACE
from .api.stackfile import find_project_dir
from .cli_common import selected_stack
from .unchanged_clusters import ENV, Decision, UpRun, decide, root_outputs, update_message

READ_TIMEOUT = 300.0
# `pulumi up` flags that choose resources or change the config the decision read: with them, no cluster is left out.
FULL_FLAGS = frozenset(
    {"--target", "-t", "--exclude", "--replace", "--target-replace", "--target-dependents", "--refresh", "-r"}
    | {"--config", "-c", "--config-file", "--config-path", "--plan"}
)


class UpError(ModelplaneError):
    """The stack could not be read or the Pulumi CLI is missing (exit 2, nothing changed)."""


def pulumi_binary() -> str:
    found = os.environ.get("MODELPLANE_PULUMI") or shutil.which("pulumi")
    if not found:
        raise UpError("`modelplane up` runs the Pulumi CLI, and `pulumi` is not on PATH (or set MODELPLANE_PULUMI)")
    return found


def read_json(pulumi: str, args: list[str], project_dir: Path) -> Any:
    shown = "pulumi " + " ".join(a for a in args if a != "--show-secrets")
    try:
        done = subprocess.run(
            [pulumi, *args, "--non-interactive"],
            cwd=project_dir,
            capture_output=True,
            text=True,
            timeout=READ_TIMEOUT,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        raise UpError(f"`{shown}` did not run: {error}; nothing was changed") from None
    if done.returncode != 0:
        lines = [line for line in done.stderr.splitlines() if line.strip()]
        raise UpError(f"`{shown}` failed: {lines[-1] if lines else 'no message'}; nothing was changed")
    try:
        return json.loads(done.stdout or "null")
    except ValueError:
        raise UpError(f"`{shown}` printed something that is not JSON; nothing was changed") from None


def fleet_from_config(entries: dict[str, Any]) -> Fleet:
    """The Fleet as the program loads it, from `pulumi config --show-secrets --json`."""
    prefix = f"{CONFIG_NAMESPACE}:"
    config = {key[len(prefix) :]: entry.get("value") for key, entry in entries.items() if key.startswith(prefix)}
    secret = {key[len(prefix) :] for key, entry in entries.items() if key.startswith(prefix) and entry.get("secret")}
    return load_fleet(config, origin="pulumi", secret_keys=secret)


def decide_for_stack(pulumi: str, stack: str, project_dir: Path) -> Decision:
    """Read the stack's last update, state and config (at once), plan as the program will, and decide."""
    from .code_digest import code_digest
    from .render.fingerprint import workload_fingerprints
    from .scheduling import load_previous, schedule

    reads = {
        "history": ["stack", "history", "--json", "--page-size", "1", "--stack", stack],
        "state": ["stack", "export", "--show-secrets", "--stack", stack],
        "config": ["config", "--show-secrets", "--json", "--stack", stack],
    }
    with ThreadPoolExecutor(len(reads)) as pool:
        futures = {name: pool.submit(read_json, pulumi, args, project_dir) for name, args in reads.items()}
        history, state, config = (futures[name].result() for name in reads)
    fleet = fleet_from_config(config or {})
    result = schedule(fleet, load_previous(root_outputs(state or {}).get("placement")))
    replicas: dict[str, list[str]] = {}
    for replica in result.replicas():
        replicas.setdefault(replica.cluster, []).append(f"{replica.key.namespace}/{replica.name}")
    last = history[0] if isinstance(history, list) and history else None
    return decide(workload_fingerprints(fleet, result, code_digest()), replicas, last, state or {})


def cmd_up(args: argparse.Namespace) -> int:
    project_dir = find_project_dir(Path.cwd())
    if project_dir is None:
        raise UpError("no Pulumi.yaml here or above; run from the project folder")
    stack = args.stack or selected_stack(project_dir)
    if stack is None:
        raise UpError("no stack given and none selected: pass -s/--stack NAME or select one with `pulumi stack select`")
    pulumi = pulumi_binary()
    extra = args.pulumi_args[1:] if args.pulumi_args[:1] == ["--"] else args.pulumi_args
    if any(flag in ("-m", "--message") or flag.startswith("--message=") for flag in extra):
        raise UpError(
            f"give the update's message as `modelplane {args.command} -m MESSAGE`, before `--`: it carries "
            "the mark the next `modelplane up` looks for"
        )
    # the flag's name only: a --config value may be a secret
    full = ["--full"] if args.full else [flag.split("=", 1)[0] for flag in extra if flag.split("=", 1)[0] in FULL_FLAGS]
    if full:
        decision = Decision(notes=[f"{full[0]} given: no cluster is left out"])
    else:
        decision = decide_for_stack(pulumi, stack, project_dir)
    for note in decision.notes:
        print(f"modelplane {args.command}: {note}", file=sys.stderr)
    print(decision.summary(args.command), file=sys.stderr)
    return run_pulumi(pulumi, args.command, stack, project_dir, decision, extra, args.message)


def start_update(decision: Decision, message: str | None) -> dict[str, list[str]]:
    """Tell the program (in this process) what was decided, under a new nonce; the `pulumi` flags that go with it."""
    nonce = secrets.token_hex(6)
    os.environ[ENV] = UpRun(nonce, decision.skip, decision.trusted).to_env()
    return {"message": [update_message(nonce, message)], "exclude": list(decision.exclude)}


def run_pulumi(
    pulumi: str, command: str, stack: str, project_dir: Path, decision: Decision, extra: list[str], message: str | None
) -> int:
    """The Pulumi CLI in the foreground, serving it this process's program (infra/serve.py)."""
    try:
        from .infra.serve import program_server
    except ImportError as error:  # the command alone (requirements-cli.txt) has no Pulumi SDK
        raise UpError(
            f"`modelplane {command}` runs the Pulumi program, which needs the Pulumi SDK ({error.name} is missing): "
            "install the whole package (`pip install .`), as the README says"
        ) from None
    update_flags = start_update(decision, message)
    argv = [pulumi, command, "--stack", stack, "--exec-kind", "auto.inline"]
    argv += [word for flag, values in update_flags.items() for value in values for word in (f"--{flag}", value)]
    try:
        with program_server() as address:
            process = subprocess.Popen([*argv, f"--client={address}", *extra], cwd=project_dir)
            while True:
                try:
                    return process.wait()
                except KeyboardInterrupt:  # Ctrl-C reached `pulumi` too: it cancels, and still talks to the program
                    continue
    finally:
        os.environ.pop(ENV, None)


def add_parser(commands, command_parser) -> None:
    for name in ("up", "preview"):
        parser = command_parser(commands, name)
        parser.add_argument("-s", "--stack", help="the stack (default: the one `pulumi stack select` chose)")
        parser.add_argument(
            "--full", action="store_true", help="leave no cluster out: register and check every resource"
        )
        parser.add_argument("-m", "--message", help="the update's message (the history shows it)")
        parser.add_argument(
            "pulumi_args",
            nargs=argparse.REMAINDER,
            metavar="-- PULUMI_FLAGS",
            help=f"passed to `pulumi {name}` as they are (e.g. -- --yes --skip-preview)",
        )


__all__ = ["UpError", "add_parser", "cmd_up", "decide_for_stack", "fleet_from_config", "start_update"]
