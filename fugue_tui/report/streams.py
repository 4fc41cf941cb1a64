"""``report``'s streams table (issue 51): the strategies that served one stream, each
per-stream figure's mean over passes with its 95 % interval where there are enough passes
(:mod:`engine.results.stream_report`)."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

from fugue_tui.format import MISSING

#: The table's columns: (figure, header, format).
_SHOWN = (("jct_mean_s", "JCT mean s", ".3f"), ("jct_p50_s", "p50 s", ".3f"),
          ("jct_p95_s", "p95 s", ".3f"), ("throughput_jps", "jobs/s busy", ".2f"),
          ("offered_load", "offered load", ".2f"), ("busy_cores_used", "cores busy", ".2f"),
          ("energy_per_job_j", "GPU J/job", ".1f"), ("cpu_energy_per_job_j", "CPU J/job", ".1f"))
#: Each table's first columns (repeated when the figures take several tables).
_KEY = ("executor", "max par", "passes")
#: Headers on two lines, so that a column is no wider than its numbers.
_HEADERS = {"max par": "max\npar", "JCT mean s": "JCT\nmean s", "jobs/s busy": "jobs/s\nbusy",
            "offered load": "offered\nload", "cores busy": "cores\nbusy",
            "GPU J/job": "GPU\nJ/job", "CPU J/job": "CPU\nJ/job"}


def _cell(figure: dict[str, Any], fmt: str) -> str:
    mean = figure.get("mean")
    if mean is None:
        return MISSING
    low, high = figure.get("ci_low"), figure.get("ci_high")
    if low is None or high is None:
        return format(mean, fmt)
    return f"{mean:{fmt}} [{low:{fmt}}, {high:{fmt}}]"


def _table(title: str, columns: list[str], rows: list[dict[str, str]]) -> Table:
    table = Table(title=title, title_justify="left")
    for name in (*_KEY, *columns):
        table.add_column(Text(_HEADERS.get(name, name)),
                         justify="left" if name == "executor" else "right", no_wrap=True)
    for row in rows:
        table.add_row(*(row[c] for c in (*_KEY, *columns)))
    return table


def _width(table: Table) -> int:
    """The width ``table`` takes when nothing has to wrap or be cut."""
    console = Console(width=100_000, color_system=None)
    return Measurement.get(console, console.options, table).maximum


def stream_tables(cells: list[dict[str, Any]], width: int | None = None) -> list[Table]:
    """One table per stream (none without stream cells), seq first: the executor, the most
    jobs that ran at once, the passes, and each figure's mean over passes with its interval;
    a figure no strategy recorded (energy on a CPU host, cores over busy periods shorter than
    the monitor's interval) is left out, named in the note. When the figures do not fit in
    ``width`` columns (None: always) they go on as several tables, ``(1/2)``, each repeating
    the executor: a value is never cut (``0.4…`` at 80 columns said nothing)."""
    by_stream: dict[str, list[dict[str, Any]]] = {}
    for cell in cells:
        by_stream.setdefault(cell["stream_sha256"], []).append(cell)
    tables = []
    for sha, group in by_stream.items():
        first = group[0]
        rate, jobs = first.get("arrival_rate_jps"), first.get("stream_jobs")
        title = f"stream {sha[:12]}: {MISSING if jobs is None else f'{jobs:g}'} jobs"
        if rate is not None:
            title += f", {rate:.2f} jobs/s arriving"
        rows = []
        for cell in group:
            par = cell.get("max_parallel")
            rows.append({"executor": cell["executor"],
                         "max par": MISSING if par is None else f"{par:g}",
                         "passes": str(cell["passes"]),
                         **{h: _cell(cell["figures"][name], fmt) for name, h, fmt in _SHOWN}})
        shown = [h for _, h, _ in _SHOWN if any(r[h] != MISSING for r in rows)]
        parts: list[list[str]] = [[]]
        for column in shown:  # greedy: as many figures per table as fit
            trial = [*parts[-1], column]
            if width is None or not parts[-1] or _width(_table("", trial, rows)) <= width:
                parts[-1] = trial
            else:
                parts.append([column])
        for i, columns in enumerate(parts, start=1):
            suffix = f" ({i}/{len(parts)})" if len(parts) > 1 else ""
            tables.append(_table(title + suffix, columns, rows))
    return tables


def print_streams(cells: list[dict[str, Any]], console: Console) -> None:
    """The streams tables (:func:`stream_tables`, fitted to the console's width) and what
    their columns mean (nothing without stream cells)."""
    tables = stream_tables(cells, console.width)
    for table in tables:
        console.print(table)
    if not tables:
        return
    left = [h for name, h, _ in _SHOWN
            if all(c["figures"][name].get("mean") is None for c in cells)]
    console.print(Text("streams: JCT = job completion time (arrival → done); jobs/s busy ="
                       " completed jobs ÷ busy period; offered load = arrival rate × mean "
                       "service time; cores busy = mean CPU cores over the busy period; "
                       "J/job = window energy ÷ completed jobs (docs/measurement.md, "
                       "\"Streams\"); [low, high] = 95% "
                       "percentile-bootstrap interval of the mean over passes, only with "
                       ">= 5 passes"
                       + (f"; not measured, left out: {', '.join(left)}" if left else "")))


__all__ = ["print_streams", "stream_tables"]
