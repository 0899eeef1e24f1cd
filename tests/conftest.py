"""The suite's fixtures: the recording Pulumi mocks (tests/pulumi_recording.py) behind `mocks`, `monitor`
and, for module-scoped fixtures, `recording`; the repository; the slow marker of the fast lane."""
from __future__ import annotations

import signal
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent

# Several tests press Ctrl-C on a command (SIGINT) and expect what a terminal user sees. A suite started in the
# background by a non-interactive shell (`(pytest &)`, some CI runners) inherits SIGINT ignored, and an ignored signal
# stays ignored in every command it starts: those tests would then wait for a Ctrl-C that never lands. Handled here,
# SIGINT is back at its default in each command the tests start.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)
sys.path[:0] = [str(REPO / "tests"), str(REPO / "scripts")]  # helper modules, and scripts/fetch_crds.py

import k8s_validation  # noqa: E402
from pulumi_recording import MOCKS, MONITOR, RecordingMocks, RecordingMonitor  # noqa: E402  (needs the path above)


@pytest.fixture(scope="session")
def recording() -> tuple[RecordingMonitor, RecordingMocks]:
    """The suite's one recording monitor and mocks (set_mocks is process-global), not cleared: for module-scoped
    fixtures that deploy once (`program_run.deploy(*recording, config)`)."""
    return MONITOR, MOCKS


@pytest.fixture
def mocks() -> RecordingMocks:
    MOCKS.created.clear()
    MOCKS.stack_outputs = {}
    MONITOR.registrations.clear()
    return MOCKS


@pytest.fixture
def monitor(mocks) -> RecordingMonitor:
    return MONITOR


@pytest.fixture
def repo() -> Path:
    return REPO


def pytest_report_header(config) -> str:
    source = k8s_validation.CRD_SOURCE
    if source.path is None:
        return f"k8s CRD schemas: none, custom-resource checks skip ({k8s_validation.MISSING_CRDS})"
    return f"k8s CRD schemas: {source.path} (from {source.origin})"


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:
    """Say why tests skipped even without -rs (the project's addopts has -q, which hides the header)."""
    if terminalreporter.hasopt("s"):
        return  # the short summary already has the reason
    reasons: dict[str, int] = {}  # each distinct reason once, with how many tests it skipped
    for report in terminalreporter.stats.get("skipped", []):
        if isinstance(report.longrepr, tuple):
            reason = report.longrepr[2].removeprefix("Skipped: ")
            if reason.endswith(k8s_validation.MISSING_CRDS):  # the same for every CRD, whichever was missing
                reason = k8s_validation.MISSING_CRDS
            reasons[reason] = reasons.get(reason, 0) + 1
    for reason, count in sorted(reasons.items(), key=lambda item: (-item[1], item[0])):
        terminalreporter.write_line(f"{count} skipped: {reason}", yellow=True)


# The fast lane, `pytest -m "not slow"` (CONTRIBUTING.md), leaves out these modules, which start
# `modelplane` (or Pulumi, openssl, another process) per test or run the whole Pulumi program under
# mocks, and the property tests that draw 300 examples or more; `pytest` alone runs everything.
SLOW_MODULES = {
    # processes per test
    "test_cli", "test_cli_docs", "test_cli_habits", "test_demo_script", "test_drain_story", "test_fetch_crds",
    "test_hostile_input", "test_main_plain_mocks", "test_mock_engine_hardening", "test_not_a_stack",
    "test_packaging", "test_render_out", "test_runbook_concurrency", "test_secrets_never_echoed", "test_status_cli",
    "test_status_hostile", "test_validate_breaks_later", "test_provider_tmpdir", "test_e2e_controlplane_unit",
    "test_e2e_pulumi_cli_unit", "test_front_door_preinstalled", "test_skip_summary",
    # the whole program under mocks
    "test_backends_cloud", "test_backends_local", "test_mirror_program", "test_program", "test_program_matches_render",
    "test_program_options", "test_program_resources",
}
LARGE_PROPERTY_TEST = 300  # hypothesis examples


def pytest_collection_modifyitems(config, items) -> None:
    for item in items:
        settings = getattr(getattr(item, "obj", None), "_hypothesis_internal_use_settings", None)
        large = settings is not None and settings.max_examples >= LARGE_PROPERTY_TEST
        if item.module.__name__ in SLOW_MODULES or large:
            item.add_marker(pytest.mark.slow)
