"""``fugue-tui --batch`` end to end: real cell subprocesses, real CSV files, real events."""

from __future__ import annotations

import json
import re

import pytest

from engine.events import read_events
from engine.results.columns import GROUP_COLUMNS, INDIVIDUAL_COLUMNS
from engine.results.read import read_rows

pytestmark = pytest.mark.slow


def test_offline_campaign_exits_zero_and_prints_summary(offline_run):
    proc = offline_run.proc
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "[6/6] D_mm seq pass 2" in proc.stdout
    # the summary table (fugue_tui.report.tables) names every experiment with its executor, ok
    # passes, mean T_group, and seq's speedup of 1 with no interval (2 passes) over itself,
    # the cores it used beside it (issue 46), then the baseline (in the table's next part
    # when the terminal is narrow)
    for exp_id in ("D_ens", "D_hpo", "D_mm"):
        assert re.search(rf"{exp_id}\s+│\s+seq\s+│\s+off\s+│\s+2\s+│\s+\d+\.\d\d\s+│.*?"
                         rf"\s1\.000\s+│\s+(\d+\.\d\d|—)\s+│\s+n/a\s+│", proc.stdout), proc.stdout
        assert re.search(rf"{exp_id}\s+│\s+seq\s+│\s+off\s+│\s+2\s+│\s+seq\s+│",
                         proc.stdout), proc.stdout


def test_group_rows(offline_run):
    rows = read_rows(offline_run.runs / "master_groups.csv")
    header = (offline_run.runs / "master_groups.csv").read_text().splitlines()[0].split(",")
    assert header == list(GROUP_COLUMNS)
    assert len(rows) == 6
    assert [r["exp_id"] for r in rows] == ["D_ens", "D_hpo", "D_mm"] * 2  # passes outermost
    assert [r["pass"] for r in rows] == ["1"] * 3 + ["2"] * 3
    assert len({r["group_id"] for r in rows}) == 6
    assert len({r["cell_key"] for r in rows}) == 6
    assert len({r["campaign_id"] for r in rows}) == 1
    for row in rows:
        assert re.fullmatch(r"seq_[0-9a-f]{8}", row["group_id"])
        assert row["status"] == "ok" and row["attempt"] == "1" and row["error"] == ""
        assert float(row["T_group"]) > 0
        assert float(row["throughput_group"]) == pytest.approx(
            int(row["total_samples"]) / float(row["T_group"]), rel=1e-9)
        # nothing measured on a machine without a GPU: empty cells, never zeros
        for column in ("energy_group", "gpu_util_mean", "gpu_util_max", "vram_peak_mb",
                       "gpu_name", "nv_driver_version"):
            assert row[column] == "", column
        assert row["energy_method"] == "none"
        assert row["torch_version"] and row["host"] and row["cpu_cores"] and row["python_version"]
        assert row["device"] == "cpu" and row["threads"] and row["campaign_hash"]
        assert row["compile"] == "False" and row["compile_mode"] == "off"
        assert row["mode"] in ("ensemble", "hpo", "multi_model")
    assert {r["K"] for r in rows if r["exp_id"] == "D_ens"} == {"5"}
    assert {r["K"] for r in rows if r["exp_id"] == "D_hpo"} == {"6"}
    assert {r["K"] for r in rows if r["exp_id"] == "D_mm"} == {"3"}


def test_job_rows_seeds_and_samples(offline_run):
    jobs = read_rows(offline_run.runs / "master_individual.csv")
    header = (offline_run.runs / "master_individual.csv").read_text().splitlines()[0].split(",")
    assert header == list(INDIVIDUAL_COLUMNS)
    assert len(jobs) == 2 * (5 + 6 + 3)
    groups = {r["group_id"]: r for r in read_rows(offline_run.runs / "master_groups.csv")}
    for pass_index in ("1", "2"):
        ens = [r for r in jobs if r["exp_id"] == "D_ens" and r["pass"] == pass_index]
        assert [r["job_id"] for r in ens] == [f"D_ens_ens_s{i}" for i in range(5)]
        assert [r["seed"] for r in ens] == [str(42 + i) for i in range(5)]
        # digits has no test split: 20 % holdout (359 of 1797), full batches of 64 only
        assert {r["total_samples"] for r in ens} == {str((1438 // 64) * 64 * 2)}
        assert {r["samples_dropped"] for r in ens} == {str((1438 % 64) * 2)}
        assert {r["split"] for r in ens} == {"holdout"}
        hpo = [r for r in jobs if r["exp_id"] == "D_hpo" and r["pass"] == pass_index]
        assert [(float(r["lr"]), r["batch_size"]) for r in hpo] == [
            (3e-4, "32"), (3e-4, "128"), (1e-3, "32"), (1e-3, "128"), (3e-3, "32"), (3e-3, "128")]
    for row in jobs:
        assert row["status"] == "ok"
        assert row["group_id"] in groups
        assert float(row["total_time_s"]) > 0 and float(row["train_time_s"]) > 0
        assert row["energy_j"] == "" and row["vram_peak_mb"] == ""
        if row["dataset"] != "diabetes":
            assert 0.0 <= float(row["final_val_acc"]) <= 1.0
    # trained for real: the digits ensemble beats chance (10 classes) by far after 2 epochs
    assert min(float(r["final_val_acc"]) for r in jobs if r["exp_id"] == "D_ens") > 0.6


def test_same_seed_same_result_across_passes(offline_run):
    """seq on CPU with the same seeds and threads reproduces its numbers pass after pass."""
    jobs = read_rows(offline_run.runs / "master_individual.csv")
    by_pass = {p: {r["job_id"]: float(r["final_val_loss"]) for r in jobs if r["pass"] == p}
               for p in ("1", "2")}
    assert by_pass["1"].keys() == by_pass["2"].keys()
    for job_id, loss in by_pass["1"].items():
        assert by_pass["2"][job_id] == pytest.approx(loss, rel=1e-5), job_id


def test_events_and_run_folder(offline_run):
    run_dirs = [p for p in offline_run.runs.iterdir() if p.is_dir() and p.name != "samples"]
    assert len(run_dirs) == 1
    run_dir = run_dirs[0]
    assert (run_dir / "campaign.toml").read_text().startswith("\nname = \"e2e\"")
    runner_events = read_events(run_dir / "runner.jsonl")
    types = [e["type"] for e in runner_events]
    assert types[0] == "campaign_started" and types[-1] == "campaign_done"
    assert types.count("cell_started") == 6 and types.count("done") == 6
    cell_dirs = sorted((run_dir / "cells").iterdir())
    assert len(cell_dirs) == 6
    events = read_events(cell_dirs[0] / "attempt-1" / "events.jsonl")
    kinds = [e["type"] for e in events]
    assert kinds[0] == "started" and kinds[-1] == "done"
    assert "summary" in kinds and kinds.count("job_done") == 5
    assert all(e["v"] == 1 for e in events)
    epoch_ends = [e for e in events if e["type"] == "job_progress" and e.get("epoch_end")]
    assert len(epoch_ends) == 5 * 2  # every epoch end of every job is reported
    spec = json.loads((cell_dirs[0] / "attempt-1" / "spec.json").read_text())
    assert spec["cell"]["exp_id"] == "D_ens" and spec["attempt"] == 1


def test_failed_and_crashed_cells_are_recorded(failing_run):
    proc = failing_run.proc
    assert proc.returncode == 1, proc.stdout[-2000:] + proc.stderr[-2000:]
    groups = read_rows(failing_run.runs / "master_groups.csv")
    # a cell that cannot run here is recorded when the campaign is planned, before any runs
    assert [(g["exp_id"], g["status"]) for g in groups] == [
        ("E01", "skipped"), ("X_fail", "failed"), ("X_crash", "failed")]
    skipped, fail, crash = groups
    assert "cifar-10-batches-py" in skipped["error"] and skipped["T_group"] == ""
    assert "2/2 jobs failed" in fail["error"] and "deliberate failure" in fail["error"]
    assert fail["T_group"] != ""  # the group ran; its jobs failed
    assert "status 7" in crash["error"]
    assert crash["T_group"] == ""  # the process died: nothing measured, nothing invented
    jobs = read_rows(failing_run.runs / "master_individual.csv")
    assert [(j["job_id"], j["status"]) for j in jobs] == [("X_fail_ens_s0", "failed"),
                                                          ("X_fail_ens_s1", "failed")]
    assert all("deliberate failure" in j["error"] for j in jobs)
    assert "failed: X_crash seq pass 1 (attempt 1): cell exited with status 7" in proc.stderr
    assert "skipped: E01 seq pass 1 (attempt 1): unavailable here" in proc.stderr
    # the skipped cell never started a process
    run_dir = next(p for p in failing_run.runs.iterdir() if p.is_dir() and p.name != "samples")
    assert not list((run_dir / "cells").glob("*E01*/attempt-1/cell.log"))
