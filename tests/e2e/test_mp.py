"""``mp`` end to end: real campaigns through the real CLI and runner.

- The offline family under seq and mp writes the same columns, and each job's final
  training loss is seq's within 1e-5 relative at one thread (same seeds, same data order):
  packing jobs into processes changes scheduling, not results. (The campaign is
  ``family_run``, tests/e2e/conftest.py, shared with test_ray.py: seq's cells run once.)
- The private MPS daemon (a stand-in ``nvidia-cuda-mps-control`` on PATH that really
  daemonises, and a fake NVML reporting a GPU, both from ``tests/fixtures/mps``) is quit by
  the runner from its cleanup record when the campaign is interrupted (Ctrl-C) and when the
  watchdog kills a hung cell — the daemon left the cell's session, so nothing else would.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path

import psutil
import pytest

from engine.events import read_events
from engine.results.read import read_rows
from tests.e2e.conftest import (
    FAMILY,
    FAMILY_K,
    _env,
    campaign_text,
    gone,
    one_job,
    start,
    wait_for,
    write_campaign,
)

pytestmark = pytest.mark.slow

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"

BLOCK = one_job("X_mps_block", "mark_and_block")


def _filled(rows: list[dict], skip: tuple[str, ...] = ()) -> set[str]:
    return {k for row in rows for k, v in row.items() if v not in ("", None) and k not in skip}


def test_offline_family_under_mp_matches_seq(family_run):
    """The shared family campaign (tests/e2e/conftest.py; its ray cells are test_ray.py's)."""
    proc, runs = family_run.proc, family_run.runs
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    groups = [g for g in read_rows(runs / "master_groups.csv") if g["executor"] in ("seq", "mp")]
    jobs = read_rows(runs / "master_individual.csv")
    assert sorted((g["exp_id"], g["executor"], g["status"]) for g in groups) == sorted(
        (e, x, "ok") for e in FAMILY for x in ("seq", "mp"))
    by = {x: [j for j in jobs if j["executor"] == x] for x in ("seq", "mp")}
    assert len(by["seq"]) == len(by["mp"]) == sum(FAMILY_K.values())
    # the same columns: every column seq fills, mp fills, and no other — except the method
    # column saying why per-job GPU metrics of concurrent jobs stay empty
    # (docs/measurement.md, "Device metrics"), and each job's worker start (issue 20; seq
    # has no per-job worker), filled for every mp job
    assert _filled(by["mp"]) - {"gpu_metrics_method", "worker_start_s"} == _filled(by["seq"])
    assert all(float(j["worker_start_s"]) >= 0 for j in by["mp"])
    seq_groups = [g for g in groups if g["executor"] == "seq"]
    mp_groups = [g for g in groups if g["executor"] == "mp"]
    # ... except data_load_s: an mp parent loads no data, each worker loads its own inside
    # the window (docs/measurement.md, the phase table)
    assert _filled(seq_groups) - {"data_load_s"} <= _filled(mp_groups)
    assert all(g["data_load_s"] == "" for g in mp_groups)
    # the same training, job for job
    seq_jobs = {j["job_id"]: j for j in by["seq"]}
    for job in by["mp"]:
        ref = seq_jobs[job["job_id"]]
        a, b = float(job["final_train_loss"]), float(ref["final_train_loss"])
        assert abs(a - b) <= 1e-5 * abs(b), (job["job_id"], a, b)
        assert job["total_samples"] == ref["total_samples"] and job["seed"] == ref["seed"]
    # one fresh process per job, none of them the cell
    started = {e["cell"]: e["pid"]
               for path in (runs / "e2e-family" / "cells").glob("*/attempt-1/events.jsonl")
               for e in read_events(path) if e["type"] == "started"}
    for group in mp_groups:
        key = group["cell_key"]
        pids = [int(j["worker_pid"]) for j in by["mp"] if j["cell_key"] == key]
        cell_pid = started[key]
        assert len(set(pids)) == len(pids) and cell_pid not in pids
        info = json.loads(group["executor_info"])
        assert sorted(w["pid"] for w in info["workers"].values()) == sorted(pids)
        k = int(group["K"])
        assert k == FAMILY_K[group["exp_id"]] and int(group["max_parallel"]) == min(2, k)
        assert group["mps_used"] == "False" and group["mps_thread_pct"] == ""
        assert float(group["train_throughput_sps"]) > float(group["throughput_group"])
        # forkserver (the default): the pre-warmed parent's start is setup, not T_group
        assert info["spawn"] == "forkserver" and group["mp_start"] == "forkserver"
        assert float(group["setup_s"]) >= info["parent"]["start_s"] > 0


@pytest.mark.parametrize("end", ["ctrl-c", "watchdog"])
def test_runner_quits_the_mps_daemon_after_an_abnormal_end(tmp_path, end):
    """The cell starts our daemon (mps = "on"); its only job blocks mid-training. Ctrl-C of
    the campaign, or the watchdog's kill of the hung cell, ends the cell by signals; the
    runner then quits the daemon from the record the executor left in the attempt folder."""
    sys.path.insert(0, str(FIXTURES / "mps"))
    import standin_control

    exe = standin_control.install(tmp_path / "bin")
    probe = tmp_path / "probe"
    env = _env()
    env["PYTHONPATH"] = os.pathsep.join([str(FIXTURES / "mps" / "fake_nvml"), str(FIXTURES / "mps"),
                                         env["PYTHONPATH"]])
    env.update(FUGUE_PLUGINS="fugue_test_plugin,fugue_mps_probe", FUGUE_PROBE_DIR=str(probe),
               PATH=f"{exe.parent}{os.pathsep}{env['PATH']}", FAKE_NVML_COMPUTE_MODE="DEFAULT")
    watchdog = ('[watchdog]\ninterval_s = 0.5\nsuspect_after = 2\nhung_after = 4\n'
                'action = "kill"\n') if end == "watchdog" else ""
    write_campaign(tmp_path, campaign_text("mpsend", "X_mps_block", ["mp"],
                                           'monitor = false\n[options.mp]\nmps = "on"\n' + watchdog),
                   BLOCK)
    proc = (start(tmp_path, "--batch", "campaign.toml", env=env) if end == "ctrl-c"
            else start(tmp_path, "campaign.toml", module="engine.runner", env=env))
    try:
        records = tmp_path / "runs" / "mpsend" / "cells"
        record_path = wait_for(lambda: next(records.glob("*/attempt-1/cleanup/mps-daemon.json"), None)
                               if records.exists() else None, timeout=300, every=0.1,
                               what="the daemon's cleanup record")
        if end == "ctrl-c":
            wait_for(lambda: list(probe.glob("blocked-*")) if probe.exists() else None,
                     timeout=300, every=0.1, what="the job to block mid-training")
        info = json.loads(record_path.read_text())["info"]
        wait_for(lambda: info.get("pid") or json.loads(record_path.read_text())["info"].get("pid"),
                 timeout=300, every=0.1, what="the daemon's pid")
        info = json.loads(record_path.read_text())["info"]
        daemon = info["pid"]
        assert psutil.Process(daemon).is_running()
        assert os.getsid(daemon) != os.getsid(proc.pid)  # outside every session of ours
        assert info["pipe_dir"].startswith(("/tmp/", os.environ.get("TMPDIR", "/tmp")))
        assert len(info["pipe_dir"]) < 80 and info["pipe_dir"] != "/tmp/nvidia-mps"
        if end == "ctrl-c":
            proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == (130 if end == "ctrl-c" else 1), err
    wait_for(lambda: gone(daemon), timeout=30, every=0.1, what="the daemon to exit")
    assert not record_path.exists() and not Path(info["root"]).exists()
    cleanups = [e for e in read_events(tmp_path / "runs" / "mpsend" / "runner.jsonl")
                if e["type"] == "cleanup"]
    assert len(cleanups) == 1 and "stopped; quit: status 0" in cleanups[0]["messages"][0]
    groups = read_rows(tmp_path / "runs" / "master_groups.csv")
    assert [g["status"] for g in groups] == ["killed"]
    assert ("interrupted" if end == "ctrl-c" else "hung") in groups[0]["error"]
    # the worker (an MPS client) did not survive its cell either
    blocked = [int(p.name.split("-")[1]) for p in probe.glob("blocked-*")]
    assert all(gone(pid) for pid in blocked)
    log = (record_path.parent.parent / "mps" / "control.log").read_text()
    assert "command 'quit'" in log
