"""Several cells at once, one per device (issue 27), on a host without GPUs: the fake NVML
(tests/fixtures/fake_nvml_site) shows an A100 in MIG mode with two 1g.5gb slices, and
``FUGUE_CELLS_ON_CPU=1`` has the cells train on the CPU while the runner plans, places,
pins (``CUDA_VISIBLE_DEVICES=<slice UUID>``) and monitors the slices as on a real host.

One campaign covers placement, real overlap (start/end stamps), the pinning environment
each cell's processes saw, the core split, control of one running cell while another
runs, ``host_concurrent_cells``, the MIG energy rule both ways, and a ``--resume`` on
other slices of the same model that skips what already ran."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from engine.results.read import read_rows
from tests.e2e.conftest import X_BLOCK, _env, one_job, wait_for

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
SITE = ROOT / "tests" / "fixtures" / "fake_nvml_site"
EXPERIMENTS = (X_BLOCK + one_job("XA", "mlp", "digits", k=2, batch_size=32, epochs=2, lr=0.01)
               + one_job("XB", "mlp", "digits", k=2, batch_size=32, epochs=2, lr=0.01))


def _nvml(path: Path, slices: list[str]) -> None:
    path.write_text(json.dumps({"devices": [
        {"uuid": "GPU-a100", "name": "NVIDIA A100-SXM4-40GB",
         "migs": [{"uuid": uuid} for uuid in slices]}]}))


def _setup(tmp: Path, experiments: list[str], slices: list[str]) -> tuple[Path, dict]:
    (tmp / "experiments.toml").write_text(EXPERIMENTS)
    campaign = tmp / "c.toml"
    campaign.write_text(f'name = "md"\nexperiments = {json.dumps(experiments)}\n'
                        'executors = ["seq"]\ndevices = "auto"\nthreads = 1\n'
                        'experiments_file = "experiments.toml"\nruns_dir = "runs"\n'
                        'monitor_interval_s = 0.2\n[watchdog]\naction = "flag"\n')
    _nvml(tmp / "nvml.json", slices)
    env = _env()
    env.update(FAKE_NVML_CONFIG=str(tmp / "nvml.json"), FUGUE_CELLS_ON_CPU="1",
               FAKE_NVML_ENV_LOG=str(tmp / "pinned.log"),
               PYTHONPATH=os.pathsep.join([str(SITE), str(ROOT), env.get("PYTHONPATH", "")]))
    env.pop("CUDA_VISIBLE_DEVICES", None)
    return campaign, env


def _events(tmp: Path) -> list[dict]:
    path = tmp / "runs" / "md" / "runner.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def _key(tmp: Path, exp: str) -> str:
    return next(e["cell"] for e in _events(tmp) if e["type"] == "queued" and exp in e["label"])


def test_cells_run_at_once_one_per_device_pinned_and_recorded(tmp_path):
    campaign, env = _setup(tmp_path, ["X_block", "XA", "XB"], ["MIG-s1", "MIG-s2"])
    runner = subprocess.Popen([sys.executable, "-m", "engine.runner", str(campaign)],
                              cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
    try:
        # X_block (unit 0) blocks device 1; XA (unit 1) runs and ends on device 2 meanwhile.
        wait_for(lambda: any(e["type"] == "done" for e in _events(tmp_path)), timeout=180,
                 what="XA to finish while X_block runs")
        block = _key(tmp_path, "X_block")
        subprocess.run([sys.executable, "-m", "fugue_tui", "control", "runs/md", "kill", block],
                       cwd=tmp_path, env=env, check=True, timeout=60)
        out, err = runner.communicate(timeout=240)
    finally:
        if runner.poll() is None:
            runner.kill()
    assert runner.returncode == 1, err[-3000:]  # one cell killed
    rows = {r["exp_id"]: r for r in read_rows(tmp_path / "runs" / "master_groups.csv")}
    assert {k: r["status"] for k, r in rows.items()} == {"X_block": "killed", "XA": "ok",
                                                         "XB": "ok"}
    assert "killed by control command" in rows["X_block"]["error"]
    # placement: unit i on device i mod 2, named, the UUID in its column
    assert [rows[e]["gpu_uuid"] for e in ("X_block", "XA", "XB")] == ["MIG-s1", "MIG-s2",
                                                                       "MIG-s1"]
    assert rows["XA"]["placement"] == "device 2/2 MIG-s2"
    assert rows["XB"]["placement"] == rows["X_block"]["placement"] == "device 1/2 MIG-s1"
    started = next(e for e in _events(tmp_path) if e["type"] == "campaign_started")
    assert started["devices"] == ["device 1/2 MIG-s1", "device 2/2 MIG-s2"]
    # real overlap: XA started and ended while X_block ran
    ts = {(e["type"], e.get("cell")): e["ts"] for e in _events(tmp_path)}
    xa = _key(tmp_path, "XA")
    assert max(ts[("cell_started", block)], ts[("cell_started", xa)]) < ts[("done", xa)] < \
        ts[("killed", block)]
    # pinning: every process of a cell saw only its slice (the monitor imports pynvml)
    seen = [line.split(" ", 2) for line in (tmp_path / "pinned.log").read_text().splitlines()]
    assert {cvd for _, cvd, _ in seen} >= {"MIG-s1", "MIG-s2"}
    assert {cvd for _, cvd, _ in seen} <= {"MIG-s1", "MIG-s2", "-"}  # "-": the runner itself
    # the host's cores split between the two devices (one share each, disjoint)
    cores = sorted(os.sched_getaffinity(0))
    if len(cores) >= 2:
        shares = {rows[e]["cpu_affinity"] for e in ("XA", "XB")}
        assert len(shares) == 2 and all(shares), shares
        zygote = {str(e.get("pid")) for e in _events(tmp_path) if e["type"] == "zygote"}
        for pid, cvd, affinity in seen:  # the zygote (pre-warmed, runs no cell) is not pinned
            if cvd != "-" and pid not in zygote:
                assert len(json.loads(affinity)) == len(cores) // 2 or \
                    len(json.loads(affinity)) == (len(cores) + 1) // 2
    # XA shared the host (and the A100) with X_block; XB ran alone after the kill
    assert rows["XA"]["host_concurrent_cells"] == "2"
    assert rows["XB"]["host_concurrent_cells"] == "1"
    assert "not attributed" in rows["XA"]["gpu_metrics_missing"]
    assert rows["XA"]["energy_group"] == "" and rows["XA"]["energy_method"] == "none"
    assert "not attributed" not in rows["XB"]["gpu_metrics_missing"]
    summaries = [json.loads(line) for line in
                 next((tmp_path / "runs" / "md" / "cells").glob(f"*{xa[:8]}/attempt-1"))
                 .joinpath("events.jsonl").read_text().splitlines()]
    warnings = next(e for e in summaries if e["type"] == "summary")["warnings"]
    assert any("2 cells ran on this host at once" in w for w in warnings), warnings

    # --resume on two other slices of the same model: the key is host + GPU model, not the
    # UUID, so XA and XB are not run again; X_block (killed) and a new X_block2 run, one
    # per slice, and SIGTERM ends the campaign as Ctrl-C does: both recorded, exit 130.
    campaign, env = _setup(tmp_path, ["X_block", "XA", "XB", "X_block2"], ["MIG-s3", "MIG-s4"])
    (tmp_path / "experiments.toml").write_text(EXPERIMENTS + one_job("X_block2", "block_forever"))
    before = len(read_rows(tmp_path / "runs" / "master_groups.csv"))
    seen = len(_events(tmp_path))
    again = subprocess.Popen([sys.executable, "-m", "engine.runner", str(campaign), "--resume"],
                             cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
    try:
        wait_for(lambda: sum(e["type"] == "cell_started" for e in _events(tmp_path)[seen:]) == 2,
                 timeout=120, what="both blocking cells to start")
        pids = [e["pid"] for e in _events(tmp_path)[seen:] if e["type"] == "cell_started"]
        again.send_signal(signal.SIGTERM)
        out, err = again.communicate(timeout=120)
    finally:
        if again.poll() is None:
            again.kill()
    assert again.returncode == 130, err[-2000:]
    skipped = [e for e in _events(tmp_path)[seen:] if e["type"] == "skipped"]
    assert sorted(e["label"] for e in skipped) == ["XA seq pass 1", "XB seq pass 1"]
    assert all("resume" in e["reason"] for e in skipped)
    new = read_rows(tmp_path / "runs" / "master_groups.csv")[before:]
    assert sorted((r["exp_id"], r["status"], r["gpu_uuid"]) for r in new) == [
        ("X_block", "killed", "MIG-s3"), ("X_block2", "killed", "MIG-s4")]
    assert all("interrupted (SIGTERM)" in r["error"] for r in new), new
    for pid in pids:  # no cell survives its runner
        assert not Path(f"/proc/{pid}").exists() or \
            Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z"
