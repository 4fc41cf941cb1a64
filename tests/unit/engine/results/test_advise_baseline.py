"""The advice's baseline is seq under fifo (a fresh user's trial, issue 46): seq under a
scheduler is a candidate like any other cell; without a seq (fifo) baseline nothing is
ranked by speedup and the advice says so, as the table does; ``--per-core`` names the input
that is really missing and says when it could not rank per core; a ``cores_used`` that is
no positive number is not recorded in the table either; seq's K reads "one after
another". Small fixture rows, nothing trains."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from engine.results.advice_model import Option
from engine.results.advise import advise
from engine.results.analysis import speedups
from engine.results.load import load_runs
from engine.results.per_core import line, rank
from fugue_tui.report.cell_tables import cell_values
from fugue_tui.report.sweeps_json import advice_entry
from tests.unit.engine.results.test_analysis import group, write
from tests.unit.engine.results.test_knee import _sweep


def _rows(cells, passes=2, **extra):
    """``cells``: (executor, scheduler, T_group s, cores_used); ``passes`` rows each."""
    return [group("W", executor, t=t, k=4, scheduler=sched, setup_s=0.0, cores_used=cores,
                  **extra)
            for executor, sched, t, cores in cells for _ in range(passes)]


def test_seq_under_a_scheduler_is_a_candidate_not_the_baseline(tmp_path):
    # the user's h3: seq asha 2.27x over seq fifo, unified_model asha 1.47x
    runs = load_runs(write(tmp_path, _rows([
        ("seq", "", 10.0, 1.0), ("seq", "asha", 4.4, 1.0),
        ("unified_model", "asha", 6.8, 1.0), ("mp", "asha", 12.0, 2.0)])))
    for per_core in (False, True):
        (a,) = advise(runs, n_boot=0, per_core=per_core)
        rec = a.recommended
        assert (rec.label, a.runner_up.label) == ("seq asha", "unified_model asha")
        assert rec.speedup == pytest.approx(10 / 4.4) and not rec.baseline
        text = "\n".join(a.lines())
        assert "recommended: seq asha (K = 4)" in text and "it is the baseline" not in text


def test_no_seq_fifo_baseline_ranks_nothing_and_says_so(tmp_path):
    # the user's h: only asha cells; the table says "n/a (no seq)" for every one
    runs = load_runs(write(tmp_path, _rows([
        ("seq", "asha", 4.4, 1.0), ("unified_model", "asha", 6.8, 1.0)])))
    (table_seq,) = speedups(runs, n_boot=0).query("executor == 'seq'")["speedup"]
    assert math.isnan(table_seq)
    for per_core in (False, True):
        (a,) = advise(runs, n_boot=0, per_core=per_core)
        assert a.recommended is None and a.runner_up is None and a.distinguishable is None
        assert "no seq (fifo) baseline at K = 4: cannot rank by speedup" in a.verdict
        text = "\n".join(a.lines())
        assert "recommended" not in text and "it is the baseline" not in text
        assert "evidence: 2 cells, 4 ok rows" in text
        entry = advice_entry(a)
        assert entry["recommended"] is None and entry["lines"] == a.lines()


def test_per_core_names_the_missing_speedup_not_cores_used():
    # the user's d: cores_used recorded (0.74) but no seq baseline -> no speedup
    base = Option(label="mp", executor="mp", K=4, n=2, n_seq=2, speedup=2.0, ci_low=math.nan,
                  ci_high=math.nan, score=2.0, score_low=math.nan, score_high=math.nan,
                  per_core_cores=2.0, per_core_rows=2, per_core_of=2)
    no_seq = replace(base, label="unified_model bf16", speedup=math.nan, per_core_cores=0.74)
    no_cores = replace(base, label="ray", per_core_cores=math.nan, per_core_rows=0)
    notes: list[str] = []
    ranked, _ = rank([no_seq, no_cores, base], notes)
    assert [o.label for o in ranked] == ["mp", "unified_model bf16", "ray"]
    said = "\n".join(notes)
    assert "no cores_used recorded" in said and "ray" in said
    why = next(n for n in notes if "unified_model bf16" in n)
    assert "no seq (fifo) baseline" in why and "no cores_used" not in why
    assert "no seq (fifo) baseline" in line(ranked[1]) and "cores_used" not in line(ranked[1])
    assert "no cores_used recorded" in line(ranked[2])


def test_each_speedup_line_says_only_what_it_lacks(tmp_path):
    # no setup_s: the end-to-end line lacks it; the T_group line lacks nothing
    rows = [group("W", e, t=t, k=4) for e, t in (("seq", 10.0), ("mp", 5.0)) for _ in "ab"]
    (a,) = advise(load_runs(write(tmp_path, rows)), n_boot=0)
    e2e = next(s for s in a.lines() if s.startswith("  end-to-end"))
    assert e2e.endswith("n/a (no setup_s recorded)")


def test_per_core_without_cores_used_says_it_ranked_on_the_speedup(tmp_path):
    # the user's nm (monitor = false): no cores_used in any row
    runs = load_runs(write(tmp_path, _rows([("seq", "", 10.0, ""), ("mp", "", 5.0, "")])))
    (a,) = advise(runs, n_boot=0, per_core=True)
    assert a.recommended.executor == "mp"  # 2x, ranked on the speedup instead
    assert a.measure.startswith("end-to-end speedup over seq")
    assert "could not rank per core: no candidate recorded cores_used" in a.measure
    assert "speedup per core at K = 4: n/a (no cores_used recorded)" in "\n".join(a.lines())


def test_a_cores_used_of_zero_is_not_recorded_in_the_table_either(tmp_path):
    runs = load_runs(write(tmp_path, _rows([("seq", "", 10.0, 1.0), ("mp", "", 5.0, 0)])))
    table = speedups(runs, n_boot=0)
    mp = table[table["executor"] == "mp"].iloc[0].to_dict()
    assert math.isnan(mp["cores_used_mean"]) and cell_values(mp)["cores"] == "—"
    (a,) = advise(runs, n_boot=0)
    assert "CPU cores used" not in "\n".join(a.lines())


def test_seq_in_a_sweep_trains_one_model_after_another(tmp_path):
    (a,) = advise(_sweep(tmp_path, seq={1: 100, 2: 200, 4: 210},
                         unified_model={1: 50, 2: 60, 4: 70}), n_boot=0)
    assert a.recommended.executor == "seq"
    assert "seq, K = 2 models, one after another (the knee)" in a.how
    assert "at once" not in a.how
