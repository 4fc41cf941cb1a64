"""Honest hpo baselines (issue 25): T_group speedups divide by seq under fifo (a seq asha
cell never enters a fifo baseline), time-to-best speedups divide by seq under the same
scheduler and only where the decisions match, and an hpo cell's accuracy is the mean over
completed trials with the best trial's metric beside it."""

from __future__ import annotations

import pandas as pd
import pytest

from engine.results.analysis import speedups
from engine.results.load import runs_from_frames


def _group(gid: str, executor: str, scheduler: str, t: float, ttb: float, key: str) -> dict:
    return {"group_id": gid, "exp_id": "D_hpo", "executor": executor, "T_group": str(t),
            "status": "ok", "scheduler": scheduler, "config_key": key, "workload_key": "w",
            "compile_mode": "off", "machine": "m", "host": "m", "pass": "1", "K": "2",
            "mode": "hpo", "time_to_best_s": str(ttb), "best_val_metric": "0.25"}


def _jobs(gid: str, stopped: dict[str, int], accs: dict[str, float]) -> list[dict]:
    return [{"group_id": gid, "job_id": job, "status": "ok", "final_val_acc": str(acc),
             "early_stopped": str(job in stopped), "epochs_run": str(stopped.get(job, 4))}
            for job, acc in accs.items()]


def _table(groups, jobs):
    return speedups(runs_from_frames(pd.DataFrame(groups), pd.DataFrame(jobs)), n_boot=0) \
        .set_index(["executor", "scheduler"])


def test_seq_asha_never_enters_the_fifo_baseline_and_ttb_needs_same_decisions():
    accs = {"t0": 0.9, "t1": 0.5}
    groups = [_group("s1", "seq", "", 10.0, 4.0, "sf"),         # seq fifo: the baseline
              _group("s2", "seq", "asha", 1.0, 2.0, "sa"),       # seq asha: much faster
              _group("s3", "seq", "sha", 6.0, 3.0, "ss"),
              _group("u1", "unified_model", "sha", 2.0, 1.5, "us"),
              _group("r1", "ray", "asha", 5.0, 1.0, "ra")]
    jobs = (_jobs("s1", {}, accs) + _jobs("s2", {"t1": 1}, accs) + _jobs("s3", {"t1": 2}, accs)
            + _jobs("u1", {"t1": 2}, accs) + _jobs("r1", {"t1": 3}, accs))
    table = _table(groups, jobs)
    # T_group: every cell over seq fifo (10 s), seq asha's 1 s never pooled into it.
    assert table.loc[("seq", ""), "speedup"] == 1.0
    assert table.loc[("seq", "asha"), "speedup"] == 10.0
    assert table.loc[("unified_model", "sha"), "speedup"] == 5.0
    assert table.loc[("ray", "asha"), "speedup"] == 2.0
    # Time to best: over seq under the same scheduler, with the same decisions.
    assert table.loc[("unified_model", "sha"), "ttb_speedup"] == 2.0
    assert table.loc[("unified_model", "sha"), "ttb_baseline"] == "seq sha"
    ray = table.loc[("ray", "asha")]
    assert pd.isna(ray["ttb_speedup"]) and ray["ttb_baseline"] == "seq asha: decisions differ"
    # Accuracy: completed trials only (t1 stopped), the best metric beside it.
    assert table.loc[("seq", "asha"), "acc_mean"] == pytest.approx(0.9)
    assert table.loc[("seq", ""), "acc_mean"] == pytest.approx(0.7)
    assert table.loc[("seq", "asha"), "best_val_metric_mean"] == pytest.approx(0.25)


def test_matching_asynchronous_decisions_compare():
    accs = {"t0": 0.9, "t1": 0.5}
    groups = [_group("s1", "seq", "", 10.0, 4.0, "sf"), _group("s2", "seq", "asha", 3.0, 2.0, "sa"),
              _group("r1", "ray", "asha", 5.0, 1.0, "ra")]
    jobs = _jobs("s1", {}, accs) + _jobs("s2", {"t1": 1}, accs) + _jobs("r1", {"t1": 1}, accs)
    table = _table(groups, jobs)
    assert table.loc[("ray", "asha"), "ttb_speedup"] == 2.0
