"""The campaign runner: one process that owns a campaign. Torch-free: it never creates a
CUDA context, so the processes it starts never inherit one.

``python -m engine.runner CAMPAIGN.toml [--resume] [--since TS] ...`` — every front end
(``fugue-tui --batch``, the dashboard) starts this process and follows its event files
(``engine.observe.follow``); the runner never depends on a front end being alive or attached.

Run folder ``<runs_dir>/<campaign name>/`` (the campaign id)::

    runner.lock, runner.pid     held by the running runner (a second one is refused)
    campaign.toml               the campaign as last run
    runner.jsonl                lifecycle events of every runner session, appended
    control/                    command files (engine.runner.control)
    cells/<NNN-exp-executor-pP>-<key8>/attempt-<a>/
        spec.json, events.jsonl, cell.log, cell.pid (while it runs), cell.reason (the
        one-line reason of a cell that could not write its output)

Each cell attempt runs in a fresh session; the watchdog (``engine.runner.watchdog``) watches it;
a hung cell is killed (``action = "kill"``, with a stack dump first) or flagged for a
command (``action = "flag"``). Failed and killed attempts are retried up to ``retries``
times; a retry sent through the control channel does not consume that budget.

A cell or runner write that fails (a full disk, a quota, a read-only file system) stops
the campaign: the cell is recorded as failed where the disk still allows, and the runner
exits 2 with one line naming the file and the reason
(``fugue-tui: error: runs/master_groups.csv: No space left on device ...``); rows are
never half-written (:mod:`engine.results.store`), so ``--resume`` continues once there is room.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import errno
import json
import os
import shutil
import signal
import sys
import tempfile
import time
from collections import deque
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from filelock import FileLock, Timeout

from engine.define.availability import experiment_availability
from engine.define.campaign import Campaign, load_campaign
from engine.cell.protocol import (EXIT_OUTPUT, REASON_BYTES, SPEC_SCHEMA, output_failure,
                         read_reason)
from engine.cleanup import run_recorded
from engine.runner.cellproc import cell_env, dump_stacks, forget, reap_leftovers, start_cell, stop_session
from engine.runner.control import Inbox
from engine.errors import ConfigError, FugueError, OutputError
from engine.events import EventTail, EventWriter
from engine.define.matrix import CellSpec, build_cells
from engine.plugins import load_plugins
from engine.measure.provenance import machine_identity, nvml_devices, resolve_device
from engine.registry import EXECUTORS
from engine.results.store import (GROUP_COLUMNS, GROUPS_FILE, append_rows, check_timestamp,
                            preflight, read_rows)
from engine.results.rows import failed_group_row
from engine.measure.monitor import resolve_gpu
from engine.runner.watchdog import ACTIONS, Watchdog

EventFn = Callable[[dict[str, Any]], None]
POLL_S = 0.1
#: Cell event types that count as progress for the watchdog (never monitor samples).
PROGRESS_EVENTS = frozenset({"started", "phase", "job_started", "job_progress", "job_done",
                             "summary", "done", "failed"})
#: Below this many free bytes the runs folder's disk counts as full (a cell that could not
#: write its output and could not say why is then reported as a full disk).
LOW_SPACE_BYTES = 1 << 20


class RunnerBusy(FugueError):
    """Another runner holds the campaign's lock."""


class Aborted(Exception):
    """The campaign was aborted through the control channel."""


@dataclass
class PlannedCell:
    cell: CellSpec
    skip: str = ""          # why it will not run: "already ok (resume)", "unavailable here: …"


@dataclass
class CellOutcome:
    """How a cell ended, as the runner saw it."""

    cell: CellSpec
    status: str                 # ok | failed | killed | skipped
    attempts: int
    error: str = ""
    log: Path | None = None


@dataclass
class CampaignOutcome:
    campaign_id: str
    run_dir: Path
    outcomes: list[CellOutcome] = field(default_factory=list)
    interrupted: bool = False
    aborted: bool = False

    @property
    def exit_code(self) -> int:
        if self.interrupted:
            return 130
        if self.aborted:
            return 3
        return 0 if all(o.status == "ok" for o in self.outcomes) else 1


class Runner:
    """Runs a campaign's cells one after another (see the module docstring).

    ``on_event(event)`` receives every event the runner writes and every cell event it
    reads, in order (front ends in other processes follow the files instead).
    """

    def __init__(self, campaign: Campaign, on_event: EventFn | None = None,
                 resume: bool = False, since: str | None = None):
        # The runner knows the same names as its cells; which plugins were loaded is part
        # of what a cell key identifies (a plugin may register models of its own).
        self.plugins = load_plugins()
        self.campaign = campaign
        self.on_event = on_event or (lambda event: None)
        self.resume, self.since = resume, since
        self.device = resolve_device(campaign.device)
        if self.device.startswith("cuda") and not nvml_devices():
            raise ConfigError(f"device '{campaign.device}': no NVIDIA GPU is visible here "
                              "(NVML finds none); use device = \"cpu\" or \"auto\"")
        # The device under test by NVML identity: every cell sees exactly this device
        # (CUDA_VISIBLE_DEVICES=<uuid>), and its monitor opens the same one by UUID.
        try:
            self.gpu = resolve_gpu(self.device, os.environ)
        except ValueError as exc:
            raise ConfigError(f"device '{campaign.device}': {exc}") from None
        self.machine = {**machine_identity(self.device, self.gpu), "plugins": self.plugins}
        self.cells = build_cells(campaign, self.machine)
        self.runs_dir = Path(campaign.runs_dir)
        self.campaign_id = campaign.name
        self.run_dir = self.runs_dir / self.campaign_id
        self._log: EventWriter | None = None
        self._cell_failure: dict[str, Any] = {}  # the running attempt's ``failed`` event

    # -- planning -------------------------------------------------------------------------
    def plan(self) -> list[PlannedCell]:
        """Every cell, with why it would not run (resume or availability). Spends nothing."""
        done = self.ok_keys() if self.resume else set()
        planned = []
        for cell in self.cells:
            if cell.key in done:
                planned.append(PlannedCell(cell, "already ok (resume)"))
                continue
            exp = self.campaign.catalogue.get(cell.exp_id)
            ok, reason = experiment_availability(exp)
            planned.append(PlannedCell(cell, "" if ok else f"unavailable here: {reason}"))
        return planned

    def ok_keys(self) -> set[str]:
        """Cell keys with an ``ok`` group row (newer than ``since`` when given)."""
        rows = read_rows(self.runs_dir / "master_groups.csv")
        return {r.get("cell_key", "") for r in rows if r.get("status") == "ok"
                and (not self.since or r.get("timestamp", "") >= self.since)}

    def find(self, ref: str) -> CellSpec | None:
        """A cell by key, unique key prefix, or index."""
        if ref.isdigit() and 1 <= int(ref) <= len(self.cells):
            return self.cells[int(ref) - 1]
        matches = [c for c in self.cells if c.key.startswith(ref)]
        return matches[0] if len(matches) == 1 else None

    # -- running --------------------------------------------------------------------------
    def run(self) -> CampaignOutcome:
        """Run the campaign. Ctrl-C or SIGTERM stops the running cell's session, records it
        as killed and returns the outcome marked interrupted.

        Raises:
            OutputError: the runs directory cannot be written (before anything runs).
            RunnerBusy: another runner holds this campaign.
        """
        preflight(self.runs_dir)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        lock = FileLock(self.run_dir / "runner.lock")
        try:
            lock.acquire(timeout=0)
        except Timeout:
            raise RunnerBusy(f"campaign '{self.campaign_id}' is already being run: "
                             f"{_holder(self.run_dir)}") from None
        try:
            return self._run_locked()
        finally:
            (self.run_dir / "runner.pid").unlink(missing_ok=True)
            lock.release()

    def _run_locked(self) -> CampaignOutcome:
        started = time.time()
        try:
            self._write_run_files(started)
        except OSError as exc:  # a full disk or a quota: one line, nothing half-written
            raise OutputError(f"{self.run_dir}: cannot write the run folder: "
                              f"{exc.strerror or exc}") from None
        self.inbox = Inbox(self.run_dir, since=started)
        outcome = CampaignOutcome(self.campaign_id, self.run_dir)
        self._emit("campaign_started", cells=len(self.cells), run_dir=str(self.run_dir),
                   device=self.device, runner_pid=os.getpid(), resume=self.resume)
        self._clean_predecessors()
        queue: deque[CellSpec] = deque()
        for planned in self.plan():
            cell = planned.cell
            if planned.skip.startswith("already ok"):
                self._emit("skipped", cell=cell.key, index=cell.index, label=cell.label,
                           reason=planned.skip)
            elif planned.skip:
                self._record(self.cell_spec(cell, self._next_attempt(cell)), "skipped", planned.skip)
                self._emit("skipped", cell=cell.key, index=cell.index, label=cell.label,
                           reason=planned.skip)
                outcome.outcomes.append(CellOutcome(cell, "skipped", 0, planned.skip))
            else:
                self._emit("queued", cell=cell.key, index=cell.index, label=cell.label)
                queue.append(cell)
        self.queue = queue
        self.auto_retries: dict[str, int] = {}
        self.outcomes: dict[str, CellOutcome] = {}
        stopped: BaseException | None = None
        try:
            while self.queue:
                self._handle_commands(running=None)
                if not self.queue:
                    break
                cell = self.queue.popleft()
                self.outcomes[cell.key] = self._run_cell(cell)
        except KeyboardInterrupt:
            outcome.interrupted = True
            self._emit("campaign_interrupted")
        except Aborted:
            outcome.aborted = True
            self._emit("campaign_aborted")
        except BaseException as exc:  # e.g. OutputError: a full disk stops the campaign
            stopped = exc
            raise
        finally:
            outcome.outcomes.extend(self.outcomes.values())
            done: dict[str, Any] = {"ok": outcome.exit_code == 0 and stopped is None,
                                    "exit_code": outcome.exit_code,
                                    "failed": sum(o.status != "ok" for o in outcome.outcomes)}
            if isinstance(stopped, FugueError):
                done.update(exit_code=stopped.exit_code, error=str(stopped))
            try:
                self._emit("campaign_done", **done)
            except OutputError:
                if stopped is None:
                    raise
            finally:  # the error that stopped the campaign is the one reported, not this
                with contextlib.suppress(OSError):
                    self._log.close()
        return outcome

    def _write_run_files(self, started: float) -> None:
        """runner.pid, the campaign as given and as resolved, the runner's event log; each
        file whole or absent (temporary file, then ``os.replace``)."""
        _write_whole(self.run_dir / "runner.pid", json.dumps(
            {"pid": os.getpid(), "host": os.uname().nodename, "started": started,
             "argv": sys.argv}))
        if self.campaign.source is not None:
            _write_whole(self.run_dir / "campaign.toml", self.campaign.source.read_text())
        # What actually runs, after command-line overrides and with the experiments resolved.
        _write_whole(self.run_dir / "campaign.resolved.json", json.dumps({
            "campaign": self.campaign.resolved(), "device": self.device,
            "machine": self.machine, "resume": self.resume, "since": self.since,
            "experiments": {e: self.campaign.catalogue.get(e).to_dict()
                            for e in self.campaign.experiments}}, indent=1, default=str))
        self._log = EventWriter(self.run_dir / "runner.jsonl", campaign=self.campaign_id)

    def _emit(self, type: str, **fields: Any) -> dict[str, Any]:
        """Append a runner event. Raises :class:`OutputError` naming ``runner.jsonl`` when
        it cannot be written (a full disk)."""
        assert self._log is not None
        try:
            event = self._log.emit(type, **fields)
        except OSError as exc:
            raise OutputError(f"{self._log.path}: {exc.strerror or exc}") from exc
        self.on_event(event)
        return event

    def _cell_dir(self, cell: CellSpec) -> Path:
        return self.run_dir / "cells" / f"{cell.slug}-{cell.key[:8]}"

    def _next_attempt(self, cell: CellSpec) -> int:
        existing = [int(p.name.split("-")[1]) for p in self._cell_dir(cell).glob("attempt-*")]
        return max(existing, default=0) + 1

    def cell_spec(self, cell: CellSpec, attempt: int) -> dict[str, Any]:
        """The spec (schema :data:`~engine.cell.protocol.SPEC_SCHEMA`) that attempt
        ``attempt`` of ``cell`` is started with: what ``python -m engine.cell`` reads. Public
        for tools that run one cell by hand (``bench``)."""
        attempt_dir = self._cell_dir(cell) / f"attempt-{attempt}"
        return {
            "schema": SPEC_SCHEMA, "campaign_id": self.campaign_id,
            "campaign_hash": self.campaign.file_hash, "runs_dir": str(self.runs_dir.resolve()),
            "events": str(attempt_dir / "events.jsonl"), "attempt": attempt,
            "reason_file": str(attempt_dir / "cell.reason"),
            "seed": self.campaign.seed, "passes": self.campaign.passes,
            # Inside the cell the device under test is the only visible one: cuda:0.
            "device": "cuda:0" if self.gpu else self.device, "device_requested": self.device,
            "gpu_uuid": self.gpu["uuid"] if self.gpu else None,
            "monitor": self.campaign.monitor,
            "monitor_interval_s": self.campaign.monitor_interval_s,
            "threads": self.campaign.threads or os.cpu_count() or 1, "cell": asdict(cell),
        }

    def _run_cell(self, cell: CellSpec) -> CellOutcome:
        """Attempts of one cell until it is ok, out of retries, killed or skipped."""
        while True:
            attempt = self._next_attempt(cell)
            status, error, log, after = self._attempt(cell, attempt)
            if status == "ok" or after == "stop":
                return CellOutcome(cell, status, attempt, error, log)
            if after == "retry":  # manual: does not consume the budget
                self._emit("retried", cell=cell.key, attempt=attempt + 1, manual=True)
                continue
            used = self.auto_retries.get(cell.key, 0)
            if used >= self.campaign.retries:
                return CellOutcome(cell, status, attempt, error, log)
            self.auto_retries[cell.key] = used + 1
            self._emit("retried", cell=cell.key, attempt=attempt + 1, manual=False,
                       retry=used + 1, retries=self.campaign.retries)

    def _attempt(self, cell: CellSpec, attempt: int) -> tuple[str, str, Path, str]:
        """One attempt: returns (status, error, log path, what next: "" | "retry" | "stop")."""
        spec = self.cell_spec(cell, attempt)
        attempt_dir = Path(spec["events"]).parent
        spec_path = attempt_dir / "spec.json"
        log_path = attempt_dir / "cell.log"
        with _writing(spec_path):
            attempt_dir.mkdir(parents=True)
            spec_path.write_text(json.dumps(spec, indent=1))
        with _writing(Path(spec["reason_file"])):  # blocks the cell's last line can reuse
            Path(spec["reason_file"]).write_bytes(b" " * REASON_BYTES)
        with _writing(Path(tempfile.gettempdir())):
            scratch = Path(tempfile.mkdtemp(prefix="fugue-cell-"))
        tail = EventTail(spec["events"])
        self._cell_failure = {}
        device_env = ({"CUDA_VISIBLE_DEVICES": self.gpu["uuid"], "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}
                      if self.gpu else {})
        try:
            with _writing(log_path):
                proc = start_cell(spec_path, log_path,
                                  cell_env(scratch, self.campaign.threads, device_env))
        except BaseException:
            shutil.rmtree(scratch, ignore_errors=True)
            raise
        # Device utilisation comes from the cell's own monitor samples (never a second
        # NVML sampler on the device).
        settings = self.campaign.watchdog
        idle = EXECUTORS.get(cell.executor).idle_cpu_fraction
        if idle:  # the executor's runtime keeps this much CPU busy even when jobs hang
            settings = replace(settings, cpu_fraction=settings.cpu_fraction + idle)
        watchdog = Watchdog(settings, proc.pid, proc.pid)
        written, hung, after, verdict = False, False, "", None
        try:
            self._emit("cell_started", cell=cell.key, index=cell.index, label=cell.label,
                       attempt=attempt, events=spec["events"], log_path=str(log_path),
                       pid=proc.pid)
            while proc.poll() is None:
                written |= self._forward(tail, watchdog)
                command = self._handle_commands(running=cell)
                if command:
                    verdict = self._stop(proc, cell, attempt, command[1], dump=False)
                    after = command[0]
                    break
                if watchdog.due():
                    check = watchdog.check()
                    if check.state == "ok" and hung:
                        hung = False
                        self._emit("resumed", cell=cell.key, attempt=attempt)
                    elif check.state == "suspect" and check.strikes == self.campaign.watchdog.suspect_after:
                        self._emit("suspect", cell=cell.key, attempt=attempt, seen=check.describe())
                    elif check.state == "hung" and not hung:
                        hung = True
                        self._emit("hung", cell=cell.key, attempt=attempt, seen=check.describe(),
                                   action=self.campaign.watchdog.action)
                        if self.campaign.watchdog.action == "kill":
                            verdict = self._stop(proc, cell, attempt, f"hung: {check.describe()}",
                                                 dump=True)
                            break
                time.sleep(POLL_S)
        except KeyboardInterrupt:
            self._stop(proc, cell, attempt, f"interrupted ({_INTERRUPTED_BY[0]})", dump=False)
            self._forward(tail, None)
            self._cleanup(cell, attempt, attempt_dir)
            forget(attempt_dir)
            shutil.rmtree(scratch, ignore_errors=True)
            raise
        except BaseException:  # the runner cannot go on (its own write failed): no cell stays
            with contextlib.suppress(Exception):
                stop_session(proc.pid, proc)
            with contextlib.suppress(Exception):
                self._cleanup(cell, attempt, attempt_dir)
            with contextlib.suppress(OSError):
                forget(attempt_dir)
            shutil.rmtree(scratch, ignore_errors=True)
            raise
        written |= self._forward(tail, None)
        leftovers = []
        if verdict is None:  # the leader exited by itself: nothing of its session may stay
            try:
                leftovers = stop_session(proc.pid, None, grace=1.0)
            except RuntimeError as exc:
                leftovers = [str(exc)]
        self._cleanup(cell, attempt, attempt_dir)
        forget(attempt_dir)
        shutil.rmtree(scratch, ignore_errors=True)
        said_there = read_reason(spec["reason_file"])
        if not said_there:  # kept only when the cell left its reason there
            with contextlib.suppress(OSError):
                Path(spec["reason_file"]).unlink(missing_ok=True)
        if after == "abort":
            raise Aborted()
        if verdict is not None:  # "" (watchdog kill: retries apply), "stop" or "retry"
            return "killed", verdict, log_path, after
        code = proc.returncode
        said = self._cell_failure.get("error") or ""
        if code == 0:
            status, error = "ok", ""
        elif code == EXIT_OUTPUT:  # the cell's own one line (it names the file) comes first
            status = "failed"
            error = (said or said_there or _last_line(log_path)
                     or _unwritable(self.runs_dir, code, log_path))
            if not written and not self._has_row(spec):  # may raise: the runner's own line
                self._record(spec, "failed", error)
        else:
            status = "failed"
            error = _last_line(log_path) or said or f"cell exited with status {code}"
            if code < 0:
                error = f"cell killed by signal {-code}: {error}"
            if not written and not self._has_row(spec):
                self._record(spec, "failed", error)
        if leftovers:
            self._emit("leftovers_killed", cell=cell.key, attempt=attempt, pids=leftovers)
        self._emit("done" if status == "ok" else "failed", cell=cell.key, attempt=attempt,
                   exit_code=code, error=error)
        if code == EXIT_OUTPUT:  # every later cell would fail the same way
            raise OutputError(f"{error} (while cell {cell.index} {cell.label} ran; the "
                              f"campaign stopped: make room, then run it again with --resume)")
        return status, error, log_path, ""

    def _cleanup(self, cell: CellSpec, attempt: int, attempt_dir: Path) -> None:
        """Stop what the cell started outside its session (``engine.cleanup``)."""
        messages = run_recorded(attempt_dir)
        if messages:
            self._emit("cleanup", cell=cell.key, attempt=attempt, messages=messages)

    def _stop(self, proc, cell: CellSpec, attempt: int, reason: str, dump: bool) -> str:
        """Stop a running attempt's whole session and record it as killed."""
        if dump:
            dump_stacks(proc.pid)
        try:
            forced = stop_session(proc.pid, proc)
            if forced:
                reason += f" (SIGKILL needed for pids {forced})"
        except RuntimeError as exc:
            reason += f"; {exc}"
        spec = self.cell_spec(cell, attempt)
        self._record(spec, "killed", reason)
        self._emit("killed", cell=cell.key, attempt=attempt, reason=reason,
                   exit_code=proc.returncode)
        return reason

    def _forward(self, tail: EventTail, watchdog: Watchdog | None) -> bool:
        """Pass new cell events on; True if the cell says it wrote its group row. The cell's
        ``failed`` event (its one-line error) is kept in ``_cell_failure``."""
        written = False
        for event in tail.read():
            written |= bool(event.get("group_written"))
            if event.get("type") == "failed":
                self._cell_failure = event
            if watchdog is not None and event.get("type") in PROGRESS_EVENTS:
                watchdog.progress()
            elif watchdog is not None and event.get("type") == "sample":
                watchdog.sample(event)
            self.on_event(event)
        return written

    def _record(self, spec: dict[str, Any], status: str, error: str) -> None:
        append_rows(self.runs_dir / "master_groups.csv", [failed_group_row(spec, status, error)],
                    GROUP_COLUMNS)

    def _has_row(self, spec: dict[str, Any]) -> bool:
        """Whether the attempt already has its group row (a cell that wrote its rows but
        could not send the event saying so): the runner never adds a second one."""
        key, attempt = spec["cell"]["key"], str(spec["attempt"])
        try:
            rows = read_rows(self.runs_dir / GROUPS_FILE)
        except (OSError, FugueError):
            return False
        return any(r.get("cell_key") == key and r.get("attempt") == attempt
                   and r.get("campaign_id") == self.campaign_id for r in rows)

    # -- control --------------------------------------------------------------------------
    def _handle_commands(self, running: CellSpec | None) -> tuple[str, str] | None:
        """Apply control commands. Returns ``(what next, reason)`` when the running cell must
        stop: ``("stop", …)`` kill or skip, ``("retry", …)``, ``("abort", …)``."""
        stop = None
        for command in self.inbox.poll():
            name, ref = command["cmd"], str(command.get("cell") or "")
            if name == "abort":
                self._emit("control", cmd=name, applied=True)
                if running is None:
                    raise Aborted()
                stop = ("abort", "campaign aborted by control command")
                continue
            cell = self.find(ref)
            if cell is None:
                self._emit("control", cmd=name, cell=ref, applied=False,
                           reason="no such cell (or an ambiguous key prefix)")
                continue
            if running is not None and cell.key == running.key:
                self._emit("control", cmd=name, cell=cell.key, applied=True)
                stop = {"kill": ("stop", "killed by control command"),
                        "skip": ("stop", "skipped by control command"),
                        "retry": ("retry", "stopped for a retry by control command")}[name]
            elif name == "skip" and cell in self.queue:
                self.queue.remove(cell)
                reason = "skipped by control command"
                self._record(self.cell_spec(cell, self._next_attempt(cell)), "skipped", reason)
                self._emit("skipped", cell=cell.key, index=cell.index, label=cell.label,
                           reason=reason)
                self.outcomes[cell.key] = CellOutcome(cell, "skipped", 0, reason)
                self._emit("control", cmd=name, cell=cell.key, applied=True)
            elif name == "retry" and cell not in self.queue:
                self.queue.appendleft(cell)
                self.outcomes.pop(cell.key, None)
                self._emit("queued", cell=cell.key, index=cell.index, label=cell.label,
                           manual_retry=True)
                self._emit("control", cmd=name, cell=cell.key, applied=True)
            else:
                self._emit("control", cmd=name, cell=cell.key, applied=False,
                           reason="not applicable to the cell's current state")
        return stop

    def _clean_predecessors(self) -> None:
        """Kill what earlier runners of this campaign left running and record those attempts."""
        for record in reap_leftovers(self.run_dir):
            attempt_dir = record["attempt_dir"]
            try:
                spec = json.loads((attempt_dir / "spec.json").read_text())
            except (OSError, json.JSONDecodeError):
                continue
            reason = (f"runner pid {record['runner_pid']} ended while this attempt ran; "
                      f"cleaned up by the next runner")
            if record["killed"]:
                reason += f" (killed leftover pids {record['killed']})"
            EventWriter(spec["events"], cell=spec["cell"]["key"],
                        attempt=spec["attempt"]).emit("killed", reason=reason)
            self._record(spec, "killed", reason)
            self._emit("killed", cell=spec["cell"]["key"], attempt=spec["attempt"],
                       reason=reason, predecessor=True)
        # After their cells are dead: what those cells started outside their sessions.
        for attempt_dir in sorted({p.parent.parent for p in
                                   self.run_dir.glob("cells/*/attempt-*/cleanup/*.json")}):
            messages = run_recorded(attempt_dir)
            if messages:
                self._emit("cleanup", attempt_dir=str(attempt_dir), messages=messages,
                           predecessor=True)


@contextlib.contextmanager
def _writing(path: Path):
    """An ``OSError`` inside becomes an :class:`OutputError` naming the file (the error's
    own file name, else ``path``) and the reason: one line, not a traceback."""
    try:
        yield
    except OSError as exc:
        raise OutputError(f"{exc.filename or path}: {exc.strerror or exc}") from exc


def _unwritable(runs_dir: Path, code: int, log_path: Path) -> str:
    """Why a cell that exited with :data:`EXIT_OUTPUT` failed, when neither its event nor
    its log could say: a full disk under the runs folder if there is next to no room."""
    try:
        free = shutil.disk_usage(runs_dir).free
    except OSError:
        free = None
    if free is not None and free < LOW_SPACE_BYTES:
        return (f"{runs_dir}: {os.strerror(errno.ENOSPC)} ({free} bytes free; the cell could "
                f"not write its output, exit status {code})")
    return f"cell exited with status {code}: it could not write its output (see {log_path})"


def _write_whole(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    try:
        tmp.write_text(text)
        os.replace(tmp, path)
    except OSError:
        tmp.unlink(missing_ok=True)
        raise


def _holder(run_dir: Path) -> str:
    try:
        info = json.loads((run_dir / "runner.pid").read_text())
        since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(info["started"]))
        return f"runner pid {info['pid']} on {info['host']} since {since} ({run_dir / 'runner.pid'})"
    except (OSError, ValueError, KeyError):
        return f"lock held on {run_dir / 'runner.lock'}"


def _last_line(path: Path) -> str:
    try:
        lines = [ln.strip() for ln in path.read_text(errors="replace").splitlines() if ln.strip()]
    except OSError:
        return ""
    return lines[-1][:500] if lines else ""


def _timestamp(text: str) -> str:
    try:
        return check_timestamp(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def build_arg_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m engine.runner",
                                     description="Run a campaign (the process front ends start).")
    parser.add_argument("campaign", help="campaign TOML file")
    parser.add_argument("--resume", action="store_true",
                        help="skip cells whose key already has an ok row")
    parser.add_argument("--since", metavar="YYYYmmdd_HHMMSS", type=_timestamp,
                        help="with --resume: only ok rows at or after this timestamp count")
    for name in ("runs-dir", "device", "experiments-file"):
        parser.add_argument(f"--{name}")
    for name in ("passes", "seed", "retries"):
        parser.add_argument(f"--{name}", type=int)
    parser.add_argument("--watchdog-action", choices=ACTIONS,
                        help="override [watchdog] action: kill, or flag (the dashboard's default: "
                             "mark the cell hung and wait for a command)")
    return parser


def overrides_from(args: argparse.Namespace) -> dict[str, Any]:
    return {"runs_dir": args.runs_dir, "passes": args.passes, "seed": args.seed,
            "device": args.device, "experiments_file": args.experiments_file,
            "retries": args.retries}


_INTERRUPTED_BY = ["Ctrl-C"]


def _interrupt(signum, frame):
    """First SIGINT/SIGTERM/SIGHUP: stop the campaign (as KeyboardInterrupt). Later ones are
    ignored, so a second Ctrl-C (or a front end forwarding the first) cannot break the
    clean-up that records the cell and stops its session."""
    _INTERRUPTED_BY[0] = "Ctrl-C" if signum == signal.SIGINT else signal.Signals(signum).name
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    args = build_arg_parser().parse_args(argv)
    # SIGTERM and SIGHUP (a closed ssh session) end the campaign exactly like Ctrl-C:
    # stop the cell, record it, exit 130.
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _interrupt)
    try:
        load_plugins()  # this process's entry: built-ins and plugins, before any name is looked up
        campaign = load_campaign(args.campaign, overrides_from(args))
        if args.watchdog_action:  # one key of a table: replaced after the file is validated
            campaign = dataclasses.replace(campaign, watchdog=dataclasses.replace(
                campaign.watchdog, action=args.watchdog_action))
        outcome = Runner(campaign, resume=args.resume, since=args.since).run()
    except FugueError as exc:
        print(f"fugue-tui: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except OSError as exc:
        reason = output_failure(exc)  # a full disk that no narrower handler named
        if reason is None:
            raise
        print(f"fugue-tui: error: {reason}", file=sys.stderr)
        return OutputError.exit_code
    except KeyboardInterrupt:
        return 130
    return outcome.exit_code

