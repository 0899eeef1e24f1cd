"""What status reads from the Pulumi stack with the Pulumi CLI: the last placement and the kubeconfigs.

    pulumi stack output --json [--show-secrets] --stack NAME   the outputs `placement` and (secret) `kubeconfigs`
    pulumi config --show-secrets --json --stack NAME           Existing clusters' kubeconfigs, when the
                                                               outputs lack one

`pulumi` is `$MODELPLANE_PULUMI`, else the one on PATH, run in the project folder. When it is missing
or fails, the error says what to pass instead (`--previous`, `--kubeconfig-dir`). Nothing `pulumi`
prints is shown but its error line, and no secret value ever is.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..api.errors import ModelplaneError

PULUMI_TIMEOUT = 120.0
INSTEAD_OF_PLACEMENT = (
    "pass --previous FILE instead (the placement of the last `pulumi up`: "
    "`pulumi stack output placement --json > FILE`)"
)
INSTEAD_OF_KUBECONFIGS = (
    "pass --kubeconfig-dir DIR instead (one kubeconfig per cluster, named <cluster>, "
    "<cluster>.yaml or <cluster>.kubeconfig)"
)
INSTEAD_OF_BOTH = (
    "pass --previous FILE and --kubeconfig-dir DIR instead (the placement of the last `pulumi up`: "
    "`pulumi stack output placement --json > FILE`; one kubeconfig per cluster, named <cluster>, "
    "<cluster>.yaml or <cluster>.kubeconfig)"
)


class PulumiError(ModelplaneError):
    """The Pulumi CLI is missing or failed, and status needed it (exit 2)."""


@dataclass(frozen=True)
class PulumiStack:
    stack: str
    project_dir: Path
    config_file: Path | None = None  # a stack file given with --config: `pulumi config --config-file`

    def outputs(self, show_secrets: bool, instead: str) -> dict[str, Any]:
        args = ["stack", "output", "--json", "--stack", self.stack] + (["--show-secrets"] if show_secrets else [])
        value = self._json(args, "the stack's outputs", instead)
        return value if isinstance(value, dict) else {}

    def config(self, instead: str) -> dict[str, Any]:
        args = ["config", "--show-secrets", "--json", "--stack", self.stack]
        if self.config_file is not None:
            args += ["--config-file", str(self.config_file)]
        value = self._json(args, "the stack's config", instead)
        return value if isinstance(value, dict) else {}

    def _json(self, args: list[str], what: str, instead: str) -> Any:
        pulumi = os.environ.get("MODELPLANE_PULUMI") or shutil.which("pulumi")
        shown = f"pulumi {' '.join(a for a in args if a != '--show-secrets')}"
        if not pulumi:
            raise PulumiError(
                f"status reads {what} with the Pulumi CLI (`{shown}`), and `pulumi` is not on PATH "
                f"(or set MODELPLANE_PULUMI to it); {instead}"
            )
        try:
            done = subprocess.run(
                [pulumi, *args, "--non-interactive"],
                cwd=self.project_dir,
                capture_output=True,
                text=True,
                timeout=PULUMI_TIMEOUT,
                stdin=subprocess.DEVNULL,
            )
        except FileNotFoundError:
            raise PulumiError(
                f"status reads {what} with the Pulumi CLI, and {pulumi} does not exist; {instead}"
            ) from None
        except subprocess.TimeoutExpired:
            raise PulumiError(f"`{shown}` did not finish within {PULUMI_TIMEOUT:g} s; {instead}") from None
        except OSError as error:
            raise PulumiError(f"cannot run {pulumi} ({error.strerror}); {instead}") from None
        if done.returncode != 0:
            raise PulumiError(f"`{shown}` failed in {self.project_dir}: {_error_line(done.stderr)}; {instead}")
        try:
            return json.loads(done.stdout or "null")
        except ValueError:
            raise PulumiError(f"`{shown}` printed something that is not JSON; {instead}") from None


def _error_line(stderr: str) -> str:
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    line = next((line for line in lines if line.startswith("error:")), lines[-1] if lines else "no message")
    return line.removeprefix("error:").strip()[:300]


def kubeconfigs_from_outputs(outputs: dict[str, Any]) -> dict[str, str]:
    """The stack output `kubeconfigs` ({cluster: kubeconfig YAML}), read with --show-secrets."""
    value = outputs.get("kubeconfigs")
    if not isinstance(value, dict):
        return {}
    return {str(k): v for k, v in value.items() if isinstance(v, str) and v.strip() and v != "[secret]"}


def kubeconfigs_from_config(config: dict[str, Any]) -> dict[str, str]:
    """Existing clusters' kubeconfigs from `pulumi config --show-secrets --json`:
    `modelplane:inferenceClusters.<cluster>.cluster.existing.kubeconfig`."""
    entry = config.get("modelplane:inferenceClusters")
    if not isinstance(entry, dict):
        return {}
    clusters = entry.get("objectValue")
    if clusters is None and isinstance(entry.get("value"), str):
        try:
            clusters = json.loads(entry["value"])
        except ValueError:
            clusters = None
    if not isinstance(clusters, dict):
        return {}
    out = {}
    for name, cluster in clusters.items():
        kubeconfig = _at(cluster, "cluster", "existing", "kubeconfig")
        if isinstance(kubeconfig, str) and kubeconfig.strip():
            out[str(name)] = kubeconfig
    return out


def _at(value: Any, *keys: str) -> Any:
    for key in keys:
        value = value.get(key) if isinstance(value, dict) else None
    return value
