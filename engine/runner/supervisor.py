"""The campaign runner: one process that owns a campaign. Torch-free: it never creates a
CUDA context, so the processes it starts never inherit one.

``python -m engine.runner CAMPAIGN.toml [--resume] [--since TS] ...`` — every front end
(``fugue-tui --batch``, the dashboard) starts this process and follows its event files
(``engine.observe.follow``); the runner never depends on a front end being alive or attached.

Run folder ``<runs_dir>/<campaign name>/`` (the campaign id)::

    runner.lock, runner.pid     held by the running runner (a second one is refused)
    campaign.toml               the campaign as last run
    runner.jsonl                lifecycle events of every runner session, appended
    zygote.log                  output of the runner's zygote (engine.runner.zygote)
    control/                    command files (engine.runner.control)
    cells/<NNN-exp-executor-pP>-<key8>/attempt-<a>/
        spec.json, events.jsonl, cell.log, cell.pid (while it runs), cell.reason (the
        one-line reason of a cell that could not write its output)

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

import contextlib
import json
import os
import shutil
import sys
import tempfile
import time
from collections import deque
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import threading

from filelock import FileLock, Timeout

from engine.cell.protocol import CellRunSpec
from engine.cleanup import run_recorded
from engine.define.availability import experiment_availability
from engine.define.campaign import Campaign
from engine.define.matrix import CellSpec, HostShare, build_cells
from engine.errors import ConfigError, FugueError, OutputError
from engine.events import EventWriter
from engine.measure.nvml import resolve_gpu, resolve_gpus
from engine.precision import device_refusal
from engine.measure.provenance import (machine_identity, model_identity, nvml_devices,
                                       resolve_device)
from engine.plugins import load_plugins, plugin_versions
from engine.results.columns import GROUPS_FILE, header
from engine.results.preflight import preflight
from engine.results.read import read_rows
from engine.results.rows import failed_group_row
from engine.results.store import append_rows
from engine.runfolder import AttemptFolder, RunFolder
from engine.runner.attempt import Aborted, Attempt
from engine.runner.cellproc import cell_env, reap_leftovers, scratch_prefix
from engine.runner.control import Inbox
from engine.runner.guard import Guard
from engine.runner.guard import describe as guard_account
from engine.runner.placement import Slot, place, split_cores
from engine.runner.zygote import Zygote, ZygoteError, start_method

EventFn = Callable[[dict[str, Any]], None]


class RunnerBusy(FugueError):
    """Another runner holds the campaign's lock."""


@dataclass
class PlannedCell:
    cell: CellSpec
    skip: str = ""          # why it will not run: "already ok in campaign 'c' (resume)", …
    #: The ok row a resumed cell is skipped for: its ``campaign_id``, ``attempt`` and
    #: ``timestamp`` (None when the cell is not skipped for a row).
    reused: dict[str, str] | None = None


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
    ``resume`` skips cells that already have an ok row of this campaign (``since``: at or
    after that timestamp); with ``reuse_any`` also an ok row of any campaign in the runs
    folder with the same cell key.
    """

    def __init__(self, campaign: Campaign, on_event: EventFn | None = None,
                 resume: bool = False, since: str | None = None, reuse_any: bool = False,
                 cell_start: str | None = None):
        #: How cells start: ``zygote`` (forked from a pre-warmed parent, the default) or
        #: ``spawn`` (fresh interpreters); ``FUGUE_CELL_START`` unless given.
        self.cell_start = cell_start or start_method()
        #: The zygote while it runs (None: not started, or cells start the old way).
        self.zygote: Zygote | None = None
        self._zygote_scratch: Path | None = None
        # The runner knows the same names as its cells; which plugins were loaded is part
        # of what a cell key identifies (a plugin may register models of its own).
        self.plugins = load_plugins()
        self.campaign = campaign
        self.on_event = on_event or (lambda event: None)
        self.resume, self.since, self.reuse_any = resume, since, reuse_any
        #: The devices of a multi-device campaign (``devices``; issue 27), one
        #: :class:`Slot` each; empty for a campaign with one ``device`` (today's runner).
        self.slots: list[Slot] = []
        #: The campaign's Ray cluster (issue 28; engine.runner.cluster), None on one host.
        self.cluster = None
        #: What runs one attempt (a cluster campaign's attempts run through node agents).
        self.attempt_class: type[Attempt] = Attempt
        if campaign.cluster is not None:
            self._init_cluster(campaign)
            return
        if campaign.devices:
            self._init_devices(campaign)
            return
        self.device = resolve_device(campaign.device)
        # the campaign file named (its key 'device', or --device over it), as 'devices' is
        where = (f"{campaign.source}: device '{campaign.device}'" if campaign.source
                 else f"device '{campaign.device}'")
        if self.device.startswith("cuda") and not nvml_devices():
            raise ConfigError(f"{where}: no NVIDIA GPU is visible here "
                              "(NVML finds none); use device = \"cpu\" or \"auto\"")
        # The device under test by NVML identity: every cell sees exactly this device
        # (CUDA_VISIBLE_DEVICES=<uuid>), and its monitor opens the same one by UUID.
        try:
            self.gpu = resolve_gpu(self.device, os.environ)
        except ValueError as exc:
            raise ConfigError(f"{where}: {exc}") from None
        self.machine = {**machine_identity(self.device, self.gpu), "plugins": self.plugins}
        self.cells = build_cells(campaign, self.machine)
        self._finish_init(campaign)

    def _init_devices(self, campaign: Campaign) -> None:
        """The multi-device form of ``__init__``: every device resolved now (a UUID that does
        not exist, two entries naming one device, devices of two GPU models: refused before
        anything is written), one :class:`Slot` per device with its share of the host's
        cores, the machine identity of the key by GPU *model* (host and model, never the
        UUID: a resume on other devices of the same model skips what already ran)."""
        where = str(campaign.source) if campaign.source else "campaign"
        try:
            gpus = resolve_gpus(campaign.devices, os.environ)
        except ValueError as exc:
            raise ConfigError(f"{where}: key 'devices': {exc}") from None
        cores = split_cores(len(gpus))
        self.slots = [Slot(i, gpu, cores[i] if len(gpus) > 1 else ())
                      for i, gpu in enumerate(gpus)]
        self.device, self.gpu = "cuda", gpus[0]
        self.machine = {**model_identity(gpus[0]), "plugins": self.plugins}
        # max_parallel = "auto" budgets one cell's share of the host (its slot's cores; the
        # smallest share, so a cell's key never depends on which device it was placed on)
        pinned = {cpu for slot in self.slots for cpu in slot.cpus}
        share = HostShare(cores=max(1, len(pinned) // len(self.slots)) if pinned
                          else (os.cpu_count() or 1), devices=len(self.slots),
                          gpu_uuid=self.slots[0].uuid)
        self.cells = build_cells(campaign, self.machine, share)
        self.placement = place(self.cells, len(self.slots))
        self._finish_init(campaign)

    def _init_cluster(self, campaign: Campaign) -> None:
        """The cluster form of ``__init__``: the nodes that fit a cell probed now (a ``gpu``
        model no node has, a cell no node can hold, nodes of several classes: refused
        before anything is written), the key's machine part by node class, one lane per
        cell the fitting nodes hold at once (engine.runner.cluster)."""
        from engine.runner.cluster import ClusterAttempt, ClusterHead

        self.cluster = ClusterHead(campaign.cluster, campaign)
        self.machine, lanes = self.cluster.plan()
        self.machine = {**self.machine, "plugins": self.plugins}
        self.device, self.gpu = ("cpu" if campaign.device == "cpu" else "cuda"), None
        self.attempt_class = ClusterAttempt
        self.cell_start = "spawn"  # cells start on their nodes: no zygote on the head
        self.cells = build_cells(campaign, self.machine)
        self.slots = [Slot(i, {}) for i in range(min(lanes, max(len(self.cells), 1)))]
        self.placement = place(self.cells, len(self.slots))
        self._finish_init(campaign)

    def _finish_init(self, campaign: Campaign) -> None:
        # A precision the device cannot run (bfloat16/TF32 below compute capability 8.0)
        # is refused now, with one line, not after a cell trained (engine.precision).
        refusal = device_refusal([c.precision for c in self.cells if c.precision], self.gpu)
        if refusal:
            where = str(campaign.source) if campaign.source else "campaign"
            raise ConfigError(f"{where}: device '{campaign.device}': {refusal}")
        self.runs_dir = Path(campaign.runs_dir)
        self.campaign_id = campaign.name
        self.folder = RunFolder.of(self.runs_dir, self.campaign_id)
        self.run_dir = self.folder.path
        self._log: EventWriter | None = None
        #: Serialises what the concurrent attempts of a multi-device campaign share: the
        #: event log, the rows file, the control inbox, the zygote.
        self._lock = threading.RLock()
        #: Stops asked for running cells (cell key → (what next, reason)), set by the one
        #: thread that reads the control inbox; each attempt takes its own.
        self._stops: dict[str, tuple[str, str]] = {}
        #: Running cells of a multi-device campaign: cell key → the device it runs on.
        self._running: dict[str, Slot] = {}
        #: cell key -> wall-clock time its running attempt was decided (attempt_started).
        self._started_wall: dict[str, float] = {}
        #: Each cell's latest attempt (its folder: the concurrency record goes there).
        self.current_attempt: dict[str, Attempt] = {}
        #: Refreshes the running attempts' concurrency records (engine.runner.concurrent).
        self._concurrency_hook: Callable[[], None] | None = None

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
            if cell.exp_id not in available:
                available[cell.exp_id] = experiment_availability(
                    self.campaign.catalogue.get(cell.exp_id))
            ok, reason = available[cell.exp_id]
            planned.append(PlannedCell(cell, "" if ok else f"unavailable here: {reason}"))
        return planned

    def ok_rows(self) -> dict[str, dict[str, str]]:
        """``{cell key: where its ok group row came from}`` (``campaign_id``, ``attempt``,
        ``timestamp``) for the rows resume may skip a cell for: this campaign's and, with
        ``reuse_any``, any campaign's (at or after ``since`` when given). This campaign's
        row wins over another's; among rows of the same standing the latest."""
        best: dict[str, tuple[tuple[bool, str], dict[str, str]]] = {}
        for r in read_rows(self.runs_dir / GROUPS_FILE):
            own = r.get("campaign_id") == self.campaign_id
            if (r.get("status") != "ok" or not (own or self.reuse_any)
                    or (self.since and r.get("timestamp", "") < self.since)):
                continue
            rank = (own, r.get("timestamp", ""))
            key = r.get("cell_key", "")
            if key not in best or rank >= best[key][0]:
                best[key] = (rank, {k: r.get(k, "") for k in
                                    ("campaign_id", "attempt", "timestamp")})
        return {key: row for key, (_, row) in best.items()}

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
        lock = FileLock(self.folder.lock)
        try:
            lock.acquire(timeout=0)
        except Timeout:
            raise RunnerBusy(f"campaign '{self.campaign_id}' is already being run: "
                             f"{_holder(self.run_dir)}") from None
        # Stops what this runner leaves running if it dies without cleaning up (a SIGKILL).
        self.guard = Guard.start(self.run_dir)
        try:
            if self.cluster is not None:
                self.cluster.connect(self.run_dir)
            return self._run_locked()
        finally:
            if self.cluster is not None:  # agents end with the driver; "local" stops here
                self.cluster.close()
            self.folder.runner_pid.unlink(missing_ok=True)
            self.guard.release()
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
                   device=self.device, runner_pid=os.getpid(), resume=self.resume,
                   reuse_any=self.reuse_any, guard_pid=self.guard.pid,
                   **({"devices": [s.describe(len(self.slots)) for s in self.slots]}
                      if self.slots else {}))
        self._clean_predecessors()
        queue: deque[CellSpec] = deque()
        for planned in self.plan():
            cell = planned.cell
            if planned.reused is not None:
                self._emit("skipped", cell=cell.key, index=cell.index, label=cell.label,
                           reason=planned.skip, from_campaign=planned.reused["campaign_id"],
                           from_attempt=planned.reused["attempt"],
                           from_timestamp=planned.reused["timestamp"])
            elif planned.skip:
                self._record(self.cell_spec(cell, self._next_attempt(cell)).to_dict(), "skipped",
                             planned.skip)
                self._emit("skipped", cell=cell.key, index=cell.index, label=cell.label,
                           reason=planned.skip)
                outcome.outcomes.append(CellOutcome(cell, "skipped", 0, planned.skip))
            else:
                self._emit("queued", cell=cell.key, index=cell.index, label=cell.label)
                queue.append(cell)
        self.queue = queue
        self.auto_retries: dict[str, int] = {}
        self.node_losses: dict[str, int] = {}
        self.outcomes: dict[str, CellOutcome] = {}
        stopped: BaseException | None = None
        zygote_wanted = self.cell_start == "zygote"
        try:
            if len(self.slots) > 1:
                if zygote_wanted and self.queue:
                    self._start_zygote()
                from engine.runner.concurrent import run_slots

                run_slots(self)
            while self.queue and len(self.slots) <= 1:
                self._handle_commands(running=None)
                if not self.queue:
                    break
                cell = self.queue.popleft()
                if zygote_wanted:  # once, before the first cell is decided on
                    zygote_wanted = False
                    self._start_zygote()
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
                self._stop_zygote()
                with contextlib.suppress(OSError):
                    self._log.close()
        return outcome

    # -- the zygote -----------------------------------------------------------------------
    def cell_environment(self, scratch: Path, slot: Slot | None = None) -> dict[str, str]:
        """The environment of this campaign's cells, with the compile caches in
        ``scratch``: the device under test (``slot``'s in a multi-device campaign) the only
        one CUDA sees, the thread counts (a slot's share of the cores when pinned)."""
        gpu = slot.gpu if slot is not None else self.gpu
        device_env = ({"CUDA_VISIBLE_DEVICES": gpu["uuid"],
                       "CUDA_DEVICE_ORDER": "PCI_BUS_ID"} if gpu else {})
        threads = self.campaign.threads or (len(slot.cpus) if slot is not None and slot.cpus
                                            else 0)
        return cell_env(scratch, threads, device_env)

    def _start_zygote(self) -> None:
        """Start this runner's zygote and wait for its imports, before the first cell (so
        no cell's time holds them). It gets the cells' environment, with compile caches of
        its own that it never uses. A zygote that cannot start is said once (a ``zygote``
        event with the error) and the cells start the old way."""
        t0 = time.perf_counter()
        try:
            try:
                self._zygote_scratch = Path(tempfile.mkdtemp(prefix=scratch_prefix()))
            except OSError as exc:
                raise ZygoteError(f"no scratch folder for the zygote: {exc}") from None
            zygote = Zygote.start(self.run_dir, self.cell_environment(self._zygote_scratch))
            self.zygote = zygote
            zygote.wait_ready()
        except ZygoteError as exc:
            self._zygote_lost(self.zygote.pid if self.zygote else None, str(exc))
            return
        facts = {k: zygote.facts.get(k) for k in ("imports_s", "threads", "python_threads",
                                                  "cuda_initialized")}
        self._emit("zygote", pid=zygote.pid, warm_s=round(time.perf_counter() - t0, 3), **facts)

    def zygote_failed(self, zygote: Zygote) -> None:
        """The zygote stopped serving while a cell started (that cell and the rest start the
        old way): said once, in a ``zygote`` event naming why."""
        if self.zygote is zygote:
            self._zygote_lost(zygote.pid, zygote.broken)

    def _zygote_lost(self, pid: int | None, why: str) -> None:
        """No zygote from now on: the event, and the warning every front end shows."""
        self.zygote = None
        self._emit("zygote", pid=pid, error=why)
        self._emit("warning", message=f"cells start as fresh interpreters from now on: {why}")

    def _stop_zygote(self) -> None:
        zygote, self.zygote = self.zygote, None
        if zygote is not None:
            zygote.close()
        if self._zygote_scratch is not None:
            shutil.rmtree(self._zygote_scratch, ignore_errors=True)
            self._zygote_scratch = None

    def _write_run_files(self, started: float) -> None:
        """runner.pid, the campaign as given and as resolved, the runner's event log; each
        file whole or absent (temporary file, then ``os.replace``)."""
        _write_whole(self.folder.runner_pid, json.dumps(
            {"pid": os.getpid(), "host": os.uname().nodename, "started": started,
             "argv": sys.argv}))
        if self.campaign.source is not None:
            _write_whole(self.folder.campaign_file, self.campaign.source.read_text())
        # What actually runs, after command-line overrides and with the experiments resolved.
        _write_whole(self.run_dir / "campaign.resolved.json", json.dumps({
            "campaign": self.campaign.resolved(), "device": self.device,
            "machine": self.machine, "resume": self.resume, "since": self.since,
            "experiments": {e: self.campaign.catalogue.get(e).to_dict()
                            for e in self.campaign.experiments}}, indent=1, default=str))
        self._log = EventWriter(self.folder.runner_log, campaign=self.campaign_id)

    def _emit(self, type: str, **fields: Any) -> dict[str, Any]:
        """Append a runner event. Raises :class:`OutputError` naming ``runner.jsonl`` when
        it cannot be written (a full disk)."""
        assert self._log is not None
        with self._lock:  # concurrent attempts: one whole line at a time, in order
            try:
                event = self._log.emit(type, **fields)
            except OSError as exc:
                raise OutputError(f"{self._log.path}: {exc.strerror or exc}") from exc
            self.on_event(event)
        return event


    def _next_attempt(self, cell: CellSpec) -> int:
        existing = [a.number for a in self.folder.attempts(cell.slug, cell.key)]
        return max(existing, default=0) + 1

    def attempt_started(self, attempt: Attempt) -> None:
        """Called once an attempt's process runs: with several devices, the concurrency
        records of every running attempt are brought up to date at once (a neighbour that
        starts and ends between two polls is still counted)."""
        # When it was decided to run (wall clock, as control commands are stamped): a retry
        # sent before then was meant for a cell that had not started (fugue-tui control
        # refuses one; the dashboard's key or a race with the cell's start still sends it).
        self._started_wall[attempt.cell.key] = attempt.decided_wall
        hook = self._concurrency_hook
        if hook is not None:
            with self._lock:
                hook()

    def slot_of(self, cell: CellSpec) -> Slot | None:
        """The device ``cell`` runs on in a multi-device campaign (None: one device)."""
        return self.slots[self.placement[cell.key]] if self.slots else None

    def cell_spec(self, cell: CellSpec, attempt: int) -> CellRunSpec:
        """The spec that attempt ``attempt`` of ``cell`` is started with: what ``python -m
        engine.cell`` reads. Public for tools that run one cell by hand (``bench``)."""
        folder = self.folder.attempt(cell.slug, cell.key, attempt)
        slot = self.slot_of(cell)
        if self.cluster is not None:  # the node's agent adds its node, GPU and threads
            return CellRunSpec(
                campaign_id=self.campaign_id, campaign_hash=self.campaign.file_hash,
                runs_dir=str(self.runs_dir.resolve()), events=str(folder.events),
                attempt=attempt, reason_file=str(folder.reason), seed=self.campaign.seed,
                passes=self.campaign.passes, device="cpu" if self.device == "cpu" else "cuda:0",
                device_requested=self.campaign.device, monitor=self.campaign.monitor,
                monitor_interval_s=self.campaign.monitor_interval_s,
                threads=self.campaign.threads or self.campaign.cluster.cpus_per_cell or 1,
                cell=asdict(cell), plugin_versions=plugin_versions() or None,
                experiments_file_hash=self.campaign.experiments_file_hash or None)
        if slot is not None:
            return self._slot_spec(cell, attempt, folder, slot)
        return CellRunSpec(
            campaign_id=self.campaign_id, campaign_hash=self.campaign.file_hash,
            runs_dir=str(self.runs_dir.resolve()), events=str(folder.events), attempt=attempt,
            reason_file=str(folder.reason), seed=self.campaign.seed,
            passes=self.campaign.passes,
            # Inside the cell the device under test is the only visible one: cuda:0.
            device="cuda:0" if self.gpu else self.device, device_requested=self.device,
            gpu_uuid=self.gpu["uuid"] if self.gpu else None, monitor=self.campaign.monitor,
            monitor_interval_s=self.campaign.monitor_interval_s,
            threads=self.campaign.threads or os.cpu_count() or 1, cell=asdict(cell),
            plugin_versions=plugin_versions() or None,
            experiments_file_hash=self.campaign.experiments_file_hash or None)

    def _slot_spec(self, cell: CellSpec, attempt: int, folder: AttemptFolder,
                   slot: Slot) -> CellRunSpec:
        """:meth:`cell_spec` for a cell of a multi-device campaign: pinned to its slot's
        device by UUID (inside the cell it is ``cuda:0``), its share of the host's cores,
        its placement named. ``FUGUE_CELLS_ON_CPU=1`` trains on the CPU while the runner
        plans, pins and monitors the devices as usual: a check of placement and pinning on
        a host whose GPUs must stay free (the rows' ``device`` then says ``cpu``)."""
        on_cpu = os.environ.get("FUGUE_CELLS_ON_CPU") == "1"
        threads = self.campaign.threads or len(slot.cpus) or os.cpu_count() or 1
        return CellRunSpec(
            campaign_id=self.campaign_id, campaign_hash=self.campaign.file_hash,
            runs_dir=str(self.runs_dir.resolve()), events=str(folder.events), attempt=attempt,
            reason_file=str(folder.reason), seed=self.campaign.seed,
            passes=self.campaign.passes, device="cpu" if on_cpu else "cuda:0",
            device_requested="cpu" if on_cpu else str(slot.gpu.get("entry") or "cuda"),
            gpu_uuid=slot.uuid, monitor=self.campaign.monitor,
            monitor_interval_s=self.campaign.monitor_interval_s, threads=threads,
            cell=asdict(cell), plugin_versions=plugin_versions() or None,
            experiments_file_hash=self.campaign.experiments_file_hash or None,
            placement=slot.describe(len(self.slots)),
            cpus=list(slot.cpus) or None)

    def _run_cell(self, cell: CellSpec) -> CellOutcome:
        """Attempts of one cell until it is ok, out of retries, killed or skipped."""
        while True:
            attempt = self._next_attempt(cell)
            current = self.attempt_class(self, cell, attempt)
            self.current_attempt[cell.key] = current
            status, error, log, after = current.run()
            if after == "node":  # its cluster node was lost: again, on another node
                from engine.runner.cluster import MAX_NODE_LOSSES

                lost = self.node_losses[cell.key] = self.node_losses.get(cell.key, 0) + 1
                if lost <= MAX_NODE_LOSSES:
                    self._emit("retried", cell=cell.key, attempt=attempt + 1, manual=False,
                               node_lost=True)
                    continue
                after = ""  # then the campaign's retries apply
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

    def _record(self, spec: dict[str, Any], status: str, error: str) -> None:
        # The device's name as NVML gave it to the runner (the same NVML device the
        # cell's monitor reads by UUID): the row of a cell that died before its monitor
        # started still says which GPU it ran on.
        gpu = self.gpu
        for slot in self.slots:  # the device this attempt was pinned to
            if slot.uuid and slot.uuid == spec.get("gpu_uuid"):
                gpu = slot.gpu
        extra = {"gpu_name": gpu["name"]} if gpu and gpu.get("name") else {}
        with self._lock:
            repaired = append_rows(self.runs_dir / GROUPS_FILE,
                                   [failed_group_row(spec, status, error, extra)],
                                   header(GROUPS_FILE))
        for line in repaired:  # an upgrade or a repair of the file, with its backup: told
            self._emit("warning", message=line, cell=spec["cell"]["key"],
                       attempt=spec["attempt"])

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
        stop: ``("stop", …)`` kill or skip, ``("retry", …)``, ``("abort", …)``. With several
        cells running (a multi-device campaign) one thread reads the inbox
        (:func:`engine.runner.concurrent.run_slots`); a running attempt only takes the stop
        kept for it."""
        if len(self.slots) > 1 and running is not None:
            with self._lock:
                return self._stops.pop(running.key, None)
        stop = None
        for command in self.inbox.poll():
            name, ref = command["cmd"], str(command.get("cell") or "")
            if name == "abort":
                self._emit("control", cmd=name, applied=True)
                if running is None:
                    raise Aborted()
                why = str(command.get("reason") or "").strip()
                stop = ("abort", f"campaign aborted by control command ({why})" if why
                        else "campaign aborted by control command")
                continue
            cell = self.find(ref)
            if cell is not None and running is not None and cell.key == running.key:
                if self.stale_retry(command, cell):
                    continue
                self._emit("control", cmd=name, cell=cell.key, applied=True)
                stop = {"kill": ("stop", "killed by control command"),
                        "skip": ("stop", "skipped by control command"),
                        "retry": ("retry", "stopped for a retry by control command")}[name]
            else:
                self._queued_command(name, ref, cell)
        return stop

    def stale_retry(self, command: dict[str, Any], cell: CellSpec) -> bool:
        """A retry of the running ``cell`` sent before its attempt started (it was queued
        then): not applied, and said so. Retrying a cell that has not run would only kill
        its first attempt and record a pointless killed row."""
        started = self._started_wall.get(cell.key)
        if command["cmd"] != "retry" or started is None or command.get("ts", started) >= started:
            return False
        self._emit("control", cmd="retry", cell=cell.key, applied=False,
                   reason="the cell had not started when the retry was sent (it runs now)")
        return True

    def _queued_command(self, name: str, ref: str, cell: CellSpec | None) -> None:
        """A command for a cell that is not running: skip a queued one, queue a finished one
        again for a retry; anything else is said to be not applicable."""
        if cell is None:
            self._emit("control", cmd=name, cell=ref, applied=False,
                       reason="no such cell (or an ambiguous key prefix)")
        elif name == "skip" and cell in self.queue:
            self.queue.remove(cell)
            reason = "skipped by control command"
            self._record(self.cell_spec(cell, self._next_attempt(cell)).to_dict(), "skipped", reason)
            self._emit("skipped", cell=cell.key, index=cell.index, label=cell.label,
                       reason=reason)
            self.outcomes[cell.key] = CellOutcome(cell, "skipped", 0, reason)
            self._emit("control", cmd=name, cell=cell.key, applied=True)
        elif name == "retry" and cell not in self.queue and cell.key not in self._running:
            self.queue.appendleft(cell)
            self.outcomes.pop(cell.key, None)
            self._emit("queued", cell=cell.key, index=cell.index, label=cell.label,
                       manual_retry=True)
            self._emit("control", cmd=name, cell=cell.key, applied=True)
        else:
            self._emit("control", cmd=name, cell=cell.key, applied=False,
                       reason="not applicable to the cell's current state")

    def _clean_predecessors(self) -> None:
        """Kill what earlier runners of this campaign left running and record those attempts."""
        for record in reap_leftovers(self.run_dir):
            attempt_dir = record["attempt_dir"]
            try:
                spec = CellRunSpec.read(AttemptFolder(attempt_dir).spec).to_dict()
            except ConfigError:  # unreadable or not a spec: nothing to record for it
                continue
            spec["cell_start"] = record.get("start")  # how that runner started it, if it said
            reason = f"runner pid {record['runner_pid']} ended while this attempt ran"
            guarded = guard_account(record)
            reason += guarded or "; cleaned up by the next runner"
            if record["killed"]:
                reason += f" (killed leftover pids {record['killed']})"
            EventWriter(spec["events"], cell=spec["cell"]["key"],
                        attempt=spec["attempt"]).emit("killed", reason=reason)
            self._record(spec, "killed", reason)
            self._emit("killed", cell=spec["cell"]["key"], attempt=spec["attempt"],
                       reason=reason, predecessor=True)
        if self.cluster is not None:  # attempts that ran on nodes (engine.runner.cluster)
            from engine.runner.cluster import orphaned_attempts

            orphaned_attempts(self)
        # After their cells are dead: what those cells started outside their sessions.
        for attempt_dir in [a.path for a in self.folder.all_attempts()
                            if any((a.path / "cleanup").glob("*.json"))]:
            messages = run_recorded(attempt_dir)
            if messages:
                self._emit("cleanup", attempt_dir=str(attempt_dir), messages=messages,
                           predecessor=True)


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
        info = json.loads(RunFolder(run_dir).runner_pid.read_text())
        since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(info["started"]))
        return f"runner pid {info['pid']} on {info['host']} since {since} ({RunFolder(run_dir).runner_pid})"
    except (OSError, ValueError, KeyError):
        return f"lock held on {RunFolder(run_dir).lock}"
