"""mp's hand-back (issue 50): a worker whose job ended ok holds its weights past the group
window, digests (and saves) them when the cell asks, then exits; a worker never asked exits
when the cell lets it go (teardown) — no process is left behind. The digest is seq's: the
same job, the same loop, one thread."""

from __future__ import annotations

import json
from pathlib import Path

import psutil
import pytest
import torch

from engine.define.workloads import JobSpec
from engine.executors.base import CellContext
from engine.executors.mp.executor import MPExecutor
from engine.train.loop import TrainSettings
from tests.unit.engine.models.trained import hpo_jobs, seq_digests

pytestmark = pytest.mark.slow


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def _jobs() -> list[JobSpec]:
    return [JobSpec(job_id=f"J{i}", exp_id="X", index=i, seed=42 + i, model="mlp",
                    dataset="wine", task=None, batch_size=16, epochs=1, lr=0.01,
                    optimizer="sgd") for i in range(2)]


def _ctx(tmp_path: Path, **options) -> CellContext:
    return CellContext(settings=TrainSettings(device=torch.device("cpu")), datasets=None,
                       emit=lambda kind, **f: None, threads=1, options=options,
                       max_parallel=1, attempt_dir=tmp_path / "attempt-1")


def test_workers_hand_back_after_the_window_and_exit(tmp_path):
    jobs = _jobs()
    ctx = _ctx(tmp_path, start="forkserver")
    executor = MPExecutor()
    executor.setup(jobs, ctx)
    try:
        results = executor.run(jobs, ctx)
        pids = [r.worker_pid for r in results]
        # the window closed with both workers alive, holding their weights (max_parallel
        # 1: the second started while the first waited, outside the slots)
        assert sorted(executor.holding) == [0, 1]
        assert not any(_gone(p) for p in pids)
        backs = executor.hand_back(jobs, results, ctx, {"J1"}, "mp")
        assert all(_gone(p) for p in pids)  # each left after its hand-back
    finally:
        executor.teardown(ctx)
    assert set(backs) == {"J0", "J1"}
    assert {j: b.digest for j, b in backs.items()} == seq_digests(jobs)
    assert backs["J0"].save_s is None and backs["J1"].save_error is None
    folder = tmp_path / "attempt-1" / "models"
    assert sorted(p.name for p in folder.iterdir()) == ["J1.json", "J1.safetensors"]
    meta = json.loads((folder / "J1.json").read_text())
    assert meta["executor"] == "mp" and meta["weights_sha256"] == backs["J1"].digest
    info = ctx.group["executor_info"]
    assert [info["workers"][j]["exit"] for j in ("J0", "J1")] == [0, 0]


def test_a_worker_never_asked_leaves_at_teardown(tmp_path):
    jobs = _jobs()[:1]
    ctx = _ctx(tmp_path, start="spawn")
    executor = MPExecutor()
    executor.setup(jobs, ctx)
    try:
        results = executor.run(jobs, ctx)
        assert executor.holding and not _gone(results[0].worker_pid)
    finally:
        executor.teardown(ctx)
    assert _gone(results[0].worker_pid) and not executor.holding
    assert ctx.group["executor_info"]["workers"]["J0"]["exit"] == 0


@pytest.mark.parametrize("scheduler", ["asha", "sha"])
def test_stopped_trials_hold_their_weights_as_of_the_decision(tmp_path, scheduler):
    """A trial a pruning scheduler stops waits at the deciding epoch for the cell's verdict
    (asha: each epoch it may be judged at; sha: each rung), so it stops there and holds its
    weights as of that epoch for the hand-back: its digest is that of the same job trained
    alone for the epochs it ran. ``save_models = "best"`` writes the group's best trial
    only, and it loads back with its digest."""
    import dataclasses

    from engine.models import load
    from engine.models.digest import weights_sha256
    from engine.models.hand_back import save_selection

    jobs = hpo_jobs()
    ctx = CellContext(settings=TrainSettings(device=torch.device("cpu")), datasets=None,
                      emit=lambda kind, **f: None, threads=1, scheduler=scheduler,
                      options={"start": "forkserver", "grace_period": 1,
                               "reduction_factor": 2},
                      max_parallel=1 if scheduler == "asha" else 3,
                      attempt_dir=tmp_path / "attempt-1", save_models="best")
    executor = MPExecutor()
    executor.setup(jobs, ctx)
    try:
        results = executor.run(jobs, ctx)
        stopped = {r.job.job_id: r for r in results if r.early_stopped}
        assert "H2" in stopped and "H0" not in stopped
        assert all(r.epochs_run < 3 for r in stopped.values())
        # every trial's worker holds its weights past the window, the stopped ones too
        assert sorted(executor.holding) == [0, 1, 2]
        save = save_selection("best", results)
        backs = executor.hand_back(jobs, results, ctx, save, "mp")
    finally:
        executor.teardown(ctx)
    alone = [dataclasses.replace(r.job, epochs=r.epochs_run) for r in results]
    assert {j: b.digest for j, b in backs.items()} == seq_digests(alone)
    assert all(len(b.digest) == 64 for b in backs.values())
    (best,) = save
    folder = tmp_path / "attempt-1" / "models"
    assert sorted(p.name for p in folder.iterdir()) == [f"{best}.json", f"{best}.safetensors"]
    module, meta = load(folder / f"{best}.safetensors")
    assert meta["weights_sha256"] == backs[best].digest == weights_sha256(module.state_dict())
    assert meta["early_stopped"] == (best in stopped)
    info = ctx.group["executor_info"]
    assert all(info["workers"][j.job_id]["exit"] == 0 for j in jobs)
