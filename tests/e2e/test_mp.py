"""``mp`` end to end: real campaigns through the real CLI and runner.

- The offline family under seq and mp writes the same columns, and each job's final
  training loss is seq's within 1e-5 relative at one thread (same seeds, same data order):
  packing jobs into processes changes scheduling, not results.
- The private MPS daemon (a stand-in ``nvidia-cuda-mps-control`` on PATH that really
  daemonises, and a fake NVML reporting a GPU, both from ``tests/fixtures/mps``) is quit by
  the runner from its cleanup record when the campaign is interrupted (Ctrl-C) and when the
  watchdog kills a hung cell — the daemon left the cell's session, so nothing else would.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from engine.events import read_events
from engine.results import read_rows
from tests.e2e.conftest import _env

pytestmark = pytest.mark.slow

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"

# The offline family, shrunk so that the mp cells start few workers (each one a fresh
# interpreter importing torch): D_cv and D_mm keep two jobs that run at the same time.
FAMILY = """
[experiments.D_ens]
k = 1
epochs = 2
[experiments.D_cv]
k = 2
epochs = 1
[experiments.D_hpo]
epochs = 2
search_space = { lr = [3e-3], batch_size = [128] }
[experiments.D_mm]
members = [
  { model = "mlp_bn", dataset = "digits", batch_size = 64, epochs = 1, lr = 0.05, optimizer = "sgd", optimizer_kwargs = { momentum = 0.9 } },
  { model = "mlp", dataset = "diabetes", task = "regression", batch_size = 32, epochs = 2, lr = 0.003, optimizer = "adam" },
]
[experiments.D_reg]
k = 1
epochs = 2
"""

BLOCK = """
[experiments.X_mps_block]
type = "ensemble"
model = "mark_and_block"
dataset = "wine"
k = 1
batch_size = 16
epochs = 1
lr = 0.1
optimizer = "sgd"
"""


def _filled(rows: list[dict], skip: tuple[str, ...] = ()) -> set[str]:
    return {k for row in rows for k, v in row.items() if v not in ("", None) and k not in skip}


def test_offline_family_under_mp_matches_seq(tmp_path):
    (tmp_path / "experiments.toml").write_text(FAMILY)
    (tmp_path / "campaign.toml").write_text(
        'name = "mpfam"\nexperiments = "D_ens,D_cv,D_hpo,D_mm,D_reg"\nexecutors = ["seq", "mp"]\n'
        'device = "cpu"\nthreads = 1\nexperiments_file = "experiments.toml"\nmonitor = false\n'
        '[options.mp]\nmax_parallel = 2\n')
    proc = subprocess.run([sys.executable, "-m", "fugue_tui", "--batch", "campaign.toml"],
                          cwd=tmp_path, env=_env(), capture_output=True, text=True, timeout=900,
                          stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    groups = read_rows(tmp_path / "runs" / "master_groups.csv")
    jobs = read_rows(tmp_path / "runs" / "master_individual.csv")
    assert sorted((g["exp_id"], g["executor"], g["status"]) for g in groups) == sorted(
        (e, x, "ok") for e in ("D_ens", "D_cv", "D_hpo", "D_mm", "D_reg") for x in ("seq", "mp"))
    by = {x: [j for j in jobs if j["executor"] == x] for x in ("seq", "mp")}
    assert len(by["seq"]) == len(by["mp"]) == 7
    # the same columns: every column seq fills, mp fills, and no other — except the method
    # column saying why per-job GPU metrics of concurrent jobs stay empty
    # (docs/measurement.md, "Device metrics")
    assert _filled(by["mp"]) - {"gpu_metrics_method"} == _filled(by["seq"])
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
               for path in (tmp_path / "runs" / "mpfam" / "cells").glob("*/attempt-1/events.jsonl")
               for e in read_events(path) if e["type"] == "started"}
    for group in mp_groups:
        key = group["cell_key"]
        pids = [int(j["worker_pid"]) for j in by["mp"] if j["cell_key"] == key]
        cell_pid = started[key]
        assert len(set(pids)) == len(pids) and cell_pid not in pids
        info = json.loads(group["executor_info"])
        assert sorted(w["pid"] for w in info["workers"].values()) == sorted(pids)
        k = int(group["K"])
        assert int(group["max_parallel"]) == min(2, k)
        assert group["mps_used"] == "False" and group["mps_thread_pct"] == ""
        assert float(group["train_throughput_sps"]) > float(group["throughput_group"])
        assert float(group["setup_s"]) < 1.0


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def _wait_for(predicate, timeout: float = 300.0, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


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
    (tmp_path / "experiments.toml").write_text(BLOCK)
    watchdog = ('[watchdog]\ninterval_s = 0.5\nsuspect_after = 2\nhung_after = 4\n'
                'action = "kill"\n') if end == "watchdog" else ""
    (tmp_path / "campaign.toml").write_text(
        'name = "mpsend"\nexperiments = "X_mps_block"\nexecutors = ["mp"]\ndevice = "cpu"\n'
        'threads = 1\nexperiments_file = "experiments.toml"\nmonitor = false\n'
        '[options.mp]\nmps = "on"\n'
        + watchdog)
    command = ([sys.executable, "-m", "fugue_tui", "--batch", "campaign.toml"] if end == "ctrl-c"
               else [sys.executable, "-m", "engine.runner", "campaign.toml"])
    proc = subprocess.Popen(command, cwd=tmp_path, env=env, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        records = tmp_path / "runs" / "mpsend" / "cells"
        record_path = _wait_for(lambda: next(records.glob("*/attempt-1/cleanup/mps-daemon.json"), None)
                                if records.exists() else None, what="the daemon's cleanup record")
        if end == "ctrl-c":
            _wait_for(lambda: list(probe.glob("blocked-*")) if probe.exists() else None,
                      what="the job to block mid-training")
        info = json.loads(record_path.read_text())["info"]
        _wait_for(lambda: info.get("pid") or json.loads(record_path.read_text())["info"].get("pid"),
                  what="the daemon's pid")
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
    _wait_for(lambda: _gone(daemon), timeout=30, what="the daemon to exit")
    assert not record_path.exists() and not Path(info["root"]).exists()
    cleanups = [e for e in read_events(tmp_path / "runs" / "mpsend" / "runner.jsonl")
                if e["type"] == "cleanup"]
    assert len(cleanups) == 1 and "stopped; quit: status 0" in cleanups[0]["messages"][0]
    groups = read_rows(tmp_path / "runs" / "master_groups.csv")
    assert [g["status"] for g in groups] == ["killed"]
    assert ("interrupted" if end == "ctrl-c" else "hung") in groups[0]["error"]
    # the worker (an MPS client) did not survive its cell either
    blocked = [int(p.name.split("-")[1]) for p in probe.glob("blocked-*")]
    assert all(_gone(pid) for pid in blocked)
    log = (record_path.parent.parent / "mps" / "control.log").read_text()
    assert "command 'quit'" in log
