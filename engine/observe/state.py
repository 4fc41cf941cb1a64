"""Campaign state rebuilt from events (``engine.observe.follow``): what every front end shows.
Torch-free and UI-free; pure bookkeeping, so live views, restarts and replays agree.

This is the one reducer of the event stream: the batch live view
(``fugue_tui.console.live``) and the dashboard render from a :class:`CampaignState` and keep no
bookkeeping of their own. The event types, and the sets branched on here, come from the
table in ``engine.events`` (:data:`engine.events.EVENTS`).

Cell states: queued, running, suspect, hung, done, failed, killed, skipped (each the
``cell_state`` of the runner event that leads to it). A cell that runs again (a retry) keeps
its earlier attempts in ``history`` with how each ended, so a front end can still show the
killed attempt under the new one.

The reducer dispatches on the event classes generated from the table
(:mod:`engine.event_types`) and reads their typed fields; a plain JSON document given to
:meth:`CampaignState.apply` (a front end or a test that builds one) is read as its typed
event first. Only what every event type may carry, including types this version does not
declare (a newer writer's, one added to :data:`engine.events.EVENTS` at run time), is read
by key: the cell it is about, the index and label that make a cell known.

Names: a cell that ended well is in state ``done`` here (after the runner's ``done``
event); its CSV rows say ``status = ok``, and the front ends show it as "ok". A job's
``status`` is the rows' word (running, ok, failed).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.event_types import (
    CellJobDone,
    CellJobProgress,
    CellJobStarted,
    CellPhase,
    CellStarted,
    CellSummary,
    CellWarning,
    MonitorSample,
    RunnerCampaignAborted,
    RunnerCampaignDone,
    RunnerCampaignInterrupted,
    RunnerCampaignStarted,
    RunnerCellStarted,
    RunnerDone,
    RunnerFailed,
    RunnerHung,
    RunnerKilled,
    RunnerQueued,
    RunnerResumed,
    RunnerRetried,
    RunnerSkipped,
    RunnerSuspect,
    RunnerWarning,
)
from engine.events import EVENTS, RUNNER, AttemptEvent, Event, RunnerEvent, parse_event
from engine.measure.samples import LATEST_SAMPLE_FIELDS
from engine.observe.follow import CampaignFollower, last_session_offset


@dataclass
class JobState:
    job_id: str
    status: str = "running"        # running | ok | failed
    epoch: int = 0
    epochs: int | None = None
    step: int = 0
    steps: int | None = None
    samples: int = 0
    loss: float | None = None
    val_loss: float | None = None
    val_acc: float | None = None
    #: What ``val_acc`` holds (``accuracy``, ``r2``) as the event said; None in older
    #: recordings (the views then say "val acc", as they always did).
    val_metric: str | None = None
    elapsed: float | None = None
    train_sps: float | None = None
    #: The job's own elapsed seconds in its latest ``job_started`` (0) or ``job_progress``
    #: report, and that report's wall-clock ``ts`` (None before the first): the live views
    #: extrapolate the elapsed time and ETA from them.
    reported_elapsed: float | None = None
    reported_ts: float | None = None
    #: Wall-clock ``ts`` of its ``job_started`` (a stream job's admission) and of its
    #: ``job_done`` (its completion); None before them.
    started_ts: float | None = None
    ended_ts: float | None = None


#: Fields of a monitor ``sample`` event kept as the cell's latest sample (GPU fields are
#: None without a GPU; ``cpu_pct`` is % of one core for the cell's process tree).
SAMPLE_FIELDS = LATEST_SAMPLE_FIELDS
#: What a cell is doing (:attr:`CellState.stage`) after its ``phase`` events; other phases
#: (imports, teardown) leave it as it was.
PHASE_STAGES = {"data_load": "setup", "setup": "setup", "group_start": "training"}


@dataclass
class AttemptRecord:
    """An earlier attempt of a cell, as it ended (``state``: done, failed or killed)."""

    attempt: int
    state: str
    error: str = ""
    started_ts: float | None = None
    ended_ts: float | None = None
    T_group: float | None = None


@dataclass
class CellState:
    key: str
    index: int
    label: str
    state: str = "queued"
    attempt: int = 0
    pid: int | None = None
    started_ts: float | None = None
    ended_ts: float | None = None
    T_group: float | None = None
    error: str = ""
    watchdog: str = ""
    log_path: str = ""
    jobs: dict[str, JobState] = field(default_factory=dict)
    #: Job ids the cell announced in its ``started`` event (before any job runs).
    planned_jobs: list[str] = field(default_factory=list)
    #: The last ``phase`` the cell reported (data_load, setup, group_start).
    phase: str = ""
    #: What the current attempt is doing: starting (process up, imports), setup (data
    #: loading, building), training (the group window), finishing (summary written);
    #: "" before its first attempt.
    stage: str = ""
    #: Warnings of the current attempt, in the order they came: the cell's ``warning``
    #: events (an executor's, a results file repaired), the runner's about it, and those
    #: of its ``summary`` (e.g. a busy host); each once.
    warnings: list[str] = field(default_factory=list)
    #: The latest monitor ``sample`` of the current attempt (:data:`SAMPLE_FIELDS`).
    sample: dict[str, Any] | None = None
    #: Earlier attempts, oldest first.
    history: list[AttemptRecord] = field(default_factory=list)
    #: A multi-device campaign: the device the current attempt runs on (its placement).
    device: str = ""
    #: A stream cell (issue 51): each job's arrival, Unix seconds by job id, placed from
    #: its ``group_start`` phase event (its ``ts`` is the stream's time 0, its ``arrivals``
    #: the offsets, in the order of ``planned_jobs``); empty for a batch cell.
    arrivals: dict[str, float] = field(default_factory=dict)

    # The cell-state sets are the event table's (EVENTS.active, .ended, .finished).
    @property
    def active(self) -> bool:
        """Running now: running, suspect or hung."""
        return self.state in EVENTS.active

    @property
    def ended(self) -> bool:
        """Its attempt is over: done, failed or killed."""
        return self.state in EVENTS.ended

    @property
    def finished(self) -> bool:
        """Counted as finished by the front ends: its attempt ended, or it was skipped."""
        return self.state in EVENTS.finished

    def archive(self) -> None:
        """Move the current attempt, if it ended, into ``history`` (once)."""
        if self.attempt and self.ended and not any(
                h.attempt == self.attempt for h in self.history):
            self.history.append(AttemptRecord(self.attempt, self.state, self.error,
                                              self.started_ts, self.ended_ts, self.T_group))


@dataclass
class CampaignState:
    campaign: str = ""
    state: str = "starting"        # starting | running | done | interrupted | aborted
    device: str = ""
    cells: dict[str, CellState] = field(default_factory=dict)
    exit_code: int | None = None
    #: The pid of the runner of the latest session (from ``campaign_started``).
    runner_pid: int | None = None
    #: When the latest runner session started and ended (events' wall-clock ``ts``).
    started_ts: float | None = None
    ended_ts: float | None = None
    #: The key of the cell the runner started last (it runs one at a time).
    current: str | None = None
    #: The runner's ``warning`` messages, in order (a results file it repaired or upgraded).
    warnings: list[str] = field(default_factory=list)

    def apply(self, event: Event) -> None:
        """Fold ``event`` into the state (a JSON document is read as its typed event:
        :func:`engine.events.parse_event`)."""
        event = parse_event(event)
        if isinstance(event, RunnerCampaignStarted):
            self.campaign, self.state = event.campaign or "", "running"
            self.device = event.device or ""
            self.runner_pid = event.runner_pid
            self.started_ts, self.ended_ts = event.ts, None
            return
        if isinstance(event, (RunnerCampaignInterrupted, RunnerCampaignAborted)):
            self.state = event.type.split("_")[1]
            return
        if isinstance(event, RunnerCampaignDone):
            self.exit_code = event.exit_code
            self.ended_ts = event.ts
            if self.state == "running":
                self.state = "done"
            return
        if isinstance(event, RunnerWarning):
            self.warnings.append(str(event.message if "message" in event else ""))
        # The cell an event is about, and the index and label that make a cell known: read
        # by key, as any type may carry them (also one this version does not declare).
        key = event.get("cell")
        if key is None:
            return
        cell = self.cells.get(key)
        if cell is None:
            if "index" not in event:
                return
            cell = self.cells[key] = CellState(key, event["index"], event.get("label", ""))
        if isinstance(event, RunnerEvent):
            self._runner_event(cell, event)
        elif isinstance(event, AttemptEvent):
            self._cell_event(cell, event)

    def _runner_event(self, cell: CellState, event: RunnerEvent) -> None:
        # the cell's state after the event: the table's (also for a type added to it)
        declared = EVENTS.get(event.type, RUNNER)
        after = declared.cell_state if declared is not None else None
        if isinstance(event, RunnerQueued):
            cell.archive()  # a manual retry of a cell that had ended
            cell.error, cell.watchdog = "", ""
        elif isinstance(event, RunnerSkipped):
            cell.error = event.reason or ""
        elif isinstance(event, RunnerCellStarted):
            cell.attempt, cell.pid = event.attempt or 0, event.pid
            cell.started_ts, cell.ended_ts, cell.T_group = event.ts, None, None
            cell.error, cell.watchdog, cell.jobs = "", "", {}
            cell.planned_jobs, cell.phase, cell.warnings, cell.sample = [], "", [], None
            cell.arrivals = {}
            cell.stage = "starting"
            cell.log_path = event.log_path or ""
            cell.device = event.device or ""
            self.current = cell.key
        elif isinstance(event, (RunnerSuspect, RunnerHung)):
            cell.watchdog = event.seen or ""
        elif isinstance(event, RunnerResumed):
            cell.watchdog = ""
        elif isinstance(event, RunnerRetried):
            cell.archive()
        elif event.type in EVENTS.end:  # the table's role (done, failed, killed)
            cell.ended_ts = event.ts
            cell.error = _end_error(event)
        elif isinstance(event, RunnerWarning) and event.attempt in (None, cell.attempt):
            _add_warning(cell, event.message)
        if after is not None:
            cell.state = after

    def _cell_event(self, cell: CellState, event: AttemptEvent) -> None:
        if event.attempt != cell.attempt:
            return  # a stale attempt's late lines
        if isinstance(event, MonitorSample):
            # the sample columns the views show, by name (the monitor's table of them)
            cell.sample = {name: event.get(name) for name in SAMPLE_FIELDS}
        elif isinstance(event, CellStarted):
            cell.planned_jobs = [str(j) for j in event.jobs or []]
            cell.stage = "starting"  # imports and data loading
        elif isinstance(event, CellPhase):
            cell.phase = str(event.phase or "")
            cell.stage = PHASE_STAGES.get(cell.phase, cell.stage)
            # (one offset per announced job, else none is trusted: a stream is not guessed)
            if (event.arrivals and len(event.arrivals) == len(cell.planned_jobs)
                    and isinstance(event.ts, (int, float))):
                cell.arrivals = {job: event.ts + float(offset) for job, offset
                                 in zip(cell.planned_jobs, event.arrivals, strict=True)}
        elif isinstance(event, CellJobStarted) and event.job_id is not None:
            job = cell.jobs[event.job_id] = JobState(event.job_id)
            job.reported_elapsed, job.reported_ts = 0.0, event.ts  # its own clock starts
            job.started_ts = event.ts
        elif isinstance(event, CellJobProgress) and event.job_id is not None:
            job = cell.jobs.setdefault(event.job_id, JobState(event.job_id))
            for name in _PROGRESS_FIELDS:
                if name in event:  # a report without one keeps the job's value
                    setattr(job, name, getattr(event, name))
            job.reported_elapsed = event.elapsed if "elapsed" in event else 0.0
            job.reported_ts = event.ts
            if event.epoch_end:
                job.train_sps = event.train_sps
                if event.val_acc is not None:
                    job.val_loss, job.val_acc = event.val_loss, event.val_acc
                    job.val_metric = event.val_metric or job.val_metric
        elif isinstance(event, CellJobDone) and event.job_id is not None:
            job = cell.jobs.setdefault(event.job_id, JobState(event.job_id))
            job.status = event.status or "ok"
            job.ended_ts = event.ts
        elif isinstance(event, CellWarning):
            _add_warning(cell, event.message)
        elif isinstance(event, CellSummary):
            cell.T_group = event.T_group
            for warning in event.warnings or []:
                _add_warning(cell, warning)
            cell.stage = "finishing"

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for cell in self.cells.values():
            out[cell.state] = out.get(cell.state, 0) + 1
        return out


#: The fields of a ``job_progress`` report that replace the job's (JobState's names).
_PROGRESS_FIELDS = ("epoch", "epochs", "step", "steps", "samples", "loss", "elapsed")


def _end_error(event: RunnerEvent) -> str:
    """Why an attempt ended: a done or failed event's error, a killed one's reason."""
    if isinstance(event, (RunnerDone, RunnerFailed)):
        return event.error or ""
    if isinstance(event, RunnerKilled):
        return event.reason or ""
    return str(event.get("error") or event.get("reason") or "")  # a type added to the table


def _add_warning(cell: CellState, message: Any) -> None:
    """Keep ``message`` among the cell's warnings (once: a summary may repeat one)."""
    text = str(message or "")
    if text and text not in cell.warnings:
        cell.warnings.append(text)


def rebuild(run_dir: str | Path, all_sessions: bool = False) -> CampaignState:
    """The state of a campaign's latest runner session (or all of them) from its files."""
    offset = 0 if all_sessions else last_session_offset(run_dir)
    state = CampaignState()
    for event in CampaignFollower(run_dir, offset).poll():
        state.apply(event)
    return state
