"""``fugue-tui bench``: lists the suite's parts, runs one, refuses unknown names."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from bench import PARTS

REPO = Path(__file__).resolve().parents[3]


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
    assert out.returncode == 0 and "usage: fugue-tui bench fixed_cost" in out.stdout
    assert fugue("bench", "--check").returncode == 0  # RESULTS.md matches the CSV files


def _rows(results_dir: Path, part: str) -> list[dict]:
    from engine.results.read import read_rows

    return read_rows(results_dir / f"{part}.csv")


def test_results_scale_times_every_step_at_every_size(tmp_path):
    """A tiny real run of the part (300 and 600 rows, one repetition): every size gets its
    three steps and their sum, only the largest the speedups variants; nothing is timed
    against a bound here (timings live in the committed results)."""
    from bench import results_scale

    out = tmp_path / "results"
    assert results_scale.main(["--sizes", "600", "300", "--reps", "1",
                               "--results-dir", str(out)]) == 0
    rows = _rows(out, "results_scale")
    got = {(r["figure"], r["variant"]) for r in rows}
    for n in (300, 600):
        assert {(f"report_path:{n}", s) for s in ("load", "aggregate", "chart")} <= got
        assert (f"report_path_total:{n}", "total") in got
    total = {r["figure"]: float(r["value"]) for r in rows if r["variant"] == "total"}
    parts = sum(float(r["value"]) for r in rows if r["figure"] == "report_path:300")
    assert abs(total["report_path_total:300"] - parts) < 1e-9
    assert all(float(r["value"]) > 0 for r in rows if r["figure"].startswith("report_path"))
    assert {r["target"] for r in rows if r["variant"] == "total"} == {""}  # only at 100k
    assert "python -m bench.results_scale --sizes 300 600 --reps 1" in rows[0]["command"]


def test_unified_scaling_curve_memory_and_seq_only_where_asked(tmp_path):
    from bench import unified_scaling

    out = tmp_path / "results"
    assert unified_scaling.main(["--ks", "1,2", "--seq-ks", "2", "--epochs", "1", "--reps", "1",
                                 "--results-dir", str(out)]) == 0
    rows = _rows(out, "unified_scaling")
    figures = {r["figure"] for r in rows}
    assert "train_throughput K=2: vs seq" in figures
    assert "train_throughput K=1: vs seq" not in figures          # seq only at --seq-ks
    curve = {r["variant"] for r in rows if r["figure"] == "scaling:unified"}
    assert curve == {"K=1", "K=2"}
    memory = {r["variant"]: float(r["value"]) for r in rows if r["figure"] == "peak_memory"}
    assert set(memory) == {"bare_stacked K=1", "unified K=1", "bare_stacked K=2", "unified K=2"}
    assert all(v >= 0 for v in memory.values())
    refused = subprocess.run([sys.executable, "-m", "bench.unified_scaling", "--ks", "8",
                              "--seq-ks", "32", "--no-write"], capture_output=True, text=True,
                             cwd=REPO, timeout=120)
    assert refused.returncode == 2 and "--seq-ks 32" in refused.stderr
