"""seq under hyperband (issue 25): the trials sit in the brackets Ray Tune's
``AsyncHyperBandScheduler`` draws for the campaign seed (recorded), and seq stops exactly
what Ray's own scheduler stops when it is fed the same trials' epochs in seq's order (job
after job)."""

from __future__ import annotations

import numpy as np
import pytest

from tests.unit.engine.executors.test_hpo_seq_schedulers import (  # noqa: F401
    EPOCHS,
    fifo,
    run,
    trials,
    wine,
)

torch = pytest.importorskip("torch")


class _Trial:
    def __init__(self, i: int) -> None:
        self.trial_id = f"t{i}"
        self.config = {"job": i}


def test_seq_hyperband_stops_what_ray_tune_stops(wine, fifo):  # noqa: F811
    from ray.tune.schedulers import AsyncHyperBandScheduler, TrialScheduler

    from engine.train import early_stop

    jobs = trials()
    results, ctx = run(wine, jobs, "hyperband", grace_period=1, reduction_factor=2)
    info = ctx.group["executor_info"]["early_stop"]
    brackets = early_stop.hyperband_brackets(EPOCHS, 1, 2)
    ray = AsyncHyperBandScheduler(time_attr="epoch", metric="val_loss", mode="min",
                                  max_t=EPOCHS, grace_period=1, reduction_factor=2,
                                  brackets=brackets)
    np.random.seed(ctx.seed)  # Ray's draw, seeded as ours
    for i in range(len(jobs)):
        ray.on_trial_add(None, _Trial(i))
    drawn = [ray._brackets.index(ray._trial_info[f"t{i}"]) for i in range(len(jobs))]
    assert info["brackets_of"] == {j.job_id: b for j, b in zip(jobs, drawn, strict=True)}
    assert info["seed"] == ctx.seed
    # Ray fed the unpruned curves (a survivor equals its unpruned run) in seq's order.
    want = {}
    for i, r in enumerate(fifo):
        for record in r.history:
            decision = ray.on_trial_result(None, _Trial(i), {"epoch": record["epoch"],
                                                            "val_loss": record["val_loss"]})
            if decision == TrialScheduler.STOP and record["epoch"] < EPOCHS:
                want[i] = record["epoch"]
                break
    got = {i: r.epochs_run for i, r in enumerate(results) if r.early_stopped}
    assert got == want and got  # the case stops something
    assert all(results[i].stop_reason.startswith(f"hyperband: stopped after epoch {e} of")
               for i, e in got.items())
