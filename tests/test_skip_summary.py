"""Every skip says why in one line, also without -rs (README: a lone clone's skips each have a reason line)."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def test_each_skip_reason_is_one_line_and_the_lines_add_up_to_every_skip(tmp_path: Path) -> None:
    # An empty HOME and e2e cache: the egctl tests skip (no toolchain), as in a fresh clone.
    env = {**{k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONUNBUFFERED")},
           "HOME": str(tmp_path), "MODELPLANE_E2E_CACHE": str(tmp_path / "e2e")}
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "tests/test_front_door_xds.py"],
                          cwd=REPO, capture_output=True, text=True, timeout=600, env=env)
    assert done.returncode == 0, done.stdout[-2000:]
    total = int(re.search(r"(\d+) skipped in ", done.stdout).group(1))
    lines = re.findall(r"^(\d+) skipped: (.+)$", done.stdout, re.M)
    assert total > 0 and sum(int(n) for n, _ in lines) == total, done.stdout[-2000:]
    assert len({reason for _, reason in lines}) == len(lines)  # one line per reason
    assert any("needs egctl" in reason and "scripts/e2e-tools.sh" in reason for _, reason in lines)
