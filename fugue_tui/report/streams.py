"""``report``'s streams table (issue 51): the strategies that served one stream, each
per-stream figure's mean over passes with its 95 % interval where there are enough passes
(:mod:`engine.results.stream_report`)."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from fugue_tui.format import MISSING

#: The table's columns: (figure, header, format).
_SHOWN = (("jct_mean_s", "JCT mean s", ".3f"), ("jct_p50_s", "p50 s", ".3f"),
          ("jct_p95_s", "p95 s", ".3f"), ("throughput_jps", "jobs/s busy", ".2f"),
          ("offered_load", "offered load", ".2f"), ("busy_cores_used", "cores busy", ".2f"),
          ("energy_per_job_j", "GPU J/job", ".1f"), ("cpu_energy_per_job_j", "CPU J/job", ".1f"))


def _cell(figure: dict[str, Any], fmt: str) -> str:
    mean = figure.get("mean")
    if mean is None:
        return MISSING
    low, high = figure.get("ci_low"), figure.get("ci_high")
    if low is None or high is None:
        return format(mean, fmt)
    return f"{mean:{fmt}} [{low:{fmt}}, {high:{fmt}}]"


def print_streams(cells: list[dict[str, Any]], console: Console) -> None:
    """One table per stream (nothing without stream cells)."""
    by_stream: dict[str, list[dict[str, Any]]] = {}
    for cell in cells:
        by_stream.setdefault(cell["stream_sha256"], []).append(cell)
    for sha, group in by_stream.items():
        first = group[0]
        rate, jobs = first.get("arrival_rate_jps"), first.get("stream_jobs")
        title = f"stream {sha[:12]}: {MISSING if jobs is None else f'{jobs:g}'} jobs"
        if rate is not None:
            title += f", {rate:.2f} jobs/s arriving"
        table = Table(title=title)
        for header in ("executor", "max par", "passes", *(h for _, h, _ in _SHOWN)):
            table.add_column(header, justify="left" if header == "executor" else "right")
        for cell in group:
            par = cell.get("max_parallel")
            table.add_row(cell["executor"], MISSING if par is None else f"{par:g}",
                          str(cell["passes"]),
                          *(_cell(cell["figures"][name], fmt) for name, _, fmt in _SHOWN))
        console.print(table)
    if by_stream:
        console.print(Text("streams: JCT = job completion time (arrival → done); jobs/s busy ="
                           " completed jobs ÷ busy period; offered load = arrival rate × mean "
                           "service time; cores busy = mean CPU cores over the busy period; "
                           "J/job = window energy ÷ completed jobs (docs/measurement.md, "
                           "\"Streams\"); [low, high] = 95% "
                           "percentile-bootstrap interval of the mean over passes, only with "
                           ">= 5 passes"))


__all__ = ["print_streams"]
