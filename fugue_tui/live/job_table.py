"""The job rows of a running cell, as the live views draw them (the terminal's under its
cell line, the dashboard's job pane): one row per job with its completed fraction of
epochs × steps as a bar, loss, validation metric, samples/s, elapsed and ETA from the job's
own rate (:func:`fugue_tui.live.progress_math.eta_seconds`). A waiting job (announced,
not started) is a dim row — a stream cell's says when it arrives (``due``) or since when it
queues (``queued``); past ``max_jobs`` rows the rest are summarised on one line.
"""

from __future__ import annotations

from collections.abc import Iterable

from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.measure import Measurement
from rich.progress_bar import ProgressBar
from rich.table import Table
from rich.text import Text

from engine.observe.state import CellState
from fugue_tui.format import PENDING as DASH
from fugue_tui.format import fmt_duration, fmt_number, fmt_rate
from fugue_tui.live.progress_math import eta_seconds, fraction_done
from fugue_tui.live.styles import BAR_WIDTH

#: The job table's header of the validation metric column, by what the events say it holds.
VAL_HEADERS = {"accuracy": "val acc", "r2": "val R²"}


def val_header(metrics: Iterable[str | None]) -> str:
    """The header of the ``val acc`` column for jobs whose events said ``metrics`` (None:
    not said, an older recording): "val acc" for classification, "val R²" for regression,
    "val metric" when one cell mixes them."""
    said = {m for m in metrics if m}
    if len(said) == 1:
        metric = said.pop()
        return VAL_HEADERS.get(metric, f"val {metric}")
    return "val metric" if said else "val acc"


def job_rows(cell: CellState, now: float, max_jobs: int, extrapolate: bool) -> Group:
    """One row per job of ``cell`` (a :class:`JobTable` first), at most ``max_jobs``.

    ``now``: wall clock seconds. ``extrapolate``: the cell is the runner's latest, so each
    running job's last report is carried forward to ``now`` (elapsed, ETA)."""
    order = list(dict.fromkeys(cell.planned_jobs + list(cell.jobs)))
    shown = order if len(order) <= max_jobs else _pick(cell, order, max_jobs)
    rows: list[RenderableType] = [
        JobTable([_job_cells(cell, job_id, now, extrapolate) for job_id in shown],
                 val_header(cell.jobs[j].val_metric for j in shown if j in cell.jobs))]
    if len(shown) < len(order):
        finished = sum(1 for j in order if j not in shown and j in cell.jobs
                       and cell.jobs[j].status != "running")
        rows.append(Text(f"  … {len(order) - len(shown)} more jobs ({finished} finished)",
                         style="dim"))
    return Group(*rows)


def _pick(cell: CellState, order: list[str], max_jobs: int) -> list[str]:
    """The running jobs first, then the latest finished and the next waiting ones."""
    running = [j for j in order if j in cell.jobs and cell.jobs[j].status == "running"]
    finished = [j for j in order if j in cell.jobs and cell.jobs[j].status != "running"]
    waiting = [j for j in order if j not in cell.jobs]
    picked = running[:max_jobs]
    room = max_jobs - len(picked)
    latest = finished[-(room // 2 + room % 2):] if room else []
    picked += latest
    picked += waiting[: max_jobs - len(picked)]
    return [j for j in order if j in set(picked)]


def _job_cells(cell: CellState, job_id: str, now: float,
               extrapolate: bool) -> dict[str, RenderableType]:
    job = cell.jobs.get(job_id)
    if job is None:
        row: dict[str, RenderableType] = {name: Text(DASH) for name in JobTable.COLUMNS}
        status, note = "waiting", ""
        arrival = cell.arrivals.get(job_id)  # a stream cell's job (issue 51)
        if arrival is not None and cell.active:
            # Not arrived yet, or arrived and queued for a server: a stream's job said
            # "waiting" either way, without when it arrives.
            status, note = (("due", f"arrives in {fmt_duration(arrival - now)}")
                            if arrival > now else
                            ("queued", f"arrived {fmt_duration(now - arrival)} ago"))
        row.update(job=Text(f"  {job_id}", style="dim"), progress=Text(note, style="dim"),
                   **{"%": Text(status, style="dim")})
        return row
    reported = job.reported_ts is not None and extrapolate
    last_elapsed = job.reported_elapsed if reported else job.elapsed
    last_ts = job.reported_ts if reported else None
    running = job.status == "running"
    fraction = 1.0 if job.status == "ok" else fraction_done(job.epoch, job.epochs, job.step,
                                                            job.steps)
    elapsed = last_elapsed
    if running and last_ts is not None and cell.active:
        elapsed = (elapsed or 0.0) + max(0.0, now - last_ts)
    eta: float | None
    if job.status == "failed" or (running and cell.state == "hung"):
        eta = None  # no rate to extrapolate from
    elif running:
        eta = eta_seconds(fraction, last_elapsed, last_ts, now)
    else:
        eta = 0.0
    sps = job.train_sps
    if sps is None and job.samples and job.elapsed:
        sps = job.samples / job.elapsed
    epochs = f"{job.epoch}/{job.epochs}" if job.epochs else DASH
    steps = f"{job.step}/{job.steps}" if job.steps else DASH
    bar: RenderableType = Text("")
    if fraction is not None:
        bar = ProgressBar(total=1.0, completed=fraction, width=BAR_WIDTH,
                          complete_style="red" if job.status == "failed" else "bar.complete")
    pct = Text(f"{fraction:.0%}" if fraction is not None else DASH)
    if job.status == "failed":
        pct = Text("failed", style="red")
    return {"job": Text(f"  {job_id}"), "epoch": Text(epochs), "step": Text(steps),
            "progress": bar, "%": pct, "loss": Text(fmt_number(job.loss, ".4f", DASH)),
            "val acc": Text(fmt_number(job.val_acc, ".3f", DASH)),
            "samples/s": Text(fmt_rate(sps, DASH)),
            "elapsed": Text(fmt_duration(elapsed)), "ETA": Text(fmt_duration(eta))}


class JobTable:
    """The job rows as a table that fits the console: on a narrow one the least needed
    columns go first (step, samples/s, elapsed, val acc), then the job id is shortened.
    The ``val acc`` column (its key) is headed ``val_header``: R² for regression."""

    COLUMNS = ("job", "epoch", "step", "progress", "%", "loss", "val acc", "samples/s",
               "elapsed", "ETA")
    DROP = ("step", "samples/s", "elapsed", "val acc")

    def __init__(self, rows: list[dict[str, RenderableType]], val_header: str = "val acc"):
        self.rows = rows
        self.val_header = val_header

    def table(self, columns: tuple[str, ...]) -> Table:
        table = Table(box=None, padding=(0, 1), pad_edge=False, show_edge=False,
                      header_style="dim")
        for name in columns:
            header = {"job": "  job", "%": "", "val acc": self.val_header}.get(name, name)
            table.add_column(header,
                             justify="left" if name in ("job", "progress") else "right",
                             no_wrap=True, overflow="ellipsis",
                             width=BAR_WIDTH if name == "progress" else None,
                             max_width=32 if name == "job" else None)
        for row in self.rows:
            table.add_row(*(row[name] for name in columns))
        return table

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        columns: tuple[str, ...] = self.COLUMNS
        for drop in (None, *self.DROP):
            if drop is not None:
                columns = tuple(c for c in columns if c != drop)
            table = self.table(columns)
            wide = options.update(width=10_000)  # the natural width, not clamped to the console
            if Measurement.get(console, wide, table).maximum <= options.max_width:
                break
        yield table
