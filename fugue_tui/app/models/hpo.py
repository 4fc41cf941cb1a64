"""The Results screen's hpo parts (issue 25), Textual-free: the time-to-best speedup of each
group row (the analysis' ``ttb_speedup`` of the row's cell) and the best-so-far curve of an
hpo row (``executor_info.best_so_far``) drawn as a one-line step chart.

``ttb_speedup`` is computed per cell by :func:`engine.results.analysis.speedups` (the mean
``time_to_best_s`` of the baseline executor, ``engine.results.derived.BASELINE_EXECUTOR``,
under the same scheduler ÷ the cell's, only where both made the same stopping decisions); a
group row shows its cell's value, missing (never 0) when the cell has none — outside hpo,
without a matching baseline cell, or "decisions differ".
"""

from __future__ import annotations

import json
import math
from typing import Any

import pandas as pd
from rich.text import Text

#: Eight levels of a block sparkline, lowest first.
BLOCKS = "▁▂▃▄▅▆▇█"


def ttb_by_row(groups: pd.DataFrame, table: pd.DataFrame, keys: list[str],
               row_key) -> dict[str, float]:
    """Row key (``row_key(row)``) → its cell's ``ttb_speedup`` (finite values only).

    ``table``: the analysis' cell table (one row per cell, ``keys`` its key columns);
    rows are matched on the key columns both frames carry
    (:func:`fugue_tui.app.models.results.cell_figure_by_row`, as the speedup column is)."""
    from fugue_tui.app.models.results import cell_figure_by_row

    return cell_figure_by_row(groups, table, keys, "ttb_speedup", row_key)


def best_curve(row: dict[str, Any]) -> dict[str, Any] | None:
    """The row's best-so-far record (``metric``, ``mode``, ``curve`` [[t s, best], ...]) from
    its ``executor_info`` (a JSON text in the CSV), or None (not an hpo row, no trial
    validated, an unreadable field)."""
    info = row.get("executor_info")
    if isinstance(info, str):
        try:
            info = json.loads(info)
        except ValueError:
            return None
    if not isinstance(info, dict):
        return None
    best = info.get("best_so_far")
    if not isinstance(best, dict) or not best.get("curve"):
        return None
    curve = [(float(t), float(v)) for t, v in best["curve"]
             if isinstance(t, (int, float)) and isinstance(v, (int, float))]
    if not curve:
        return None
    return {"metric": str(best.get("metric") or "val_loss"), "mode": best.get("mode", "min"),
            "curve": curve}


def step_values(curve: list[tuple[float, float]], end: float, width: int) -> list[float | None]:
    """The best-so-far step function sampled at ``width`` times evenly over [0, ``end``] s:
    None before the first validation (nothing known yet: not drawn)."""
    out: list[float | None] = []
    for i in range(width):
        t = end * (i + 1) / width
        known = [v for s, v in curve if s <= t]
        out.append(known[-1] if known else None)
    return out


def sparkline(values: list[float | None], higher_is_up: bool = True) -> str:
    """Block sparkline of ``values`` (blank where None); a flat series draws mid-height."""
    seen = [v for v in values if v is not None]
    if not seen:
        return " " * len(values)
    low, high = min(seen), max(seen)
    chars = []
    for v in values:
        if v is None:
            chars.append(" ")
            continue
        level = 0.5 if high == low else (v - low) / (high - low)
        if not higher_is_up:
            level = 1 - level
        chars.append(BLOCKS[min(len(BLOCKS) - 1, int(level * len(BLOCKS)))])
    return "".join(chars)


def curve_text(best: dict[str, Any], time_to_best: float | None, width: int) -> Text:
    """The best-so-far curve as a few lines: a title, the step sparkline over the group's
    time (up = better: a loss is drawn inverted), its first and last values, and when the
    best was known (time to best)."""
    curve = best["curve"]
    metric, mode = best["metric"], best["mode"]
    end = max(curve[-1][0], time_to_best or 0.0) * 1.05 or 1.0
    width = max(8, width)
    text = Text(f"best so far ({metric}, {'lower' if mode == 'min' else 'higher'} is better;"
                f" up = better)\n", style="bold")
    text.append(sparkline(step_values(curve, end, width), higher_is_up=mode != "min") + "\n",
                style="green")
    text.append(f"0 s{'':>{max(1, width - 3 - len(f'{end:.1f} s'))}}{end:.1f} s\n", style="dim")
    text.append(f"first {curve[0][1]:.4g} at {curve[0][0]:.1f} s → best {curve[-1][1]:.4g} at "
                f"{curve[-1][0]:.1f} s")
    if time_to_best is not None and math.isfinite(time_to_best):
        text.append(f"\ntime to best (within 1 %): {time_to_best:.1f} s")
    return text
