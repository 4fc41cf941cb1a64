"""``early_stop.decision_epochs`` (issue 50): mp's workers wait for the verdict only after
the epochs it names, so every epoch a decider actually judges a trial at must be one of
them — asha, hyperband (several brackets) and median, budgets below and at ``max_t`` —
and, for asha/hyperband, nothing else (no needless waits)."""

from __future__ import annotations

import numpy as np
import pytest

from engine.train import early_stop


@pytest.mark.parametrize("name", ["asha", "hyperband", "median"])
def test_every_judged_epoch_is_a_decision_epoch(name):
    rng = np.random.default_rng(5)
    max_t, trials = 9, 12
    budgets = {i: int(rng.integers(2, max_t + 1)) for i in range(trials)}
    planned = dict(budgets)
    decider = early_stop.asynchronous(name, max_t, "min", 1, 2, seed=7)
    judged: dict[int, set[int]] = {i: set() for i in range(trials)}
    # trials interleaved epoch by epoch, as concurrent workers report
    for epoch in range(1, max_t + 1):
        for i in rng.permutation(trials):
            if epoch >= budgets[i]:
                continue  # stopped, or its last epoch: no decision (mp judges epoch < budget)
            stop, rung = decider.judge(int(i), epoch, float(rng.random()))
            if rung is not None:
                judged[int(i)].add(epoch)
            if stop:
                budgets[int(i)] = epoch  # stopped: no more epochs
    for i in range(trials):
        epochs = set(early_stop.decision_epochs(decider, i, planned[i]))
        assert judged[i] <= epochs, (i, judged[i], epochs)
        if name != "median" and budgets[i] == planned[i]:  # ran its budget: every rung met
            assert judged[i] == epochs, (i, judged[i], epochs)
