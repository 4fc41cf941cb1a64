"""ray's hpo cells log their rung decisions (issue 46): Ray Tune's own asha and median
schedulers, as ray's cells build them (``make_scheduler``), given results in an arrival
order, record each rung decision in decisions.json's schema; they are the decisions
``early_stop`` makes on the same results in the same order (no difference found), and the
file is written where the cell's other files are."""

from __future__ import annotations

import pytest

pytest.importorskip("ray")

from engine.results import decisions  # noqa: E402
from engine.train import early_stop  # noqa: E402
from tests.unit.engine.train.test_hpo_hyperband import (  # noqa: E402
    _arrivals,
    _curves,
    _Trial,
)

EPOCHS = 6


class _Live:  # Tune's controller as the median rule sees it: nothing pending
    def get_live_trials(self):
        return []


def _logs(name: str, seed: int):
    from ray.tune.schedulers import TrialScheduler

    from engine.executors.ray.tune import make_scheduler

    curves = _curves(8, EPOCHS, seed)
    jobs = [f"H_j{i}" for i in curves]
    scheduler, _ = make_scheduler(name, EPOCHS, 1, 2)
    scheduler.set_search_properties("val_loss", "min")
    scheduler.fugue_log = decisions.DecisionLog("ray", name, "val_loss", "min", jobs, 1, 2,
                                                EPOCHS)
    scheduler.fugue_budgets = {i: EPOCHS for i in curves}
    ours_log = decisions.DecisionLog("seq", name, "val_loss", "min", jobs, 1, 2, EPOCHS)
    ours = early_stop.asynchronous(name, EPOCHS, "min", 1, 2)
    trials = {i: _Trial(i) for i in curves}
    for t in trials.values():
        scheduler.on_trial_add(None, t)
    done_ray, done_ours = set(), set()
    for i, epoch in _arrivals(curves, seed):
        value = curves[i][epoch - 1]
        if i not in done_ray and scheduler.on_trial_result(
                _Live(), trials[i], {"epoch": epoch, "val_loss": value}) == TrialScheduler.STOP:
            done_ray.add(i)
        if i not in done_ours and epoch < EPOCHS and early_stop.judged(ours, ours_log, i,
                                                                      epoch, value):
            done_ours.add(i)
    return scheduler.fugue_log, ours_log


@pytest.mark.parametrize("name", ["asha", "median"])
def test_ray_logs_the_decisions_early_stop_makes(name, tmp_path):
    ray_log, ours_log = _logs(name, 3)
    path = ray_log.write(tmp_path / "attempt-1")
    assert path == tmp_path / "attempt-1" / decisions.FILE
    doc = decisions.read(path)
    assert doc["executor"] == "ray" and doc["scheduler"] == name
    entries = doc["decisions"]
    assert any(e["decision"] == "stop" for e in entries)
    assert any(e["decision"] == "continue" for e in entries)
    assert all(e["rung"] < EPOCHS for e in entries)  # a finished trial is no decision
    if name == "asha":  # rungs 1, 2, 4 of max_t 6 at reduction factor 2
        assert {e["rung"] for e in entries} <= {1, 2, 4}
    assert decisions.first_difference(doc, ours_log.to_dict()) is None
    # the same trials judged at the same rungs with the same values
    key = [(e["trial"], e["rung"], e["value"], e["decision"]) for e in entries]
    assert key == [(d.trial, d.rung, d.value, d.decision) for d in ours_log.decisions]

