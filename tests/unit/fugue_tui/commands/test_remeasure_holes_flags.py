"""``--remeasure-holes`` (issue 43) on the front ends: only with ``--resume`` (one line,
exit 2, nothing written), for ``--batch`` and ``fugue-tui run`` alike."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[4]


def _fugue(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", "fugue_tui", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("args", [
    ("--batch", str(REPO / "campaigns" / "quick.toml"), "--remeasure-holes"),
    ("run", "--exp", "D_ens", "--exec", "seq", "--remeasure-holes"),
])
def test_remeasure_holes_without_resume_is_one_line_exit_2(tmp_path, args):
    proc = _fugue(tmp_path, *args)
    assert proc.returncode == 2, proc.stderr
    (line,) = proc.stderr.strip().splitlines()[-1:]
    assert "--remeasure-holes only applies with --resume" in line
    assert list(tmp_path.iterdir()) == []
