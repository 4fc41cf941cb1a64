"""Early-stopping decisions (issue 25, engine/train/early_stop.py): sha's rung rule and its
order independence, our asha and median against Ray Tune's own schedulers on the same
per-epoch losses in the same arrival order, and the warning that is true."""

from __future__ import annotations

import itertools
import random

import pytest

from engine.train import early_stop as es


def _curves(n: int, epochs: int, seed: int = 0) -> dict[int, list[float]]:
    rng = random.Random(seed)
    return {i: [rng.uniform(0.1, 2.0) / (1 + 0.1 * e) for e in range(epochs)]
            for i in range(n)}


def test_sha_rungs_and_survivors():
    assert es.sha_rungs(12, 1, 2) == [1, 2, 4, 8]
    assert es.sha_rungs(12, 2, 3) == [2, 6]
    assert es.sha_rungs(4, 4, 2) == []
    # Top 1/eta continue, at least one; ties to the lower index; NaN last.
    assert es.sha_survivors({0: 0.5, 1: 0.2, 2: 0.9, 3: 0.1}, "min", 2) == {1, 3}
    assert es.sha_survivors({0: 0.5, 1: 0.2, 2: 0.9, 3: 0.1}, "max", 2) == {0, 2}
    assert es.sha_survivors({0: 0.3, 1: 0.3, 2: 0.9}, "min", 3) == {0}
    assert es.sha_survivors({0: float("nan"), 1: 5.0}, "min", 2) == {1}
    assert es.sha_survivors({4: 1.0}, "min", 4) == {4}


def test_sha_decisions_prune_to_the_budget():
    curves = _curves(8, 8)
    budgets = {i: 8 for i in curves}
    stops = es.sha_decisions(curves, budgets, "min", 1, 2)
    # Rungs 1, 2, 4: 8 -> 4 -> 2 -> 1 trials.
    assert sorted(s.epoch for s in stops.values()) == [1, 1, 1, 1, 2, 2, 4]
    winner = set(curves) - set(stops)
    assert len(winner) == 1
    # The four stopped at rung 1 are exactly the four worst at epoch 1.
    worst = sorted(curves, key=lambda i: curves[i][0])[4:]
    assert {s.trial for s in stops.values() if s.epoch == 1} == set(worst)
    assert stops[worst[0]].reason(8, "val_loss").startswith("sha: stopped after epoch 1 of 8")


@pytest.mark.parametrize("seed", range(3))
def test_rung_driver_decides_the_same_in_any_arrival_order(seed):
    """Rungs (the driver executors use) matches sha_decisions whatever order results come
    in: trials run at different speeds and wait at each rung."""
    curves = _curves(9, 9, seed)
    budgets = {i: 9 if i % 3 else 6 for i in curves}  # some trials have smaller budgets
    want = es.sha_decisions(curves, budgets, "min", 1, 3)
    rng = random.Random(seed)
    rungs = es.Rungs(budgets, "min", 1, 3)
    epoch = {i: 0 for i in curves}
    waiting: set[int] = set()
    running = set(curves)
    while running:
        movable = sorted(running - waiting)
        if not movable:
            raise AssertionError("deadlock: every running trial waits")
        i = rng.choice(movable)
        epoch[i] += 1
        rungs.report(i, epoch[i], curves[i][epoch[i] - 1])
        if epoch[i] >= budgets[i]:
            running.discard(i)
        elif rungs.is_rung(epoch[i], i):
            waiting.add(i)
        for rung in rungs.rungs:
            if rungs.ready(rung):
                for stop in rungs.decide(rung):
                    running.discard(stop.trial)
                waiting -= {t for t in waiting if epoch[t] == rung}
    assert rungs.stops == want


class _Trial:
    def __init__(self, i: int) -> None:
        self.trial_id = str(i)


def _arrivals(curves: dict[int, list[float]], seed: int) -> list[tuple[int, int]]:
    """An interleaved arrival order of (trial, epoch) results."""
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


@pytest.mark.parametrize("seed,grace,eta", [(0, 1, 2), (1, 1, 3), (2, 2, 2), (3, 1, 4)])
def test_asha_agrees_with_ray_tune(seed, grace, eta):
    """Our asha and Ray Tune's ASHAScheduler stop the same trials at the same epochs on the
    same per-epoch losses arriving in the same order."""
    from ray.tune.schedulers import AsyncHyperBandScheduler, TrialScheduler

    curves = _curves(12, 9, seed)
    ray = AsyncHyperBandScheduler(time_attr="epoch", metric="val_loss", mode="min", max_t=9,
                                  grace_period=grace, reduction_factor=eta, brackets=1)
    ours = es.Asha(9, "min", grace, eta)
    trials = {i: _Trial(i) for i in curves}
    for t in trials.values():
        ray.on_trial_add(None, t)
    stopped_ray: dict[int, int] = {}
    stopped_ours: dict[int, int] = {}
    for i, epoch in _arrivals(curves, seed):
        value = curves[i][epoch - 1]
        if i not in stopped_ray:
            decision = ray.on_trial_result(None, trials[i], {"epoch": epoch, "val_loss": value})
            if decision == TrialScheduler.STOP and epoch < 9:
                stopped_ray[i] = epoch
        if i not in stopped_ours and ours.on_result(i, epoch, value):
            stopped_ours[i] = epoch
    assert stopped_ours == stopped_ray
    assert stopped_ours  # the case stops something


def test_median_agrees_with_ray_tune():
    from ray.tune.schedulers import MedianStoppingRule, TrialScheduler

    curves = _curves(8, 6, 5)
    ray = MedianStoppingRule(time_attr="epoch", metric="val_loss", mode="min", grace_period=1,
                             min_samples_required=3, min_time_slice=10**9, hard_stop=True)
    ours = es.Median("min", 1)
    trials = {i: _Trial(i) for i in curves}

    class _Controller:  # no trial pending or paused: the rule never thinks of pausing
        def get_live_trials(self):
            return []

    stopped_ray: dict[int, int] = {}
    stopped_ours: dict[int, int] = {}
    for i, epoch in _arrivals(curves, 11):
        value = curves[i][epoch - 1]
        if i not in stopped_ray:
            decision = ray.on_trial_result(_Controller(), trials[i],
                                           {"epoch": epoch, "val_loss": value})
            if decision == TrialScheduler.STOP:
                stopped_ray[i] = epoch
        if i not in stopped_ours and ours.on_result(i, epoch, value):
            stopped_ours[i] = epoch
    assert stopped_ours == stopped_ray and stopped_ours


def test_warning_only_when_nothing_can_be_stopped():
    """The old warning ('asha cannot prune 3 trials with reduction factor 4') was false: 3
    trials at eta 4 can lose 2. Now only provable cases warn."""
    assert es.pruning_warnings("asha", 3, 3, 12, 1, 4) == []
    # ...and asha really stops some of 3 trials at eta 4.
    asha = es.Asha(12, "min", 1, 4)
    stopped = [asha.on_result(i, 1, v) for i, v in enumerate([0.1, 0.5, 0.9])]
    assert stopped == [False, True, True]
    assert es.pruning_warnings("sha", 3, 3, 12, 1, 4) == []
    assert es.pruning_warnings("sha", 1, 1, 12, 1, 2) != []
    assert es.pruning_warnings("asha", 4, 4, 2, 2, 2) != []  # budget <= grace
    assert es.pruning_warnings("median", 3, 3, 12, 1, 2) != []
    assert es.pruning_warnings("fifo", 1, 1, 1, 1, 2) == []


def test_objective_per_task():
    assert es.objective("accuracy") == ("val_loss", "min")
    assert es.objective("r2") == ("val_acc", "max")
    assert list(itertools.islice(es.SCHEDULERS, 1)) == ["fifo"]


def test_seq_fifo_cells_keep_their_keys():
    """A seq scheduler list: the fifo cells have the keys of a campaign without the option
    (tests/fixtures/golden_keys.json: seq_schedulers against mp_start_both's seq cells);
    the sha and asha cells have keys of their own."""
    import json
    from pathlib import Path

    golden = json.loads((Path(__file__).resolve().parents[3] / "fixtures" /
                         "golden_keys.json").read_text())
    ours = {c["slug"].split("-", 1)[1]: c["key"] for c in golden["seq_schedulers"]}
    before = {c["slug"].split("-", 1)[1]: c["key"] for c in golden["mp_start_both"]}
    assert ours["D_hpo-seq-p1"] == before["D_hpo-seq-p1"]
    assert ours["D_ens-seq-p1"] == before["D_ens-seq-p1"]
    assert len({ours["D_hpo-seq-p1"], ours["D_hpo-seq-sha-p1"], ours["D_hpo-seq-asha-p1"]}) == 3


def test_unified_fifo_cell_keeps_its_key():
    import json
    from pathlib import Path

    golden = json.loads((Path(__file__).resolve().parents[3] / "fixtures" /
                         "golden_keys.json").read_text())
    ours = {c["slug"].split("-", 1)[1]: c["key"] for c in golden["unified_schedulers"]}
    before = {c["slug"].split("-", 1)[1]: c["key"] for c in golden["hpo_sampled"]}
    assert ours["D_hpo-unified_model-p1"] == before["D_hpo-unified_model-p1"]
    assert {"D_hpo-unified_model-sha-p1", "D_hpo-unified_model-median-p1"} <= set(ours)


def test_mp_fifo_cell_keeps_its_key():
    import json
    from pathlib import Path

    golden = json.loads((Path(__file__).resolve().parents[3] / "fixtures" /
                         "golden_keys.json").read_text())
    ours = {c["slug"].split("-", 1)[1]: c["key"] for c in golden["mp_schedulers"]}
    before = {c["slug"].split("-", 1)[1]: c["key"] for c in golden["unified_schedulers"]}
    assert ours["D_hpo-mp-p1"] == before["D_hpo-mp-p1"]
    assert {"D_hpo-mp-sha-p1", "D_hpo-mp-hyperband-p1"} <= set(ours)
