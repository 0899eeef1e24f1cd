"""The scale measurement's own arithmetic (tests/e2e/scale.py), without a fleet: state weight, the table's ratios."""
from __future__ import annotations

import json

import pytest
from e2e.pulumi_cli import MemorySampler
from e2e.scale import Measured, ScaleRun, read_variants, state_weight


def test_state_weight_is_per_resource_and_by_type(tmp_path):
    resources = [{"urn": f"urn:{i}", "type": "kubernetes:apps/v1:Deployment", "inputs": {"x": "y" * 900}} for i in range(3)]
    resources.append({"urn": "urn:ns", "type": "kubernetes:core/v1:Namespace"})
    state = tmp_path / "e2e.json"
    state.write_text(json.dumps({"checkpoint": {"latest": {"resources": resources}}}))
    text, weight = state_weight(state)
    assert weight["resources"] == 4 and weight["bytes"] == state.stat().st_size
    assert weight["by_type"]["kubernetes:apps/v1:Deployment"]["count"] == 3
    first = text.splitlines()[1]
    assert first.split()[0] == "Deployment" and first.split()[1] == "3"  # the heaviest type first


def test_the_table_gives_each_operation_as_a_ratio_to_the_floor():
    run = ScaleRun.__new__(ScaleRun)
    run.floor = Measured("floor", 20.0, 100, {"provider": 5.0}, {"provider": 2**20 * 90})
    run.measured = [Measured("pulumi up (first)", 60.0, 100, {"engine (pulumi)": 12.0, "provider": 3.0,
                                                                "program (python)": 4.0, "fleet": 7.4}, {}),
                    Measured("pulumi up (no changes)", 10.0, 0, {}, {}, ok=False)]
    lines = run.table().splitlines()
    first = next(line for line in lines if line.startswith("pulumi up (first)"))
    assert "60.0s" in first and " 3.0 " in first and "12/3/4" in first
    assert first.split()[-2] == "7"  # the fleet's own CPU seconds, apart from Pulumi's
    assert next(line for line in lines if line.startswith("floor")).split()[-1] == "0/90/0"
    failed = next(line for line in lines if line.startswith("pulumi up (no changes)"))
    assert failed.endswith("(FAILED)") and " 0.5 " in failed and failed.split()[-3] == "-"


def test_cpu_is_summed_over_every_process_of_a_name():
    sampler = MemorySampler(0)
    sampler.cpu_of = {1: ("provider", 1.5), 2: ("provider", 2.0), 3: ("engine (pulumi)", 4.0)}
    assert sampler.cpu == {"provider": 3.5, "engine (pulumi)": 4.0}


def test_wall_time_is_the_pulumi_command_not_the_automation_apis_extra_reads():
    class FakeRun:
        def __init__(self):
            self.seconds, self.cpu, self.peak_rss, self.stdout = 30.0, {}, {}, ""
            self.result = {"ok": True, "command_seconds": 24.5, "changes": {"same": 10}}

    measured = Measured.of("pulumi up (no changes)", FakeRun())
    assert (measured.seconds, measured.harness_seconds) == (24.5, 30.0)
    run = ScaleRun.__new__(ScaleRun)
    run.floor, run.measured = None, [measured]
    assert "added 5.5-5.5 s" in run.table().splitlines()[-1]


def test_each_variant_is_an_unchanged_up_skipping_checkpoints_with_its_environment_added():
    calls, checks = [], []

    class FakeRun:
        def __init__(self, changes):
            self.result = {"ok": True, "changes": changes}

    run = ScaleRun.__new__(ScaleRun)
    run.mode, run.mode_env = "", {}
    run.report = type("Report", (), {"check": lambda self, what, ok, detail="": checks.append((what, bool(ok)))})()

    def engine(what, op, events=False, extra_env=None, **kwargs):
        calls.append((what, op, {**run.mode_env, **(extra_env or {})}, kwargs))
        return FakeRun({"same": 5} if len(calls) == 1 else {"same": 4, "update": 1})

    run.engine = engine
    run.variants([("exclude replicas", {"MODELPLANE_E2E_EXCLUDE": '["**"]'}), ("GOGC=400", {"GOGC": "400"})])
    assert [c[2] for c in calls] == [{"PULUMI_SKIP_CHECKPOINTS": "true", "MODELPLANE_E2E_EXCLUDE": '["**"]'},
                                     {"PULUMI_SKIP_CHECKPOINTS": "true", "GOGC": "400"}]
    assert all(c[1] == "up" and c[3] == {"expect_no_changes": True} for c in calls)
    assert [ok for _, ok in checks] == [True, False]  # the second changed something
    assert "exclude replicas" in checks[0][0] and (run.mode, run.mode_env) == ("", {})


def test_variants_are_label_and_environment_pairs(tmp_path):
    path = tmp_path / "variants.json"
    path.write_text(json.dumps([["exclude replicas", {"MODELPLANE_E2E_EXCLUDE": '["**"]'}], ["as is", {}]]))
    assert read_variants(path) == [("exclude replicas", {"MODELPLANE_E2E_EXCLUDE": '["**"]'}), ("as is", {})]


@pytest.mark.parametrize("text", ["{}", '[["label"]]', '[["label", {"GOGC": 400}]]', "not json"])
def test_malformed_variants_stop_before_the_fleet_starts(tmp_path, text):
    path = tmp_path / "variants.json"
    path.write_text(text)
    with pytest.raises(SystemExit, match="--variants"):
        read_variants(path)
