"""The end-to-end suite runs the runbook's commands for a cluster gone for good exactly as docs/runbook.md prints them."""
from __future__ import annotations

from e2e.scenario import RUNBOOK_AFTER_A_KILL, RUNBOOK_FORGET_RELEASES


def test_the_e2e_runs_the_runbook_step_as_written(repo):
    assert RUNBOOK_FORGET_RELEASES in (repo / "docs" / "runbook.md").read_text()


def test_the_e2e_clears_up_after_a_killed_update_as_the_runbook_says(repo):
    assert RUNBOOK_AFTER_A_KILL in (repo / "docs" / "runbook.md").read_text()
