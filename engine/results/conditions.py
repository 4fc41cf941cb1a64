"""The conditions a cell was measured under (issue 46): how busy the host was during its
group windows, and whether a window was too short to time.

Every group row records the host's 1-minute load average when its window opened and
closed (``host_load_start``, ``host_load_end``) and the host's logical cores
(``cpu_cores``). A row is **busy** by the rule the cell itself warned with
(:func:`engine.measure.host.busy_warning`): the higher of its two loads above its cores
plus :data:`~engine.measure.host.BUSY_MARGIN`. A row whose loads or cores were not
recorded (older rows, the harness's) is not judged busy — nothing is claimed from a missing
value. A row is **short** when its ``T_group`` is under :data:`MIN_WINDOW_S`: start-up,
the timer's resolution and the load average's one-minute lag weigh on such a window more
than the strategy does.

:func:`fill` adds the per-cell figures to the analysis's cells
(:func:`engine.results.analysis.speedups`); :func:`notes` words them for the report; the
advisor (:mod:`engine.results.advise`) refuses to call a difference resolved on busy rows.
Pandas and numpy only.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from engine.measure.host import BUSY_MARGIN

#: A group window shorter than this (s) is warned about.
MIN_WINDOW_S = 1.0

#: The per-cell columns :func:`fill` adds (the analysis appends them to its table).
COLUMNS = ("host_load_max", "host_cores", "busy_n", "short_n", "seq_busy_n",
           "seq_host_load_max")


def row_conditions(rows: pd.DataFrame) -> pd.DataFrame:
    """Per group row (aligned with ``rows``): ``load`` (the higher of ``host_load_start`` and
    ``host_load_end``, NaN when neither was recorded), ``cores`` (``cpu_cores``, NaN when
    missing), ``busy`` and ``short`` (bools; module doc)."""
    def column(name: str) -> pd.Series:
        if name not in rows.columns:
            return pd.Series(np.nan, index=rows.index)
        return pd.to_numeric(rows[name], errors="coerce")

    load = pd.concat([column("host_load_start"), column("host_load_end")], axis=1).max(axis=1)
    cores = column("cpu_cores").where(lambda c: c > 0)
    busy = (load > cores + BUSY_MARGIN).fillna(False).astype(bool)
    short = (column("T_group") < MIN_WINDOW_S).fillna(False).astype(bool)
    return pd.DataFrame({"load": load, "cores": cores, "busy": busy, "short": short})


def fill(cells: pd.DataFrame, ok: pd.DataFrame, seq_rows: pd.DataFrame) -> None:
    """Add :data:`COLUMNS` to ``cells`` (in place): over each cell's ok rows (``ok["cell"]``)
    the highest load, the cores, how many rows were busy and how many short; over its
    baseline's rows (``seq_rows["base"]``, ``cells["base"]``) how many were busy and the
    highest load. Missing loads stay NaN (never 0); counts are 0 when nothing is known."""
    mine = row_conditions(ok).assign(cell=ok["cell"].to_numpy())
    by_cell = mine.groupby("cell").agg(host_load_max=("load", "max"),
                                       host_cores=("cores", "max"),
                                       busy_n=("busy", "sum"), short_n=("short", "sum"))
    for column in ("host_load_max", "host_cores", "busy_n", "short_n"):
        cells[column] = cells["cell"].map(by_cell[column])
    base = row_conditions(seq_rows).assign(base=seq_rows["base"].to_numpy())
    by_base = base.groupby("base").agg(seq_busy_n=("busy", "sum"),
                                       seq_host_load_max=("load", "max"))
    cells["seq_busy_n"] = cells["base"].map(by_base["seq_busy_n"])
    cells["seq_host_load_max"] = cells["base"].map(by_base["seq_host_load_max"])
    for count in ("busy_n", "short_n", "seq_busy_n"):
        cells[count] = cells[count].fillna(0).astype(int)


def _label(row: dict[str, Any]) -> str:
    parts = [str(row.get("exp_id")), str(row.get("executor"))]
    parts += [str(row[c]) for c in ("scheduler", "features", "precision")
              if row.get(c) and row.get(c) == row.get(c) and row.get(c) != "fp32"]
    return " ".join(parts)


def busy_text(n_busy: int, n: int, load: float, cores: float) -> str:
    """``5 of 5 rows at host load up to 6.2 on 2 cores``."""
    where = (f" at host load up to {load:.1f} on {cores:g} cores"
             if math.isfinite(load) and math.isfinite(cores) else "")
    return f"{n_busy} of {n} rows{where}"


def notes(table: pd.DataFrame) -> list[str]:
    """The report's lines about conditions (none when every row was quiet and long enough):
    one naming the cells measured on a busy host, with their figures, and one naming the
    cells with group windows under :data:`MIN_WINDOW_S`."""
    if not len(table) or "busy_n" not in table.columns:
        return []
    out = []
    records = table.to_dict("records")
    busy = [r for r in records if r.get("busy_n", 0) > 0]
    if busy:
        cells = "; ".join(f"{_label(r)}: " + busy_text(int(r["busy_n"]), int(r["n_strategy"]),
                                                      float(r["host_load_max"]),
                                                      float(r["host_cores"]))
                          for r in busy)
        out.append(f"busy host (load average above the cores + {BUSY_MARGIN:g}, as each cell "
                   f"warned): {cells}. Timings taken while other work ran are not "
                   f"comparable; a speedup or interval involving them is not a resolved "
                   f"difference (rerun on a quiet host).")
    short = [r for r in records if r.get("short_n", 0) > 0]
    if short:
        cells = "; ".join(f"{_label(r)}: {int(r['short_n'])} of {int(r['n_strategy'])} rows"
                          for r in short)
        out.append(f"short window: T_group under {MIN_WINDOW_S:g} s in {cells}. Start-up and "
                   f"the timer weigh on so short a window more than the strategy does; give "
                   f"the workload more jobs or epochs.")
    return out


# --------------------------------------------------------------------------- the advice

def _count(value: Any) -> int:
    try:
        out = float(value)
    except (TypeError, ValueError):
        return 0
    return int(out) if math.isfinite(out) else 0


def _number(value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


def condition_fields(row: dict[str, Any]) -> dict[str, Any]:
    """The condition fields of an advice candidate (:class:`engine.results.advise.Option`)
    from its analysis row (missing: NaN figures, 0 counts)."""
    return dict(host_load_max=_number(row.get("host_load_max")),
                host_cores=_number(row.get("host_cores")),
                busy_n=_count(row.get("busy_n")), short_n=_count(row.get("short_n")),
                seq_busy_n=_count(row.get("seq_busy_n")),
                seq_host_load_max=_number(row.get("seq_host_load_max")))


def _compared(best: Any, second: Any) -> list[Any]:
    return [o for o in (best, second) if o is not None]


def busy_figures(best: Any, second: Any) -> list[str]:
    """Which of the compared candidates (and their seq baseline) had busy rows, with the
    figures; [] when none did."""
    out = []
    for option in _compared(best, second):
        if option.busy_n:
            out.append(f"{option.label} (K = {option.K}): " + busy_text(
                option.busy_n, option.n, option.host_load_max, option.host_cores))
    seq_listed = any(o.baseline and o.busy_n for o in _compared(best, second))
    baseline = next((o for o in _compared(best, second)
                     if not o.baseline and o.seq_busy_n), None)
    if baseline is not None and not seq_listed:
        out.append("their seq baseline: " + busy_text(
            baseline.seq_busy_n, baseline.n_seq, baseline.seq_host_load_max,
            baseline.host_cores))
    return out


def busy_verdict(best: Any, second: Any, distinguishable: bool | None,
                 verdict: str) -> tuple[bool, str]:
    """``(busy, verdict)``: where a compared row was measured on a busy host, the verdict
    refuses to call the difference resolved, says why with the figures, and keeps what
    the intervals said; else ``verdict`` unchanged."""
    figures = busy_figures(best, second)
    if not figures:
        return False, verdict
    name = (f"{best.label} (K = {best.K}) vs {second.label} (K = {second.K})"
            if second is not None else f"{best.label} (K = {best.K})")
    said = {True: "their 95% intervals do not overlap", False: "their 95% intervals overlap",
            None: "no intervals to compare"}[distinguishable]
    return True, (f"{name}: not resolved: the host was busy while they were measured "
                  f"({'; '.join(figures)}; load average above the cores + {BUSY_MARGIN:g}); "
                  f"{said}, but timings taken while other work ran do not rank strategies: "
                  f"rerun on a quiet host")


def host_line(best: Any, second: Any) -> str:
    """The recorded host load over the compared rows as one line of the advice ("" when
    none was recorded)."""
    options = _compared(best, second)
    loads = [x for o in options for x in (o.host_load_max, o.seq_host_load_max)
             if math.isfinite(x)]
    if not loads:
        return ""
    cores = max((o.host_cores for o in options if math.isfinite(o.host_cores)),
                default=math.nan)
    on = f" on {cores:g} cores" if math.isfinite(cores) else " (cores not recorded)"
    busy = sum(o.busy_n for o in options)
    rows = sum(o.n for o in options)
    text = (f"host load (1-minute average) while measuring: up to {max(loads):.1f}{on}; "
            f"busy in {busy} of the {rows} rows compared")
    baseline = next((o for o in options if not o.baseline), None)
    if baseline is not None and not any(o.baseline for o in options):
        text += f", {baseline.seq_busy_n} of their seq baseline's {baseline.n_seq}"
    return text


def short_notes(best: Any, second: Any) -> list[str]:
    """A note per compared candidate with group windows under :data:`MIN_WINDOW_S`."""
    return [f"{o.label} (K = {o.K}): T_group under {MIN_WINDOW_S:g} s in {o.short_n} of "
            f"{o.n} rows: start-up and the timer weigh on so short a window more than the "
            f"strategy does; give the workload more jobs or epochs"
            for o in _compared(best, second) if o.short_n]
