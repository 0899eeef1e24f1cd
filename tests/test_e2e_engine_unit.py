"""The e2e engine runner's terminal mode (tests/e2e/engine.py): what a user's terminal gives `pulumi`, under the
Automation API, which otherwise always pipes its output and adds --non-interactive."""
from __future__ import annotations

import subprocess
import time
from types import SimpleNamespace

import pytest
from e2e import engine, terminal

STAND_IN = """#!/bin/bash
if [ -t 0 ] && [ -t 1 ]; then where="a terminal of $(stty size)"; else where="a pipe"; fi
echo "$where; CI=${CI-unset}; args: $*"
if [ -t 0 ]; then  # what the CLI asks a terminal when it starts; unanswered, it waits
  stty raw -echo
  printf '\\033]11;?\\033\\\\' && IFS= read -r -s -t 5 -d '\\' colour
  printf '\\033[6n' && IFS= read -r -s -t 5 -d R position
  stty sane
  printf '\\nanswers: %q %q\\n' "$colour" "$position"
fi
"""


@pytest.fixture
def stack(tmp_path, monkeypatch):
    real = tmp_path / "bin" / "pulumi"
    real.parent.mkdir()
    real.write_text(STAND_IN)
    real.chmod(0o755)
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setenv("CI", "true")
    monkeypatch.setenv("TERM", "dumb")
    monkeypatch.setenv("REAL_PULUMI", "")  # set by _in_a_terminal; restored afterwards
    stack = SimpleNamespace(workspace=SimpleNamespace(pulumi_command=SimpleNamespace(command=str(real))))
    engine._in_a_terminal(stack)
    return stack


def run(stack, *args: str) -> str:
    return subprocess.run([stack.workspace.pulumi_command.command, *args], capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, check=True).stdout


@pytest.mark.parametrize("op", ["up", "preview", "destroy", "refresh"])
def test_an_operation_runs_in_a_terminal_without_non_interactive_or_ci(stack, op):
    rows, columns = engine.TERMINAL_SIZE
    out = run(stack, "--non-interactive", op, "--yes", "--stack", "e2e")
    assert f"a terminal of {rows} {columns}; CI=unset; args: {op} --yes --stack e2e" in out


def test_the_terminal_answers_what_the_cli_asks_when_it_starts(stack):
    started = time.monotonic()
    out = run(stack, "--non-interactive", "preview")
    assert "answers: $'\\E]11;rgb:0000/0000/0000\\E' $'\\E[1;1'" in out, out
    assert time.monotonic() - started < 4


def test_queries_split_across_reads_are_answered_once():
    assert terminal.answers(b"", b"\x1b[6n") == b"\x1b[1;1R"
    assert terminal.answers(b"abc\x1b]11", b";?\x1b\\") == terminal.ANSWERS[b"\x1b]11;?"]
    assert terminal.answers(b"\x1b[6n", b"more output") == b""  # answered with the read it ended in


def test_other_commands_run_as_the_automation_api_asked(stack):
    out = run(stack, "--non-interactive", "stack", "output", "--json")
    assert out.strip() == "a pipe; CI=true; args: --non-interactive stack output --json"


@pytest.mark.parametrize(
    ("environ", "expected"),
    [
        ({}, {}),
        ({"MODELPLANE_E2E_EXCLUDE": '["urn:pulumi:e2e::modelplane::modelplane:index:ModelReplica**"]'},
         {"exclude": ["urn:pulumi:e2e::modelplane::modelplane:index:ModelReplica**"]}),
        ({"MODELPLANE_E2E_TARGET": '["a", "b"]', "MODELPLANE_E2E_EXCLUDE": ""}, {"target": ["a", "b"]}),
    ],
)
def test_target_and_exclude_come_from_the_environment(environ, expected):
    assert engine.selection(environ) == expected


@pytest.mark.parametrize("text", ["urn:pulumi:e2e::x", "[]x", '"one"', '[""]', "[1]"])
def test_a_malformed_selection_stops_the_run_naming_the_variable(text):
    with pytest.raises(SystemExit, match="MODELPLANE_E2E_TARGET"):
        engine.selection({"MODELPLANE_E2E_TARGET": text})
