"""Early stopping inside the stacked model (issue 25): under sha, unified_model's members
wait at each rung (across buckets), the pruned ones retire there, the decisions are seq's,
and the survivors equal an unpruned unified run bit for bit (kernels = "exact", retire =
"remove": the re-stacked survivors are exact copies). asha decides as epochs end."""

from __future__ import annotations

import dataclasses

import pytest

torch = pytest.importorskip("torch")

#: parity-sensitive: scripts/parity_matrix.py re-runs this module under other kernels
pytestmark = pytest.mark.parity

from engine.errors import ConfigError  # noqa: E402
from engine.executors.base import CellContext  # noqa: E402
from engine.executors.unified.executor import UnifiedExecutor  # noqa: E402
from engine.train import early_stop  # noqa: E402
from engine.train.loop import TrainSettings  # noqa: E402
from tests.unit.engine.executors.test_hpo_seq_schedulers import (  # noqa: E402
    CPU,
    EPOCHS,
    wine,  # noqa: F401 - the fixture
)
from tests.unit.engine.executors.test_hpo_seq_schedulers import run as seq_run  # noqa: E402
from tests.unit.engine.executors.test_hpo_seq_schedulers import trials as seq_trials  # noqa: E402


def trials():
    """seq's trials in two buckets (batch sizes 16 and 32): members reach rungs at
    different global steps, so a rung waits across buckets."""
    return [dataclasses.replace(j, batch_size=16 if j.index % 2 else 32) for j in seq_trials()]


def unified(data, jobs, scheduler, **options):
    ctx = CellContext(settings=TrainSettings(device=CPU), datasets=lambda name: data,
                      emit=lambda kind, **f: None, threads=1,
                      scheduler=None if scheduler == "fifo" else scheduler,
                      options={"scheduler": scheduler, "kernels": "exact", "verify": False,
                               **options})
    executor = UnifiedExecutor()
    return executor.run(jobs, ctx), ctx, executor


@pytest.fixture(scope="module")
def unpruned(wine):  # noqa: F811
    return unified(wine, trials(), "fifo")[0]


def test_sha_in_the_stack_matches_seq_and_survivors_are_exact(wine, unpruned):  # noqa: F811
    results, ctx, executor = unified(wine, trials(), "sha", grace_period=1,
                                     reduction_factor=2)
    assert len(executor.runs) == 2  # two buckets: the rung waited across them
    curves = {i: [h["val_loss"] for h in r.history] for i, r in enumerate(unpruned)}
    want = early_stop.sha_decisions(curves, {i: EPOCHS for i in curves}, "min", 1, 2)
    got = {i: r.epochs_run for i, r in enumerate(results) if r.early_stopped}
    assert got == {i: s.epoch for i, s in want.items()} and got
    # The same decisions as seq on the same trials.
    seq_results, _ = seq_run(wine, trials(), "sha", grace_period=1, reduction_factor=2)
    assert got == {i: r.epochs_run for i, r in enumerate(seq_results) if r.early_stopped}
    assert ctx.group["trials_stopped"] == len(got) and ctx.group["scheduler"] == "sha"
    for i, r in enumerate(results):
        ref = unpruned[i]
        assert r.status == "ok"
        assert [h["val_loss"] for h in r.history] == curves[i][:r.epochs_run]
        if r.early_stopped:
            assert r.stop_reason.startswith(f"sha: stopped after epoch {r.epochs_run} of 4")
        else:  # bit for bit
            assert (r.final_val_loss, r.final_val_acc, r.final_train_loss,
                    r.final_train_acc, r.samples) == (ref.final_val_loss, ref.final_val_acc,
                                                      ref.final_train_loss,
                                                      ref.final_train_acc, ref.samples)
    # Pruned members left their stacks (retire = "remove" re-stacked the survivors).
    assert any(run.restacks for run in executor.runs)
    assert ctx.group["executor_info"]["early_stop"]["order"].startswith("members wait")


def test_asha_in_the_stack_stops_members(wine, unpruned):  # noqa: F811
    results, ctx, _ = unified(wine, trials(), "asha", grace_period=1, reduction_factor=2)
    stopped = [r for r in results if r.early_stopped]
    assert stopped and ctx.group["trials_stopped"] == len(stopped)
    for r in results:  # every epoch it ran is the unpruned run's
        i = r.job.index
        assert [h["val_loss"] for h in r.history] == \
            [h["val_loss"] for h in unpruned[i].history][:r.epochs_run]


def test_sha_refuses_several_chunks(wine):  # noqa: F811
    with pytest.raises(ConfigError, match="sha needs every trial in one chunk"):
        unified(wine, trials(), "sha", max_parallel=2)


def test_sha_survivors_within_the_fidelity_tolerance_under_batched_kernels(wine):  # noqa: F811
    """Default batched kernels: re-stacking the survivors changes the stack's size, so
    vmap's accumulation order may change; the survivors stay within docs/fidelity.md's
    float32 tolerance (1e-4 relative) of the unpruned stacked run."""
    def batched(scheduler):
        return unified(wine, trials(), scheduler, kernels="batched", grace_period=1,
                       reduction_factor=2)[0]

    pruned, full = batched("sha"), batched("fifo")
    survivors = [i for i, r in enumerate(pruned) if not r.early_stopped]
    assert survivors and len(survivors) < len(pruned)
    for i in survivors:
        for got, want in zip(pruned[i].history, full[i].history, strict=True):
            assert got["val_loss"] == pytest.approx(want["val_loss"], rel=1e-4)
        assert pruned[i].final_val_acc == pytest.approx(full[i].final_val_acc, rel=1e-4)
