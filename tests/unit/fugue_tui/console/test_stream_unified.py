"""A stream cell under unified_model killed mid-stream and resumed (issue 52): ``--batch``
serves a trace under seq and unified_model (``kernels = "exact"``); the runner is stopped
(SIGTERM) while the unified_model cell trains its first job, the cell is recorded as
killed, and ``--resume`` skips seq's done cell and reruns the stream cell whole: every job
of the stream, the same arrivals, the second job joining the first one's running stack
and the other structure's job never joining it — and every job's final weights are seq's
bit for bit (the exact kernels' row of the parity contract, through joins and
re-stacks)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from engine.results.read import read_rows
from tests.unit.fugue_tui.commands.test_commands import _env

pytestmark = pytest.mark.slow

EXPERIMENTS = """
[experiments.D_ens]
k = 2
epochs = 20
[experiments.D_reg]
k = 2
epochs = 1
"""
# the second D_ens job arrives while the first trains (about 0.4 s alone): it joins it;
# D_reg's job is another structure (model and dataset): its own bucket
TRACE = "time_s,experiment\n0,D_ens\n0.1,D_ens\n0.15,D_reg\n1.5,D_ens\n"
CAMPAIGN = """
name = "su"
executors = ["seq", "unified_model"]
experiments_file = "e.toml"
threads = 1
monitor = false
retries = 0
arrivals = { trace = "trace.csv" }
[options.unified_model]
kernels = "exact"
"""


def _batch(work: Path, *args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "fugue_tui", "--batch", "c.toml", *args],
                            cwd=work, env={**_env(), "FUGUE_PLAIN": "1", "COLUMNS": "200"},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL, text=True)


def test_a_killed_unified_stream_cell_reruns_whole_on_resume(tmp_path):
    (tmp_path / "e.toml").write_text(EXPERIMENTS)
    (tmp_path / "trace.csv").write_text(TRACE)
    (tmp_path / "c.toml").write_text(CAMPAIGN)
    first = _batch(tmp_path)
    try:
        deadline = time.monotonic() + 240
        in_cell = False
        assert first.stdout is not None
        for line in first.stdout:  # the unified cell is serving once its first epoch ends
            in_cell = in_cell or "stream unified_model pass 1" in line
            if (in_cell and "a0000_D_ens" in line and " epoch " in line) \
                    or time.monotonic() > deadline:
                break
        assert in_cell, "the unified_model cell never started"
        first.send_signal(signal.SIGTERM)
        _, err = first.communicate(timeout=120)
    finally:
        if first.poll() is None:
            first.kill()
            first.wait()
    assert first.returncode == 130, err
    assert "killed: stream unified_model pass 1" in err

    again = _batch(tmp_path, "--resume")
    out, err = again.communicate(timeout=300)
    assert again.returncode == 0, out[-3000:] + err[-3000:]
    assert "[1/2] stream seq pass 1: skipped, already ok" in out
    runs = tmp_path / "runs"
    groups = read_rows(runs / "master_groups.csv")
    assert [(g["executor"], g["status"], g["attempt"]) for g in groups] == [
        ("seq", "ok", "1"), ("unified_model", "killed", "1"), ("unified_model", "ok", "2")]
    seq_group, killed, group = groups
    assert group["stream_sha256"] == seq_group["stream_sha256"] and group["stream_jobs"] == "4"
    # the runner's row for the killed attempt groups with its stream too (it had neither)
    assert (killed["stream_sha256"], killed["stream_jobs"]) == (seq_group["stream_sha256"], "4")
    rows = read_rows(runs / "master_individual.csv")
    seq = {j["job_id"]: j for j in rows if j["group_id"] == seq_group["group_id"]}
    ours = {j["job_id"]: j for j in rows if j["group_id"] == group["group_id"]}
    assert list(ours) == list(seq) == ["a0000_D_ens_ens_s0", "a0001_D_ens_ens_s1",
                                       "a0002_D_reg_ens_s0", "a0003_D_ens_ens_s0"]
    assert [float(j["arrival_s"]) for j in ours.values()] == [0.0, 0.1, 0.15, 1.5]
    for job_id, row in ours.items():  # the whole stream, each job as seq trained it
        assert row["status"] == "ok" and row["weights_sha256"], job_id
        assert row["weights_sha256"] == seq[job_id]["weights_sha256"], job_id
        assert float(row["jct_s"]) > 0
    joined = ours["a0001_D_ens_ens_s1"]["joined_s"]
    assert joined and float(joined) >= 0.1
    assert ours["a0000_D_ens_ens_s0"]["joined_s"] == ""
    assert ours["a0002_D_reg_ens_s0"]["joined_s"] == ""
    plan = json.loads(group["executor_info"])["plan"]
    [stacked] = [b for b in plan if "a0000_D_ens_ens_s0" in b["jobs"]]
    assert stacked["route"] == "vectorised" and stacked["jobs"][:2] == [
        "a0000_D_ens_ens_s0", "a0001_D_ens_ens_s1"]
    assert stacked["joins"][0]["job"] == "a0001_D_ens_ens_s1"
    [other] = [b for b in plan if "a0002_D_reg_ens_s0" in b["jobs"]]
    assert other["jobs"] == ["a0002_D_reg_ens_s0"]
    assert group["parity_contract"] == "exact"
    # the killed attempt and the rerun each have their own folder; the rerun started
    # every job of the stream again
    [cell] = [p for p in (runs / "su" / "cells").iterdir() if "unified_model" in p.name]
    events = [json.loads(line) for line in
              (cell / "attempt-2" / "events.jsonl").read_text().splitlines()]
    assert sorted(e["job_id"] for e in events if e["type"] == "job_started") == sorted(ours)
    assert (cell / "attempt-1" / "events.jsonl").exists()
