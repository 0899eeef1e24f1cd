"""Run one set of allocator cases on its own one-cluster LocalFleet (`python -m tests.e2e.<cases> [work dir]`)."""
from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any, Callable, Sequence


def run_standalone(argv: Sequence[str], default_work: str, run_cases: Callable[[Any], list],
                   report: Callable[[list], str]) -> int:
    """Start a one-cluster LocalFleet, run the cases, print the report; exit 1 on any disagreement."""
    from .controlplane import LocalFleet

    work = Path(argv[0] if argv else default_work)
    bin_dir = Path(os.environ.get("MODELPLANE_E2E_BIN", Path.home() / ".cache/modelplane/e2e/bin"))
    with LocalFleet(work, bin_dir, ["cases"]) as fleet:  # entering starts it
        started = time.monotonic()
        results = run_cases(fleet.endpoints["cases"].api())
        print(report(results))
        print(f"run_cases: {time.monotonic() - started:.1f} s")
    return 0 if all(r.agree for r in results) else 1
