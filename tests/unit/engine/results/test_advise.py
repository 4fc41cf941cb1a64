"""The advisor (issue 23): a pure function of rows, on the harness's own CSVs and on
synthetic rows with known answers."""

from __future__ import annotations

import math
import shutil

import pytest

from engine.results.advice_model import passes_to_separate
from engine.results.advise import advise
from engine.results.load import load_runs
from tests.unit.engine.results.test_analysis import HARNESS, group, write
from tests.unit.engine.results.test_knee import TP, _sweep


def test_harness_csvs_recommend_unified_model_without_inventing_an_interval(tmp_path):
    shutil.copy(HARNESS / "master_groups.csv", tmp_path / "master_groups.csv")
    advice = {a.exp_id: a for a in advise(load_runs(tmp_path))}
    assert set(advice) == {"D_ens", "D_cv", "D_hpo"}
    for exp_id, speedup in (("D_ens", 1.464), ("D_cv", 1.236), ("D_hpo", 1.113)):
        a = advice[exp_id]
        assert not a.swept and a.recommended.executor == "unified_model"
        assert a.recommended.speedup == pytest.approx(speedup, abs=1e-3)
        assert a.runner_up.executor == "seq"
        assert a.distinguishable is None and a.more_passes == 3  # 2 passes, intervals need 5
        assert a.cells == 2 and a.rows == 4 and a.passes == (2, 2)
        assert math.isnan(a.recommended.energy_per_model_j)  # the harness's seq 0 J is unmeasured
    text = "\n".join(advice["D_ens"].lines())
    assert "recommended: unified_model" in text and "1.46×" in text
    # the harness's rows have no setup_s: ranked on T_group, and the advice says so
    assert "ranked by speedup over seq (T_group only)" in text
    assert "no interval with 2 passes" in text and "run 3 more" in text
    assert "energy per trained model: not measured" in text
    assert "AMD EPYC (2 cores)" in text


def _plain(tmp_path, seq, strat, executor="mp", **extra):
    rows = [group("W", "seq", t=t, k=4) for t in seq]
    rows += [group("W", executor, t=t, k=4, max_parallel=2, **extra) for t in strat]
    return load_runs(write(tmp_path, rows))


def test_clear_winner_with_five_passes_is_distinguishable(tmp_path):
    (a,) = advise(_plain(tmp_path, [10.0, 10.1, 9.9, 10.0, 10.05],
                         [5.0, 5.1, 4.9, 5.0, 5.02]))
    assert a.recommended.executor == "mp" and a.recommended.speedup == pytest.approx(2.0, 0.01)
    assert a.distinguishable is True and a.more_passes is None
    assert a.recommended.ci_low < 2.0 < a.recommended.ci_high
    assert "max_parallel = 2" in a.how
    assert "distinguishable with 5 passes" in a.verdict


def test_seq_is_recommended_when_nothing_beats_it(tmp_path):
    (a,) = advise(_plain(tmp_path, [10.0] * 2, [20.0] * 2))
    assert a.recommended.executor == "seq" and a.runner_up.executor == "mp"
    assert "1× (it is the baseline)" in "\n".join(a.lines())


def test_overlapping_intervals_say_how_many_more_passes(tmp_path):
    seq = [10.0, 12.0, 8.0, 11.0, 9.0]
    runs = load_runs(write(tmp_path, [group("W", "seq", t=t) for t in seq]
                           + [group("W", "mp", t=t) for t in (9.0, 11.5, 7.5, 10.5, 8.0)]
                           + [group("W", "ray", t=t) for t in (9.3, 11.8, 7.8, 10.6, 8.4)]))
    (a,) = advise(runs)
    assert {a.recommended.executor, a.runner_up.executor} == {"mp", "ray"}
    assert a.distinguishable is False
    best, second = a.recommended, a.runner_up
    expected = passes_to_separate(best.score, best.half_width, second.score,
                                  second.half_width, 5) - 5
    assert a.more_passes == expected and a.more_passes > 0
    assert f"not distinguishable with 5 passes; about {expected} more" in a.verdict


def test_passes_rule():
    assert passes_to_separate(2.0, 0.3, 1.8, 0.1, 5) == 21
    assert passes_to_separate(2.0, 0.3, 2.0, 0.1, 5) is None  # equal estimates
    assert passes_to_separate(3.0, 0.01, 1.0, 0.01, 5) == 6  # at least one more


def test_sweep_recommends_the_knee_of_the_best_strategy(tmp_path):
    runs = _sweep(tmp_path, energy=40.0, seq={1: 100, 2: 101, 4: 100, 8: 99, 16: 100},
                  unified_model=dict(TP))
    (a,) = advise(runs)
    assert a.swept and a.recommended.executor == "unified_model" and a.recommended.K == 4
    # ranked on the speedup at its K (the printed evidence), throughput kept as information
    assert a.recommended.score == pytest.approx(3.5) and a.recommended.throughput == 350
    # speedup measured at K = 4: seq T_group 4000/100 over unified 4000/350
    assert a.recommended.speedup == pytest.approx(3.5)
    assert a.recommended.energy_per_model_j == pytest.approx(40.0)
    assert a.runner_up.executor == "seq" and a.runner_up.K == 1
    text = "\n".join(a.lines())
    assert "K = 4 models at once (the knee)" in text
    assert "best at K = 16" in text
    assert "5%: K = 8" in text and "energy per trained model: 40.0 J" in text
    assert a.cells == 10 and a.rows == 10


def test_sweep_without_a_knee_says_sweep_further(tmp_path):
    (a,) = advise(_sweep(tmp_path, seq={1: 100, 2: 100}, unified_model={1: 100, 2: 200}))
    assert a.recommended.executor == "unified_model" and a.recommended.K == 2
    assert any("no knee inside the sweep" in n for n in a.notes)
    assert "its best K" in a.how


def test_machines_are_advised_apart(tmp_path):
    rows = [group("W", "seq", t=10.0, host=h) for h in ("a", "b")]
    rows += [group("W", "mp", t=5.0, host="a"), group("W", "mp", t=20.0, host="b")]
    advice = {a.provenance["machine"]: a for a in advise(load_runs(write(tmp_path, rows)))}
    assert advice["a"].recommended.executor == "mp"
    assert advice["b"].recommended.executor == "seq"
