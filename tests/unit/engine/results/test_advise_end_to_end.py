"""The advice weighs what the user waits for (fresh-user findings 1 and 2): it ranks on the
end-to-end speedup (``setup_s + T_group``), prints both speedups and says which it ranked
on; with a K sweep the number printed as the evidence is the number ranked on. Synthetic
rows with known answers; one subprocess for the command line. Nothing trains here."""

from __future__ import annotations

import json
import math

import pytest

from engine.results.advise import advise
from engine.results.load import load_runs
from tests.unit.engine.results.test_analysis import group, write
from tests.unit.fugue_tui.test_json_outputs import fugue, strict


def _ray_case(tmp_path, passes=5):
    """The fresh user's quick.toml: ray 1.66x faster inside the group window, but 40 s of
    set-up against seq's half second."""
    rows = []
    for p in range(passes):
        rows.append(group("D_cv", "seq", t=10.0 + 0.05 * p, k=4, setup_s=0.5))
        rows.append(group("D_cv", "ray", t=6.0 + 0.05 * p, k=4, setup_s=40.0 + p,
                          max_parallel=2))
    return write(tmp_path, rows)


def test_slow_start_up_loses_end_to_end_and_the_advice_names_it(tmp_path):
    (a,) = advise(load_runs(_ray_case(tmp_path)))
    assert a.recommended.executor == "seq" and a.runner_up.executor == "ray"
    ray = a.runner_up
    assert ray.speedup == pytest.approx(10.1 / 6.1, rel=1e-3)   # T_group, unchanged meaning
    assert ray.e2e_speedup == pytest.approx(10.6 / 48.1, rel=1e-3)  # (0.5 + 10.1) / (42 + 6.1)
    assert ray.score == ray.e2e_speedup and ray.e2e_low < ray.e2e_high  # 5 passes: interval
    assert a.measure.startswith("end-to-end speedup over seq (setup_s + T_group)")
    text = "\n".join(a.lines())
    assert "ranked by end-to-end speedup" in text
    assert "on T_group alone (set-up excluded) ray (K = 4) would rank first (1.66× over seq)" \
        in text and "0.22× end to end" in text
    assert a.distinguishable is True


def test_a_strategy_faster_end_to_end_is_recommended_with_both_numbers(tmp_path):
    rows = [group("W", "seq", t=10.0, setup_s=0.2) for _ in range(2)]
    rows += [group("W", "mp", t=4.0, setup_s=2.0, max_parallel=4) for _ in range(2)]
    (a,) = advise(load_runs(write(tmp_path, rows)))
    rec = a.recommended
    assert rec.executor == "mp" and rec.speedup == pytest.approx(2.5)
    assert rec.e2e_speedup == pytest.approx(10.2 / 6.0)
    text = "\n".join(a.lines())
    assert "end-to-end speedup over seq at K = 4 (setup + T_group, what you wait for): 1.70×" \
        in text and "set-up 2.0 s + T_group 4.00 s" in text
    assert "speedup over seq at K = 4 (T_group only, set-up excluded): 2.50×" in text
    assert not a.notes  # both measures agree: nothing to warn about


def test_without_setup_times_it_ranks_on_t_group_and_says_so(tmp_path):
    rows = [group("W", "seq", t=10.0, setup_s=0.2), group("W", "seq", t=10.0, setup_s=0.2)]
    rows += [group("W", "ray", t=5.0), group("W", "ray", t=5.0, setup_s=30.0)]  # one missing
    (a,) = advise(load_runs(write(tmp_path, rows)))
    assert a.recommended.executor == "ray" and math.isnan(a.recommended.e2e_speedup)
    assert "T_group only" in a.measure and "no setup_s (or no seq row) for ray" in a.measure
    assert any("set-up time is not recorded" in n for n in a.notes)
    # only what applies: ray has a seq row and set-up in one of its two rows
    assert ("n/a (setup_s missing from some rows of this cell or of its seq baseline)"
            in "\n".join(a.lines()))


def _user_sweep(tmp_path):
    """The fresh user's my/sweep.toml (D_ens, K = 1, 2, 4; seq and unified_model): at
    K = 4 unified_model trains more samples/s (13,033 vs 12,252) but its T_group is 0.86 s
    against seq's 0.53 s."""
    rows = []
    for executor, k, t, train in (("seq", 1, 0.14, 12_300), ("seq", 2, 0.27, 12_280),
                                  ("seq", 4, 0.53, 12_252),
                                  ("unified_model", 1, 0.40, 6_000),
                                  ("unified_model", 2, 0.60, 9_500),
                                  ("unified_model", 4, 0.86, 13_033)):
        rows.append(group("D_ens", executor, t=t, k=k, gpu="", cuda="", setup_s=0.05,
                          train_throughput_sps=train, rss_peak_mb=100 + k))
    return write(tmp_path, rows)


def test_k_sweep_ranking_and_printed_evidence_are_the_same_measure(tmp_path):
    (a,) = advise(load_runs(_user_sweep(tmp_path)))
    assert a.swept
    # unified_model's knee is K = 4 (no knee: best K); its speedup there is below 1, so it
    # cannot be recommended over seq
    assert a.recommended.executor == "seq"
    uni = a.runner_up
    assert uni.executor == "unified_model" and uni.K == 4
    assert uni.speedup == pytest.approx(0.53 / 0.86, rel=1e-3)
    assert uni.score == pytest.approx(0.58 / 0.91, rel=1e-3)  # end to end, what it ranks on
    # the invariant: the recommendation's printed score is never below the runner-up's
    assert a.recommended.score >= uni.score
    text = "\n".join(a.lines())
    assert "ranked by end-to-end speedup over seq (setup_s + T_group) at each strategy's " \
           "knee" in text
    assert "recommended: seq" in text and "1× (it is the baseline)" in text


def test_report_advise_on_the_command_line(tmp_path):
    runs = _ray_case(tmp_path / "runs")
    done = fugue("report", str(runs), "--advise")
    assert done.returncode == 0, done.stderr
    assert "recommended: seq" in done.stdout
    assert "on T_group alone (set-up excluded) ray" in done.stdout
    # the speedup column keeps its window: ray's row still says 1.66 in the table
    assert "1.656" in done.stdout
    doc = strict(fugue("report", str(runs), "--advise", "--json").stdout, "report")
    (advice,) = doc["advice"]
    runner = advice["runner_up"]
    assert runner["executor"] == "ray" and runner["setup_s"] == pytest.approx(42.0)
    assert runner["e2e_speedup"] == pytest.approx(10.6 / 48.1, rel=1e-3)
    assert json.dumps(advice["lines"]).count("end-to-end speedup") == 2
