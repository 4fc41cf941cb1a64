"""The throughput-vs-K curve and its knee (issue 23), on synthetic rows with known answers."""

from __future__ import annotations

import math

import pytest

from engine.results.knee import (
    curve_table,
    curves,
    find_knee,
    per_doubling_gains,
)
from engine.results.load import load_runs
from tests.unit.engine.results.test_analysis import group, write

TP = {1: 100.0, 2: 190.0, 4: 350.0, 8: 370.0, 16: 375.0}


def test_gain_is_normalised_to_a_doubling():
    assert per_doubling_gains([1, 2], [100, 150]) == pytest.approx([0.5])
    assert per_doubling_gains([1, 4], [100, 400]) == pytest.approx([1.0])  # 2x per doubling
    assert per_doubling_gains([4, 8], [200, 100]) == pytest.approx([-0.5])


@pytest.mark.parametrize("fraction, knee", [(0.05, 8), (0.10, 4), (0.20, 4), (0.85, 2),
                                            (0.95, 1)])
def test_knee_moves_with_the_fraction(fraction, knee):
    assert find_knee(list(TP), list(TP.values()), fraction) == knee


def test_no_knee_while_the_last_doubling_still_gains():
    assert find_knee([1, 2, 4, 8], [100, 180, 300, 400], 0.10) is None
    assert find_knee([4], [100], 0.10) is None
    # a later bump above the fraction moves the knee past it
    assert find_knee([1, 2, 4, 8, 16], [100, 105, 106, 150, 151], 0.10) == 8


def _sweep(tmp_path, passes=1, noise=0.0, energy=None, train=True, **per_exec):
    rows = []
    for p in range(passes):
        for executor, tps in per_exec.items():
            for k, tp in tps.items():
                tp = tp * (1 + noise * ((p % 3) - 1))
                extra = {"train_throughput_sps": tp} if train else {}
                if energy is not None:
                    extra.update(energy=energy * k, energy_method="nvml")
                rows.append(group("D_ens", executor, t=1000 * k / tp, k=k, gpu="", cuda="",
                                  rss_peak_mb=100 + 10 * k, **extra))
    return load_runs(write(tmp_path, rows))


def test_curves_per_strategy_with_knee_best_energy_and_memory(tmp_path):
    runs = _sweep(tmp_path, seq={1: 100, 2: 101, 4: 100, 8: 99},
                  unified_model=dict(TP))
    by_exec = {c.executor: c for c in curves(runs)}
    assert set(by_exec) == {"seq", "unified_model"}
    uni = by_exec["unified_model"]
    assert uni.ks == [1, 2, 4, 8, 16] and uni.knee == 4 and uni.best_k == 16
    assert uni.metric == "train_throughput_sps"
    assert uni.knees == {0.05: 8, 0.10: 4, 0.20: 4, 0.30: 4}
    assert by_exec["seq"].knee == 1 and by_exec["seq"].best_k == 2
    point = uni.point(8)
    assert point.throughput == pytest.approx(370) and point.n == 1
    assert math.isnan(point.energy_per_model_j) and point.energy_n == 0  # missing, not 0
    assert uni.mem_metric == "rss_peak_mb" and point.mem_peak_mb == pytest.approx(180)
    assert not uni.has_intervals and uni.knee_text == "K = 4"
    table = curve_table(uni)
    assert list(table["K"]) == [1, 2, 4, 8, 16]
    assert table.loc[table["K"] == 4, "mark"].item() == "knee"
    assert table.loc[table["K"] == 16, "mark"].item() == "best"
    assert math.isnan(table["gain_per_doubling"][0])
    assert table["gain_per_doubling"][1] == pytest.approx(0.9)


def test_group_throughput_when_rows_lack_train_throughput(tmp_path):
    runs = _sweep(tmp_path, train=False, energy=50.0, unified_model={1: 100, 2: 300, 4: 310})
    (curve,) = curves(runs)
    assert curve.metric == "throughput_group" and curve.knee == 2
    assert curve.point(4).energy_per_model_j == pytest.approx(50.0)


def test_intervals_with_enough_passes_bound_the_knee(tmp_path):
    runs = _sweep(tmp_path, passes=6, noise=0.01, unified_model=dict(TP))
    (curve,) = curves(runs)
    assert curve.has_intervals and curve.knee == 4
    assert curve.knee_low <= 4 <= curve.knee_high
    for point in curve.points:
        assert point.n == 6 and point.low <= point.throughput <= point.high
    assert curve.knee_text.startswith("K = 4 [")
    # two passes: no interval is invented
    (few,) = curves(_sweep(tmp_path / "few", passes=2, noise=0.01, unified_model=dict(TP)))
    assert not few.has_intervals and math.isnan(few.point(4).low)


def test_still_growing_curve_says_sweep_further(tmp_path):
    (curve,) = curves(_sweep(tmp_path, unified_model={1: 100, 2: 200, 4: 400}))
    assert curve.knee is None and curve.best_k == 4
    assert "sweep further" in curve.knee_text


def test_a_single_k_is_no_curve(tmp_path):
    assert curves(_sweep(tmp_path, seq={5: 100}, unified_model={5: 300})) == []


def test_fraction_outside_zero_one_is_refused(tmp_path):
    with pytest.raises(ValueError):
        curves(_sweep(tmp_path, seq={1: 1, 2: 2}), fraction=1.5)


def test_a_dip_does_not_fake_a_knee_and_a_later_rise_vetoes_a_plateau():
    # the trial run on a loaded VM: seq's throughput fell after K = 1, a +35 % step 4 -> 8
    assert find_knee([1, 2, 4, 8, 16], [462, 123, 113, 153, 134], 0.10) == 1
    # a dip at 4, then growth: every larger K is compared, not only the next one
    assert find_knee([1, 2, 4, 8, 16], [164, 292, 212, 387, 590], 0.10) is None
    assert find_knee([1, 2, 4, 8], [100, 104, 90, 140], 0.10) is None
    # missing points are skipped, never read as 0
    assert find_knee([1, 2, 4, 8], [100, math.nan, 300, 310], 0.10) == 4
