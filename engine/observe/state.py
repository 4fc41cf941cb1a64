"""Campaign state rebuilt from events (``engine.observe.follow``): what every front end shows.
Torch-free and UI-free; pure bookkeeping, so live views, restarts and replays agree.

Cell states: queued, running, suspect, hung, done, failed, killed, skipped. A cell that runs
again (a retry) keeps its earlier attempts in ``history`` with how each ended, so a front end
can still show the killed attempt under the new one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

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
    elapsed: float | None = None
    train_sps: float | None = None


#: Fields of a monitor ``sample`` event kept as the cell's latest sample.
SAMPLE_FIELDS = LATEST_SAMPLE_FIELDS
#: Cell states after which an attempt is over.
ENDED = frozenset({"done", "failed", "killed"})


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
    #: Warnings of the cell's ``summary`` event (e.g. a busy host).
    warnings: list[str] = field(default_factory=list)
    #: The latest monitor ``sample`` of the current attempt (:data:`SAMPLE_FIELDS`).
    sample: dict[str, Any] | None = None
    #: Earlier attempts, oldest first.
    history: list[AttemptRecord] = field(default_factory=list)

    def archive(self) -> None:
        """Move the current attempt, if it ended, into ``history`` (once)."""
        if self.attempt and self.state in ENDED and not any(
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

    def apply(self, event: dict[str, Any]) -> None:
        kind = event.get("type")
        from_runner = "campaign" in event
        key = event.get("cell")
        if kind == "campaign_started":
            self.campaign, self.state, self.device = event["campaign"], "running", event["device"]
            self.runner_pid = event.get("runner_pid")
            return
        if kind in ("campaign_interrupted", "campaign_aborted"):
            self.state = kind.split("_")[1]
            return
        if kind == "campaign_done":
            self.exit_code = event.get("exit_code")
            if self.state == "running":
                self.state = "done"
            return
        if key is None:
            return
        cell = self.cells.get(key)
        if cell is None:
            if "index" not in event:
                return
            cell = self.cells[key] = CellState(key, event["index"], event.get("label", ""))
        if from_runner:
            self._runner_event(cell, kind, event)
        else:
            self._cell_event(cell, kind, event)

    def _runner_event(self, cell: CellState, kind: str, event: dict[str, Any]) -> None:
        if kind == "queued":
            cell.archive()  # a manual retry of a cell that had ended
            cell.state, cell.error, cell.watchdog = "queued", "", ""
        elif kind == "skipped":
            cell.state, cell.error = "skipped", event.get("reason", "")
        elif kind == "cell_started":
            cell.state, cell.attempt, cell.pid = "running", event["attempt"], event.get("pid")
            cell.started_ts, cell.ended_ts, cell.T_group = event["ts"], None, None
            cell.error, cell.watchdog, cell.jobs = "", "", {}
            cell.planned_jobs, cell.phase, cell.warnings, cell.sample = [], "", [], None
            cell.log_path = event.get("log_path", "")
        elif kind in ("suspect", "hung"):
            cell.state, cell.watchdog = kind, event.get("seen", "")
        elif kind == "resumed":
            cell.state, cell.watchdog = "running", ""
        elif kind == "retried":
            cell.archive()
            cell.state = "queued"
        elif kind in ("done", "failed", "killed"):
            cell.state, cell.ended_ts = kind, event["ts"]
            cell.error = event.get("error") or event.get("reason") or ""

    def _cell_event(self, cell: CellState, kind: str, event: dict[str, Any]) -> None:
        if event.get("attempt") != cell.attempt:
            return  # a stale attempt's late lines
        if kind == "sample":
            cell.sample = {name: event.get(name) for name in SAMPLE_FIELDS}
        elif kind == "started":
            cell.planned_jobs = [str(j) for j in event.get("jobs") or []]
        elif kind == "phase":
            cell.phase = str(event.get("phase") or "")
        elif kind == "job_started":
            cell.jobs[event["job_id"]] = JobState(event["job_id"])
        elif kind == "job_progress":
            job = cell.jobs.setdefault(event["job_id"], JobState(event["job_id"]))
            for name in ("epoch", "epochs", "step", "steps", "samples", "loss", "elapsed"):
                setattr(job, name, event.get(name, getattr(job, name)))
            if event.get("epoch_end"):
                job.train_sps = event.get("train_sps")
                if event.get("val_acc") is not None:
                    job.val_loss, job.val_acc = event.get("val_loss"), event["val_acc"]
        elif kind == "job_done":
            job = cell.jobs.setdefault(event["job_id"], JobState(event["job_id"]))
            job.status = event.get("status", "ok")
        elif kind == "summary":
            cell.T_group = event.get("T_group")
            cell.warnings = [str(w) for w in event.get("warnings") or []]

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for cell in self.cells.values():
            out[cell.state] = out.get(cell.state, 0) + 1
        return out


def rebuild(run_dir: str | Path, all_sessions: bool = False) -> CampaignState:
    """The state of a campaign's latest runner session (or all of them) from its files."""
    offset = 0 if all_sessions else last_session_offset(run_dir)
    state = CampaignState()
    for event in CampaignFollower(run_dir, offset).poll():
        state.apply(event)
    return state
