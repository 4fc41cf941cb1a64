"""The typed events: one class per event type of the table (engine.events.EVENTS).

GENERATED from engine/events.py (EVENTS, FIELD_TYPES); do not edit. After changing
the table, run:  python -m engine.event_codegen > engine/event_types.py
(tests/unit/engine/test_event_types.py fails while this file and the table differ).

Each class reads its declared fields as typed properties (None when a document
lacks one: engine.event_base) and builds an event to write from keyword arguments
(the envelope and the writer's common fields are added when it is written).
"""

from __future__ import annotations

from typing import Any, ClassVar

from engine.event_base import (
    ABSENT,
    CELL,
    MONITOR,
    RUNNER,
    CellEvent,
    Event,
    MonitorEvent,
    RunnerEvent,
    _Absent,
    draft,
)

__all__ = [
    "RunnerCampaignStarted",
    "RunnerZygote",
    "RunnerQueued",
    "RunnerSkipped",
    "RunnerCellStarted",
    "RunnerSuspect",
    "RunnerHung",
    "RunnerResumed",
    "RunnerLeftoversKilled",
    "RunnerDone",
    "RunnerFailed",
    "RunnerKilled",
    "RunnerRetried",
    "RunnerCleanup",
    "RunnerControl",
    "RunnerWarning",
    "RunnerCampaignInterrupted",
    "RunnerCampaignAborted",
    "RunnerCampaignDone",
    "CellStarted",
    "CellPhase",
    "CellExecutor",
    "CellWarning",
    "CellJobStarted",
    "CellJobProgress",
    "CellWaiting",
    "CellJobDone",
    "CellSummary",
    "CellDone",
    "CellFailed",
    "CellKilled",
    "MonitorSample",
    "CLASSES",
]


class RunnerCampaignStarted(RunnerEvent):
    """a runner session starts (reuse_any: resume reuses other campaigns' ok rows; guard_pid: the process that cleans up if the runner dies; devices: a multi-device campaign's devices, each as the placement column names it)"""

    __slots__ = ()
    TYPE: ClassVar[str] = "campaign_started"

    def __init__(self, *, cells: int, run_dir: str, device: str, runner_pid: int, resume: bool, reuse_any: bool | _Absent = ABSENT, guard_pid: int | None | _Absent = ABSENT, devices: list[str] | _Absent = ABSENT) -> None:
        super().__init__(draft("campaign_started", {"cells": cells, "run_dir": run_dir, "device": device, "runner_pid": runner_pid, "resume": resume, "reuse_any": reuse_any, "guard_pid": guard_pid, "devices": devices}))

    @property
    def cells(self) -> int | None:
        return dict.get(self, "cells")

    @property
    def run_dir(self) -> str | None:
        return dict.get(self, "run_dir")

    @property
    def device(self) -> str | None:
        return dict.get(self, "device")

    @property
    def runner_pid(self) -> int | None:
        return dict.get(self, "runner_pid")

    @property
    def resume(self) -> bool | None:
        return dict.get(self, "resume")

    @property
    def reuse_any(self) -> bool | None:
        return dict.get(self, "reuse_any")

    @property
    def guard_pid(self) -> int | None:
        return dict.get(self, "guard_pid")

    @property
    def devices(self) -> list[str] | None:
        return dict.get(self, "devices")


class RunnerZygote(RunnerEvent):
    """the runner's pre-warmed cell parent is ready (warm_s: its start and imports, imports_s: the imports; threads, python_threads, cuda_initialized: as it reported them, checked again before every fork: 1, 1, false), or cannot start cells (error: why; they then start as fresh interpreters)"""

    __slots__ = ()
    TYPE: ClassVar[str] = "zygote"

    def __init__(self, *, pid: int | None, warm_s: float | _Absent = ABSENT, imports_s: float | _Absent = ABSENT, threads: int | _Absent = ABSENT, python_threads: int | _Absent = ABSENT, cuda_initialized: bool | _Absent = ABSENT, error: str | None | _Absent = ABSENT) -> None:
        super().__init__(draft("zygote", {"pid": pid, "warm_s": warm_s, "imports_s": imports_s, "threads": threads, "python_threads": python_threads, "cuda_initialized": cuda_initialized, "error": error}))

    @property
    def pid(self) -> int | None:
        return dict.get(self, "pid")

    @property
    def warm_s(self) -> float | None:
        return dict.get(self, "warm_s")

    @property
    def imports_s(self) -> float | None:
        return dict.get(self, "imports_s")

    @property
    def threads(self) -> int | None:
        return dict.get(self, "threads")

    @property
    def python_threads(self) -> int | None:
        return dict.get(self, "python_threads")

    @property
    def cuda_initialized(self) -> bool | None:
        return dict.get(self, "cuda_initialized")

    @property
    def error(self) -> str | None:
        return dict.get(self, "error")


class RunnerQueued(RunnerEvent):
    """a cell waits for its turn (again, after a manual retry)"""

    __slots__ = ()
    TYPE: ClassVar[str] = "queued"

    def __init__(self, *, cell: str, index: int, label: str, manual_retry: bool | _Absent = ABSENT) -> None:
        super().__init__(draft("queued", {"cell": cell, "index": index, "label": label, "manual_retry": manual_retry}))

    @property
    def cell(self) -> str | None:
        return dict.get(self, "cell")

    @property
    def index(self) -> int | None:
        return dict.get(self, "index")

    @property
    def label(self) -> str | None:
        return dict.get(self, "label")

    @property
    def manual_retry(self) -> bool | None:
        return dict.get(self, "manual_retry")


class RunnerSkipped(RunnerEvent):
    """a cell will not run (already ok, cannot run here, skipped by control); an ok row's campaign, attempt and timestamp when resume skipped it for one"""

    __slots__ = ()
    TYPE: ClassVar[str] = "skipped"

    def __init__(self, *, cell: str, index: int, label: str, reason: str, from_campaign: str | _Absent = ABSENT, from_attempt: str | _Absent = ABSENT, from_timestamp: str | _Absent = ABSENT) -> None:
        super().__init__(draft("skipped", {"cell": cell, "index": index, "label": label, "reason": reason, "from_campaign": from_campaign, "from_attempt": from_attempt, "from_timestamp": from_timestamp}))

    @property
    def cell(self) -> str | None:
        return dict.get(self, "cell")

    @property
    def index(self) -> int | None:
        return dict.get(self, "index")

    @property
    def label(self) -> str | None:
        return dict.get(self, "label")

    @property
    def reason(self) -> str | None:
        return dict.get(self, "reason")

    @property
    def from_campaign(self) -> str | None:
        return dict.get(self, "from_campaign")

    @property
    def from_attempt(self) -> str | None:
        return dict.get(self, "from_attempt")

    @property
    def from_timestamp(self) -> str | None:
        return dict.get(self, "from_timestamp")


class RunnerCellStarted(RunnerEvent):
    """an attempt's process started (start: zygote, forked from the runner's pre-warmed parent, or spawn, a fresh interpreter; start_s: seconds from the runner's decision to run the attempt until its process ran; device: in a multi-device campaign, the device it was placed on, as the placement column says; node: on a Ray cluster, the node it runs on, as the node column says, and pid is its pid there)"""

    __slots__ = ()
    TYPE: ClassVar[str] = "cell_started"

    def __init__(self, *, cell: str, index: int, label: str, attempt: int, events: str, log_path: str, pid: int | None, start: str | _Absent = ABSENT, start_s: float | _Absent = ABSENT, device: str | _Absent = ABSENT, node: str | None | _Absent = ABSENT) -> None:
        super().__init__(draft("cell_started", {"cell": cell, "index": index, "label": label, "attempt": attempt, "events": events, "log_path": log_path, "pid": pid, "start": start, "start_s": start_s, "device": device, "node": node}))

    @property
    def cell(self) -> str | None:
        return dict.get(self, "cell")

    @property
    def index(self) -> int | None:
        return dict.get(self, "index")

    @property
    def label(self) -> str | None:
        return dict.get(self, "label")

    @property
    def attempt(self) -> int | None:
        return dict.get(self, "attempt")

    @property
    def events(self) -> str | None:
        return dict.get(self, "events")

    @property
    def log_path(self) -> str | None:
        return dict.get(self, "log_path")

    @property
    def pid(self) -> int | None:
        return dict.get(self, "pid")

    @property
    def start(self) -> str | None:
        return dict.get(self, "start")

    @property
    def start_s(self) -> float | None:
        return dict.get(self, "start_s")

    @property
    def device(self) -> str | None:
        return dict.get(self, "device")

    @property
    def node(self) -> str | None:
        return dict.get(self, "node")


class RunnerSuspect(RunnerEvent):
    """no progress for suspect_after checks"""

    __slots__ = ()
    TYPE: ClassVar[str] = "suspect"

    def __init__(self, *, cell: str, attempt: int, seen: str) -> None:
        super().__init__(draft("suspect", {"cell": cell, "attempt": attempt, "seen": seen}))

    @property
    def cell(self) -> str | None:
        return dict.get(self, "cell")

    @property
    def attempt(self) -> int | None:
        return dict.get(self, "attempt")

    @property
    def seen(self) -> str | None:
        return dict.get(self, "seen")


class RunnerHung(RunnerEvent):
    """no progress for hung_after checks"""

    __slots__ = ()
    TYPE: ClassVar[str] = "hung"

    def __init__(self, *, cell: str, attempt: int, seen: str, action: str) -> None:
        super().__init__(draft("hung", {"cell": cell, "attempt": attempt, "seen": seen, "action": action}))

    @property
    def cell(self) -> str | None:
        return dict.get(self, "cell")

    @property
    def attempt(self) -> int | None:
        return dict.get(self, "attempt")

    @property
    def seen(self) -> str | None:
        return dict.get(self, "seen")

    @property
    def action(self) -> str | None:
        return dict.get(self, "action")


class RunnerResumed(RunnerEvent):
    """a hung cell progresses again"""

    __slots__ = ()
    TYPE: ClassVar[str] = "resumed"

    def __init__(self, *, cell: str, attempt: int) -> None:
        super().__init__(draft("resumed", {"cell": cell, "attempt": attempt}))

    @property
    def cell(self) -> str | None:
        return dict.get(self, "cell")

    @property
    def attempt(self) -> int | None:
        return dict.get(self, "attempt")


class RunnerLeftoversKilled(RunnerEvent):
    """processes an attempt left outside its session were killed"""

    __slots__ = ()
    TYPE: ClassVar[str] = "leftovers_killed"

    def __init__(self, *, cell: str, attempt: int, pids: list[int | str]) -> None:
        super().__init__(draft("leftovers_killed", {"cell": cell, "attempt": attempt, "pids": pids}))

    @property
    def cell(self) -> str | None:
        return dict.get(self, "cell")

    @property
    def attempt(self) -> int | None:
        return dict.get(self, "attempt")

    @property
    def pids(self) -> list[int | str] | None:
        return dict.get(self, "pids")


class RunnerDone(RunnerEvent):
    """an attempt ended ok"""

    __slots__ = ()
    TYPE: ClassVar[str] = "done"

    def __init__(self, *, cell: str, attempt: int, exit_code: int | None, error: str | None) -> None:
        super().__init__(draft("done", {"cell": cell, "attempt": attempt, "exit_code": exit_code, "error": error}))

    @property
    def cell(self) -> str | None:
        return dict.get(self, "cell")

    @property
    def attempt(self) -> int | None:
        return dict.get(self, "attempt")

    @property
    def exit_code(self) -> int | None:
        return dict.get(self, "exit_code")

    @property
    def error(self) -> str | None:
        return dict.get(self, "error")


class RunnerFailed(RunnerEvent):
    """an attempt failed"""

    __slots__ = ()
    TYPE: ClassVar[str] = "failed"

    def __init__(self, *, cell: str, attempt: int, exit_code: int | None, error: str | None) -> None:
        super().__init__(draft("failed", {"cell": cell, "attempt": attempt, "exit_code": exit_code, "error": error}))

    @property
    def cell(self) -> str | None:
        return dict.get(self, "cell")

    @property
    def attempt(self) -> int | None:
        return dict.get(self, "attempt")

    @property
    def exit_code(self) -> int | None:
        return dict.get(self, "exit_code")

    @property
    def error(self) -> str | None:
        return dict.get(self, "error")


class RunnerKilled(RunnerEvent):
    """an attempt was stopped (control, watchdog, Ctrl-C, or an earlier runner's; node_lost: its cluster node was lost while it ran)"""

    __slots__ = ()
    TYPE: ClassVar[str] = "killed"

    def __init__(self, *, cell: str, attempt: int, reason: str, exit_code: int | None | _Absent = ABSENT, predecessor: bool | _Absent = ABSENT, node_lost: bool | _Absent = ABSENT) -> None:
        super().__init__(draft("killed", {"cell": cell, "attempt": attempt, "reason": reason, "exit_code": exit_code, "predecessor": predecessor, "node_lost": node_lost}))

    @property
    def cell(self) -> str | None:
        return dict.get(self, "cell")

    @property
    def attempt(self) -> int | None:
        return dict.get(self, "attempt")

    @property
    def reason(self) -> str | None:
        return dict.get(self, "reason")

    @property
    def exit_code(self) -> int | None:
        return dict.get(self, "exit_code")

    @property
    def predecessor(self) -> bool | None:
        return dict.get(self, "predecessor")

    @property
    def node_lost(self) -> bool | None:
        return dict.get(self, "node_lost")


class RunnerRetried(RunnerEvent):
    """a failed, hung or killed cell runs again (node_lost: on another cluster node, without using a retry of the campaign's budget; retry of retries: its node losses so far of those allowed)"""

    __slots__ = ()
    TYPE: ClassVar[str] = "retried"

    def __init__(self, *, cell: str, attempt: int, manual: bool, retry: int | _Absent = ABSENT, retries: int | _Absent = ABSENT, node_lost: bool | _Absent = ABSENT) -> None:
        super().__init__(draft("retried", {"cell": cell, "attempt": attempt, "manual": manual, "retry": retry, "retries": retries, "node_lost": node_lost}))

    @property
    def cell(self) -> str | None:
        return dict.get(self, "cell")

    @property
    def attempt(self) -> int | None:
        return dict.get(self, "attempt")

    @property
    def manual(self) -> bool | None:
        return dict.get(self, "manual")

    @property
    def retry(self) -> int | None:
        return dict.get(self, "retry")

    @property
    def retries(self) -> int | None:
        return dict.get(self, "retries")

    @property
    def node_lost(self) -> bool | None:
        return dict.get(self, "node_lost")


class RunnerCleanup(RunnerEvent):
    """what a cell recorded for cleanup was stopped (guard: by the guard of runner runner_pid, which had died)"""

    __slots__ = ()
    TYPE: ClassVar[str] = "cleanup"

    def __init__(self, *, cell: str | _Absent = ABSENT, attempt: int | _Absent = ABSENT, attempt_dir: str | _Absent = ABSENT, messages: list[str], predecessor: bool | _Absent = ABSENT, guard: bool | _Absent = ABSENT, runner_pid: int | _Absent = ABSENT) -> None:
        super().__init__(draft("cleanup", {"cell": cell, "attempt": attempt, "attempt_dir": attempt_dir, "messages": messages, "predecessor": predecessor, "guard": guard, "runner_pid": runner_pid}))

    @property
    def cell(self) -> str | None:
        return dict.get(self, "cell")

    @property
    def attempt(self) -> int | None:
        return dict.get(self, "attempt")

    @property
    def attempt_dir(self) -> str | None:
        return dict.get(self, "attempt_dir")

    @property
    def messages(self) -> list[str] | None:
        return dict.get(self, "messages")

    @property
    def predecessor(self) -> bool | None:
        return dict.get(self, "predecessor")

    @property
    def guard(self) -> bool | None:
        return dict.get(self, "guard")

    @property
    def runner_pid(self) -> int | None:
        return dict.get(self, "runner_pid")


class RunnerControl(RunnerEvent):
    """a control command was applied or ignored"""

    __slots__ = ()
    TYPE: ClassVar[str] = "control"

    def __init__(self, *, cmd: str, cell: str | _Absent = ABSENT, applied: bool, reason: str | _Absent = ABSENT) -> None:
        super().__init__(draft("control", {"cmd": cmd, "cell": cell, "applied": applied, "reason": reason}))

    @property
    def cmd(self) -> str | None:
        return dict.get(self, "cmd")

    @property
    def cell(self) -> str | None:
        return dict.get(self, "cell")

    @property
    def applied(self) -> bool | None:
        return dict.get(self, "applied")

    @property
    def reason(self) -> str | None:
        return dict.get(self, "reason")


class RunnerWarning(RunnerEvent):
    """something the user must know that stops nothing: a results file the runner appended to was repaired or upgraded (the file, what was done, the backup)"""

    __slots__ = ()
    TYPE: ClassVar[str] = "warning"

    def __init__(self, *, message: str, cell: str | _Absent = ABSENT, attempt: int | _Absent = ABSENT) -> None:
        super().__init__(draft("warning", {"message": message, "cell": cell, "attempt": attempt}))

    @property
    def message(self) -> str | None:
        return dict.get(self, "message")

    @property
    def cell(self) -> str | None:
        return dict.get(self, "cell")

    @property
    def attempt(self) -> int | None:
        return dict.get(self, "attempt")


class RunnerCampaignInterrupted(RunnerEvent):
    """Ctrl-C or SIGTERM stopped the campaign"""

    __slots__ = ()
    TYPE: ClassVar[str] = "campaign_interrupted"

    def __init__(self) -> None:
        super().__init__(draft("campaign_interrupted", {}))


class RunnerCampaignAborted(RunnerEvent):
    """a control command aborted the campaign"""

    __slots__ = ()
    TYPE: ClassVar[str] = "campaign_aborted"

    def __init__(self) -> None:
        super().__init__(draft("campaign_aborted", {}))


class RunnerCampaignDone(RunnerEvent):
    """the runner session ends (with the campaign's exit code)"""

    __slots__ = ()
    TYPE: ClassVar[str] = "campaign_done"

    def __init__(self, *, ok: bool, exit_code: int | None, failed: int, error: str | None | _Absent = ABSENT) -> None:
        super().__init__(draft("campaign_done", {"ok": ok, "exit_code": exit_code, "failed": failed, "error": error}))

    @property
    def ok(self) -> bool | None:
        return dict.get(self, "ok")

    @property
    def exit_code(self) -> int | None:
        return dict.get(self, "exit_code")

    @property
    def failed(self) -> int | None:
        return dict.get(self, "failed")

    @property
    def error(self) -> str | None:
        return dict.get(self, "error")


class CellStarted(CellEvent):
    """the cell process is up; its job ids"""

    __slots__ = ()
    TYPE: ClassVar[str] = "started"

    def __init__(self, *, pid: int | None, exp_id: str, executor: str, jobs: list[str]) -> None:
        super().__init__(draft("started", {"pid": pid, "exp_id": exp_id, "executor": executor, "jobs": jobs}))

    @property
    def pid(self) -> int | None:
        return dict.get(self, "pid")

    @property
    def exp_id(self) -> str | None:
        return dict.get(self, "exp_id")

    @property
    def executor(self) -> str | None:
        return dict.get(self, "executor")

    @property
    def jobs(self) -> list[str] | None:
        return dict.get(self, "jobs")


class CellPhase(CellEvent):
    """imports, data_load, setup, group_start, group_end (window: the group window's [start, end] on time.perf_counter), teardown (arrivals: a stream cell's group_start, issue 51: each job's arrival, seconds after the window opens, in the order of its started event's jobs; the window opens just after this event, once the device is synchronised and the monitor's mark sample written, so the event's ts is the stream's time 0 to within milliseconds, what the dashboard's timeline places the arrivals from)"""

    __slots__ = ()
    TYPE: ClassVar[str] = "phase"

    def __init__(self, *, phase: str, seconds: float | None | _Absent = ABSENT, window: list[float] | _Absent = ABSENT, arrivals: list[float] | _Absent = ABSENT) -> None:
        super().__init__(draft("phase", {"phase": phase, "seconds": seconds, "window": window, "arrivals": arrivals}))

    @property
    def phase(self) -> str | None:
        return dict.get(self, "phase")

    @property
    def seconds(self) -> float | None:
        return dict.get(self, "seconds")

    @property
    def window(self) -> list[float] | None:
        return dict.get(self, "window")

    @property
    def arrivals(self) -> list[float] | None:
        return dict.get(self, "arrivals")


class CellExecutor(CellEvent):
    """the executor's runtime (ray)"""

    __slots__ = ()
    TYPE: ClassVar[str] = "executor"

    def __init__(self, *, name: str, temp_dir: str | None | _Absent = ABSENT, tag: str | None | _Absent = ABSENT, address: str | None | _Absent = ABSENT) -> None:
        super().__init__(draft("executor", {"name": name, "temp_dir": temp_dir, "tag": tag, "address": address}))

    @property
    def name(self) -> str | None:
        return dict.get(self, "name")

    @property
    def temp_dir(self) -> str | None:
        return dict.get(self, "temp_dir")

    @property
    def tag(self) -> str | None:
        return dict.get(self, "tag")

    @property
    def address(self) -> str | None:
        return dict.get(self, "address")


class CellWarning(CellEvent):
    """a warning the executor raised (ray tune), or a results file the cell appended to was repaired or upgraded (the file, what was done, the backup)"""

    __slots__ = ()
    TYPE: ClassVar[str] = "warning"

    def __init__(self, *, message: str) -> None:
        super().__init__(draft("warning", {"message": message}))

    @property
    def message(self) -> str | None:
        return dict.get(self, "message")


class CellJobStarted(CellEvent):
    """a job starts (worker_pid: the process training it, under mp and ray; pid in recordings of older mp cells)"""

    __slots__ = ()
    TYPE: ClassVar[str] = "job_started"

    def __init__(self, *, job_id: str, pid: int | None | _Absent = ABSENT, worker_pid: int | None | _Absent = ABSENT) -> None:
        super().__init__(draft("job_started", {"job_id": job_id, "pid": pid, "worker_pid": worker_pid}))

    @property
    def job_id(self) -> str | None:
        return dict.get(self, "job_id")

    @property
    def pid(self) -> int | None:
        return dict.get(self, "pid")

    @property
    def worker_pid(self) -> int | None:
        return dict.get(self, "worker_pid")


class CellJobProgress(CellEvent):
    """rate-limited at the source; epoch_end with the epoch's validation (val_metric: what val_acc holds, accuracy or r2; absent in older recordings)"""

    __slots__ = ()
    TYPE: ClassVar[str] = "job_progress"

    def __init__(self, *, job_id: str, epoch: int, epochs: int, step: int, steps: int, samples: int, loss: float | None, elapsed: float, val_loss: float | None | _Absent = ABSENT, val_acc: float | None | _Absent = ABSENT, epoch_end: bool | _Absent = ABSENT, train_sps: float | None | _Absent = ABSENT, val_metric: str | None | _Absent = ABSENT) -> None:
        super().__init__(draft("job_progress", {"job_id": job_id, "epoch": epoch, "epochs": epochs, "step": step, "steps": steps, "samples": samples, "loss": loss, "elapsed": elapsed, "val_loss": val_loss, "val_acc": val_acc, "epoch_end": epoch_end, "train_sps": train_sps, "val_metric": val_metric}))

    @property
    def job_id(self) -> str | None:
        return dict.get(self, "job_id")

    @property
    def epoch(self) -> int | None:
        return dict.get(self, "epoch")

    @property
    def epochs(self) -> int | None:
        return dict.get(self, "epochs")

    @property
    def step(self) -> int | None:
        return dict.get(self, "step")

    @property
    def steps(self) -> int | None:
        return dict.get(self, "steps")

    @property
    def samples(self) -> int | None:
        return dict.get(self, "samples")

    @property
    def loss(self) -> float | None:
        return dict.get(self, "loss")

    @property
    def elapsed(self) -> float | None:
        return dict.get(self, "elapsed")

    @property
    def val_loss(self) -> float | None:
        return dict.get(self, "val_loss")

    @property
    def val_acc(self) -> float | None:
        return dict.get(self, "val_acc")

    @property
    def epoch_end(self) -> bool | None:
        return dict.get(self, "epoch_end")

    @property
    def train_sps(self) -> float | None:
        return dict.get(self, "train_sps")

    @property
    def val_metric(self) -> str | None:
        return dict.get(self, "val_metric")


class CellWaiting(CellEvent):
    """a stream cell waits for its next arrival (issue 51): job job_id arrives at until_s seconds after the group window opened; repeated every heartbeat while it waits, so the watchdog sees progress"""

    __slots__ = ()
    TYPE: ClassVar[str] = "waiting"

    def __init__(self, *, job_id: str, until_s: float) -> None:
        super().__init__(draft("waiting", {"job_id": job_id, "until_s": until_s}))

    @property
    def job_id(self) -> str | None:
        return dict.get(self, "job_id")

    @property
    def until_s(self) -> float | None:
        return dict.get(self, "until_s")


class CellJobDone(CellEvent):
    """a job ended (status ok or failed)"""

    __slots__ = ()
    TYPE: ClassVar[str] = "job_done"

    def __init__(self, *, job_id: str, status: str, error: str, total_time_s: float | None, samples: int, final_val_acc: float | None, pid: int | None | _Absent = ABSENT, early_stopped: bool | _Absent = ABSENT, stop_reason: str | None | _Absent = ABSENT) -> None:
        super().__init__(draft("job_done", {"job_id": job_id, "status": status, "error": error, "total_time_s": total_time_s, "samples": samples, "final_val_acc": final_val_acc, "pid": pid, "early_stopped": early_stopped, "stop_reason": stop_reason}))

    @property
    def job_id(self) -> str | None:
        return dict.get(self, "job_id")

    @property
    def status(self) -> str | None:
        return dict.get(self, "status")

    @property
    def error(self) -> str | None:
        return dict.get(self, "error")

    @property
    def total_time_s(self) -> float | None:
        return dict.get(self, "total_time_s")

    @property
    def samples(self) -> int | None:
        return dict.get(self, "samples")

    @property
    def final_val_acc(self) -> float | None:
        return dict.get(self, "final_val_acc")

    @property
    def pid(self) -> int | None:
        return dict.get(self, "pid")

    @property
    def early_stopped(self) -> bool | None:
        return dict.get(self, "early_stopped")

    @property
    def stop_reason(self) -> str | None:
        return dict.get(self, "stop_reason")


class CellSummary(CellEvent):
    """the group's rows are written"""

    __slots__ = ()
    TYPE: ClassVar[str] = "summary"

    def __init__(self, *, group_id: str, status: str, error: str, T_group: float, total_samples: int, throughput_group: float | None, setup_s: float, data_load_s: float | None, warnings: list[str], jobs: list[dict[str, Any]]) -> None:
        super().__init__(draft("summary", {"group_id": group_id, "status": status, "error": error, "T_group": T_group, "total_samples": total_samples, "throughput_group": throughput_group, "setup_s": setup_s, "data_load_s": data_load_s, "warnings": warnings, "jobs": jobs}))

    @property
    def group_id(self) -> str | None:
        return dict.get(self, "group_id")

    @property
    def status(self) -> str | None:
        return dict.get(self, "status")

    @property
    def error(self) -> str | None:
        return dict.get(self, "error")

    @property
    def T_group(self) -> float | None:
        return dict.get(self, "T_group")

    @property
    def total_samples(self) -> int | None:
        return dict.get(self, "total_samples")

    @property
    def throughput_group(self) -> float | None:
        return dict.get(self, "throughput_group")

    @property
    def setup_s(self) -> float | None:
        return dict.get(self, "setup_s")

    @property
    def data_load_s(self) -> float | None:
        return dict.get(self, "data_load_s")

    @property
    def warnings(self) -> list[str] | None:
        return dict.get(self, "warnings")

    @property
    def jobs(self) -> list[dict[str, Any]] | None:
        return dict.get(self, "jobs")


class CellDone(CellEvent):
    """the cell ends ok"""

    __slots__ = ()
    TYPE: ClassVar[str] = "done"

    def __init__(self, *, error: str | None, group_written: bool, output_error: bool | _Absent = ABSENT) -> None:
        super().__init__(draft("done", {"error": error, "group_written": group_written, "output_error": output_error}))

    @property
    def error(self) -> str | None:
        return dict.get(self, "error")

    @property
    def group_written(self) -> bool | None:
        return dict.get(self, "group_written")

    @property
    def output_error(self) -> bool | None:
        return dict.get(self, "output_error")


class CellFailed(CellEvent):
    """the cell ends failed (with whether its failed row was written)"""

    __slots__ = ()
    TYPE: ClassVar[str] = "failed"

    def __init__(self, *, error: str | None, group_written: bool, output_error: bool | _Absent = ABSENT) -> None:
        super().__init__(draft("failed", {"error": error, "group_written": group_written, "output_error": output_error}))

    @property
    def error(self) -> str | None:
        return dict.get(self, "error")

    @property
    def group_written(self) -> bool | None:
        return dict.get(self, "group_written")

    @property
    def output_error(self) -> bool | None:
        return dict.get(self, "output_error")


class CellKilled(CellEvent):
    """written by the next runner for an attempt an earlier runner left"""

    __slots__ = ()
    TYPE: ClassVar[str] = "killed"

    def __init__(self, *, reason: str) -> None:
        super().__init__(draft("killed", {"reason": reason}))

    @property
    def reason(self) -> str | None:
        return dict.get(self, "reason")


class MonitorSample(MonitorEvent):
    """one monitor sample (GPU fields null without a GPU)"""

    __slots__ = ()
    TYPE: ClassVar[str] = "sample"

    def __init__(self, *, t: float, time: float | _Absent = ABSENT, gpu_util_pct: float | None | _Absent = ABSENT, mem_used_mib: float | None | _Absent = ABSENT, power_w: float | None | _Absent = ABSENT, energy_mj: float | None | _Absent = ABSENT, sm_clock_mhz: float | None | _Absent = ABSENT, temp_c: float | None | _Absent = ABSENT, cpu_pct: float | None | _Absent = ABSENT, rss_mib: float | None | _Absent = ABSENT, host_mem_available_mib: float | None | _Absent = ABSENT) -> None:
        super().__init__(draft("sample", {"t": t, "time": time, "gpu_util_pct": gpu_util_pct, "mem_used_mib": mem_used_mib, "power_w": power_w, "energy_mj": energy_mj, "sm_clock_mhz": sm_clock_mhz, "temp_c": temp_c, "cpu_pct": cpu_pct, "rss_mib": rss_mib, "host_mem_available_mib": host_mem_available_mib}))

    @property
    def t(self) -> float | None:
        return dict.get(self, "t")

    @property
    def time(self) -> float | None:
        return dict.get(self, "time")

    @property
    def gpu_util_pct(self) -> float | None:
        return dict.get(self, "gpu_util_pct")

    @property
    def mem_used_mib(self) -> float | None:
        return dict.get(self, "mem_used_mib")

    @property
    def power_w(self) -> float | None:
        return dict.get(self, "power_w")

    @property
    def energy_mj(self) -> float | None:
        return dict.get(self, "energy_mj")

    @property
    def sm_clock_mhz(self) -> float | None:
        return dict.get(self, "sm_clock_mhz")

    @property
    def temp_c(self) -> float | None:
        return dict.get(self, "temp_c")

    @property
    def cpu_pct(self) -> float | None:
        return dict.get(self, "cpu_pct")

    @property
    def rss_mib(self) -> float | None:
        return dict.get(self, "rss_mib")

    @property
    def host_mem_available_mib(self) -> float | None:
        return dict.get(self, "host_mem_available_mib")


#: The class of each declared (source, type).
CLASSES: dict[tuple[str, str], type[Event]] = {
    (RUNNER, "campaign_started"): RunnerCampaignStarted,
    (RUNNER, "zygote"): RunnerZygote,
    (RUNNER, "queued"): RunnerQueued,
    (RUNNER, "skipped"): RunnerSkipped,
    (RUNNER, "cell_started"): RunnerCellStarted,
    (RUNNER, "suspect"): RunnerSuspect,
    (RUNNER, "hung"): RunnerHung,
    (RUNNER, "resumed"): RunnerResumed,
    (RUNNER, "leftovers_killed"): RunnerLeftoversKilled,
    (RUNNER, "done"): RunnerDone,
    (RUNNER, "failed"): RunnerFailed,
    (RUNNER, "killed"): RunnerKilled,
    (RUNNER, "retried"): RunnerRetried,
    (RUNNER, "cleanup"): RunnerCleanup,
    (RUNNER, "control"): RunnerControl,
    (RUNNER, "warning"): RunnerWarning,
    (RUNNER, "campaign_interrupted"): RunnerCampaignInterrupted,
    (RUNNER, "campaign_aborted"): RunnerCampaignAborted,
    (RUNNER, "campaign_done"): RunnerCampaignDone,
    (CELL, "started"): CellStarted,
    (CELL, "phase"): CellPhase,
    (CELL, "executor"): CellExecutor,
    (CELL, "warning"): CellWarning,
    (CELL, "job_started"): CellJobStarted,
    (CELL, "job_progress"): CellJobProgress,
    (CELL, "waiting"): CellWaiting,
    (CELL, "job_done"): CellJobDone,
    (CELL, "summary"): CellSummary,
    (CELL, "done"): CellDone,
    (CELL, "failed"): CellFailed,
    (CELL, "killed"): CellKilled,
    (MONITOR, "sample"): MonitorSample,
}
