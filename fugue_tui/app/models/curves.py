"""Per-job loss and validation curves across executors (issue 30), Textual-free: for the
selected cell, the same experiment, configuration and pass under every executor of the
campaign, one block per job with one line per executor — the training loss and the
validation metric as sparklines on a scale shared by the job's lines, so a job that
trains or validates differently under one executor stands out (accuracy parity at a
glance), with the latest values and the difference from seq.

From the cells' ``job_progress`` events (the executors report the same fields): loss at
each report (rate-limited at the source), the validation metric at each validated epoch
(every epoch for hpo trials, else the last). The x axis is training progress (epochs and
steps done ÷ planned), not time: executors run at different speeds and the curves must
line up. A cell's newer attempt replaces its older one's curves.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from rich.text import Text

from engine.event_base import Event
from engine.events import is_runner_event
from engine.observe.state import CampaignState, CellState
from engine.results.derived import BASELINE_EXECUTOR
from fugue_tui.app.models.cells import split_label
from fugue_tui.app.models.hpo import sparkline
from fugue_tui.live.job_table import VAL_HEADERS


@dataclass
class JobCurve:
    """One job's points: (progress in [0, 1], value) for the loss and the validation."""

    loss: list[tuple[float, float]] = field(default_factory=list)
    val: list[tuple[float, float]] = field(default_factory=list)
    metric: str | None = None


@dataclass
class CellCurves:
    attempt: int
    executor: str = ""
    jobs: dict[str, JobCurve] = field(default_factory=dict)


def _progress(event: Event) -> float | None:
    epochs, epoch = event.get("epochs"), event.get("epoch")
    if not isinstance(epochs, int) or epochs < 1 or not isinstance(epoch, int):
        return None
    steps, step = event.get("steps"), event.get("step")
    if event.get("epoch_end") or not isinstance(steps, int) or not steps:
        done = float(epoch)
    else:
        done = epoch - 1 + min(1.0, (step or 0) / steps)
    return max(0.0, min(1.0, done / epochs))


def _finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) \
        and math.isfinite(value)


class CurveStore:
    """The curves of every cell's latest attempt; ``version`` grows with each point."""

    def __init__(self) -> None:
        self.cells: dict[str, CellCurves] = {}
        self.version = 0

    def add(self, event: Event) -> bool:
        """Take a cell's ``started`` or ``job_progress`` event; False for anything else."""
        kind = event.get("type")
        if kind not in ("started", "job_progress") or is_runner_event(event):
            return False
        key, attempt = str(event.get("cell")), int(event.get("attempt") or 0)
        cell = self.cells.get(key)
        if cell is None or attempt > cell.attempt:  # a newer attempt starts over
            cell = self.cells[key] = CellCurves(attempt)
        elif attempt < cell.attempt:
            return False  # a stale attempt's late lines
        if kind == "started":
            cell.executor = str(event.get("executor") or "")
            self.version += 1
            return True
        at = _progress(event)
        if at is None or not event.get("job_id"):
            return False
        job = cell.jobs.setdefault(str(event["job_id"]), JobCurve())
        if _finite(event.get("loss")):
            job.loss.append((at, float(event["loss"])))
        if event.get("epoch_end") and _finite(event.get("val_acc")):
            job.val.append((at, float(event["val_acc"])))
            job.metric = event.get("val_metric") or job.metric
        self.version += 1
        return True


def peers(state: CampaignState, cell: CellState) -> list[CellState]:
    """The cells of ``cell``'s experiment, configuration and pass, one per executor, in
    the campaign's order (``cell`` among them)."""
    exp, _, config, pass_no = split_label(cell.label)
    out: dict[str, CellState] = {}
    for other in sorted(state.cells.values(), key=lambda c: c.index):
        o_exp, o_exec, o_config, o_pass = split_label(other.label)
        if (o_exp, o_config, o_pass) == (exp, config, pass_no):
            out.setdefault(o_exec, other)
    return list(out.values())


def sampled(points: list[tuple[float, float]], width: int) -> list[float | None]:
    """The latest value at or before each of ``width`` even steps of progress: None where
    none was reported yet, and past the job's last report (a trial an early-stopping
    scheduler stopped, a job still running: not drawn as if it had gone on)."""
    out: list[float | None] = []
    i, latest = 0, None
    ordered = sorted(points)
    last = ordered[-1][0] if ordered else 0.0
    for column in range(width):
        edge = (column + 1) / width
        while i < len(ordered) and ordered[i][0] <= edge + 1e-9:
            latest = ordered[i][1]
            i += 1
        out.append(latest if column / width < last - 1e-9 else None)
    return out


#: The narrowest scale a job's lines share: 0.01 of the validation metric (accuracy, R²) or
#: of log10(loss) (2 %). Narrower, float noise between executors (1e-7) would fill the
#: eight levels and two equal curves would read as opposite.
MIN_RANGE = 0.01


def _scaled(values: list[float | None], low: float, high: float) -> str:
    """A sparkline on the shared [low, high] scale (:func:`sparkline` scales alone),
    widened about its middle to at least :data:`MIN_RANGE`."""
    if high - low < MIN_RANGE:
        middle = (high + low) / 2
        low, high = middle - MIN_RANGE / 2, middle + MIN_RANGE / 2
    return sparkline([low, high, *values])[2:]


def _log(values: Sequence[float | None], use: bool) -> list[float | None]:
    """Losses on a log scale when ``use`` (a loss falls by orders of magnitude: linear, the
    first reports flatten the rest); the caller keeps a job with a loss <= 0 linear."""
    return [None if v is None or not use else math.log10(v) for v in values] if use \
        else list(values)


def curves_text(store: CurveStore, state: CampaignState, cell: CellState | None, width: int,
                height: int) -> Text:
    """The curves of ``cell``'s peers (see the module docstring), fitted to ``width`` ×
    ``height`` (jobs that do not fit are counted on the last line)."""
    if cell is None:
        return Text("select a cell: its jobs' loss and validation across executors",
                    style="dim")
    cells = [c for c in peers(state, cell) if c.key in store.cells]
    if not cells:
        return Text(f"{cell.label}: no progress reported yet", style="dim")
    exp, _, config, pass_no = split_label(cell.label)
    names = {c.key: store.cells[c.key].executor or split_label(c.label)[1] for c in cells}
    metrics = {j.metric for c in cells for j in store.cells[c.key].jobs.values() if j.metric}
    val_name = VAL_HEADERS.get(metrics.pop(), "val") if len(metrics) == 1 else "val"
    jobs = list(dict.fromkeys(j for c in cells for j in store.cells[c.key].jobs))
    name_w = min(16, max(len(n) for n in names.values()))
    # name, "loss ", its spark and value (8), the metric's name, its spark, value and the
    # difference from seq (6 + 8)
    spark = max(6, (width - 2 - name_w - 1 - 5 - 8 - len(val_name) - 2 - 6 - 8) // 2)
    title = " ".join(f"{exp} {config} pass {pass_no}".split())
    title += (f" · loss (log) and {val_name} by progress · {len(cells)} executor"
              f"{'s' if len(cells) != 1 else ''}, one scale per job; Δ: val − seq's")
    if len(title) > width:  # whole parts only (issue 47, item 5: cut mid-word at 80x24)
        cut = max(title.rfind(sep, 0, width + len(sep)) for sep in (" · ", "; ", ", "))
        title = title[:cut] if cut > 0 else title[:width]
    text = Text(title + "\n", style="bold")
    used = 1
    for n, job_id in enumerate(jobs):
        block = 1 + len(cells)
        if used + block > height - (1 if n < len(jobs) - 1 else 0):
            text.append(f"… {len(jobs) - n} more jobs (z: zoom)", style="dim")
            break
        used += block
        text.append(f"{job_id}\n", style="dim")
        curves = [(c, store.cells[c.key].jobs.get(job_id)) for c in cells]
        losses = [v for _, j in curves if j for _, v in j.loss]
        vals = [v for _, j in curves if j for _, v in j.val]
        log = bool(losses) and min(losses) > 0
        scaled = [v for v in _log(losses, log) if v is not None] or [0.0]
        base = next((j.val[-1][1] for c, j in curves
                     if j and j.val and names[c.key] == BASELINE_EXECUTOR), None)
        for c, job in curves:
            text.append(f"  {names[c.key][:name_w]:<{name_w}} ")
            if job is None:
                text.append("not started\n", style="dim")
                continue
            line = _scaled(_log(sampled(job.loss, spark), log), min(scaled), max(scaled)) \
                if job.loss else " " * spark
            text.append("loss ", style="dim")
            text.append(line, style="cyan")
            text.append(f" {job.loss[-1][1]:<7.4f}" if job.loss else f" {'—':<7}")
            text.append(f" {val_name} ", style="dim")
            line = _scaled(sampled(job.val, spark), min(vals), max(vals)) \
                if job.val else " " * spark
            text.append(line, style="green")
            if job.val:
                value = job.val[-1][1]
                text.append(f" {value:.3f}")
                if base is not None and names[c.key] != BASELINE_EXECUTOR:
                    text.append(f" Δ{value - base:+.3f}",
                                style="yellow" if abs(value - base) > 0.02 else "dim")
            else:
                text.append(" —", style="dim")
            text.append("\n")
    text.rstrip()
    return text
