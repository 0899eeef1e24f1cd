"""The scheduler benchmark's fleets (issue 27): `--shapes varied` is a valid fleet of many distinct shapes, the
uniform fleet every earlier placement sha256 was printed for is unchanged, and the fill's refusal of a cluster by
its classes (`Fit.classes`) changes no placement and no explanation."""
from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import pytest

from modelplane import views
from modelplane.api import load_fleet
from modelplane.scheduling import schedule
from modelplane.scheduling import scheduler as scheduler_module
from modelplane.scheduling.fit import Fit
from modelplane.scheduling.snapshot import workloads_of

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
from bench_scheduler import synthetic_fleet  # noqa: E402


def test_the_uniform_fleet_is_the_one_the_recorded_placement_hashes_were_printed_for():
    text = json.dumps(synthetic_fleet(200, 2000), sort_keys=True)
    assert hashlib.sha256(text.encode()).hexdigest()[:16] == "0331eb503f072a6f"


def test_varied_shapes_are_a_valid_fleet_of_mostly_distinct_shapes():
    fleet = load_fleet(synthetic_fleet(20, 200, shapes="varied"))
    workloads = workloads_of(fleet)
    assert len({w.signature for w in workloads}) > 0.8 * len(workloads)
    assert any(len(w.engines) == 2 for w in workloads)  # PrefillDecode
    assert any(len(e.members) == 2 for w in workloads for e in w.engines)  # Leader + Worker
    assert any(w.tiers for w in workloads) and any(w.tolerations for w in workloads)
    result = schedule(fleet)
    assert result.replicas()  # mostly placed


@pytest.mark.parametrize("packing", ["WholeNode", "DeviceGranular"])
@pytest.mark.parametrize("shapes", ["uniform", "varied"])
def test_refusing_a_cluster_by_its_classes_changes_no_placement_and_no_explanation(monkeypatch, packing, shapes):
    fleet = load_fleet(synthetic_fleet(20, 200, packing=packing, shapes=shapes))

    def plan():
        result = schedule(fleet)
        warnings = [views.shortfall_warning(result, p) for p in result.deployments.values() if p.short]
        explained = [repr(result.explain(key)) for key in sorted(result.deployments)[:40]]
        return result.to_json(), warnings, explained

    with_classes = plan()
    monkeypatch.setattr(scheduler_module, "Fit", lambda w, m, p, classes=None: Fit(w, m, p))
    assert plan() == with_classes
