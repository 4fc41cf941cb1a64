"""fugue_tui.report.charts: text charts with labels, missing values listed and never drawn, min/max
downsampling, colourless output, and plotext imported nowhere else."""

from __future__ import annotations

import ast
import math
from pathlib import Path

import numpy as np
import pandas as pd

from fugue_tui.report.charts import (
    MISSING_PREFIX,
    bar_chart,
    downsample,
    line_chart,
    speedup_chart,
)

ROOT = Path(__file__).resolve().parents[4]


def _split(text: str) -> tuple[str, list[str]]:
    """(the chart, the labels listed as missing)."""
    lines = text.splitlines()
    missing = [line for line in lines if line.startswith(MISSING_PREFIX)]
    chart = "\n".join(line for line in lines if not line.startswith(MISSING_PREFIX))
    listed = missing[0][len(MISSING_PREFIX):].split(", ") if missing else []
    return chart, listed


def test_bar_chart_has_its_labels_and_title_and_no_side_effects(capsys):
    text = bar_chart(["alpha", "gamma_long"], [1.5, 3.0], title="demo title", width=70,
                     color=False)
    assert "alpha" in text and "gamma_long" in text and "demo title" in text
    assert "1.5" in text and "3" in text  # values written in the bars
    assert "\x1b[" not in text  # colourless
    assert max(len(line) for line in text.splitlines()) <= 70
    assert capsys.readouterr() == ("", "")  # nothing printed


def test_missing_value_is_listed_and_not_drawn():
    text = bar_chart(["alpha", "beta_missing", "gamma", "delta_none"],
                     [1.0, float("nan"), 2.0, None], width=70, color=False)
    chart, listed = _split(text)
    assert listed == ["beta_missing", "delta_none"]
    assert "beta_missing" not in chart and "delta_none" not in chart
    assert "alpha" in chart and "gamma" in chart


def test_all_missing_draws_no_chart_at_all():
    text = bar_chart(["a_cell", "b_cell"], [None, math.nan], title="t", width=60, color=False)
    assert text.splitlines() == ["t", MISSING_PREFIX + "a_cell, b_cell"]
    assert "┤" not in text and "0.0" not in text


def test_more_bars_than_the_limit_draws_the_top_ones_and_counts_the_rest():
    labels = [f"cell_{i:03d}" for i in range(12)]
    text = bar_chart(labels, [1.0 + i for i in range(12)], width=70, color=False, max_bars=5)
    lines = text.splitlines()
    assert lines[-1].startswith("… 7 more bars not drawn")
    # plotext draws the first bar at the bottom: the top five are the last five labels
    assert all(f"cell_{i:03d}" in text for i in range(7, 12))
    assert not any(f"cell_{i:03d}" in text for i in range(7))
    unlimited = bar_chart(labels, [1.0 + i for i in range(12)], width=70, color=False,
                          max_bars=None)
    assert all(label in unlimited for label in labels) and "more bars" not in unlimited


def test_interval_is_drawn_and_axis_starts_at_zero():
    plain = bar_chart(["x_cell"], [2.0], width=60, color=False)
    with_ci = bar_chart(["x_cell"], [2.0], width=60, color=False, errors=[(1.5, 2.5)])
    assert plain != with_ci
    assert "0.0" in plain.splitlines()[-1]  # bars start at 0, never at the smallest value


def test_color_follows_no_color(monkeypatch):
    monkeypatch.delenv("NO_COLOR", raising=False)
    assert "\x1b[" in bar_chart(["a"], [1.0], width=40)
    monkeypatch.setenv("NO_COLOR", "1")
    assert "\x1b[" not in bar_chart(["a"], [1.0], width=40)
    assert "\x1b[" in bar_chart(["a"], [1.0], width=40, color=True)


def test_downsample_keeps_min_and_max_of_a_long_series():
    rng = np.random.default_rng(3)
    xs = np.arange(10_000, dtype=float)
    ys = rng.normal(0.0, 1.0, 10_000)
    ys[4321], ys[9876] = 25.0, -30.0  # lone spikes a bucket mean would flatten
    ys[17] = np.nan  # dropped, never drawn as 0
    dx, dy = downsample(xs, ys, 68)
    assert len(dy) <= 2 * 68
    assert dy.max() == 25.0 and dx[dy.argmax()] == 4321
    assert dy.min() == -30.0 and dx[dy.argmin()] == 9876
    assert np.all(np.diff(dx) > 0) and not np.isnan(dy).any()
    short_x, short_y = downsample(xs[:50], ys[:50], 68)
    assert len(short_y) == 49  # short series unchanged but for the NaN


def test_line_chart_of_a_long_series():
    xs = np.arange(10_000)
    text = line_chart(xs, {"loss_curve": np.sin(xs / 500.0), "empty": [np.nan] * 10_000},
                      title="loss", width=70, height=12, color=False)
    assert "loss_curve" in text and "loss" in text
    assert len(text.splitlines()) <= 12 + 1


def test_speedup_chart_orders_lists_missing_and_skips_seq():
    df = pd.DataFrame([
        {"machine": "m", "exp_id": "E01", "executor": "seq", "compile_mode": "off",
         "scheduler": "", "features": "", "speedup": 1.0, "ci_low": np.nan, "ci_high": np.nan},
        {"machine": "m", "exp_id": "E01", "executor": "mp", "compile_mode": "off",
         "scheduler": "", "features": "", "speedup": 1.8, "ci_low": 1.6, "ci_high": 2.0},
        {"machine": "m", "exp_id": "E01", "executor": "ray", "compile_mode": "off",
         "scheduler": "asha", "features": "", "speedup": 2.4, "ci_low": np.nan,
         "ci_high": np.nan},
        {"machine": "m", "exp_id": "E02", "executor": "unified_model",
         "compile_mode": "reduce-overhead", "scheduler": "", "features": "vf:1,s:0,fl:0",
         "speedup": np.nan, "ci_low": np.nan, "ci_high": np.nan},
    ])
    chart, listed = _split(speedup_chart(df, width=90, color=False))
    assert listed == ["E02 unified_model compile=reduce-overhead vf:1,s:0,fl:0"]
    assert "E01 mp" in chart and "E01 ray asha" in chart and "E01 seq" not in chart
    assert "1.800" in chart and "2.400" in chart
    assert chart.index("E01 mp") < chart.index("E01 ray asha")  # table order, top down
    only_seq = speedup_chart(df[df["executor"] == "seq"], width=60, color=False)
    assert "only seq" in only_seq


def test_plotext_is_imported_only_by_charts():
    offenders = []
    for folder in ("engine", "fugue_tui", "bench"):
        for path in (ROOT / folder).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                names = []
                if isinstance(node, ast.Import):
                    names = [a.name for a in node.names]
                elif isinstance(node, ast.ImportFrom) and node.module:
                    names = [node.module]
                if any(n.split(".")[0] == "plotext" for n in names):
                    offenders.append(str(path.relative_to(ROOT)))
    assert offenders == ["fugue_tui/report/charts.py"]


def test_figure_chart_keeps_order_lists_missing_and_draws_intervals():
    from fugue_tui.report.charts import figure_chart
    from fugue_tui.report.figures import Bar, Figure

    figure = Figure("speedup", "speedup over seq", "×", [
        Bar("E1 unified_model", 1.5, 1.2, 1.8, "1.500 [1.200, 1.800]"),
        Bar("E2 unified_model", None, text="—"),
        Bar("E3 ray", 0.8, text="0.800")], reference=1.0, note="ratio of means")
    text = figure_chart(figure, width=80, color=False)
    lines = text.splitlines()
    first = next(i for i, line in enumerate(lines) if "E1 unified_model 1.500" in line)
    third = next(i for i, line in enumerate(lines) if "E3 ray 0.800" in line)
    assert first < third  # the figure's order, top to bottom
    assert "[1.200, 1.800]" in lines[first]
    assert lines[-2] == "missing: E2 unified_model" and lines[-1] == "ratio of means"
    assert "E2 unified_model" not in "\n".join(lines[:-2])  # never a bar at 0
    empty = figure_chart(Figure("energy", "energy per trained model", "J"), color=False)
    assert "no rows" in empty
