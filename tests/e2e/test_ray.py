"""The ``ray`` executor end to end: real ``fugue-tui --batch`` campaigns, real local Ray.

Ray starts slowly here (20-30 s per cell on a small shared CPU), so one campaign — the
offline family under seq, mp and ray, fifo and asha for the hpo grid, in a run folder deeper
than 100 characters (``family_run``, tests/e2e/conftest.py, shared with test_mp.py) — serves
most assertions.
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
from engine.executors.ray.runtime import TAG_ENV
from engine.results.columns import GROUP_COLUMNS, INDIVIDUAL_COLUMNS
from engine.results.read import read_rows
from tests.e2e.conftest import (
    FAMILY_K,
    X_BLOCK,
    _env,
    campaign_text,
    start,
    write_campaign,
)

pytestmark = pytest.mark.slow


def _ours_alive(tags: list[str], temp_dirs: list[str]) -> list[str]:
    """Processes carrying one of our tags (environment) or temp dirs (command line)."""
    found = []
    for proc in psutil.process_iter(["pid", "cmdline"]):
        try:
            cmdline = " ".join(proc.info["cmdline"] or [])
            env = proc.environ().get(TAG_ENV)
        except (psutil.Error, OSError):
            continue
        if env in tags or any(t and t in cmdline for t in temp_dirs):
            if proc.status() != psutil.STATUS_ZOMBIE:
                found.append(f"{proc.pid} {cmdline[:120]}")
    return found


def _executor_events(cell_dirs) -> list[dict]:
    out = []
    for cell in cell_dirs:
        for attempt in sorted(cell.glob("attempt-*")):
            out += [e for e in read_events(attempt / "events.jsonl") if e["type"] == "executor"]
    return out


def test_campaign_ok_in_a_deep_run_folder(family_run):
    runs, proc = family_run.runs, family_run.proc
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    groups = read_rows(runs / "master_groups.csv")
    assert [(g["exp_id"], g["executor"], g["scheduler"]) for g in groups if g["executor"] == "ray"] \
        == [("D_ens", "ray", ""), ("D_cv", "ray", ""), ("D_hpo", "ray", "fifo"),
            ("D_hpo", "ray", "asha"), ("D_mm", "ray", "")]
    assert all(g["status"] == "ok" for g in groups)


def test_same_columns_as_seq_and_ray_facts_recorded(family_run):
    runs = family_run.runs
    header = (runs / "master_groups.csv").read_text().splitlines()[0].split(",")
    assert header == list(GROUP_COLUMNS)
    header = (runs / "master_individual.csv").read_text().splitlines()[0].split(",")
    assert header == list(INDIVIDUAL_COLUMNS)
    groups = read_rows(runs / "master_groups.csv")
    jobs = read_rows(runs / "master_individual.csv")
    seq_groups = {g["exp_id"]: g for g in groups if g["executor"] == "seq"}
    for g in (g for g in groups if g["executor"] == "ray"):
        # every column seq fills, ray fills too (ray adds its own facts)
        filled_by_seq = {c for c, v in seq_groups[g["exp_id"]].items() if v != ""}
        # (the cell loads no data for ray: data_load_s is the actors' own load, and Tune
        # trials load theirs inside the window)
        allowed_empty = {"data_load_s"} if g["mode"] == "hpo" else set()
        assert {c for c in filled_by_seq if g[c] == ""} <= allowed_empty, g["exp_id"]
        assert float(g["setup_s"]) > 0 and float(g["T_group"]) > 0
        info = json.loads(g["executor_info"])
        assert info["ray_version"] and info["num_cpus"] == len(os.sched_getaffinity(0))
        assert info["num_gpus"] == 0 and info["resources"]["CPU"] == info["num_cpus"]
        assert info["threads_per_worker"] == 1 and info["temp_dir"].startswith("/tmp/fr-")
        # ray.shutdown() normally stops everything itself; a straggler it leaves is stopped
        # by us and counted (test_nothing_of_ours_survives checks nothing is left)
        assert info["leftover_pids_stopped"] in (0, 1)
        # two at a time, or one actor for a single job (D_ens)
        parallel = min(2, FAMILY_K[g["exp_id"]])
        assert g["K"] == str(FAMILY_K[g["exp_id"]]) and g["max_parallel"] == str(parallel)
        if g["mode"] != "hpo":
            assert info["kind"] == "actors" and info["actor_threads"] == [1] * parallel
            assert float(g["data_load_s"]) == max(info["actor_data_load_s"])
            assert len(set(info["actor_pids"])) == parallel
        else:
            assert info["kind"] == "tune" and info["stopped_trial_pids_alive"] == []
    seq_jobs = {j["job_id"] for j in jobs if j["executor"] == "seq"}
    for j in (j for j in jobs if j["executor"] == "ray"):
        assert j["job_id"] in seq_jobs and j["status"] == "ok" and j["worker_pid"]
        assert j["epochs_run"] and j["early_stopped"] in ("True", "False")


def test_final_training_loss_equals_seq(family_run):
    """Same seeds, same data order, one thread: packing changes scheduling, not results."""
    runs = family_run.runs
    groups = {g["group_id"]: g for g in read_rows(runs / "master_groups.csv")}
    jobs = read_rows(runs / "master_individual.csv")
    seq = {j["job_id"]: j for j in jobs if j["executor"] == "seq"}
    compared = 0
    for j in jobs:
        if j["executor"] != "ray" or groups[j["group_id"]]["scheduler"] == "asha":
            continue
        ref = seq[j["job_id"]]
        assert float(j["final_train_loss"]) == pytest.approx(float(ref["final_train_loss"]),
                                                             rel=1e-5), j["job_id"]
        assert j["total_samples"] == ref["total_samples"]
        assert j["epochs_run"] == ref["epochs_run"] and j["early_stopped"] == "False"
        # pool actors and Tune trials hand back (issue 50): the same weights as seq's
        assert j["weights_sha256"] == ref["weights_sha256"] != "", j["job_id"]
        compared += 1
    assert compared == sum(FAMILY_K.values())


def test_asha_stops_a_trial_early_and_says_why(family_run):
    runs = family_run.runs
    groups = read_rows(runs / "master_groups.csv")
    asha = next(g for g in groups if g["scheduler"] == "asha")
    info = json.loads(asha["executor_info"])
    assert info["scheduler"]["class"] == "ASHAScheduler" and info["trials_stopped"] >= 1
    rows = [j for j in read_rows(runs / "master_individual.csv")
            if j["group_id"] == asha["group_id"]]
    stopped = [j for j in rows if j["early_stopped"] == "True"]
    assert stopped, rows
    for j in stopped:
        assert int(j["epochs_run"]) < 3
        assert j["stop_reason"].startswith(f"asha: stopped after epoch {j['epochs_run']} of 3")
        assert float(j["final_train_loss"]) > 0 and float(j["final_val_loss"]) > 0
    for j in rows:
        if j["early_stopped"] == "False":
            assert j["epochs_run"] == "3" and j["stop_reason"] == ""
        # every trial hands its weights back, a stopped one as of its stop (issue 50)
        assert len(j["weights_sha256"]) == 64, j
    # issue 46: Tune's decisions in arrival order, named by the row, in the attempt folder
    from engine.results import decisions

    assert asha["decisions"].endswith(f"attempt-{asha['attempt']}/{decisions.FILE}")
    doc = decisions.read(runs / asha["decisions"])
    assert doc["executor"] == "ray" and doc["scheduler"] == "asha"
    assert {e["trial"] for e in doc["decisions"] if e["decision"] == "stop"} == \
        {j["job_id"] for j in stopped}
    assert all(g["decisions"] == "" for g in groups if g["scheduler"] in ("", "fifo"))


def test_nothing_of_ours_survives_and_logs_are_kept(family_run):
    runs = family_run.runs
    cells = sorted((runs / "e2e-family" / "cells").glob("*-ray-*"))
    events = _executor_events(cells)
    assert len(events) == 5
    tags = [e["tag"] for e in events]
    temp_dirs = [e["temp_dir"] for e in events]
    assert _ours_alive(tags, temp_dirs) == []
    assert not any(Path(t).exists() for t in temp_dirs)
    for cell in cells:
        logs = cell / "attempt-1" / "ray-logs"
        assert logs.is_dir() and not logs.is_symlink()  # copied out of the temp dir
        assert (logs / "raylet.out").is_file()
        assert not list((cell / "attempt-1" / "cleanup").glob("*.json"))  # released


def test_hung_ray_cell_killed_by_the_watchdog_leaves_nothing(tmp_path):
    """A job that blocks inside a Ray actor: the watchdog kills the cell, the runner's
    cleanup stops the runtime, which runs in sessions of its own.

    An idle Ray runtime (gcs, raylet, log monitor, agents, idle workers) uses about 6 % of
    a core, above the watchdog's default ``cpu_fraction`` (5 %), so this campaign raises
    it to 15 %: below any training or start-up, above Ray's own background."""
    write_campaign(tmp_path, campaign_text("ray-hung", "X_block", ["ray"], """
[watchdog]
interval_s = 1.0
suspect_after = 2
hung_after = 4
cpu_fraction = 0.15
action = "kill"
"""), X_BLOCK)
    proc = start(tmp_path, "campaign.toml", module="engine.runner")
    cell_dir = tmp_path / "runs" / "ray-hung" / "cells"
    seen: list[dict] = []
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and proc.poll() is None:
        seen = _executor_events(sorted(cell_dir.glob("*"))) if cell_dir.exists() else []
        if seen:
            break
        time.sleep(0.5)
    assert seen, "the ray cell never started its runtime"
    tag, temp_dir = seen[0]["tag"], seen[0]["temp_dir"]
    assert _ours_alive([tag], [temp_dir])  # the runtime really runs while the job blocks
    try:
        out, err = proc.communicate(timeout=240)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            proc.communicate(timeout=60)
    assert proc.returncode == 1, err[-2000:]
    groups = read_rows(tmp_path / "runs" / "master_groups.csv")
    assert [(g["exp_id"], g["status"]) for g in groups] == [("X_block", "killed")]
    runner = read_events(tmp_path / "runs" / "ray-hung" / "runner.jsonl")
    cleanup = [e for e in runner if e["type"] == "cleanup"]
    assert cleanup and "Ray process" in " ".join(cleanup[0]["messages"])
    assert _ours_alive([tag], [temp_dir]) == []
    assert not Path(temp_dir).exists()
    # the actor's own stacks, where the job blocks, beside the cell's (engine.stacks)
    stacks = next(cell_dir.glob("*/attempt-1/stacks"))
    actor = [p.read_text() for p in stacks.glob("ray-worker-*.txt")]
    assert len(actor) == 1 and "in forward" in actor[0] and "in train" in actor[0]
    assert list(stacks.glob("cell-*.txt"))


UNSCHEDULABLE = r"""
import json, sys, time
from pathlib import Path
import ray
from engine.executors.ray import runtime as raytools
from engine.errors import FugueError
from engine.executors.ray import actors as ray_actors

attempt = Path(sys.argv[1])
runtime = raytools.start_runtime(attempt_dir=attempt, num_cpus=1, num_gpus=0)
out = {}
try:
    nodes = [n["Resources"] for n in ray.nodes() if n.get("Alive")]
    t0 = time.monotonic()
    try:
        raytools.check_schedulable({"CPU": 0.5, "GPU": 0.5}, 2, nodes)
    except FugueError as exc:
        out["check"] = [str(exc), time.monotonic() - t0]
    # The backstop for what the check cannot see: actors Ray accepts but never places.
    ray_actors.ACTOR_START_TIMEOUT_S = 3
    ex = ray_actors.RayExecutor()
    ex.parallel, ex.per_actor = 2, {"CPU": 0.5, "GPU": 0.5}

    import torch
    from engine.train.loop import TrainSettings

    class Ctx:
        threads, settings = 1, TrainSettings(device=torch.device("cpu"))
    t0 = time.monotonic()
    try:
        ex._start_actors([], Ctx())
    except FugueError as exc:
        out["backstop"] = [str(exc), time.monotonic() - t0]
    for a in ex.actors:
        ray.kill(a)
finally:
    raytools.shutdown(runtime, attempt)
out["alive"] = raytools.find_ours(runtime.temp_dir, runtime.tag)
out["alive"] = [p.pid for p in out["alive"]]
print(json.dumps(out))
"""


def test_unschedulable_fractional_request_fails_fast_on_real_ray(tmp_path):
    proc = subprocess.run([sys.executable, "-c", UNSCHEDULABLE, str(tmp_path)], cwd=tmp_path,
                          env=_env(no_data=True), capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    message, seconds = out["check"]
    assert "\n" not in message and seconds < 1
    assert "2 actors of {CPU 0.5, GPU 0.5} each can never be scheduled: only 0 fit" in message
    message, seconds = out["backstop"]
    assert "\n" not in message and seconds < 10
    assert "did not start within 3 s" in message
    assert out["alive"] == []
    assert (tmp_path / "ray-logs" / "raylet.out").is_file()
