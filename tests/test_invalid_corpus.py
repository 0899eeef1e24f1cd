"""The invalid-config corpus: every file in tests/invalid/ breaks one rule and must be rejected properly.

Each corpus file starts with comment lines:

    # rule: <which rule it breaks>
    # expect-path: <the exact config path the validator prints before ': '>
    # expect-message: <a distinctive substring of the message for that path>
    # expect-errors: <optional: how many errors in all, where one mistake must not cascade into more>

"Properly" means: exit code 2, no "valid:" line, no traceback, and an error line that starts with
the expected path and carries the expected message. Files whose validator output is still wrong
would live in tests/invalid_pending/ and are not run here.
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from modelplane import cli

TESTS_DIR = Path(__file__).resolve().parent
REPO_ROOT = TESTS_DIR.parent
CORPUS_DIR = TESTS_DIR / "invalid"
CORPUS = sorted(CORPUS_DIR.glob("*.yaml"))
MIN_CORPUS_SIZE = 40


def read_header(path: Path) -> dict[str, str]:
    """The leading `# key: value` comment lines of a corpus file."""
    header: dict[str, str] = {}
    for line in path.read_text().splitlines():
        if not line.startswith("#"):
            break
        key, sep, value = line.lstrip("#").strip().partition(":")
        if sep:
            header[key.strip()] = value.strip()
    return header


def expectation(path: Path) -> tuple[str, str]:
    header = read_header(path)
    for key in ("rule", "expect-path", "expect-message"):
        assert header.get(key), f"{path.name}: missing '# {key}:' header line"
    return header["expect-path"], header["expect-message"]


def matching_lines(stderr: str, expect_path: str, expect_message: str) -> list[str]:
    return [line for line in stderr.splitlines()
            if line.strip().startswith(f"{expect_path}: ") and expect_message in line]


def assert_rejected(path: Path, code: int, stdout: str, stderr: str) -> None:
    expect_path, expect_message = expectation(path)
    assert code == 2, f"{path.name}: exit code {code}, expected 2\nstdout: {stdout}\nstderr: {stderr}"
    assert "valid:" not in stdout, f"{path.name}: reported valid: {stdout}"
    assert stdout.strip() == "", f"{path.name}: unexpected stdout: {stdout}"
    assert "Traceback" not in stderr, f"{path.name}: traceback:\n{stderr}"
    assert matching_lines(stderr, expect_path, expect_message), (
        f"{path.name}: no error line '{expect_path}: ...{expect_message}...' in:\n{stderr}")
    if (count := read_header(path).get("expect-errors")) is not None:
        noun = "error" if count == "1" else "errors"
        assert stderr.startswith(f"error: {count} {noun} in "), f"{path.name}: expected {count} {noun}:\n{stderr}"


@pytest.mark.parametrize("path", CORPUS, ids=[p.stem for p in CORPUS])
def test_corpus_file_is_rejected(path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = cli.main(["validate", "--config", str(path)])
    captured = capsys.readouterr()
    assert_rejected(path, code, captured.out, captured.err)


SUBPROCESS_SAMPLE = ["deployment-replicas-too-many", "cluster-eks-pool-without-zones", "cel-syntax-error"]


@pytest.mark.parametrize("stem", SUBPROCESS_SAMPLE)
def test_corpus_file_is_rejected_by_the_real_command(stem: str) -> None:
    path = CORPUS_DIR / f"{stem}.yaml"
    assert path.is_file(), f"sample file {path} is missing from the corpus"
    result = subprocess.run(
        [sys.executable, "-m", "modelplane", "validate", "--config", str(path.relative_to(REPO_ROOT))],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 2, f"exit {result.returncode}\nstdout: {result.stdout}\nstderr: {result.stderr}"
    assert "Traceback" not in result.stderr, result.stderr
    assert_rejected(path, result.returncode, result.stdout, result.stderr)


def test_corpus_is_large_and_each_file_checks_something_different() -> None:
    assert len(CORPUS) >= MIN_CORPUS_SIZE, f"only {len(CORPUS)} corpus files in {CORPUS_DIR}"
    seen: dict[tuple[str, str], str] = {}
    for path in CORPUS:
        pair = expectation(path)
        assert pair not in seen, f"{path.name} expects the same (path, message) as {seen[pair]}: {pair}"
        seen[pair] = path.name
