"""Garbage-collector settings for a run that builds a large object graph and keeps it.

A plan holds every validated config object, every verdict and every placed replica until it
exits, and frees almost nothing on the way. CPython's default thresholds (700, 10, 10) make the
collector walk that growing graph again and again: at 400 clusters x 4,000 deployments about
half of `schedule()` and of the warnings was collection. Our data has few reference cycles
(frozen dataclasses and validated models), so young collections are made rarer (every 100,000
allocations instead of 700) and full ones rarer still; what was imported before is frozen, out
of every collection's way. Peak memory is unchanged (benchmarks/bench_plan.py prints it).
"""

from __future__ import annotations

import gc

YOUNG_THRESHOLD = 100_000
MIDDLE_THRESHOLD = 50
OLD_THRESHOLD = 100


def for_batch_run() -> None:
    gc.freeze()  # the interpreter and the imported modules: never garbage, never scanned again
    gc.set_threshold(YOUNG_THRESHOLD, MIDDLE_THRESHOLD, OLD_THRESHOLD)
