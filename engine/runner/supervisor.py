"""The campaign runner: one process that owns a campaign. Torch-free: it never creates a
CUDA context, so the processes it starts never inherit one.

``python -m engine.runner CAMPAIGN.toml [--resume] [--since TS] ...`` — every front end
(``fugue-tui --batch``, the dashboard) starts this process and follows its event files
(``engine.observe.follow``); the runner never depends on a front end being alive or attached.

Run folder ``<runs_dir>/<campaign name>/`` (the campaign id)::

    runner.lock, runner.pid     held by the running runner (a second one is refused)
    campaign.toml               the campaign as last run
    arrivals.csv                a stream campaign's stream (engine.define.arrivals)
    runner.jsonl                lifecycle events of every runner session, appended
    zygote.log                  output of the runner's zygote (engine.runner.zygote)
    control/                    command files (engine.runner.control)
    cells/<NNN-exp-executor-pP>-<key8>/attempt-<a>/
        spec.json, events.jsonl, cell.log, cell.pid (while it runs), cell.reason (the
        one-line reason of a cell that could not write its output)

The runner keeps what every campaign has: planning and resume, the run files, the control
inbox (:mod:`engine.runner.commands`), the zygote (:mod:`engine.runner.warmstart`), the
retries. What it writes goes through its journal (:mod:`engine.runner.journal`); where and
how many cells run at once is its placement strategy's (:mod:`engine.runner.strategy`: one
device, several devices, a Ray cluster).

Each cell attempt (:class:`engine.runner.attempt.Attempt`, one attempt's lifecycle) runs in
a fresh session; the watchdog (``engine.runner.watchdog``) watches it;
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

import os
import sys
import time
from collections import deque
from dataclasses import replace
from pathlib import Path

from filelock import FileLock, Timeout

from engine.cell.protocol import CellRunSpec, output_failure
from engine.cleanup import run_recorded
from engine.define.availability import experiment_availability
from engine.define.campaign import Campaign
from engine.define.catalogue import Catalogue
from engine.define.matrix import CellSpec
from engine.errors import ConfigError, FugueError, OutputError
from engine.event_base import ABSENT, Event
from engine.event_types import (
    CellKilled,
    RunnerCampaignAborted,
    RunnerCampaignDone,
    RunnerCampaignInterrupted,
    RunnerCampaignStarted,
    RunnerCleanup,
    RunnerKilled,
    RunnerQueued,
    RunnerRetried,
    RunnerSkipped,
    RunnerWarning,
)
from engine.events import EventWriter
from engine.plugins import load_plugins
from engine.precision import device_refusal
from engine.results.columns import GROUPS_FILE
from engine.results.preflight import preflight
from engine.results.read import read_rows
from engine.results.values import row_instant, since_instant
from engine.runfolder import AttemptFolder, RunFolder
from engine.runner.attempt import STOPPED, Aborted, AttemptSettings, Crew
from engine.runner.board import Board
from engine.runner.cellproc import reap_leftovers
from engine.runner.commands import Commands
from engine.runner.control import Inbox, resolve_cell
from engine.runner.guard import Guard
from engine.runner.guard import describe as guard_account
from engine.runner.holes import is_hole
from engine.runner.journal import EventFn, Journal
from engine.runner.outcome import CampaignOutcome, CellOutcome, PlannedCell
from engine.runner.placement import Slot
from engine.runner.records import (
    read_record,
    write_resolved_campaign,
    write_runner_record,
    write_whole,
)
from engine.runner.release import exit_code_of, release_all
from engine.runner.strategy import (
    OneDevice,
    Placement,
    SeveralDevices,
    one_device_index,
)
from engine.runner.warmstart import WarmStart
from engine.runner.zygote import start_method

# Where front ends and tools have always imported them from.
__all__ = ["CampaignOutcome", "CellOutcome", "EventFn", "PlannedCell", "Runner", "RunnerBusy"]


class RunnerBusy(FugueError):
    """Another runner holds the campaign's lock."""


class Runner:
    """Runs a campaign's cells (see the module docstring).

    ``on_event(event)`` receives every event the runner writes and every cell event it
    reads, in order (front ends in other processes follow the files instead).
    ``resume`` skips cells that already have an ok row of this campaign (``since``: at or
    after that timestamp); with ``reuse_any`` also an ok row of any campaign in the runs
    folder with the same cell key. ``cell_start``: how cells start, ``zygote`` (forked
    from a pre-warmed parent, the default) or ``spawn`` (fresh interpreters);
    ``FUGUE_CELL_START`` unless given (a cluster's cells always spawn, on their nodes).
    ``remeasure_holes``: with ``resume``, an ok row whose monitor columns are missing for
    a reason other than "no device" does not count (:mod:`engine.runner.holes`).

    Raises:
        ConfigError: the campaign's devices or nodes cannot run it, or a precision its
            device cannot run (one line, before anything is written).
    """

    def __init__(self, campaign: Campaign, on_event: EventFn | None = None,
                 resume: bool = False, since: str | None = None, reuse_any: bool = False,
                 cell_start: str | None = None, remeasure_holes: bool = False):
        self.cell_start = cell_start or start_method()
        # The runner knows the same names as its cells; which plugins were loaded is part
        # of what a cell key identifies (a plugin may register models of its own).
        self.plugins = load_plugins()
        self.campaign = campaign
        self.on_event = on_event or (lambda event: None)
        self.resume, self.since, self.reuse_any = resume, since, reuse_any
        # --remeasure-holes: an ok row with a monitor hole does not count (engine.runner.holes)
        self.remeasure_holes = remeasure_holes and campaign.monitor
        #: Where the cells run and how many at once (engine.runner.strategy).
        self.strategy = placement_for(campaign, self.plugins)
        if not self.strategy.zygote_allowed:
            self.cell_start = "spawn"  # cells start on their nodes: no zygote on the head
        self.device, self.gpu = self.strategy.device, self.strategy.gpu
        self.machine, self.cells = self.strategy.machine, self.strategy.cells
        #: The devices of a multi-device campaign (``devices``; issue 27), one
        #: :class:`Slot` each (a cluster's lanes); empty for a campaign with one ``device``.
        self.slots: list[Slot] = self.strategy.slots
        #: cell key → the index of the slot it runs in (empty with one device).
        self.placement: dict[str, int] = self.strategy.lane_of
        # A precision the device cannot run (bfloat16/TF32 below compute capability 8.0)
        # is refused now, with one line, not after a cell trained (engine.precision).
        refusal = device_refusal([c.precision for c in self.cells if c.precision], self.gpu)
        if refusal:
            where = str(campaign.source) if campaign.source else "campaign"
            # name what the campaign said: a 'devices' campaign's device is 'auto'
            said = (f"devices {list(campaign.devices)!r}" if campaign.devices
                    else f"device '{campaign.device}'")
            raise ConfigError(f"{where}: {said}: {refusal}")
        self.runs_dir = Path(campaign.runs_dir)
        self.campaign_id = campaign.name
        self.folder = RunFolder.of(self.runs_dir, self.campaign_id)
        self.run_dir = self.folder.path
        self.journal = Journal(self.runs_dir, self.campaign_id, self._forward,
                               self.strategy.gpu_for)
        #: The runner's zygote while it serves (engine.runner.warmstart).
        self.warm = WarmStart(self.journal, self.run_dir, self.cell_environment)
        self.board = Board(self.journal.lock)

    def _forward(self, event: Event) -> None:
        self.on_event(event)  # read when called: a caller may set on_event later

    # -- planning -------------------------------------------------------------------------
    def plan(self) -> list[PlannedCell]:
        """Every cell, with why it would not run (resume or availability). Spends nothing."""
        done = self.ok_rows() if self.resume else {}
        planned = []
        available: dict[str, tuple[bool, str]] = {}  # once per experiment, not per cell
        for cell in self.cells:
            row = done.get(cell.key)
            if row is not None:
                source = row["campaign_id"]
                how = ("resume" if source == self.campaign_id
                       else "resume, reusing another campaign's row")
                planned.append(PlannedCell(cell, f"already ok in campaign '{source}' ({how})",
                                           reused=row))
                continue
            # a stream cell (issue 51) needs every template of its stream
            needed = (cell.stream or {}).get("templates") or [cell.exp_id]
            for exp_id in needed:
                if exp_id not in available:
                    available[exp_id] = experiment_availability(self._catalogue().get(exp_id))
            ok, reason = next((available[e] for e in needed if not available[e][0]),
                              (True, ""))
            planned.append(PlannedCell(cell, "" if ok else f"unavailable here: {reason}"))
        return planned

    def ok_rows(self) -> dict[str, dict[str, str]]:
        """``{cell key: where its ok group row came from}`` (``campaign_id``, ``attempt``,
        ``timestamp``) for the rows resume may skip a cell for: this campaign's and, with
        ``reuse_any``, any campaign's (at or after ``since`` when given). This campaign's
        row wins over another's; among rows of the same standing the latest."""
        # instants, never text: rows written under another TZ compare by when they were
        # written (time_utc; an older row's timestamp read as this host's local time)
        since = since_instant(self.since) if self.since else None
        best: dict[str, tuple[tuple[bool, float], dict[str, str]]] = {}
        for r in read_rows(self.runs_dir / GROUPS_FILE):
            own = r.get("campaign_id") == self.campaign_id
            when = row_instant(r)
            if (r.get("status") != "ok" or not (own or self.reuse_any)
                    or (since is not None and (when is None or when < since))
                    or (self.remeasure_holes and is_hole(r))):
                continue
            rank = (own, when if when is not None else float("-inf"))
            key = r.get("cell_key", "")
            if key not in best or rank >= best[key][0]:
                best[key] = (rank, {k: r.get(k, "") for k in
                                    ("campaign_id", "attempt", "timestamp")})
        return {key: row for key, (_, row) in best.items()}

    def _catalogue(self) -> Catalogue:
        """The campaign's experiments (a campaign parsed from its file always has them)."""
        if self.campaign.catalogue is None:
            raise ConfigError(f"campaign '{self.campaign_id}': no experiment catalogue (a "
                              "campaign is made by engine.define.campaign.parse_campaign)")
        return self.campaign.catalogue

    def find(self, ref: str) -> CellSpec | None:
        """A cell by key, unique key prefix, or index: the rule ``fugue-tui control`` checks
        with (:func:`engine.runner.control.resolve_cell`); None: none, or several."""
        found = resolve_cell(ref, len(self.cells), (c.key for c in self.cells))
        if isinstance(found, int):
            return self.cells[found - 1]
        return next((c for c in self.cells if [c.key] == found), None)

    # -- where cells run (the strategy's) ---------------------------------------------------
    def slot_of(self, cell: CellSpec) -> Slot | None:
        """The device ``cell`` runs on in a multi-device campaign (None: one device)."""
        return self.strategy.slot_of(cell)

    def cell_environment(self, scratch: Path, slot: Slot | None = None) -> dict[str, str]:
        """The environment of this campaign's cells, with the compile caches in
        ``scratch``: the device under test (``slot``'s in a multi-device campaign) the only
        one CUDA sees, the thread counts (a slot's share of the cores when pinned)."""
        return self.strategy.environment(scratch, slot)

    def cell_spec(self, cell: CellSpec, attempt: int) -> CellRunSpec:
        """The spec that attempt ``attempt`` of ``cell`` is started with: what ``python -m
        engine.cell`` reads. Public for tools that run one cell by hand (``bench``)."""
        return self.strategy.cell_spec(cell, attempt,
                                       self.folder.attempt(cell.slug, cell.key, attempt))

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
        lock = FileLock(self.folder.lock)
        try:
            lock.acquire(timeout=0)
        except Timeout:
            raise RunnerBusy(f"campaign '{self.campaign_id}' is already being run: "
                             f"{_holder(self.run_dir)}") from None
        # Stops what this runner leaves running if it dies without cleaning up (a SIGKILL).
        self.guard = Guard.start(self.run_dir)
        self.guard.watch(self._guard_replaced)
        first: BaseException | None = None
        try:
            self.strategy.connect(self.run_dir)
            return self._run_locked()
        except BaseException as exc:
            first = exc
            raise
        finally:  # every release runs; none replaces the error that ended the run
            release_all([("strategy", self.strategy.close),
                         ("runner.pid", lambda: self.folder.runner_pid.unlink(missing_ok=True)),
                         ("guard", self.guard.release), ("lock", lock.release)], first)

    def _guard_replaced(self, line: str) -> None:
        """A dead guard was replaced (or could not be): a warning, or before the runner's
        log is open, a line on stderr."""
        try:
            self.journal.emit(RunnerWarning(message=line))
        except (OutputError, RuntimeError):
            print(f"fugue-tui: warning: {line}", file=sys.stderr)

    def _run_locked(self) -> CampaignOutcome:
        started = time.time()
        try:
            self._write_run_files(started)
        except OSError as exc:  # a full disk or a quota: one line, nothing half-written
            raise OutputError(f"{self.run_dir}: cannot write the run folder: "
                              f"{exc.strerror or exc}") from None
        self.inbox = Inbox(self.run_dir, since=started)
        outcome = CampaignOutcome(self.campaign_id, self.run_dir)
        emit = self.journal.emit
        emit(RunnerCampaignStarted(
            cells=len(self.cells), run_dir=str(self.run_dir), device=self.device,
            runner_pid=os.getpid(), resume=self.resume, reuse_any=self.reuse_any,
            guard_pid=self.guard.pid, devices=self.strategy.devices() or ABSENT))
        self._clean_predecessors()
        board = self.board
        board.queue = self._queue(outcome)
        self.commands = Commands(self.inbox, self.journal, board, self.find, self._skip,
                                 lanes=len(self.slots) > 1)
        self.crew = Crew(self.journal, self.commands, self.warm,
                         AttemptSettings(self.campaign.watchdog, self.runs_dir, self.campaign_id,
                                         self.campaign.threads),
                         board.attempt_started)
        stopped: BaseException | None = None
        warm_up = self.warm.start if self.cell_start == "zygote" else _nothing
        try:
            self.strategy.run_cells(board, self.commands, self._run_cell, warm_up)
        except KeyboardInterrupt:
            outcome.interrupted = True
            emit(RunnerCampaignInterrupted())
        except Aborted:
            outcome.aborted = True
            emit(RunnerCampaignAborted())
        except BaseException as exc:  # e.g. OutputError: a full disk stops the campaign
            stopped = exc
            raise
        finally:
            outcome.outcomes.extend(board.outcomes.values())
            reason = None if stopped is None else (output_failure(stopped) or str(stopped))
            # A cell the stopping error interrupted (its row could not be written: a full
            # disk) has no outcome; it failed all the same.
            cut = [k for k in board.attempts if k not in board.outcomes] if stopped else []
            done = RunnerCampaignDone(
                ok=outcome.exit_code == 0 and stopped is None,
                exit_code=exit_code_of(stopped, outcome.exit_code),
                failed=sum(o.status != "ok" for o in outcome.outcomes) + len(cut),
                error=reason if reason else ABSENT)
            try:
                emit(done)
            except OutputError:
                if stopped is None:
                    raise
            finally:  # the error that stopped the campaign is the one reported, not this
                self.warm.stop()
                self.journal.close()
        return outcome

    def _queue(self, outcome: CampaignOutcome) -> deque[CellSpec]:
        """The cells to run, in order; each other cell said skipped (a resumed one with the
        row it reuses; an unavailable one recorded with its reason, in ``outcome``)."""
        queue: deque[CellSpec] = deque()
        for planned in self.plan():
            cell = planned.cell
            if planned.reused is not None:
                # from_attempt as the row has it (its CSV text)
                self.journal.emit(RunnerSkipped(
                    cell=cell.key, index=cell.index, label=cell.label,
                    reason=planned.skip, from_campaign=planned.reused["campaign_id"],
                    from_attempt=planned.reused["attempt"],
                    from_timestamp=planned.reused["timestamp"]))
            elif planned.skip:
                outcome.outcomes.append(self._skip(cell, planned.skip))
            else:
                self.journal.emit(RunnerQueued(cell=cell.key, index=cell.index,
                                               label=cell.label))
                queue.append(cell)
        return queue

    def _skip(self, cell: CellSpec, reason: str) -> CellOutcome:
        """A cell that will not run: its skipped row (as its next attempt) and event."""
        spec = self.cell_spec(cell, self._next_attempt(cell))
        self.journal.ended(spec, RunnerSkipped(cell=cell.key, index=cell.index,
                                               label=cell.label, reason=reason))
        return CellOutcome(cell, "skipped", 0, reason)

    def _next_attempt(self, cell: CellSpec) -> int:
        existing = [a.number for a in self.folder.attempts(cell.slug, cell.key)]
        return max(existing, default=0) + 1

    def _run_cell(self, cell: CellSpec) -> CellOutcome:
        """Attempts of one cell until it is ok, out of retries, killed or skipped."""
        board, emit = self.board, self.journal.emit
        while True:
            attempt = self._next_attempt(cell)
            folder = self.folder.attempt(cell.slug, cell.key, attempt)
            current = self.strategy.new_attempt(cell, attempt, folder, self.crew)
            board.attempts[cell.key] = current
            try:
                status, error, log, after = current.run()
            except OutputError as exc:  # the runner's own write failed during the attempt
                if str(exc).endswith(f"{STOPPED})"):
                    raise
                raise OutputError(f"{exc} (while cell {cell.index} {cell.label} attempt "
                                  f"{attempt} ran; not recorded; {STOPPED})") from None
            if after == "node":  # its cluster node was lost: again, on another node
                lost = board.node_losses[cell.key] = board.node_losses.get(cell.key, 0) + 1
                if lost <= self.strategy.max_node_losses:
                    emit(RunnerRetried(cell=cell.key, attempt=attempt + 1, manual=False,
                                       node_lost=True, retry=lost,
                                       retries=self.strategy.max_node_losses))
                    continue
                after = ""  # then the campaign's retries apply
            if status == "ok" or after == "stop":
                return CellOutcome(cell, status, attempt, error, log)
            if after == "retry":  # manual: does not consume the budget
                emit(RunnerRetried(cell=cell.key, attempt=attempt + 1, manual=True))
                continue
            used = board.auto_retries.get(cell.key, 0)
            if used >= self.campaign.retries:
                return CellOutcome(cell, status, attempt, error, log)
            board.auto_retries[cell.key] = used + 1
            emit(RunnerRetried(cell=cell.key, attempt=attempt + 1, manual=False,
                               retry=used + 1, retries=self.campaign.retries))

    def _write_run_files(self, started: float) -> None:
        """runner.pid, the campaign as given and as resolved, the runner's event log; each
        file whole or absent (temporary file, then ``os.replace``)."""
        write_runner_record(self.folder.runner_pid, started, sys.argv)
        if self.campaign.source is not None:
            write_whole(self.folder.campaign_file, self.campaign.source.read_text())
        # What actually runs, after command-line overrides and with the experiments resolved.
        write_resolved_campaign(self.run_dir / "campaign.resolved.json", {
            "campaign": self.campaign.resolved(), "device": self.device,
            "machine": self.machine, "resume": self.resume, "since": self.since,
            "experiments": {e: self._catalogue().get(e).to_dict()
                            for e in self.campaign.experiments}})
        if self.campaign.arrivals is not None and self.campaign.catalogue is not None:
            # A stream campaign's stream (issue 51), the one every stream cell serves.
            from engine.define.arrivals import generate, write_stream

            write_stream(generate(self.campaign.arrivals, self.campaign.catalogue,
                                  self.campaign.seed), self.run_dir)
        self.journal.open(self.folder.runner_log)

    def _clean_predecessors(self) -> None:
        """Kill what earlier runners of this campaign left running and record those attempts."""
        for record in reap_leftovers(self.run_dir):
            attempt_dir = record["attempt_dir"]
            try:
                spec = CellRunSpec.read(AttemptFolder(attempt_dir).spec)
            except ConfigError:  # unreadable or not a spec: nothing to record for it
                continue
            # how that runner started it, if it said
            spec = replace(spec, cell_start=record.get("start"))
            reason = f"runner pid {record['runner_pid']} ended while this attempt ran"
            guarded = guard_account(record)
            reason += guarded or "; cleaned up by the next runner"
            if record["killed"]:
                reason += f" (killed leftover pids {record['killed']})"
            key = spec.cell.key
            EventWriter(spec.events, cell=key, attempt=spec.attempt).write(
                CellKilled(reason=reason))
            self.journal.ended(spec, RunnerKilled(cell=key, attempt=spec.attempt, reason=reason,
                                                  predecessor=True))
        # attempts that ran elsewhere (a cluster's nodes: engine.runner.cluster)
        self.strategy.clean_predecessors(self.folder, self.journal)
        # After their cells are dead: what those cells started outside their sessions.
        for attempt_dir in [a.path for a in self.folder.all_attempts()
                            if any((a.path / "cleanup").glob("*.json"))]:
            messages = run_recorded(attempt_dir)
            if messages:
                self.journal.emit(RunnerCleanup(attempt_dir=str(attempt_dir),
                                                messages=messages, predecessor=True))


def placement_for(campaign: Campaign, plugins: list[str]) -> Placement:
    """The placement strategy of ``campaign``'s mode (``cluster``, ``devices``, else
    ``device``; :mod:`engine.runner.strategy`).

    Raises:
        ConfigError: its devices or nodes cannot run the campaign (one line).
    """
    if campaign.cluster is not None:
        # The one part of the runner that is a Ray driver: imported for a cluster only.
        from engine.runner.cluster import ClusterPlacement

        return ClusterPlacement(campaign, campaign.cluster, plugins)
    if campaign.devices:
        # One device by its UUID is the cuda:N it is: its plan and keys (issue 46).
        index = one_device_index(campaign)
        return (OneDevice(campaign, plugins, device=index) if index
                else SeveralDevices(campaign, plugins))
    return OneDevice(campaign, plugins)


def _nothing() -> None:
    """No warm-up: cells start as fresh interpreters."""


def _holder(run_dir: Path) -> str:
    info = read_record(RunFolder(run_dir).runner_pid)
    try:
        if info is None:
            raise ValueError("no runner record")
        since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(info["started"]))
        return f"runner pid {info['pid']} on {info['host']} since {since} ({RunFolder(run_dir).runner_pid})"
    except (OSError, ValueError, KeyError):
        return f"lock held on {RunFolder(run_dir).lock}"
