"""Time to best in ``fugue-tui report`` and ``report --export`` (issue 25): per hpo
workload a table (time to best with its range over passes, its speedup over seq under the
same scheduler, the best metric, the trial most often best, trials stopped) and a terminal
chart of each cell's best-so-far curve; the export writes the curves as
``best_so_far.csv`` (every pass, every step) and ``best_so_far.png`` / ``.svg``.

The numbers come from :mod:`engine.results.hpo_curves` and
:func:`engine.results.analysis.speedups`; this module lays them out. Missing is "—" in
the terminal and empty in the CSV, never 0.
"""

from __future__ import annotations

import csv
import math
import textwrap
from pathlib import Path
from typing import Any

from rich import box
from rich.table import Table
from rich.text import Text

from fugue_tui.format import MISSING, fmt_number

BEST_FIGURE = "best_so_far"
BEST_TABLE = "best_so_far.csv"


def _metric_name(cells: list[Any]) -> str:
    metrics = {c.metric for c in cells if c.metric}
    return metrics.pop() if len(metrics) == 1 else "val metric"


def workloads(cells: list[Any]) -> list[tuple[str, list[Any]]]:
    """``(title, cells)`` per experiment and machine, in load order."""
    out: dict[str, list[Any]] = {}
    for cell in cells:
        machine = cell.provenance.get("machine") or "unknown machine"
        gpu = cell.provenance.get("gpu_name") or "no GPU"
        out.setdefault(f"{cell.cell['exp_id']} on {machine} · {gpu}", []).append(cell)
    return list(out.items())


def analyse(runs: Any, table: Any, by_campaign: bool = False
            ) -> tuple[list[Any], dict[tuple[str, ...], tuple[float, str]]]:
    """The hpo cells of ``runs`` and the time-to-best speedups of ``table`` (the report's
    :func:`~engine.results.analysis.speedups`) by cell key."""
    from engine.results.hpo_curves import hpo_cells, ttb_speedups

    return hpo_cells(runs, by_campaign), ttb_speedups(table, by_campaign)


def _key(cell: Any, by_campaign: bool) -> tuple[str, ...]:
    from engine.results.analysis import CELL_COLUMNS, provenance_columns
    from engine.results.hpo_curves import key_text

    values = {**cell.provenance, **cell.cell}
    return key_text(values, provenance_columns(by_campaign) + list(CELL_COLUMNS))


#: Below this console width the table folds to eight columns (:func:`ttb_table`).
COMPACT_BELOW = 120


def ttb_table(title: str, cells: list[Any], speed: dict, by_campaign: bool = False,
              compact: bool = False) -> Table:
    """One workload's hpo cells as a Rich table (module doc). ``compact`` (a console
    narrower than :data:`COMPACT_BELOW`): the time to best's [min, max] under it, and the
    ttb speedup's baseline under the speedup, so that ten columns of figures fit 80
    columns without cutting them."""
    metric = _metric_name(cells)
    # compact: no vertical rules (eight columns of figures and their rules need 84 columns)
    table = Table(title=f"{title}: time to best", title_justify="left",
                  **({"box": box.SIMPLE_HEAD, "pad_edge": False, "collapse_padding": True}
                     if compact else {}))
    names = (("strategy", "n", "time to\nbest s\n(min–max)", "ttb\nspeedup\n(vs)",
              f"best\n{metric}", "best trial\n(passes)", "trials\nstop-\nped", "T_group\ns")
             if compact else
             ("strategy", "n", "time to\nbest s", "[min, max]", "ttb\nspeedup",
              "ttb baseline", f"best\n{metric}", "best trial\n(passes)", "trials\nstopped",
              "T_group\ns"))
    for name in names:
        # a long strategy label wraps, never loses its end ("unified_…" named nothing)
        table.add_column(Text(name), justify="left" if name in (
            "strategy", "[min, max]", "ttb baseline", "best trial\n(passes)") else "right",
            overflow="fold" if name == "strategy" else "ellipsis",
            min_width=min(20, max((len(w) for c in cells for w in c.label.split()), default=8))
            if name == "strategy" else None)
    for cell in cells:
        low, high = cell.ttb_range
        ratio, baseline = speed.get(_key(cell, by_campaign), (math.nan, ""))
        trial, count = cell.best_trial
        t_group = [p.T_group for p in cell.passes if math.isfinite(p.T_group)]
        spread = f"[{low:.2f}, {high:.2f}]" if math.isfinite(low) else MISSING
        if compact and math.isfinite(low):
            spread = f"{low:.2f}–{high:.2f}"
        ttb, speedup = fmt_number(cell.ttb_mean, ".2f"), fmt_number(ratio, ".2f")
        rest = (fmt_number(cell.best_metric_mean, ".4f"),
                f"{trial} ({count}/{cell.n})" if trial else MISSING,
                fmt_number(cell.trials_stopped_mean, ".1f"),
                fmt_number(sum(t_group) / len(t_group) if t_group else math.nan, ".2f"))
        if compact:
            table.add_row(cell.label, str(cell.n), f"{ttb}\n{spread}",
                          f"{speedup}\n{baseline or MISSING}", *rest)
        else:
            table.add_row(cell.label, str(cell.n), ttb, spread, speedup, baseline or MISSING,
                          *rest)
    return table


def note_lines() -> list[str]:
    from engine.results.derived import BASELINE_EXECUTOR
    from engine.results.hpo_best import EPSILON

    return [f"time to best = seconds from the group window's start until some trial's "
            f"validation came within {EPSILON:.0%} (relative) of the group's final best; "
            f"ttb speedup = mean {BASELINE_EXECUTOR} time to best under the same scheduler ÷ the cell's, "
            f"only when their early-stopping decisions match (docs/results.md). The chart "
            f"draws each cell's pass of median time to best."]


def charts(cells: list[Any], width: int = 80, color: bool | None = None) -> list[str]:
    """One terminal chart per workload: each cell's representative best-so-far curve."""
    from fugue_tui.report.charts import best_so_far_chart

    out = []
    for title, group in workloads(cells):
        series = []
        for cell in group:
            rep = cell.representative
            series.append((f"{cell.label} (pass {rep.pass_index})" if rep and rep.pass_index
                           else cell.label, rep.curve if rep else (),
                           rep.time_to_best_s if rep else None, rep.T_group if rep else None))
        out.append(best_so_far_chart(series, title=f"{title}: best so far", width=width,
                                     color=color, ylabel=f"best {_metric_name(group)}"))
    return out


def print_hpo(cells: list[Any], speed: dict, console: Any, width: int = 80,
              color: bool | None = None, chart: bool = True, by_campaign: bool = False) -> None:
    """The tables (and with ``chart`` the charts) of the hpo cells; nothing without one."""
    if not cells:
        return
    for title, group in workloads(cells):
        console.print(ttb_table(title, group, speed, by_campaign,
                                compact=(console.width or width) < COMPACT_BELOW))
    for line in note_lines():
        console.print(Text(line))
    if chart:
        for text in charts(cells, width=width, color=color):
            console.print(Text.from_ansi(text) if color else Text(text))


def planned_files(formats: list[str]) -> list[str]:
    """The files :func:`export_hpo` owns for ``formats`` (known before reading)."""
    return [f"{BEST_FIGURE}.{f}" for f in ("png", "svg") if f in formats] + [BEST_TABLE]


def export_hpo(cells: list[Any], out: Path, formats: list[str]) -> list[Path]:
    """``best_so_far.csv`` (one row per cell, pass and step of the curve, with the pass's
    time to best, best metric and trial) and, for png / svg, ``best_so_far.<fmt>`` (a panel
    per workload: every pass's step line, its time to best marked); nothing without an hpo
    cell. Returns the paths."""
    if not cells:
        return []
    path = out / BEST_TABLE
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["machine", "gpu_name", "exp_id", "strategy", "executor", "scheduler",
                         "precision", "K", "pass", "attempt", "group_id", "metric", "mode",
                         "t_s", "best", "time_to_best_s", "best_val_metric", "best_trial",
                         "trials_stopped", "T_group"])
        for cell in cells:
            k = cell.cell.get("K")
            for p in cell.passes:
                for t, v in p.curve or [(None, None)]:  # a pass without a curve: one row
                    writer.writerow([
                        cell.provenance.get("machine") or "", cell.provenance.get("gpu_name") or "",
                        cell.cell["exp_id"], cell.label, cell.cell["executor"],
                        cell.cell.get("scheduler") or "", cell.cell.get("precision") or "",
                        "" if k is None or k != k else int(k),
                        "" if p.pass_index is None else p.pass_index,
                        "" if p.attempt is None else p.attempt, p.group_id,
                        cell.metric or "", cell.mode or "", _csv(t), _csv(v),
                        _csv(p.time_to_best_s), _csv(p.best_val_metric), p.best_trial or "",
                        _csv(p.trials_stopped), _csv(p.T_group)])
    written = [path]
    for fmt in ("png", "svg"):
        if fmt in formats:
            written.append(_figure(cells, out / f"{BEST_FIGURE}.{fmt}", fmt))
    return written


def _csv(value: Any) -> str:
    """Missing stays empty in the table, never 0."""
    if value is None:
        return ""
    value = float(value)
    return repr(value) if math.isfinite(value) else ""


def _figure(cells: list[Any], path: Path, fmt: str) -> Path:
    from fugue_tui.report.export import _pyplot
    from fugue_tui.report.points import step_points

    plt = _pyplot()
    groups = workloads(cells)
    fig, axes = plt.subplots(len(groups), 1, figsize=(8.0, 3.6 * len(groups)),
                             layout="constrained", squeeze=False)
    try:
        for ax, (title, group) in zip(axes[:, 0], groups, strict=True):
            for i, cell in enumerate(group):
                colour = f"C{i % 10}"
                rep = cell.representative
                for p in cell.passes:
                    xs, ys = step_points(p.curve, p.T_group)
                    if not xs:
                        continue
                    main = p is rep
                    ax.plot(xs, ys, color=colour, linewidth=1.6 if main else 0.7,
                            alpha=1.0 if main else 0.4,
                            label=f"{cell.label} (n={cell.n})" if main else None)
                    if math.isfinite(p.time_to_best_s):
                        at = next((v for t, v in reversed(p.curve)
                                   if t <= p.time_to_best_s + 1e-12), p.curve[0][1])
                        ax.plot([p.time_to_best_s], [at], marker="*", markersize=9 if main else 5,
                                color=colour, alpha=1.0 if main else 0.5, linestyle="none")
            ax.set_xlabel("seconds since the group window opened")
            ax.set_ylabel(f"best {_metric_name(group)} so far")
            ax.set_title("\n".join(textwrap.wrap(title + ": best so far (★ time to best; "
                                                 "bold: the pass of median time to best)",
                                                 80)), fontsize=10)
            if ax.get_legend_handles_labels()[0]:
                ax.legend(fontsize=8)
        metadata = {"Date": None} if fmt == "svg" else {"Software": "fugue-tui"}
        fig.savefig(path, format=fmt, metadata=metadata, dpi=120)
    finally:
        plt.close(fig)
    return path
