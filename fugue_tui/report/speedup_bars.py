"""The speedup chart's bars from a speedup table (:func:`engine.results.analysis.speedups`):
which rows are drawn (every executor but the baseline, whose speedup is 1 by definition),
in which order, with which labels and intervals, and the width that holds them. plotext
draws them in :func:`fugue_tui.report.charts.speedup_chart`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from engine.results.derived import BASELINE_EXECUTOR
from fugue_tui.report.points import is_missing

#: The title of the speedup chart.
SPEEDUP_TITLE = (f"speedup over {BASELINE_EXECUTOR} (ratio of mean T_group; "
                 f"1 = {BASELINE_EXECUTOR})")
#: Columns a bar needs beside its label to be read: the axis, the bar area, the frame.
MIN_BAR_AREA = 20


def speedup_label(row: Mapping[str, Any]) -> str:
    """``exp executor`` plus what distinguishes the cell (``fugue_tui.report.figures.cell_label``)."""
    from fugue_tui.report.figures import cell_label

    return cell_label(dict(row))


def speedup_chart_width(speedup_df, title: str = SPEEDUP_TITLE) -> int:
    """The fewest columns that hold the speedup chart of ``speedup_df`` with its title and
    every label (the longest label, then :data:`MIN_BAR_AREA` columns of bars)."""
    bars = speedup_bars(speedup_df)
    longest = max((len(label) for label in bars[0]), default=0) if bars else 0
    return max(len(title), longest + MIN_BAR_AREA)


def speedup_bars(speedup_df):
    """``(labels, values, errors)`` of the rows that are not the baseline's, bottom bar
    first (plotext's order); None when only baseline rows are left. Several machines:
    labels start with the machine."""
    from fugue_tui.report.figures import mark_sweeps

    frame = mark_sweeps(speedup_df)
    frame = frame[frame["executor"] != BASELINE_EXECUTOR]
    if not len(frame):
        return None
    machines = frame["machine"].unique() if "machine" in frame.columns else []
    frame = frame.assign(_exp=frame["exp_id"].map({e: i for i, e in enumerate(
        dict.fromkeys(frame["exp_id"]))}))
    frame = frame.sort_values(["_exp", "executor"], kind="stable")
    labels, values, errors = [], [], []
    for row in frame.to_dict("records"):
        label = speedup_label(row)
        if len(machines) > 1:
            label = f"{row['machine']}: {label}"
        value = row.get("speedup")
        # the value goes into the tick label: inside the bar the line at 1 could cover it
        labels.append(label if is_missing(value) else f"{label} {float(value):.3f}")
        values.append(value)
        errors.append((row.get("ci_low"), row.get("ci_high")))
    # plotext draws the first bar at the bottom: reverse so the table order reads downwards.
    return tuple(x[::-1] for x in (labels, values, errors))
