"""A stream cell's figures (issue 51, engine.results.streams): hand-computed cases, the
busy period as a union of intervals, and missing as None (an empty cell), never 0."""

from __future__ import annotations

import pytest

from engine.results.streams import busy_period, stream_figures


def test_busy_period_is_the_union_of_the_intervals():
    assert busy_period([]) == 0.0
    assert busy_period([(0.0, 1.0), (0.5, 2.0), (3.0, 4.0)]) == pytest.approx(3.0)
    assert busy_period([(3.0, 4.0), (0.0, 1.0), (1.0, 1.5)]) == pytest.approx(2.5)
    assert busy_period([(0.0, 5.0), (1.0, 2.0)]) == pytest.approx(5.0)


def test_a_served_stream_by_hand():
    # two jobs at 0 (the second queues behind the first), one at 10 after an idle gap
    arrivals = [0.0, 0.0, 10.0]
    admitted = [0.0, 1.0, 10.0]
    completed = [1.0, 3.0, 11.0]
    group, jobs = stream_figures(arrivals, admitted, completed, [True] * 3, rate=None)
    assert [j["queue_delay_s"] for j in jobs] == [0.0, 1.0, 0.0]
    assert [j["jct_s"] for j in jobs] == [1.0, 3.0, 1.0]
    assert group["jct_mean_s"] == pytest.approx(5 / 3)
    assert group["jct_p50_s"] == pytest.approx(1.0)
    assert group["jct_p95_s"] == pytest.approx(1.0 + 0.9 * 2.0)  # linear between 1 and 3
    assert group["makespan_s"] == pytest.approx(11.0)
    assert group["busy_s"] == pytest.approx(4.0)  # [0, 3] and [10, 11]
    assert group["throughput_jps"] == pytest.approx(3 / 4)
    assert group["arrival_rate_jps"] == pytest.approx(2 / 10)  # a trace's (n-1)/span
    assert group["offered_load"] == pytest.approx(0.2 * (1 + 2 + 1) / 3)
    assert group["stream_jobs"] == 3


def test_the_poisson_rate_is_used_and_a_failed_job_has_no_completion_time():
    group, jobs = stream_figures([0.0, 1.0], [0.0, 1.0], [0.5, 1.5], [True, False], rate=4.0)
    assert jobs[1]["jct_s"] is None and jobs[1]["queue_delay_s"] == 0.0
    assert group["jct_mean_s"] == pytest.approx(0.5) and group["arrival_rate_jps"] == 4.0
    assert group["offered_load"] == pytest.approx(4.0 * 0.5)


def test_nothing_completed_is_empty_never_zero():
    group, jobs = stream_figures([0.5], [None], [None], [False], rate=None)
    assert jobs == [{"arrival_s": 0.5, "admitted_s": None, "completed_s": None,
                     "queue_delay_s": None, "jct_s": None}]
    assert {k: v for k, v in group.items() if k != "stream_jobs"} == dict.fromkeys(
        ["jct_mean_s", "jct_p50_s", "jct_p95_s", "makespan_s", "busy_s", "throughput_jps",
         "arrival_rate_jps", "offered_load"])


def test_a_batch_cells_rows_leave_the_stream_columns_empty(tmp_path, monkeypatch):
    """The rows writer of a real cell spec (a batch cell): every stream column empty."""
    import engine.cell.main as cell_mod
    from engine.cell.output import CellEvents
    from engine.define.workloads import JobSpec
    from engine.results.columns import GROUPS_FILE, INDIVIDUAL_FILE
    from engine.results.read import read_rows
    from engine.train.loop import JobResult
    from tests.unit.engine.cell.cell_specs import real_cell_spec

    monkeypatch.setattr(cell_mod.faulthandler, "register", lambda *args, **kwargs: None)
    spec = real_cell_spec(tmp_path, group_id="seq_0000cafe")
    job = JobSpec(job_id="D_ens_m0", exp_id="D_ens", index=0, seed=42, model="mlp",
                  dataset="wine", task=None, batch_size=16, epochs=1, lr=0.1, optimizer="sgd")
    events = CellEvents(spec.events, cell="aaaa", attempt=1)
    cell_mod.write_rows(spec, events, [JobResult(job, samples=96, epochs_run=1)],
                        10.0, 0.1, 0.1, {}, None, {})
    events.close()
    (group,) = read_rows(tmp_path / "runs" / GROUPS_FILE)
    (row,) = read_rows(tmp_path / "runs" / INDIVIDUAL_FILE)
    for name in ("stream_sha256", "stream_jobs", "jct_mean_s", "jct_p50_s", "jct_p95_s",
                 "makespan_s", "busy_s", "throughput_jps", "arrival_rate_jps", "offered_load"):
        assert group[name] == "", name
    for name in ("arrival_s", "admitted_s", "completed_s", "queue_delay_s", "jct_s",
                 "joined_s"):
        assert row[name] == "", name


def test_busy_cores_weighs_each_busy_interval_and_leaves_the_idle_gap_out():
    """Two busy intervals, [0, 3] (2 cores) and [10, 11] (1 core): (2·3 + 1·1) ÷ 4; the
    idle gap [3, 10] is never asked for."""
    from engine.results.streams import busy_cores

    asked = []

    def cores(a, b):
        asked.append((a, b))
        return 2.0 if b <= 3.0 else 1.0

    assert busy_cores([(0.0, 1.0), (0.5, 3.0), (10.0, 11.0)], cores) == pytest.approx(7 / 4)
    assert asked == [(0.0, 3.0), (10.0, 11.0)]
    assert busy_cores([(0.0, 1.0)], lambda a, b: None) is None  # unknown, never 0
    assert busy_cores([], cores) is None
    # a busy interval shorter than the sampling interval cannot be resolved: empty
    assert busy_cores([(0.0, 3.0), (10.0, 10.4)], cores, resolution_s=0.5) is None
    assert busy_cores([(0.0, 3.0), (10.0, 11.0)], cores, resolution_s=0.5) == pytest.approx(7 / 4)


def test_energy_per_job_is_empty_when_not_measured_never_zero():
    from engine.results.streams import per_job

    assert per_job(120.0, 4) == pytest.approx(30.0)
    assert per_job(None, 4) is None and per_job(float("nan"), 4) is None
    assert per_job(120.0, 0) is None
