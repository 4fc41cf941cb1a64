"""``python -m bench.streams`` (issue 52, item 3): the capacity arithmetic, the rates, the
executors it discovers, the campaigns it builds (the same stream for every strategy, the
same jobs at every load) and the figures it reads from group rows. No cell runs here and
nothing is timed: the timings live in bench/results/streams.csv."""

from __future__ import annotations

import math

import pytest

from bench import streams
from bench.strategies import offline_epochs
from engine.define.campaign import parse_campaign
from engine.define.matrix import build_cells

MACHINE = {"host": "h", "device": "cpu"}


def _job(i: int, completed: float | str, status: str = "ok") -> dict[str, str]:
    return {"job_id": f"a{i:04d}", "status": status, "completed_s": str(completed)}


def test_capacity_counts_only_the_jobs_after_the_warm_up():
    # warm-up of 2 ends at 3.0 s; 4 more jobs complete by 5.0 s: 4 jobs in 2 s
    jobs = [_job(i, t) for i, t in enumerate([5.0, 1.0, 3.0, 3.5, 4.0, 4.5])]  # any order
    assert streams.capacity_of(jobs, 2) == pytest.approx(4 / 2.0)
    # without a warm-up: every job over the time since the window opened
    assert streams.capacity_of(jobs, 0) == pytest.approx(6 / 5.0)


def test_capacity_refuses_a_failed_job_and_a_run_with_nothing_to_measure():
    with pytest.raises(ValueError, match="a0001"):
        streams.capacity_of([_job(0, 1.0), _job(1, "", "failed")], 0)
    with pytest.raises(ValueError, match="nothing to measure"):
        streams.capacity_of([_job(0, 1.0), _job(1, 2.0)], 2)


def test_rates_are_the_loads_times_the_capacity():
    assert streams.rates(2.5, [0.3, 0.6, 0.9]) == pytest.approx(
        {0.3: 0.75, 0.6: 1.5, 0.9: 2.25})
    assert streams.load_label(0.3) == "0.3" and streams.load_label(1.0) == "1"


def test_capacity_trace_puts_the_warm_up_first_and_every_job_at_zero():
    text = streams.capacity_trace(["D_reg", "D_ens"], ["D_ens", "D_cv"])
    assert text.splitlines() == ["time_s,experiment", "0,D_ens", "0,D_cv", "0,D_reg",
                                 "0,D_ens"]


def test_every_executor_that_serves_streams_is_discovered(monkeypatch):
    """Not a list: a plugin executor that serves streams is in, one that does not is out,
    seq first (the baseline)."""
    import engine.registry
    from engine.plugins import load_plugins

    load_plugins()
    real = engine.registry.EXECUTORS
    assert set(streams.stream_executors()) == {
        n for n in real.names() if real.get(n).serves_streams}

    class Spec:
        def __init__(self, serves: bool, workers: bool = False, options=()):
            self.serves_streams, self.trains_in_workers = serves, workers
            self.option_fields = dict.fromkeys(options)

    fake = {"zeta": Spec(True, True, ["max_parallel"]), "batchonly": Spec(False),
            "seq": Spec(True), "alpha": Spec(True, False, ["max_parallel"])}

    class Registry:
        def names(self):
            return list(fake)

        def get(self, name):
            return fake[name]

    monkeypatch.setattr(engine.registry, "EXECUTORS", Registry())
    assert streams.stream_executors() == ["seq", "zeta", "alpha"]
    # one worker per core only where jobs train in worker processes
    assert streams.worker_options(["seq", "zeta", "alpha"], 2) == {"zeta": {"max_parallel": 2}}


def _cells(tmp_path, name, arrivals, executors, options=None, passes=1):
    (tmp_path / "exps.toml").write_text(offline_epochs(2))
    doc = streams._doc(name, executors, arrivals, passes, tmp_path, options or {})
    return build_cells(parse_campaign(doc, "bench", base_dir=tmp_path), MACHINE)


def test_the_campaigns_serve_one_stream_and_the_same_jobs_at_every_load(tmp_path):
    executors = ["seq", "mp", "unified_model"]
    options = streams.worker_options(executors, 2)
    assert options == {"mp": {"max_parallel": 2}}
    low = _cells(tmp_path, "streams-0.3", streams.poisson(0.9, 8), executors, options, 2)
    high = _cells(tmp_path, "streams-0.9", streams.poisson(2.7, 8), executors, options, 2)
    # one cell per executor and pass, every one the same stream
    assert sorted((c.executor, c.pass_index) for c in low) == sorted(
        (e, p) for e in executors for p in (1, 2))
    assert len({c.stream["sha256"] for c in low}) == 1
    assert next(c for c in low if c.executor == "mp").max_parallel == 2
    # the loads differ only in time: the same jobs arrive, three times as fast
    a, b = low[0], high[0]
    assert a.stream["sha256"] != b.stream["sha256"]
    assert [j["job_id"] for j in a.jobs] == [j["job_id"] for j in b.jobs]
    assert a.jobs == b.jobs
    assert all(math.isclose(t, 3 * u, rel_tol=1e-4, abs_tol=3e-6)
               for t, u in zip(a.arrivals, b.arrivals, strict=True))
    assert set(a.stream["templates"]) <= set(streams.OFFLINE)
    # the capacity trace: the same templates in the same order after the warm-up, at 0
    def template(job):  # a0003_D_ens_ens_s1 → D_ens
        return "D_" + job["job_id"].split("_")[2]

    order = [template(j) for j in a.jobs]
    (tmp_path / "capacity.csv").write_text(streams.capacity_trace(order, streams.OFFLINE))
    [cap] = _cells(tmp_path, streams.CAPACITY_CAMPAIGN,
                   {"trace": str(tmp_path / "capacity.csv")}, ["seq"])
    assert cap.arrivals == [0.0] * (len(streams.OFFLINE) + 8)
    assert [template(j) for j in cap.jobs] == [*streams.OFFLINE, *order]


def _group(campaign, executor, p, **values):
    return {"campaign_id": campaign, "executor": executor, "pass": str(p), "status": "ok",
            **{k: "" for k, *_ in streams.FIGURES}, **values}


def test_figures_per_load_from_the_ok_rows_missing_left_out():
    groups = [
        _group("streams-0.3", "seq", 1, jct_p95_s="2.0", throughput_jps="1.0",
               host_load_start="0.5", host_load_end="1.5"),
        _group("streams-0.3", "seq", 2, jct_p95_s="2.2"),
        _group("streams-0.3", "mp", 1, jct_p95_s="1.5"),
        {**_group("streams-0.3", "mp", 2, jct_p95_s="9.9"), "status": "failed"},
        _group("streams-0.9", "seq", 1, jct_p95_s="4.0", host_load_end="2.5"),
        _group(streams.CAPACITY_CAMPAIGN, "seq", 1, jct_p95_s="7.0", host_load_end="9"),
        _group("other", "seq", 1, jct_p95_s="8.0"),
    ]
    values = streams.figure_values(groups, [0.3, 0.9], ["seq", "mp"])
    assert values[0.3, "jct_p95_s"] == {"seq": {1: 2.0, 2: 2.2}, "mp": {1: 1.5}}
    assert values[0.9, "jct_p95_s"] == {"seq": {1: 4.0}}
    assert values[0.3, "throughput_jps"] == {"seq": {1: 1.0}}  # empty is missing, not 0
    assert values[0.9, "offered_load"] == {}
    assert streams.load_by_pass(groups) == {1: 2.5}  # the capacity cell is not a pass


def test_the_gpu_part_is_named_within_120_s_and_runs_without_ray():
    from bench.gpu_check import PARTS

    spec = PARTS["streams"]
    assert spec.budget_s <= 120 and not spec.default
    assert "ray" not in spec.needs  # ray is left out where it does not load, not the part
