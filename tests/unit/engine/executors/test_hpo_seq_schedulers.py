"""seq under early-stopping schedulers (issue 25): sha's decisions are those of the pure
rule on the trials' own per-epoch metrics, pruned trials stop at their rung with the
reason recorded, survivors equal an unpruned run bit for bit (interleaving does not change
a trial), and asynchronous schedulers decide as results arrive."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from engine.datasets import load_dataset  # noqa: E402
from engine.define.workloads import JobSpec, SplitSpec  # noqa: E402
from engine.executors.base import CellContext  # noqa: E402
from engine.executors.seq import SeqExecutor  # noqa: E402
from engine.train import early_stop  # noqa: E402
from engine.train.data import to_device  # noqa: E402
from engine.train.loop import TrainSettings  # noqa: E402

CPU = torch.device("cpu")
EPOCHS = 4


@pytest.fixture(scope="module")
def wine():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield to_device(load_dataset("wine"), CPU)
    torch.set_num_threads(threads)


def trials(n: int = 6) -> list[JobSpec]:
    """Tiny hpo trials: an MLP with BatchNorm and dropout (the global RNG matters) on wine,
    lr spread so that the trials rank differently."""
    lrs = [0.5, 0.001, 0.05, 0.0003, 0.02, 0.1, 0.005, 0.2][:n]
    return [JobSpec(job_id=f"T_t{i}", exp_id="T", index=i, seed=42 + i, model="mlp_bn",
                    dataset="wine", task=None, batch_size=32, epochs=EPOCHS, lr=lr,
                    optimizer="sgd", model_kwargs={"hidden": 8, "dropout": 0.2},
                    split=SplitSpec("holdout", 0, 0.25), validate_every_epoch=True)
            for i, lr in enumerate(lrs)]


def run(data, jobs, scheduler, events=None, **options):
    ctx = CellContext(settings=TrainSettings(device=CPU), datasets=lambda name: data,
                      emit=lambda kind, **f: (events if events is not None else []).append(
                          (kind, f)),
                      threads=1, scheduler=None if scheduler == "fifo" else scheduler,
                      options={"scheduler": scheduler, **options})
    return SeqExecutor().run(jobs, ctx), ctx


@pytest.fixture(scope="module")
def fifo(wine):
    return run(wine, trials(), "fifo")[0]


def test_sha_stops_what_the_rule_says_and_survivors_equal_the_unpruned_run(wine, fifo):
    events = []
    results, ctx = run(wine, trials(), "sha", events, grace_period=1, reduction_factor=2)
    curves = {i: [h["val_loss"] for h in r.history] for i, r in enumerate(fifo)}
    want = early_stop.sha_decisions(curves, {i: EPOCHS for i in curves}, "min", 1, 2)
    got = {i: r.epochs_run for i, r in enumerate(results) if r.early_stopped}
    assert got == {i: s.epoch for i, s in want.items()} and got
    assert ctx.group["trials_stopped"] == len(want) and ctx.group["scheduler"] == "sha"
    for i, r in enumerate(results):
        assert r.status == "ok"
        ref = fifo[i]
        # Every epoch it ran equals the unpruned run's, bit for bit (dropout RNG kept per
        # trial across the rung-by-rung interleaving).
        assert [h["val_loss"] for h in r.history] == curves[i][:r.epochs_run]
        if r.early_stopped:
            assert r.stop_reason.startswith(f"sha: stopped after epoch {r.epochs_run} of 4")
            assert r.final_train_acc is None and r.samples < ref.samples
        else:
            assert (r.final_val_loss, r.final_val_acc, r.final_train_loss,
                    r.final_train_acc, r.samples) == (ref.final_val_loss, ref.final_val_acc,
                                                      ref.final_train_loss,
                                                      ref.final_train_acc, ref.samples)
    info = ctx.group["executor_info"]["early_stop"]
    assert info["order"].startswith("rung by rung") and len(info["decisions"]) == len(want)
    # Every job started and ended exactly once, whatever the interleaving.
    kinds = [k for k, _ in events]
    assert kinds.count("job_started") == kinds.count("job_done") == 6


def test_asha_decides_in_arrival_order(wine, fifo):
    results, ctx = run(wine, trials(), "asha", grace_period=1, reduction_factor=2)
    asha = early_stop.Asha(EPOCHS, "min", 1, 2)
    want = {}
    for i, r in enumerate(fifo):  # seq's arrival order: job after job, epoch by epoch
        for h in r.history[:-1]:
            if asha.on_result(i, h["epoch"], h["val_loss"]):
                want[i] = h["epoch"]
                break
    got = {i: r.epochs_run for i, r in enumerate(results) if r.early_stopped}
    assert got == want and got
    assert ctx.group["trials_stopped"] == len(got)
    assert all(r.stop_reason.startswith("asha: stopped after epoch") for r in results
               if r.early_stopped)
