"""The Results screen's figures and table read right at any width (issue 30): round plain
axis ticks (no ``4.8e2``), every bar's label whole on an 80-column chart, a killed or failed
row's reason in the table, a missing speedup that says why, and a speedup below 1 beside a
higher throughput explained."""

from __future__ import annotations

import re

from engine.results.load import load_runs
from fugue_tui.app.models.results import COLUMNS, apply_filter, cell_text, parse_filter
from fugue_tui.report.charts import bar_chart, figure_chart
from fugue_tui.report.figures import Bar, Figure, _slower_but_faster, build
from tests.snapshots.helpers import FIXTURES


def test_bar_chart_axis_ticks_are_round_plain_numbers():
    text = bar_chart(["a", "b", "c"], [480.0, 455.5, 12.25], width=70, color=False)
    axis = text.splitlines()[-1]
    assert "e+" not in text and "e2" not in axis
    numbers = [float(n.replace(",", "")) for n in re.findall(r"[\d,.]+", axis)]
    assert numbers[0] == 0 and len(numbers) >= 3
    steps = {round(b - a, 9) for a, b in zip(numbers, numbers[1:], strict=False)}
    assert len(steps) == 1 and steps.pop() in (50, 100, 200)


def test_long_labels_on_a_narrow_chart_are_numbered_and_listed_whole():
    label = "D_ens unified_model compile=default vf:1,s:0,fl:1 rung D+FL"
    figure = Figure("speedup", "speedup", "×",
                    [Bar(label, 0.136, text="0.136"), Bar("D_cv seq", None)], 1.0, "note")
    text = figure_chart(figure, width=78, color=False)
    assert f"1  {label} 0.136" in text  # the legend keeps the whole label and value
    assert "missing: D_cv seq" in text and text.endswith("note")
    bars = [line for line in text.splitlines() if "┤" in line]
    assert bars and all(line.index("┤") < 5 for line in bars)  # room left for the bars
    wide = figure_chart(figure, width=150, color=False)
    assert f"{label} 0.136┤" in wide  # wide enough: labels beside the bars as before


def test_the_reason_of_a_killed_row_is_a_column():
    assert COLUMNS[-1] == ("reason", "reason", "error")
    assert cell_text("reason", "killed by control\ncommand") == "killed by control command"
    assert cell_text("reason", None) == ""  # an ok row has no reason, not a dash


def test_a_missing_speedup_says_the_filter_left_seq_out():
    runs = load_runs(FIXTURES / "runs")
    shown = apply_filter(runs, parse_filter("executor:unified"))
    note = build(shown, n_boot=50).figures[0].note
    assert "no seq row of that experiment among the rows shown" in note
    assert "no seq row" not in build(runs, n_boot=50).figures[0].note


def test_a_speedup_below_one_beside_a_higher_throughput_is_explained():
    rows = [("D_ens seq", {"exp_id": "D_ens", "executor": "seq", "machine": "m",
                           "speedup": 1.0, "throughput_group_mean": 1000.0}),
            ("D_ens ray", {"exp_id": "D_ens", "executor": "ray", "machine": "m",
                           "speedup": 0.8, "throughput_group_mean": 1200.0}),
            ("D_ens mp", {"exp_id": "D_ens", "executor": "mp", "machine": "m",
                          "speedup": 0.8, "throughput_group_mean": 700.0})]
    lines = _slower_but_faster(rows)
    assert lines == ["D_ens ray: speedup 0.800 < 1 though its throughput is 1.20× seq's: it "
                     "trained about 1.50× the samples, so its T_group is longer while it "
                     "trains faster"]
