"""``fugue-tui bench``: lists the suite's parts, runs one, refuses unknown names."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from bench import PARTS

REPO = Path(__file__).resolve().parents[2]


def fugue(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "fugue_tui", *args], capture_output=True,
                          text=True, cwd="/", timeout=120)


def test_bench_lists_every_part_and_says_which_exist():
    out = fugue("bench")
    assert out.returncode == 0, out.stderr
    for name in PARTS:
        line = next(line for line in out.stdout.splitlines() if line.strip().startswith(name))
        assert ("not built yet" in line) != (REPO / "bench" / f"{name}.py").is_file()


def test_unknown_part_is_one_line_with_the_nearest_name():
    out = fugue("bench", "monitor_overheat")
    assert out.returncode == 2
    assert out.stderr.strip().splitlines() == [
        out.stderr.strip()] and "did you mean 'monitor_overhead'" in out.stderr


def test_a_part_receives_its_own_arguments():
    out = fugue("bench", "fixed_cost", "--help")
    assert out.returncode == 0 and "usage: python -m bench.fixed_cost" in out.stdout
    assert fugue("bench", "--check").returncode == 0  # RESULTS.md matches the CSV files
