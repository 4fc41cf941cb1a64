"""``mp``: one process per job, at most ``max_parallel`` at once, sharing the GPU through a
private CUDA MPS daemon when the machine allows it.

The window rule (``docs/measurement.md``): what does not depend on the jobs starts in
``setup`` (``setup_s``) — the MPS daemon, and with ``start = "forkserver"`` the pre-warmed
parent that has imported torch, the engine and the plugins (``engine.executors.mp.parent``)
— and everything a job costs is inside ``T_group``: its process (a fork of that parent, or
with ``start = "spawn"`` a fresh interpreter that imports everything), torch set-up, its
dataset load and copy, its training. Each job's ``worker_start_s`` is the time from asking
for its process to that process ready to train. A process is never reused for a second
job. The daemon and the parent are stopped in ``teardown``; the cleanup record lets the
runner quit the daemon after any abnormal end of the cell (``engine.cleanup``), and the
parent dies with the cell (its parent-death signal).

Options (``[options.mp]``): ``max_parallel`` (default: all jobs of the cell), ``start``
(``forkserver`` or ``spawn``) and ``mps``:

- ``auto``: on a CUDA device, use a private MPS daemon when ``nvidia-cuda-mps-control`` is
  found; otherwise (a CPU device, no binary, a daemon that fails to start in DEFAULT
  compute mode) plain concurrent processes, recorded as such;
- ``on``: a private MPS daemon is required: refuse with one line when it cannot run (no
  GPU visible through NVML, no binary, a daemon that fails). On a CPU device the workers
  are clients that never create a CUDA context (the daemon's cost is still measured);
- ``off``: plain concurrent processes.

A stream cell (issue 51, ``ctx.arrivals``): jobs are admitted FIFO, each no earlier than
its arrival, while fewer than ``max_parallel`` run; with nothing running and the next job
not yet arrived the cell sleeps with a ``waiting`` heartbeat (``engine.executors.arrivals``).
Each job's admission (its process started) and end go to ``ctx.stream_marks``.

Group columns set here: ``max_parallel`` (the most worker processes alive at once),
``mp_start``, ``mps_used``, ``mps_thread_pct``, ``mps_present``, ``gpu_compute_mode`` and
``executor_info`` (start method, the parent's facts, worker pids, per-job worker start and
set-up seconds, CPU seconds and exit codes, the daemon's folders, foreign daemons).
"""

from __future__ import annotations

import contextlib
import dataclasses
import multiprocessing
import multiprocessing.connection
import os
import signal
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from engine import cleanup
from engine.define.executor_options import from_table
from engine.define.workloads import JobSpec
from engine.errors import FugueError
from engine.events import job_done, job_progress, job_started
from engine.executors import MPOptions, packing
from engine.executors.arrivals import HEARTBEAT_S, wait_until
from engine.executors.base import CellContext, Executor
from engine.executors.mp import mps, mps_checks
from engine.executors.mp.parent import PrewarmedParent
from engine.executors.mp.stopper import Stopper
from engine.executors.mp.worker import worker_main
from engine.measure.spans import union_seconds
from engine.train.loop import JobResult

#: Seconds between SIGTERM and SIGKILL when a worker must be stopped.
TERM_GRACE_S = 5.0
#: How long the hand-back waits for one worker's digest (and save) before giving up on it:
#: generous, a save of a large model to a slow disk included.
HAND_BACK_WAIT_S = 600.0
#: Name of the cleanup record of the MPS daemon in the attempt folder.
MPS_RECORD = "mps-daemon"


@dataclass
class _Worker:
    """A running job: its process, the read end of its pipe, and what it reported."""

    index: int
    job: JobSpec
    process: Any
    conn: Any
    started: float
    pid: int | None = None
    setup_s: float | None = None
    #: The worker's perf_counter when it was ready to train (its "ready" message).
    ready_at: float | None = None
    prewarmed: bool | None = None
    cpu_s: float | None = None
    result: JobResult | None = None
    #: The result as of the job's last finished epoch (the worker's ``epoch`` message).
    so_far: JobResult | None = None
    spans: list = field(default_factory=list)
    error: str = ""
    eof: bool = False
    info: dict[str, Any] = field(default_factory=dict)
    #: Early stopping (issue 25): the rung the worker waits at, and the decision that
    #: stopped it with its result as of that epoch.
    waiting_at: int | None = None
    stopped: tuple[Any, JobResult, float] | None = None
    #: The stop reached the worker while it waited at the deciding epoch (issue 50): its
    #: weights are that epoch's, and it holds them for the hand-back like a finished job.
    stop_sent: bool = False
    #: Packing (issue 27): the GPU UUID the worker is pinned to, and what it saw when it
    #: set the pin (its ``pin`` message).
    device: str | None = None
    pin: dict[str, Any] | None = None
    #: The job ended ok and the process holds its final weights for the hand-back after
    #: the window (its ``held`` message, issue 50).
    held: bool = False


def _exit_reason(pid: int | None, code: int | None) -> str:
    if code is not None and code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return f"worker process {pid} was killed by {name} before reporting a result"
    return f"worker process {pid} exited with status {code} before reporting a result"


def _died(job: JobSpec, so_far: JobResult | None, error: str) -> JobResult:
    """The failed result of a job whose process ended without its result: what it had
    finished by its last epoch end (epochs, samples, losses, validation, history), else an
    empty one. When it died is unknown, so its end and total time stay empty."""
    if so_far is None:
        return JobResult(job, status="failed", error=error)
    return dataclasses.replace(so_far, job=job, status="failed", error=error, end=None,
                               total_time_s=None)


class MPExecutor(Executor):
    """One spawned process per job (see the module docstring)."""

    def __init__(self) -> None:
        self.daemon: mps.MPSDaemon | None = None
        self.workers: dict[int, _Worker] = {}
        #: Workers whose job ended ok, holding its weights for the hand-back (issue 50).
        self.holding: dict[int, _Worker] = {}
        self.parallel = 1
        self.client_env: dict[str, str] = {}
        self.info: dict[str, Any] = {}
        self._record_dir = None
        self.parent: PrewarmedParent | None = None
        #: Packing (``devices``): the GPU UUIDs, and the slots that bound each device.
        self.devices: list[str] = []
        self.per_device: int | None = None
        self.slots: packing.Slots | None = None

    # ------------------------------------------------------------------ setup (setup_s)
    def setup(self, jobs: list[JobSpec], ctx: CellContext) -> None:
        """Decide the process count and MPS use; start our MPS daemon when used, then the
        pre-warmed parent (``start = "forkserver"``), so both are ``setup_s``.

        Raises:
            FugueError: the GPU's compute mode forbids concurrent workers (PROHIBITED, or
                EXCLUSIVE_PROCESS without a working MPS daemon of ours), ``mps = "on"``
                and MPS cannot run here, or the pre-warmed parent failed (its reason).
        """
        options = from_table(MPOptions, ctx.options)
        start = str(options.start)
        ctx.group["mp_start"] = start
        # The matrix resolved ``devices`` to GPU UUIDs in the runner (its environment: an
        # outer CUDA_VISIBLE_DEVICES is indexed there); the cell only pins.
        self.devices = list(options.devices or [])
        self.per_device = options.jobs_per_device
        self._setup_mps(jobs, ctx, str(options.mps), start)
        if start == "forkserver":
            self.parent = PrewarmedParent()
            try:
                self.info["parent"] = self.parent.start()
            except BaseException:
                # teardown does not run after a failed setup: nothing may stay behind
                self.info["parent"] = {**self.parent.info, "stop": self.parent.stop()}
                self._quit_daemon()
                raise

    def _setup_mps(self, jobs: list[JobSpec], ctx: CellContext, mode: str, start: str) -> None:
        requested = ctx.max_parallel or ctx.options.get("max_parallel")
        self.parallel = max(1, min(int(requested or len(jobs)), len(jobs)))
        if self.devices:
            self._setup_packing(jobs, ctx)
            return
        device = ctx.settings.device
        index = device.index or 0
        on_gpu = device.type == "cuda"
        self.info = {"spawn": start, "mps": mode, "planned_parallel": self.parallel,
                     "threads_per_worker": ctx.threads}
        group = ctx.group
        group.update(mps_used=False, mps_thread_pct=None)
        if not on_gpu and mode != "on":  # mps_present: the cell's host-wide check applies
            self.info["mps_reason"] = f"device {device}: no GPU to share"
            return
        # NVML by the device's UUID when the runner resolved one (cuda:0 here is not NVML
        # index 0 on a multi-GPU host); the index only for a hand-made spec.
        index = ctx.gpu_uuid or index
        compute = mps_checks.compute_mode(index)
        group["gpu_compute_mode"] = compute
        foreign = mps_checks.foreign_daemons()
        group["mps_present"] = bool(foreign)
        if foreign:
            self.info["foreign_mps"] = foreign
        if compute == "PROHIBITED" or mode == "off":
            mps_checks.check_compute_mode(compute, index, mps_running=False)
            self.info["mps_reason"] = "mps = off"
            return
        if mode == "on" and not mps_checks.gpu_visible(index):
            raise FugueError(f"[options.mp] mps = \"on\": NVML sees no GPU {index} to share")
        control = mps_checks.find_control()
        if control is None:
            reason = (f"{mps_checks.CONTROL} not found on PATH or in "
                      f"{', '.join(mps_checks.FALLBACK_DIRS)}")
            self._no_mps(mode, compute, index, reason)
            return
        try:
            self._start_daemon(control, ctx)
        except mps.MPSError as exc:
            self._no_mps(mode, compute, index, str(exc))
            return
        pct = mps_checks.thread_percentage(self.parallel)
        self.client_env = self.daemon.client_env(pct)
        group.update(mps_used=True, mps_thread_pct=pct, mps_present=True)
        self.info.update(mps_pipe_dir=str(self.daemon.pipe_dir),
                         mps_log_dir=str(self.daemon.log_dir), mps_daemon_pid=self.daemon.pid,
                         mps_start_s=self.daemon.start_s)

    def _setup_packing(self, jobs: list[JobSpec], ctx: CellContext) -> None:
        """Packing over ``self.devices``: job i on device i mod n, at most
        ``jobs_per_device`` at once on each, each worker pinned by ``CUDA_VISIBLE_DEVICES``.

        No MPS: the private daemon is started for one device (its clients must see the
        devices it serves) and a per-device set of daemons is not built; the campaign
        check refuses ``mps = "on"`` with ``devices``, ``auto`` runs plain processes.
        The cell's monitor watches the cell's device only, so the group's GPU columns
        (energy, utilisation, power, VRAM) would describe one device of several: they are
        left empty unless the packing is that one device."""
        n = len(self.devices)
        placement = packing.assign(len(jobs), n)
        per = self.per_device or max(placement.count(k) for k in range(n))
        self.parallel = max(1, min(self.parallel, n * per))
        self.slots = packing.Slots(len(jobs), n, per, self.parallel)
        on_gpu = ctx.settings.device.type == "cuda"
        self.info.update(
            {"spawn": ctx.group["mp_start"], "planned_parallel": self.parallel,
             "threads_per_worker": ctx.threads, "mps": "off",
             "mps_reason": f"devices: {n} device(s) packed; the private MPS daemon serves "
                           "one device, so workers run as plain processes",
             "packing": {"devices": self.devices, "jobs_per_device": per,
                         "placement": [self.devices[k] for k in placement],
                         "trains_on": "cuda:0 of each worker (its pinned device)" if on_gpu
                         else f"{ctx.settings.device} (the cell's device; pinned anyway)"}})
        ctx.group.update(mps_used=False, mps_thread_pct=None)
        if not on_gpu:
            ctx.emit("warning", message=f"mp devices on a {ctx.settings.device} cell: the "
                     "workers are pinned to their GPUs but train on the CPU")
        emptied = packing.group_columns(ctx.group, self.devices, per, on_gpu, ctx.gpu_uuid)
        if emptied:
            self.info["packing"]["gpu_columns"] = emptied

    def _no_mps(self, mode: str, compute: str | None, index: int, reason: str) -> None:
        """MPS cannot run: refuse where that is required, else record plain processes."""
        if mode == "on":
            raise FugueError(f"[options.mp] mps = \"on\" but MPS cannot run: {reason}")
        try:
            mps_checks.check_compute_mode(compute, index, mps_running=False)
        except FugueError as exc:  # say why our daemon is not there
            raise FugueError(f"{exc}; MPS: {reason}") from None
        self.info["mps_reason"] = reason

    def _start_daemon(self, control: str, ctx: CellContext) -> None:
        log_dir = ctx.attempt_dir / "mps" if ctx.attempt_dir is not None else None
        daemon = mps.MPSDaemon.create(control, log_dir=log_dir)
        self._record_dir = ctx.attempt_dir
        # Recorded before it exists: a cell killed while the daemon starts still leaves the
        # runner enough to find it (its private pipe directory).
        self._record(daemon)
        try:
            daemon.launch()
            self._record(daemon)  # now with its pid
        except BaseException:
            daemon.quit()  # never leave a daemon behind a failed set-up (teardown won't run)
            if self._record_dir is not None:
                cleanup.release(self._record_dir, MPS_RECORD)
            raise
        self.daemon = daemon

    def _record(self, daemon: mps.MPSDaemon) -> None:
        if self._record_dir is not None:
            cleanup.record(self._record_dir, MPS_RECORD, "engine.executors.mp.mps:quit_recorded_daemon",
                           **daemon.record_info())

    # ------------------------------------------------------------------ run (T_group)
    def run(self, jobs: list[JobSpec], ctx: CellContext) -> list[JobResult]:
        """Start one process per job, at most ``max_parallel`` alive; a slot is refilled as
        soon as its process ends. A process that dies without a result fails its job with
        the exit status or signal; the others go on. Results in job order."""
        spawn = (self.parent.context if self.parent is not None
                 else multiprocessing.get_context("spawn"))
        pending = deque(enumerate(jobs))
        results: dict[int, JobResult] = {}
        peak = 0
        settings = {"device": str(ctx.settings.device), "compile_mode": ctx.settings.compile_mode,
                    "amp_allowed": ctx.settings.amp_allowed,
                    "precision": ctx.settings.precision,
                    "compile_backend": ctx.settings.compile_backend}
        env = {**ctx.job_env, **self.client_env}
        per_job: dict[str, dict[str, Any]] = {}
        spans: list[tuple[float, float]] = []
        self.stopper = Stopper.make(jobs, ctx, self.parallel)
        if self.slots is not None and ctx.settings.device.type == "cuda":
            settings["device"] = "cuda:0"  # the one device the pinned worker sees

        # A stream cell (issue 51): a job is admitted FIFO, no earlier than its arrival
        # (seconds after the window opened), while fewer than max_parallel run.
        arrivals = ctx.arrivals
        origin = ctx.stream_origin if ctx.stream_origin is not None else time.perf_counter()

        def arrived(index: int) -> bool:
            return arrivals is None or time.perf_counter() - origin >= arrivals[index]

        def take() -> int | None:
            """The next job to start now, or None (packing: its device's slots)."""
            if self.slots is not None:
                return self.slots.next()
            if pending and len(self.workers) < self.parallel and arrived(pending[0][0]):
                return pending.popleft()[0]
            return None

        def until_next_arrival() -> float | None:
            """Seconds to wait at most for the next arrival (a stream with a free slot and
            its next job not yet arrived), else None (wait for a worker)."""
            if arrivals is None or not pending or len(self.workers) >= self.parallel:
                return None
            head = pending[0][0]
            if not self.workers:  # nothing runs: sleep to the arrival, with heartbeats
                wait_until(origin + arrivals[head], jobs[head].job_id, arrivals[head],
                           ctx.emit)
                return 0.0
            return max(0.0, min(HEARTBEAT_S, origin + arrivals[head] - time.perf_counter()))

        def waiting() -> bool:
            return self.slots.waiting() if self.slots is not None else bool(pending)

        try:
            while waiting() or self.workers:
                while (index := take()) is not None:
                    job = jobs[index]
                    if self.parent is not None and not self.parent.alive():
                        # never a new parent inside the window (the library would start
                        # one, imports and all): the job fails, saying why
                        results[index] = self._no_parent(job, ctx)
                        if self.slots is not None:
                            self.slots.done(index)
                        continue
                    rungs = self.stopper.rungs_of(index) if self.stopper else []
                    job_env, device = env, None
                    if self.slots is not None:
                        device = self.devices[self.slots.placement[index]]
                        job_env = {**env, packing.PIN_ENV: device}
                    self._spawn(spawn, index, job, {**settings, "rungs": rungs,
                                                    "pin": device}, job_env, ctx)
                    self.workers[index].device = device
                timeout = until_next_arrival()
                if not self.workers:
                    continue
                peak = max(peak, len(self.workers))
                ready = multiprocessing.connection.wait(
                    [w.conn for w in self.workers.values() if not w.eof]
                    + [w.process.sentinel for w in self.workers.values()], timeout=timeout)
                for worker in list(self.workers.values()):
                    if worker.conn in ready:
                        self._drain(worker, ctx)
                    if worker.process.sentinel in ready or (
                            worker.held and (worker.result is not None or worker.stop_sent)):
                        ended = time.perf_counter()
                        results[worker.index] = self._finish(worker, ctx)
                        if arrivals is not None:  # admitted when its process was started
                            ctx.stream_marks[worker.job.job_id] = (worker.started, ended)
                        per_job[worker.job.job_id] = worker.info
                        spans.extend(worker.spans)
        finally:
            self._stop_workers()
        ordered = [results[i] for i in range(len(jobs))]
        if self.stopper is not None:
            self.info["early_stop"] = self.stopper.info()
            ctx.group.update(scheduler=self.stopper.name,
                             trials_stopped=len(self.stopper.stops))
            self.stopper.log.write(ctx.attempt_dir)
        self.info.update(workers=per_job, max_parallel_seen=peak)
        ctx.group.update(max_parallel=peak)
        # Jobs overlap: the group's training wall time is the union of every job's epoch
        # training spans (docs/measurement.md, mp); a failed group measured nothing.
        wall = union_seconds(spans)
        self.info["train_wall_s"] = wall
        if wall > 0 and all(r.status == "ok" for r in ordered):
            ctx.group["train_throughput_sps"] = sum(r.samples for r in ordered) / wall
        return ordered

    def _no_parent(self, job: JobSpec, ctx: CellContext) -> JobResult:
        error = (f"the pre-warmed parent (pid {self.parent.pid}) ended before the job "
                 f"started ({self.parent.exit})")
        result = JobResult(job, status="failed", error=error)
        job_started(job.job_id).send(ctx.emit)
        job_done(result).send(ctx.emit)
        return result

    def _spawn(self, spawn, index: int, job: JobSpec, settings: dict[str, Any],
               env: dict[str, str], ctx: CellContext) -> None:
        # Duplex: under sha the cell answers a worker waiting at a rung (go or stop).
        receiver, sender = spawn.Pipe(duplex=True)
        # The worker dies with its parent: the cell, or the pre-warmed parent that forks it.
        parent_pid = self.parent.pid if self.parent is not None else os.getpid()
        process = spawn.Process(target=worker_main, name=f"fugue-mp-{job.job_id}",
                                args=(sender, job.to_dict(), settings, ctx.threads, env,
                                      parent_pid))
        started = time.perf_counter()
        process.start()
        sender.close()  # only the worker writes: its exit then reads as EOF here
        worker = _Worker(index, job, process, receiver, started, pid=process.pid)
        self.workers[index] = worker
        job_started(job.job_id, worker_pid=process.pid).send(ctx.emit)

    def _drain(self, worker: _Worker, ctx: CellContext) -> None:
        """Read every message the worker has sent so far."""
        try:
            while not worker.eof and worker.conn.poll():
                kind, payload = worker.conn.recv()
                if kind == "progress":
                    job_progress(**payload).send(ctx.emit)
                elif kind == "ready":
                    worker.setup_s = payload["setup_s"]
                    worker.ready_at = payload.get("ready_at")
                    worker.prewarmed = payload.get("prewarmed")
                elif kind == "cpu":
                    worker.cpu_s = payload
                elif kind == "pin":
                    worker.pin = payload
                elif kind == "epoch":
                    worker.so_far, worker.spans = payload
                    if self.stopper is not None and worker.stopped is None:
                        self.stopper.epoch(self, worker)
                elif kind == "rung":
                    worker.waiting_at = payload
                    if self.stopper is not None:
                        self.stopper.settle(self)
                elif kind == "result":
                    worker.result, worker.spans = payload
                elif kind == "error":
                    worker.error = payload
                elif kind == "held":
                    worker.held = True
        except (EOFError, OSError):
            worker.eof = True

    def _finish(self, worker: _Worker, ctx: CellContext) -> JobResult:
        """The worker's process ended: its result, or a failed result saying how it died."""
        self._drain(worker, ctx)
        del self.workers[worker.index]
        if (worker.held and (worker.stopped is None or worker.stop_sent)
                and worker.process.is_alive()):
            # the job ended ok, or was stopped at the epoch it waited at; its process waits
            # with the weights for the hand-back after the window, outside the slots: the
            # next job starts now, as before
            self.holding[worker.index] = worker
            code = None
        else:
            if worker.held:
                # a trial stopped by a signal (not at an epoch it waited at): its weights
                # may have run past the decision, so none are handed back; closing the pipe
                # ends the worker's wait
                worker.conn.close()
            worker.process.join()
            code = worker.process.exitcode
            worker.conn.close()
        if self.slots is not None:
            self.slots.done(worker.index)
        result = worker.result
        # A stopped trial is the trial as of the deciding epoch, even when its worker ran
        # on and sent a full result before the SIGTERM reached it (a loaded host): the
        # decision stands, as under seq, and trials_stopped counts it either way.
        if worker.stopped is not None:
            stop, so_far, at = worker.stopped  # stopped early: its result at the decision
            result = dataclasses.replace(so_far, job=worker.job, early_stopped=True,
                                         stop_reason=stop.reason(worker.job.epochs,
                                                                 self.stopper.metric))
            if result.history:
                result.final_train_loss = result.history[-1].get("train_loss")
            result.end = at
            if result.start is not None:
                result.total_time_s = at - result.start
        elif result is None and self.stopper is not None:
            self.stopper.forget(self, worker.index)
        if result is None:
            error = worker.error or _exit_reason(worker.pid, code)
            if self.parent is not None and not self.parent.alive():
                error += f" (the pre-warmed parent {self.parent.pid}: {self.parent.exit})"
            result = _died(worker.job, worker.so_far, error)
        result.job = worker.job
        if result.worker_pid is None:
            result.worker_pid = worker.pid
        if worker.ready_at is not None:  # both on perf_counter: system-wide, monotonic
            result.worker_start_s = worker.ready_at - worker.started
        ended = time.perf_counter()
        worker.info = {"pid": worker.pid, "exit": code, "start_s": result.worker_start_s,
                       "setup_s": worker.setup_s, "prewarmed": worker.prewarmed,
                       "cpu_s": worker.cpu_s, "wall_s": ended - worker.started}
        if worker.device is not None:
            result.device_uuid = worker.device
            # perf_counter stamps of the process's life (system-wide, monotonic): the
            # per-device concurrency of a packing is checked from them.
            worker.info.update(device=worker.device, pin=worker.pin,
                               spawned_at=worker.started, ended_at=ended)
        job_done(result, pid=worker.pid).send(ctx.emit)
        return result

    def hand_back(self, jobs, results, ctx, save, executor):
        """Each held worker, one at a time: digest (and save) in the worker, which then
        exits (engine.executors.mp.worker._hand_back). A worker that cannot answer leaves
        its job's digest empty."""
        backs: dict[str, Any] = {}
        ok = {r.job.job_id: r for r in results if r.status == "ok"}
        for index in sorted(self.holding):
            worker = self.holding[index]
            if worker.job.job_id not in ok:
                continue
            try:
                # the cell's result (a stopped trial's is the deciding epoch's, with its
                # stop) is what the saved model's JSON records
                worker.conn.send(("hand_back", {"save": worker.job.job_id in save,
                                                "attempt_dir": ctx.attempt_dir,
                                                "result": ok[worker.job.job_id]}))
                while worker.conn.poll(HAND_BACK_WAIT_S):
                    kind, payload = worker.conn.recv()
                    if kind == "handed":
                        backs[worker.job.job_id] = payload
                        break
            except (EOFError, OSError):
                pass
            self._release(worker)
        return backs

    def _release(self, worker: _Worker, grace: float = TERM_GRACE_S) -> None:
        """A held worker told to leave (its pipe closed: EOF ends its wait), joined; its
        exit status into the workers' record."""
        with contextlib.suppress(OSError):
            worker.conn.close()
        worker.process.join(grace)
        if worker.process.is_alive():
            with contextlib.suppress(OSError):
                worker.process.terminate()
            worker.process.join(grace)
        worker.info["exit"] = worker.process.exitcode
        self.holding.pop(worker.index, None)

    def _stop_workers(self, grace: float = TERM_GRACE_S) -> None:
        """SIGTERM every live worker, wait ``grace`` s, SIGKILL what is left: MPS clients
        get the chance to leave the server cleanly before any SIGKILL."""
        alive = [w for w in self.workers.values() if w.process.is_alive()]
        for worker in alive:
            with contextlib.suppress(OSError):
                worker.process.terminate()
        deadline = time.monotonic() + grace
        for worker in alive:
            worker.process.join(max(0.0, deadline - time.monotonic()))
        for worker in alive:
            if worker.process.is_alive():
                with contextlib.suppress(OSError):
                    worker.process.kill()
                worker.process.join(grace)
        for worker in self.workers.values():
            with contextlib.suppress(OSError):
                worker.conn.close()
        self.workers.clear()

    # ------------------------------------------------------------------ teardown
    def teardown(self, ctx: CellContext) -> None:
        """Stop leftover workers, then the pre-warmed parent (its workers hold its pipe),
        then quit our MPS daemon and forget its record."""
        for worker in list(self.holding.values()):  # no hand-back asked (or it failed)
            self._release(worker)
        self._stop_workers()
        if self.parent is not None:
            self.info.setdefault("parent", {})["stop"] = self.parent.stop()
            self.parent = None
        self._quit_daemon()
        ctx.group["executor_info"] = self.info

    def _quit_daemon(self) -> None:
        if self.daemon is not None:
            self.info["mps_quit"] = self.daemon.quit()
            if self._record_dir is not None:
                cleanup.release(self._record_dir, MPS_RECORD)
            self.daemon = None
