"""hyperband's brackets and ray's Tune schedulers (issue 25): our bracket assignment is the
one Ray Tune's ``AsyncHyperBandScheduler`` draws (same seed, trials added in job order),
our hyperband stops what Ray's stops on the same results in the same arrival order, ray's
cells give Tune's scheduler that same assignment whatever numpy's global generator did,
ray judges regression on the R² (mode max) like every executor, and ray's median rule
never pauses a trial (Ray 2.x pauses on its first check: our workaround)."""

from __future__ import annotations

import random

import numpy as np
import pytest

from engine.train import early_stop as es


class _Trial:
    def __init__(self, i: int) -> None:
        self.trial_id = f"t{i}"
        self.config = {"job": i}
        self.status = "RUNNING"


def _curves(n: int, epochs: int, seed: int, mode: str = "min") -> dict[int, list[float]]:
    rng = random.Random(seed)
    if mode == "min":  # losses, falling
        return {i: [rng.uniform(0.1, 2.0) / (1 + 0.1 * e) for e in range(epochs)]
                for i in range(n)}
    return {i: [1 - rng.uniform(0.1, 2.0) / (1 + 0.1 * e) for e in range(epochs)]  # R², rising
            for i in range(n)}


def _arrivals(curves: dict[int, list[float]], seed: int) -> list[tuple[int, int]]:
    rng = random.Random(seed)
    pending = {i: 1 for i in curves}
    out = []
    while pending:
        i = rng.choice(sorted(pending))
        out.append((i, pending[i]))
        pending[i] += 1
        if pending[i] > len(curves[i]):
            del pending[i]
    return out


def _ray_hyperband(max_t: int, grace: int, eta: int, metric: str = "val_loss",
                   mode: str = "min"):
    from ray.tune.schedulers import AsyncHyperBandScheduler

    brackets = es.hyperband_brackets(max_t, grace, eta)
    return AsyncHyperBandScheduler(time_attr="epoch", metric=metric, mode=mode, max_t=max_t,
                                   grace_period=grace, reduction_factor=eta,
                                   brackets=brackets)


@pytest.mark.parametrize("seed,max_t,grace,eta", [(0, 9, 1, 3), (42, 8, 1, 2), (7, 27, 1, 3),
                                                  (2**32 + 5, 12, 2, 2)])
def test_brackets_are_the_ones_ray_tune_draws(seed, max_t, grace, eta):
    ray = _ray_hyperband(max_t, grace, eta)
    sizes = [len(b._rungs) for b in ray._brackets]
    assert len(sizes) > 1
    np.random.seed(seed % 2**32)  # Ray draws from numpy's global generator
    trials = [_Trial(i) for i in range(40)]
    for t in trials:
        ray.on_trial_add(None, t)
    theirs = [ray._brackets.index(ray._trial_info[t.trial_id]) for t in trials]
    ours = es.hyperband_brackets_of(seed, 40, sizes)
    assert ours == theirs
    assert len(set(ours)) > 1  # more than one bracket is used: the case tests something
    # Trial i's bracket does not depend on how many trials follow it.
    assert es.hyperband_brackets_of(seed, 7, sizes) == ours[:7]
    asha = es.Asha(max_t, "min", grace, eta, len(sizes), seed=seed)
    assert [asha.bracket_of(i) for i in (39, 0, 5)] == [ours[39], ours[0], ours[5]]


@pytest.mark.parametrize("seed,mode", [(0, "min"), (3, "min"), (5, "max")])
def test_hyperband_agrees_with_ray_tune(seed, mode):
    """Our hyperband and Ray Tune's AsyncHyperBandScheduler (brackets drawn with the same
    seed) stop the same trials at the same epochs on the same results in the same order —
    losses (min) and R² (max)."""
    from ray.tune.schedulers import TrialScheduler

    max_t, grace, eta = 9, 1, 3
    metric = "val_loss" if mode == "min" else "val_acc"
    curves = _curves(16, max_t, seed, mode)
    ray = _ray_hyperband(max_t, grace, eta, metric, mode)
    np.random.seed(seed)
    trials = {i: _Trial(i) for i in curves}
    for t in trials.values():
        ray.on_trial_add(None, t)
    ours = es.asynchronous("hyperband", max_t, mode, grace, eta, seed=seed)
    stopped_ray: dict[int, int] = {}
    stopped_ours: dict[int, int] = {}
    for i, epoch in _arrivals(curves, seed):
        value = curves[i][epoch - 1]
        if i not in stopped_ray:
            decision = ray.on_trial_result(None, trials[i], {"epoch": epoch, metric: value})
            if decision == TrialScheduler.STOP and epoch < max_t:
                stopped_ray[i] = epoch
        if i not in stopped_ours and ours.on_result(i, epoch, value):
            stopped_ours[i] = epoch
    assert stopped_ours == stopped_ray
    assert stopped_ours  # the case stops something


def test_ray_cells_give_tune_our_brackets_whatever_numpy_did():
    """``make_scheduler('hyperband')``: each trial (job i) in bracket
    ``hyperband_brackets_of(seed)[i]``, recorded in the scheduler's facts, even when
    numpy's global generator was used (or seeded differently) before the trials came."""
    from engine.executors.ray.tune import make_scheduler

    scheduler, facts = make_scheduler("hyperband", 9, 1, 3, seed=11, trials=12)
    scheduler.set_search_properties("val_loss", "min")
    sizes = [len(b._rungs) for b in scheduler._brackets]
    want = es.hyperband_brackets_of(11, 12, sizes)
    assert facts["brackets_of"] == want and facts["seed"] == 11
    np.random.seed(999)
    np.random.random(17)
    trials = [_Trial(i) for i in reversed(range(12))]  # any order of addition
    for t in trials:
        scheduler.on_trial_add(None, t)
    got = {t.config["job"]: scheduler._brackets.index(scheduler._trial_info[t.trial_id])
           for t in trials}
    assert [got[i] for i in range(12)] == want


def test_ray_asha_judges_regression_on_r2_and_records_it():
    """Tune's scheduler set as a regression cell sets it (``val_acc``, max): it stops what
    our asha stops on the same R² curves, and records the R² it stopped on."""
    from ray.tune.schedulers import TrialScheduler

    from engine.executors.ray.tune import make_scheduler

    assert es.objective("r2") == ("val_acc", "max")
    curves = _curves(12, 9, 4, "max")
    scheduler, _ = make_scheduler("asha", 9, 1, 2)
    scheduler.set_search_properties("val_acc", "max")
    ours = es.asynchronous("asha", 9, "max", 1, 2)
    trials = {i: _Trial(i) for i in curves}
    for t in trials.values():
        scheduler.on_trial_add(None, t)
    stopped_ray, stopped_ours = {}, {}
    for i, epoch in _arrivals(curves, 4):
        value = curves[i][epoch - 1]
        if i not in stopped_ray:
            # val_loss carries the same numbers: judged as a loss (min), the best would stop
            result = {"epoch": epoch, "val_acc": value, "val_loss": value}
            if (scheduler.on_trial_result(None, trials[i], result) == TrialScheduler.STOP
                    and epoch < 9):
                stopped_ray[i] = epoch
        if i not in stopped_ours and ours.on_result(i, epoch, value):
            stopped_ours[i] = epoch
    assert stopped_ray == stopped_ours and stopped_ours
    recorded = {i: s for i, s in scheduler.fugue_stops.items() if s[0] < 9}  # 9: finished
    assert {i: e for i, (e, _) in recorded.items()} == stopped_ray
    assert all(v == curves[i][e - 1] for i, (e, v) in recorded.items())


def test_ray_median_never_pauses_and_agrees_with_ours():
    """With trials pending, Ray 2.x's MedianStoppingRule pauses a trial on its first check
    with too few samples despite ``min_time_slice`` (a paused trial of ours has no
    checkpoint: Tune would start it again from epoch 1, training and timing it twice). Ours
    (``RecordingMedian``) never pauses and stops what ``early_stop.Median`` stops."""
    from ray.tune.experiment import Trial
    from ray.tune.schedulers import MedianStoppingRule, TrialScheduler

    from engine.executors.ray.tune import make_scheduler

    class _Pending:  # Tune's controller as the rule sees it: another trial pending
        def get_live_trials(self):
            t = _Trial(99)
            t.status = Trial.PENDING
            return [t]

    # The Ray behaviour worked around (if a Ray upgrade fixes it, this says so).
    plain = MedianStoppingRule(time_attr="epoch", metric="val_loss", mode="min",
                               grace_period=1, min_samples_required=3,
                               min_time_slice=10**9, hard_stop=True)
    first = _Trial(0)
    assert plain.on_trial_result(_Pending(), first, {"epoch": 1, "val_loss": 1.0}) \
        == TrialScheduler.PAUSE

    curves = _curves(8, 6, 5)
    scheduler, facts = make_scheduler("median", 6, 1, 2)
    scheduler.set_search_properties("val_loss", "min")
    ours = es.Median("min", 1)
    trials = {i: _Trial(i) for i in curves}
    decisions = set()
    stopped_ray, stopped_ours = {}, {}
    for i, epoch in _arrivals(curves, 11):
        value = curves[i][epoch - 1]
        if i not in stopped_ray:
            decision = scheduler.on_trial_result(_Pending(), trials[i],
                                                 {"epoch": epoch, "val_loss": value})
            decisions.add(decision)
            if decision == TrialScheduler.STOP:
                stopped_ray[i] = epoch
        if i not in stopped_ours and ours.on_result(i, epoch, value):
            stopped_ours[i] = epoch
    assert TrialScheduler.PAUSE not in decisions
    assert stopped_ray == stopped_ours and stopped_ours
    assert facts["hard_stop"] is True


def test_bracket_record_for_executor_info():
    ids = [f"H_t{i}" for i in range(5)]
    hyperband = es.asynchronous("hyperband", 9, "min", 1, 3, seed=5)
    want = es.hyperband_brackets_of(5, 5, hyperband.sizes)
    assert es.bracket_record(hyperband, ids) == {
        "seed": 5, "brackets_of": dict(zip(ids, want, strict=True))}
    assert es.bracket_record(es.asynchronous("asha", 9, "min", 1, 3), ids) == {}
    assert es.bracket_record(None, ids) == {}
