"""Bad ``mp`` options end like every bad input (README, "Failures"): one line on stderr
naming the key, exit status 2, nothing written — checked on the real CLI."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[4]


@pytest.mark.parametrize("argv, files, needles", [
    (["--batch", "c.toml"],
     {"c.toml": 'experiments = "D_ens"\nexecutors = ["mp"]\n[options.mp]\nmax_parallel = 0\n'},
     ["c.toml", "options.mp", "'max_parallel'", ">= 1", "got 0"]),
    (["--batch", "c.toml"],
     {"c.toml": 'experiments = "D_ens"\nexecutors = ["mp"]\n[options.mp]\nmps = "of"\n'},
     ["c.toml", "options.mp", "'mps'", "auto, on, off", "did you mean 'off'"]),
    (["--batch", "c.toml"],
     {"c.toml": 'experiments = "D_ens"\nexecutors = ["mp"]\n[options.mp]\nmax_paralel = 2\n'},
     ["c.toml", "options.mp", "unknown key 'max_paralel'", "did you mean 'max_parallel'"]),
    (["--batch", "c.toml"],
     {"c.toml": 'experiments = "D_ens"\nexecutors = ["mp"]\n[options.mp]\nmax_parallel = "2"\n'},
     ["c.toml", "options.mp", "'max_parallel'"]),
    (["run", "--exp", "D_ens", "--exec", "mp", "--option", "mp.max_parallel=0"], {},
     ["mp", "'max_parallel'", "got 0"]),
    (["run", "--exp", "D_ens", "--exec", "mp", "--option", "mp.mps=always"], {},
     ["mp", "'mps'", "'always'"]),
], ids=["max-parallel-0", "mps-typo", "key-typo", "max-parallel-string", "cli-max-parallel-0",
        "cli-mps-unknown"])
def test_bad_mp_options_one_line_exit_2_nothing_written(tmp_path, argv, files, needles):
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    before = sorted(tmp_path.rglob("*"))
    result = subprocess.run([sys.executable, "-m", "fugue_tui", *argv], cwd=tmp_path,
                            capture_output=True, text=True, timeout=120,
                            stdin=subprocess.DEVNULL)
    assert result.returncode == 2, (result.stdout, result.stderr)
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    assert sorted(tmp_path.rglob("*")) == before
