"""The campaign's host/device timeline (issue 30), Textual-free: what every cell's monitor
measured over the whole campaign, on one time axis, with a dotted line where each cell
attempt started and ended and the cells' numbers above them (a legend under the chart
says which cell each number is, with its start and end in campaign time).

Panels: the CPU (% of one core) and RSS (MiB) of the running cells' process trees, summed
over the cells that ran at the same time (the runner may run several at once), and, where
a GPU was measured, its utilisation % and VRAM used (MiB) — device-wide readings, so the
largest any cell saw, not a sum. A GPU panel on a CPU-only machine is one line, "not
measured", never a line at 0. Samples are binned onto the chart's columns (a mean per cell
and bin, then summed or maxed across cells); a bin in which no cell sampled is a gap.

A stream campaign (issue 51) adds its jobs under the panels, on the same axis
(:func:`stream_jobs`, :func:`jobs_panel`): per job its arrival, the queueing delay up to its
admission and its bar to completion, jobs packed into lanes (:func:`lanes`), then a key line
saying what the marks mean; a batch campaign's timeline is unchanged.

Times are Unix seconds (a sample's ``time``, else its event ``ts``) from the campaign's
start; in replay the clock is the replay's. :class:`CampaignTimeline` keeps the last
:data:`MAX_POINTS` samples of each cell attempt.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field

import numpy as np

from engine.event_base import Event
from engine.event_types import MonitorSample
from engine.observe.state import CampaignState
from fugue_tui.app.models.series import cell_sample

#: Samples kept per cell attempt (at the monitor's 0.5 s: over an hour).
MAX_POINTS = 8000
#: (field, title, how cells running at once combine).
#: Short titles: plotext leaves out a title wider than its chart.
PANELS = (("cpu_pct", "cells' CPU % of a core", "sum"),
          ("rss_mib", "cells' RSS MiB", "sum"),
          ("gpu_util_pct", "GPU util %", "max"),
          ("mem_used_mib", "VRAM used MiB", "max"))
GPU_FIELDS = ("gpu_util_pct", "mem_used_mib")


@dataclass
class _Track:
    """One cell attempt's samples: Unix time and one column per :data:`PANELS` field."""

    t: deque = field(default_factory=lambda: deque(maxlen=MAX_POINTS))
    values: dict[str, deque] = field(default_factory=lambda: {
        name: deque(maxlen=MAX_POINTS) for name, _, _ in PANELS})


class CampaignTimeline:
    """Every cell's monitor samples, for the timeline; ``version`` grows with each."""

    def __init__(self) -> None:
        self.tracks: dict[tuple[str, int], _Track] = {}
        self.version = 0

    def add(self, event: Event) -> bool:
        """Take a cell's ``sample`` event; False for anything else."""
        sample = cell_sample(event)
        return sample is not None and self.take(sample)

    def take(self, sample: MonitorSample) -> bool:
        """Add a cell's sample (one :func:`~fugue_tui.app.models.series.cell_sample` let
        through); False when it carries no time (neither ``time`` nor ``ts``)."""
        when = sample.get("time") if isinstance(sample.get("time"), (int, float)) \
            else sample.ts
        if not isinstance(when, (int, float)):
            return False
        track = self.tracks.setdefault((str(sample.cell), int(sample.attempt or 0)), _Track())
        track.t.append(float(when))
        for name, _, _ in PANELS:
            value = sample.get(name)
            track.values[name].append(
                float(value) if isinstance(value, (int, float)) and not isinstance(value, bool)
                and math.isfinite(value) else math.nan)
        self.version += 1
        return True

    def measured(self, name: str) -> bool:
        return any(np.isfinite(np.asarray(tr.values[name], dtype=float)).any()
                   for tr in self.tracks.values())

    def binned(self, name: str, start: float, span: float, bins: int, how: str
               ) -> tuple[np.ndarray, np.ndarray]:
        """(bin centres in seconds from ``start``, value per bin: per track the mean of
        its samples in the bin, then summed or maxed (``how``) over the tracks; NaN where
        no track sampled)."""
        edges = np.linspace(0.0, span, bins + 1)
        total = np.full(bins, np.nan)
        for track in self.tracks.values():
            t = np.asarray(track.t, dtype=float) - start
            v = np.asarray(track.values[name], dtype=float)
            keep = np.isfinite(v) & (t >= 0) & (t <= span)
            if not keep.any():
                continue
            idx = np.clip(np.searchsorted(edges, t[keep], side="right") - 1, 0, bins - 1)
            sums = np.bincount(idx, weights=v[keep], minlength=bins)
            counts = np.bincount(idx, minlength=bins)
            with np.errstate(invalid="ignore", divide="ignore"):
                mean = np.where(counts > 0, sums / np.maximum(counts, 1), np.nan)
            has = np.isfinite(mean)
            if how == "sum":
                total[has] = np.where(np.isfinite(total[has]), total[has], 0.0) + mean[has]
            else:
                total[has] = np.fmax(total[has], mean[has])
        return (edges[:-1] + edges[1:]) / 2, total


#: How a busy-host warning names the competing processes (engine.cell.rows.load_warnings).
COMPETITORS = "; busiest other processes: "


@dataclass(frozen=True)
class Span:
    """One cell attempt on the timeline: its number, label, start and end (seconds from
    the campaign's start; end None while it runs)."""

    number: str
    label: str
    start: float
    end: float | None
    #: The cell's busy-host warning (the machine was busy, and with what: its busiest other
    #: processes, engine.measure.competitors), "" when it had none.
    busy: str = ""


def spans(state: CampaignState, start: float) -> list[Span]:
    """Every attempt that started, in start order (an earlier attempt of a retried cell
    numbered ``3a1``, its current one ``3``)."""
    out = []
    for cell in state.cells.values():
        for record in cell.history:
            if record.started_ts is not None:
                out.append(Span(f"{cell.index}a{record.attempt}", cell.label,
                                record.started_ts - start,
                                None if record.ended_ts is None else record.ended_ts - start))
        if cell.started_ts is not None and cell.state != "queued":
            busy = next((w for w in cell.warnings if "the machine was busy" in w), "")
            out.append(Span(str(cell.index), cell.label, cell.started_ts - start,
                            None if cell.ended_ts is None or cell.active
                            else cell.ended_ts - start, busy))
    return sorted(out, key=lambda s: s.start)


def _clock(seconds: float) -> str:
    seconds = max(0, int(round(seconds)))
    return f"{seconds // 60}:{seconds % 60:02d}"


def marks(cells: list[Span], span: float, columns: int) -> list[tuple[float, str]]:
    """Dotted lines at starts (labelled with the cell's number) and ends (unlabelled, left
    out when a start is within a column: the next cell starting as one ends); labels that
    would overlap the previous one (less than its width apart) are dropped, the line kept."""
    per_column = span / max(1, columns)
    starts = [(s.start, s.number) for s in cells]
    ends = [(s.end, "") for s in cells if s.end is not None
            and not any(abs(s.end - t) <= per_column for t, _ in starts)]
    out, last_label_end = [], -math.inf
    for at, label in sorted(starts + ends):
        if label:
            column = at / per_column if per_column else 0.0
            if column < last_label_end:
                label = ""
            else:
                last_label_end = column + len(label) + 1
        out.append((at, label))
    return out


def legend(cells: list[Span], width: int, lines: int) -> list[str]:
    """``number label start–end`` of each attempt, packed into at most ``lines`` lines of
    ``width`` (the rest counted on the last); a cell warned that the host was busy is
    numbered ``3!`` and, room allowing, gets a line of its own naming the busiest other
    processes of its window."""
    items = [f"{s.number}{'!' if s.busy else ''} {s.label} {_clock(s.start)}–"
             f"{_clock(s.end) if s.end is not None else 'now'}" for s in cells]
    # A cell warned that the host was busy is marked "!" and, room allowing (up to half the
    # lines), the processes that competed with it follow (a warning that names none - an
    # older recording - is the mark only: on a busy machine every cell has one).
    busy = [f"!{s.number} {_busy_text(s.busy)}"[:width] for s in cells
            if COMPETITORS in s.busy]
    if busy and lines >= 2:
        room = min(len(busy), lines // 2)
        return _packed(items, width, lines - room) + busy[:room]
    return _packed(items, width, lines)


def _busy_text(warning: str) -> str:
    """The competing processes first (what the user looks for), else the warning itself."""
    head, sep, who = warning.partition(COMPETITORS)
    return f"host busy, busiest other processes: {who}" if sep else head


def _packed(items: list[str], width: int, lines: int) -> list[str]:
    """``items`` joined by `` · `` into at most ``lines`` lines of ``width``; when they do not
    all fit, the last line ends ``… +N more`` (N: the items left out)."""
    rows: list[list[str]] = [[]]
    for item in items:
        row = rows[-1]
        if row and len(" · ".join(row + [item])) > width:
            rows.append([])
        rows[-1].append(item[:width])
    if len(rows) <= lines:
        return [" · ".join(r) for r in rows if r]
    kept, last = rows[:lines - 1], list(rows[lines - 1])
    left = sum(len(r) for r in rows[lines - 1:]) - len(last)
    while True:
        more = f" … +{left} more"
        text = " · ".join(last)
        if len(text) + len(more) <= width or len(last) <= 1:
            return [" · ".join(r) for r in kept] + [text[: max(0, width - len(more))] + more]
        last.pop()
        left += 1


@dataclass(frozen=True)
class StreamJob:
    """One job of a stream cell (issue 51) on the timeline, in seconds from the campaign's
    start: its arrival, its admission (None: not admitted, still queued or cut by its cell's
    end) and where its marks end (``end``: its completion when ``completed``, else now, or
    its cell's end when the cell ended first)."""

    job_id: str
    arrival: float
    admitted: float | None
    end: float
    completed: bool = False
    failed: bool = False
    #: Its cell ended first (killed, failed): the job was cut, never completed.
    cut: bool = False
    #: The cell serving it (its key): each strategy's cell serves the whole stream.
    cell: str = ""


def stream_jobs(state: CampaignState, start: float, now: float) -> list[StreamJob]:
    """The jobs of every stream cell's current attempt that had arrived by ``now`` (Unix
    seconds; an arrival after its cell ended, a stream cut short, never happened), in arrival
    order; none for a batch campaign. Arrivals are placed from the cell's ``group_start``
    event (:attr:`engine.observe.state.CellState.arrivals`), admissions and completions are
    its ``job_started`` and ``job_done`` events' times."""
    out = []
    for cell in state.cells.values():
        if not cell.arrivals:
            continue
        until = now if cell.active or cell.ended_ts is None else min(now, cell.ended_ts)
        for job_id, at in cell.arrivals.items():
            if at > until:
                continue
            job = cell.jobs.get(job_id)
            admitted = job.started_ts if job is not None else None
            ended = job.ended_ts if job is not None else None
            out.append(StreamJob(
                job_id, at - start, None if admitted is None else admitted - start,
                (until if ended is None else ended) - start, ended is not None,
                ended is not None and job is not None and job.status == "failed",
                ended is None and cell.ended_ts is not None and not cell.active, cell.key))
    return sorted(out, key=lambda j: (j.arrival, j.job_id))


def lanes(jobs: list[StreamJob], gap: float, most: int) -> tuple[list[int | None], int]:
    """A lane for each job (first fit in arrival order: the first lane whose last job's
    marks ended more than ``gap`` seconds before this one arrives) and the lanes used; a
    job that finds none of ``most`` lanes free gets None (not drawn: more jobs in the
    system at once than the chart has rows)."""
    last: list[float] = []
    out: list[int | None] = []
    for job in jobs:
        lane = next((i for i, e in enumerate(last) if e + gap < job.arrival), None)
        if lane is None and len(last) < most:
            lane = len(last)
            last.append(job.end)
        elif lane is not None:
            last[lane] = job.end
        out.append(lane)
    return out, len(last)


#: Rows of the stream jobs chart besides its lanes (title, frame, tick labels).
JOBS_FRAME = 4
#: The fewest rows a monitor panel gets above a stream's jobs (3 of them plotted): fewer
#: panels are drawn rather than flatter ones.
STREAM_PANEL_ROWS = 7


def jobs_panel(jobs: list[StreamJob], cells: list[Span], span: float, width: int, rows: int,
               color: bool | None) -> list[str]:
    """The stream jobs chart (:func:`fugue_tui.report.charts.jobs_chart`) in at most
    ``rows`` rows (lanes as :func:`lanes` packs them), then its key line: what the marks
    mean, and how many jobs found no lane."""
    from fugue_tui.report.charts import JOB_KEY, JOB_KEY_SHORT, jobs_chart

    columns = max(10, width - 12)
    placed, used = lanes(jobs, 1.5 * span / columns, max(1, rows - JOBS_FRAME))
    drawn = [(lane, j.arrival, j.admitted, j.end, j.failed)
             for j, lane in zip(jobs, placed, strict=True) if lane is not None]
    counts = {"done": sum(1 for j in jobs if j.completed and not j.failed),
              "failed": sum(1 for j in jobs if j.failed),
              "running": sum(1 for j in jobs if j.admitted is not None and not j.completed
                             and not j.cut),
              "queued": sum(1 for j in jobs if j.admitted is None and not j.cut),
              "cut by their cell's end": sum(1 for j in jobs if j.cut)}
    # every strategy's cell serves the whole stream: a count over several cells says so
    # ("12 done" for a stream of 6 jobs read as a miscount)
    served = len({j.cell for j in jobs})
    title = ("stream jobs" + (f" of {served} cells" if served > 1 else "") + ": "
             + ", ".join(f"{n} {what}" for what, n in counts.items()
                         if n or what in ("done", "running", "queued")))
    chart = jobs_chart(span, drawn, max(1, used), marks(cells, span, columns), title,
                       width=width, height=min(rows, max(1, used) + JOBS_FRAME), color=color)
    # the key, then the jobs that found no lane; shorter forms where the pane is narrow
    hidden = len(jobs) - len(drawn)
    more = [f"  (+{hidden} not drawn: more at once than rows)", f"  +{hidden} not drawn"]
    key = next((k + m for m in (more if hidden else [""]) for k in (JOB_KEY, JOB_KEY_SHORT)
                if len(k + m) <= width), JOB_KEY_SHORT + more[-1] if hidden else JOB_KEY_SHORT)
    return [chart, key[:width]]


def render(timeline: CampaignTimeline, state: CampaignState, now: float, width: int,
           height: int, color: bool | None = None) -> str:
    """The timeline at ``width`` × ``height`` (see the module docstring)."""
    from fugue_tui.report.charts import timeline_chart

    start = state.started_ts
    if start is None:
        firsts = [tr.t[0] for tr in timeline.tracks.values() if tr.t]
        if not firsts:
            return "no monitor samples yet: the timeline starts with the first cell"
        start = min(firsts)
    end = state.ended_ts if state.ended_ts is not None and state.state != "running" else now
    span = max(1.0, end - start)
    cells = spans(state, start)
    legend_lines = 1 if height < 16 else 2 if height < 30 else min(8, height // 6)
    key = legend(cells, width, legend_lines)
    columns = max(10, width - 12)
    panels: list[tuple[str, list[float], list[float]]] = []
    for name, title, how in PANELS:
        if name in GPU_FIELDS and not timeline.measured(name):
            if name == "gpu_util_pct":
                panels.append(("GPU util % and VRAM (no GPU sampled)", [], []))
            continue
        xs, ys = timeline.binned(name, start, span, columns, how)
        panels.append((title, xs.tolist(), ys.tolist()))
    latest = "now" if state.state == "running" else "last"
    jobs = stream_jobs(state, start, end)
    if jobs:
        return _with_jobs(jobs, panels, cells, key, span, width, height, color, latest)
    drawn = sum(1 for _, _, ys in panels if any(math.isfinite(y) for y in ys))
    if height - len(key) - (len(panels) - drawn) < 5 * max(1, drawn):
        # too short for every panel: the first ones (CPU, then RSS) that fit
        keep = max(1, (height - len(key) - 1) // 5)
        panels = panels[:keep]
    chart = timeline_chart(span, panels, marks(cells, span, columns), width=width,
                           height=max(5, height - len(key) - (len(panels) - drawn)),
                           color=color, latest=latest)
    return "\n".join([chart, *key])


#: The line that stands for the monitor's panels when the pane leaves them no room.
NO_ROOM = "monitor panels left out: z zooms the pane"


def _with_jobs(jobs: list[StreamJob], panels: list[tuple[str, list[float], list[float]]],
               cells: list[Span], key: list[str], span: float, width: int, height: int,
               color: bool | None, latest: str) -> str:
    """A stream campaign's timeline: the monitor's panels, then the jobs' chart and its key
    line, then the cells' legend (``key``). The jobs get the rows their lanes need, up to
    two thirds of the pane; the panels what is left, as many as get
    :data:`STREAM_PANEL_ROWS` rows each (at least one of 5 rows, else :data:`NO_ROOM` and
    the jobs get the pane), their "not measured" lines counted as they wrap."""
    from fugue_tui.report.charts import timeline_chart

    columns = max(10, width - 12)
    measured = [p for p in panels if any(math.isfinite(y) for y in p[2])]
    missing = [p for p in panels if p not in measured]
    missing_rows = sum(-(-len(f"{title}: not measured") // max(1, width))
                       for title, _, _ in missing)
    room = height - len(key) - 1  # the jobs' key line
    need = lanes(jobs, 1.5 * span / columns, len(jobs))[1] + JOBS_FRAME
    rows = min(need, max(5, (room - missing_rows) * 2 // 3))
    left = room - rows - missing_rows
    if left < 5 or not measured:
        above = NO_ROOM[:width] if measured else "\n".join(f"{t}: not measured" for t, _, _ in missing)
        rows = min(need, max(5, room - (above.count("\n") + 1)))
    else:
        above = timeline_chart(span, measured[:max(1, left // STREAM_PANEL_ROWS)] + missing,
                               marks(cells, span, columns), width=width, height=left,
                               color=color, latest=latest)
    body = [above, *jobs_panel(jobs, cells, span, width, rows, color)]
    # The jobs' chart may take fewer rows than it was offered (it needs few lanes): the
    # cells' legend gets the rows left blank (it was cut, "… +1 more", above blank rows).
    spare = height - sum(part.count("\n") + 1 for part in body) - len(key)
    if spare > 0:
        key = legend(cells, width, len(key) + spare)
    return "\n".join([*body, *key])
