"""``ray``: Ray actors for ensemble, cv and multi_model; Ray Tune trials for hpo.

The window rule (docs/measurement.md): starting the strategy's job-independent runtime is
setup (``setup_s``, outside ``T_group``); everything done per job is inside.

Setup: a private local Ray runtime with explicit ``num_cpus`` (the cores this process may
use) and ``num_gpus`` (1 on CUDA, the device under test, else 0), without the head
processes a cell never uses, temporary folder on a short path
(``engine.executors.ray.runtime``) — or an existing cluster by ``[options.ray] address``; a
check of the resources Ray reports; each actor's request, from the nodes' resources
(:func:`~engine.executors.ray.runtime.actor_request`); the hub (progress mailbox and start
gate, ``engine.executors.ray.hub``); and the P = min(max_parallel, K) actors: for a
pool, the actors themselves (torch thread count set, plugins and host datasets loaded);
under Tune with ``reuse_actors``, ``ray.tune`` and the first P trials, prepared and waiting
at the start gate.

The group window (``T_group``): pools hand jobs to idle actors in job order; each actor
copies its datasets to the device on first use, then trains. Tune trials take their jobs
when the gate opens; a reused actor runs its next trial in the same process, and without
reuse every trial's process start and set-up is inside.

Teardown: actors and hub killed, ``ray.shutdown()``, then any process that still carries
our tag is stopped and the runtime's logs are copied into the attempt folder.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any

import ray

from engine.define.executor_options import from_table
from engine.define.workloads import JobSpec
from engine.errors import FugueError, first_line
from engine.events import job_done, job_progress, job_started
from engine.executors import RayOptions, packing
from engine.executors.arrivals import wait_until
from engine.executors.base import CellContext, Executor
from engine.executors.ray import runtime as raytools
from engine.executors.ray.hub import Hub
from engine.executors.ray.worker import JobActor, from_snapshot
from engine.measure.spans import union_seconds
from engine.train import isolation
from engine.train.loop import JobResult

#: Seconds the pool actors get to start (process, torch import, plugins, host datasets)
#: before the cell gives up with a message: a request Ray accepted but cannot place, or a
#: worker that cannot start, must not hang the cell.
ACTOR_START_TIMEOUT_S = float(os.environ.get("FUGUE_RAY_START_TIMEOUT_S", "120"))
#: How often the cell looks for finished jobs and drains progress while jobs run, s.
POLL_S = 0.2


def cores() -> int:
    """CPU cores this process may run on (its affinity mask, not the host's count)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def cuda_visible(device) -> str | None:
    """``CUDA_VISIBLE_DEVICES`` for the runtime: the device under test only, so Ray's GPU
    1.0 is that device whatever its index; ``None`` off CUDA."""
    if device.type != "cuda":
        return None
    index = device.index or 0
    visible = [v.strip() for v in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")
               if v.strip()]
    return visible[index] if index < len(visible) else str(index)


class RayExecutor(Executor):
    """Trains jobs on Ray actors or Ray Tune trials; see the module docstring."""

    def __init__(self) -> None:
        self.runtime: raytools.Runtime | None = None
        self.hub = None
        self.actors: list[Any] = []
        self.tune_run = None                            # engine.executors.ray.tune.TuneRun
        self.info: dict[str, Any] = {}
        self.latest: dict[str, dict[str, Any]] = {}   # job_id -> last epoch snapshot
        self.finals: dict[str, dict[str, Any]] = {}   # job_id -> done snapshot
        self.done_emitted: set[str] = set()
        self.spans: dict[str, list] = {}                # job_id -> training (start, end)s
        self.stopped_pids: list[int] = []               # worker pids of early-stopped trials
        self.failure_line = ""
        self.tune = False
        self.reuse = False
        self.parallel = 1
        self.per_actor: dict[str, float] = {}
        self._actors_t0 = 0.0
        #: Packing (``devices``, issue 27): the GPU UUIDs, the jobs at once per device,
        #: and the device each actor sees (what Ray pinned it to).
        self.devices: list[str] = []
        self.per_device = 0
        self.actor_device: dict[Any, str] = {}
        self.n_actors = 0
        self.slots: packing.Slots | None = None
        #: job id → the pool actor that trained it and holds its weights (issue 50)
        self.trained_by: dict[str, Any] = {}
        #: Tune trials (issue 50): job id → the final weights a trial handed off at its end
        #: (``{"records"}`` or ``{"error"}``, engine.executors.ray.worker.hand_off), kept
        #: here until the hand-back; job id → the seconds each hand-off's copy took in its
        #: trial
        self.handed: dict[str, dict[str, Any]] = {}
        self.handoff_s: dict[str, float] = {}

    # -- setup ------------------------------------------------------------------------
    def setup(self, jobs: list[JobSpec], ctx: CellContext) -> None:
        """Start (or join) the runtime, check it, start the hub and the actors (a pool, or
        Tune's first trials when they are reused).

        Raises:
            FugueError: unreachable address, resources not as expected, a request that can
                never be scheduled, actors that do not start in time.
        """
        try:
            self._setup(jobs, ctx)
        except BaseException:
            self.teardown(ctx)  # the cell only tears down after a successful setup
            raise

    def _setup(self, jobs: list[JobSpec], ctx: CellContext) -> None:
        options = from_table(RayOptions, ctx.options)
        self.tune = ctx.scheduler is not None
        self.reuse = self.tune and bool(options.reuse_actors)
        if self.reuse:
            self._check_reuse(jobs, ctx)
        k = len(jobs)
        requested = ctx.max_parallel or ctx.options.get("max_parallel") or k
        self.parallel = max(1, min(int(requested), k))
        device = ctx.settings.device
        address = ctx.options.get("address")
        n_cpus, n_gpus = cores(), (1 if device.type == "cuda" else 0)
        visible = None if address else cuda_visible(device)
        self.devices = list(options.devices or [])
        if self.devices:
            # The runtime gets exactly the packed GPUs (their UUIDs as Ray's GPU ids), and
            # Ray pins each actor to the one it assigns (CUDA_VISIBLE_DEVICES).
            if self.tune or address:
                raise FugueError("ray: devices packs actor pools of the private runtime; "
                                 "not hpo's Tune trials nor a cluster (address)")
            n_gpus, visible = len(self.devices), ",".join(self.devices)
            self._plan_packing(jobs, ctx, options.jobs_per_device)
        attempt_dir = ctx.attempt_dir or Path.cwd()
        self.runtime = raytools.start_runtime(
            attempt_dir=attempt_dir, num_cpus=None if address else n_cpus,
            num_gpus=None if address else n_gpus, address=address,
            cuda_visible=visible)
        ctx.emit("executor", name="ray", temp_dir=self.runtime.temp_dir, tag=self.runtime.tag,
                 address=self.runtime.address)
        # A runtime we started must show exactly our numbers; a cluster must at least have
        # the GPU (its CPUs are checked per request below).
        raytools.check_resources(self.runtime, {"GPU": n_gpus} if address
                                 else {"CPU": n_cpus, "GPU": n_gpus})
        # Each actor's share comes from the nodes' own resources, not from this host's
        # cores: on a cluster of 1-CPU nodes an actor asks for at most 1 CPU.
        nodes = [n["Resources"] for n in ray.nodes() if n.get("Alive")]
        if self.devices:
            # jobs_per_device actors on each device, each a 1/jobs_per_device GPU share: the
            # shares fill every device exactly, so Ray places the same number on each.
            self.per_actor = {"CPU": raytools.share(n_cpus, self.n_actors),
                              "GPU": raytools.share(1.0, self.per_device)}
        else:
            self.per_actor = raytools.actor_request(nodes, self.parallel, gpu=bool(n_gpus))
        raytools.check_schedulable(self.per_actor, self.n_actors or self.parallel, nodes,
                                   "trials" if self.tune else "actors")
        if not self.tune:
            # The pool's actors first: the raylet has one idle worker process per CPU
            # started with the runtime, which they take; the light hub starts beside them.
            self._submit_actors(jobs, ctx)
        # The hub takes no CPU: it must never compete with the jobs for a slot. Its first
        # call costs ~0.15 s here: made now, before the window.
        self.hub = ray.remote(Hub).options(num_cpus=0, max_restarts=0).remote()
        ray.get(self.hub.take.remote())
        self.info.update(self.runtime.info())
        self.info.update(kind="tune" if self.tune else "actors", parallel=self.parallel,
                         per_actor=self.per_actor, threads_per_worker=ctx.threads,
                         resources_available={k: v for k, v in ray.available_resources().items()
                                              if k in ("CPU", "GPU")},
                         runtime_processes=raytools.process_kinds(self.runtime))
        if self.tune:
            self.info["reuse_actors"] = self.reuse
            ctx.group["tune_actors"] = "reused" if self.reuse else "fresh"
            self._start_tune(jobs, ctx)
        else:
            self._await_actors()
            if self.devices:
                self._check_placement(ctx)
        ctx.group.update(scheduler=ctx.scheduler if self.tune else None,
                         max_parallel=self.parallel, executor_info=self.info)
        if not self.tune or self.reuse:
            # The cell loads no data for executors whose workers train; each actor loads its
            # own host copy of the cell's datasets as it starts (in setup): the slowest of
            # those loads. Fresh Tune trials load theirs inside the window (per-job work),
            # so it stays empty there.
            loads = self.info.get("actor_data_load_s") or []
            ctx.group["data_load_s"] = max(loads) if loads else None

    def _check_reuse(self, jobs: list[JobSpec], ctx: CellContext) -> None:
        """Jobs are independent (docs/measurement.md): a model whose every build changes
        shared plugin state (``engine.train.isolation.reuse_refusal``: built twice here,
        in setup) would hand each reused actor's next trial other state than a fresh
        process gives it, so its trials run in fresh actors instead: ``reuse_actors`` false
        in ``executor_info`` with ``reuse_refused`` saying why, ``tune_actors`` fresh (what
        ran), and a warning. The cell key keeps the request."""
        why = isolation.reuse_refusal(jobs)
        if why is None:
            return
        self.reuse = False
        line = (f"ray: reuse_actors refused, every trial runs in a fresh actor: {why} "
                f"at each build, which a reused actor would carry into its next trial")
        self.info["reuse_refused"] = why
        self.info.setdefault("warnings", []).append(line)
        ctx.emit("warning", message=line)

    def _plan_packing(self, jobs: list[JobSpec], ctx: CellContext,
                      per_device: int | None) -> None:
        """Actors and bounds of a packing: job i on device i mod n, ``per_device`` actors on
        each device (at most its jobs), ``max_parallel`` capping the jobs running at once."""
        n = len(self.devices)
        placement = packing.assign(len(jobs), n)
        most = max(placement.count(d) for d in range(n))
        self.per_device = min(per_device or most, most)
        self.n_actors = n * self.per_device
        self.parallel = max(1, min(self.parallel, self.n_actors))
        self.slots = packing.Slots(len(jobs), n, self.per_device, self.parallel)
        on_gpu = ctx.settings.device.type == "cuda"
        self.info["packing"] = {"devices": self.devices, "jobs_per_device": self.per_device,
                                "actors": self.n_actors,
                                "placement": [self.devices[d] for d in placement]}
        if not on_gpu:
            ctx.emit("warning", message=f"ray devices on a {ctx.settings.device} cell: the "
                     "actors are pinned to their GPUs but train on the CPU")
        emptied = packing.group_columns(ctx.group, self.devices, self.per_device, on_gpu,
                                        ctx.gpu_uuid)
        if emptied:
            self.info["packing"]["gpu_columns"] = emptied

    def _check_placement(self, ctx: CellContext) -> None:
        """Each actor's device as Ray pinned it; every device must hold ``per_device``.

        Raises:
            FugueError: Ray placed the actors otherwise (one line with the counts).
        """
        seen = self.info.get("actor_visible") or []
        self.actor_device = dict(zip(self.actors, seen, strict=True))
        counts = {d: seen.count(d) for d in self.devices}
        if any(c != self.per_device for c in counts.values()) or len(seen) != self.n_actors:
            raise FugueError(f"ray: devices: Ray pinned the {self.n_actors} actors as "
                             f"{seen}, not {self.per_device} on each of {self.devices}")
        if any(self.info.get("actor_cuda_initialized") or []):
            raise FugueError("ray: devices: an actor had initialised CUDA before its pin")

    def _start_tune(self, jobs: list[JobSpec], ctx: CellContext) -> None:
        """Build the Tune run (``ray.tune`` imported here: job-independent); with
        ``reuse_actors``, start it and wait until the first P trials' actors are prepared
        and waiting at the start gate."""
        from engine.executors.ray.tune import TuneRun

        # Tune's experiment folder: the short temporary folder of a local runtime (its logs
        # are kept with the attempt); for a cluster, the attempt folder.
        storage = Path(self.runtime.temp_dir or ctx.attempt_dir or Path.cwd()) / "tune"
        if self.runtime.temp_dir is None and ctx.attempt_dir is not None:
            storage = Path(ctx.attempt_dir) / "tune"
        self.tune_run = TuneRun(jobs, ctx, hub=self.hub, concurrent=self.parallel,
                                resources=self.per_actor, threads=ctx.threads,
                                settings=ctx.settings, storage=storage, info=self.info,
                                reuse=self.reuse,
                                datasets=list(dict.fromkeys(j.dataset for j in jobs)))
        if not self.reuse:
            return
        t0 = time.perf_counter()
        self.tune_run.start()
        ready: list[dict[str, Any]] = []
        deadline = time.monotonic() + ACTOR_START_TIMEOUT_S
        while len(ready) + self.tune_run.settled.count < self.parallel:
            if not self.tune_run.running:
                break  # Tune ended before the window: run() collects what happened
            if time.monotonic() > deadline:
                raise FugueError(f"ray: {self.parallel} Tune trial actor(s) of "
                                 f"{self.per_actor} were not ready within "
                                 f"{ACTOR_START_TIMEOUT_S:g} s (FUGUE_RAY_START_TIMEOUT_S)")
            ready += [payload for kind, _, payload in ray.get(self.hub.take.remote())
                      if kind == "ready"]
            time.sleep(0.05)
        self.info.update(actor_start_s=round(time.perf_counter() - t0, 3),
                         actor_pids=[r["pid"] for r in ready],
                         actor_threads=[r["threads"] for r in ready],
                         actor_data_load_s=[round(r["data_load_s"], 3) for r in ready])

    def _start_actors(self, jobs: list[JobSpec], ctx: CellContext) -> None:
        """Start the pool's P actors and wait until each is prepared (see
        :meth:`_await_actors`)."""
        self._submit_actors(jobs, ctx)
        self._await_actors()

    def _submit_actors(self, jobs: list[JobSpec], ctx: CellContext) -> None:
        datasets = list(dict.fromkeys(j.dataset for j in jobs))
        self._actors_t0 = time.perf_counter()
        self.actors = [self._new_actor(datasets, ctx)
                       for _ in range(self.n_actors or self.parallel)]

    def _await_actors(self) -> None:
        """Wait for the submitted actors to be prepared (imports, plugins, host datasets).

        Raises:
            FugueError: an actor failed to start, or they were not all up within
                ``FUGUE_RAY_START_TIMEOUT_S``.
        """
        try:
            ready = ray.get([a.ready.remote() for a in self.actors],
                            timeout=ACTOR_START_TIMEOUT_S)
        except ray.exceptions.GetTimeoutError:
            raise FugueError(f"ray: {self.parallel} actor(s) of {self.per_actor} did not start "
                             f"within {ACTOR_START_TIMEOUT_S:g} s (FUGUE_RAY_START_TIMEOUT_S)"
                             ) from None
        except ray.exceptions.RayError as exc:
            raise FugueError(f"ray: an actor failed to start: "
                             f"{str(exc).strip().splitlines()[-1][:300]}") from None
        self.info.update(actor_start_s=round(time.perf_counter() - self._actors_t0, 3),
                         actor_pids=[r["pid"] for r in ready],
                         actor_threads=[r["threads"] for r in ready],
                         actor_data_load_s=[round(r["data_load_s"], 3) for r in ready])
        if self.devices:
            self.info.update(actor_visible=[r.get("visible") for r in ready],
                             actor_cuda_initialized=[r.get("cuda_initialized")
                                                     for r in ready])

    def _new_actor(self, datasets: list[str], ctx: CellContext):
        cls = ray.remote(JobActor).options(
            num_cpus=self.per_actor["CPU"], num_gpus=self.per_actor["GPU"], max_restarts=0,
            max_task_retries=0)
        return cls.remote(ctx.threads, datasets, ctx.settings, str(ctx.settings.device))

    # -- progress ---------------------------------------------------------------------
    def _drain(self, ctx: CellContext) -> None:
        """Move the workers' messages into the events file (only the cell writes it)."""
        if self.hub is None:
            return
        for kind, job_id, payload in ray.get(self.hub.take.remote()):
            if kind == "started":
                job_started(job_id, worker_pid=payload).send(ctx.emit)
            elif kind == "progress":
                job_progress(**payload).send(ctx.emit)
            elif kind == "epoch":
                self.latest[job_id] = payload
            elif kind == "done":
                self.finals[job_id] = payload
            elif kind == "held":
                self.handoff_s[job_id] = float(payload.pop("copy_s", 0.0))
                self.handed[job_id] = payload

    def _job_done(self, ctx: CellContext, result: JobResult) -> None:
        if result.job.job_id in self.done_emitted:
            return
        self.done_emitted.add(result.job.job_id)
        job_done(result, early_stopped=result.early_stopped,
                 stop_reason=result.stop_reason or None).send(ctx.emit)

    # -- the group window -------------------------------------------------------------
    def run(self, jobs: list[JobSpec], ctx: CellContext) -> list[JobResult]:
        t0 = time.perf_counter()
        results = self._run_tune(jobs, ctx) if self.tune else self._run_pool(jobs, ctx)
        # This method's span on perf_counter (system-wide monotonic): inside the cell's
        # group window by microseconds; what a check of the window rule compares the
        # workers' own timestamps with.
        self.info["run_window"] = [t0, time.perf_counter()]
        for result in results:
            self._job_done(ctx, result)
        # Jobs overlap, so the group's training wall time is the union of the jobs' epoch
        # training spans (docs/measurement.md, ray); a failed group measured nothing.
        spans = [s for job_spans in self.spans.values() for s in job_spans]
        wall = union_seconds(spans) if spans else 0.0
        self.info["train_wall_s"] = round(wall, 6)
        ok = all(r.status == "ok" for r in results)
        failed = [r for r in results if r.status != "ok"]
        self.failure_line = (f"ray: {len(failed)}/{len(results)} jobs failed; first: "
                             f"{failed[0].job.job_id}: {failed[0].error}" if failed else "")
        ctx.group["train_throughput_sps"] = (sum(r.samples for r in results) / wall
                                             if ok and wall > 0 else None)
        return results

    def _run_pool(self, jobs: list[JobSpec], ctx: CellContext) -> list[JobResult]:
        if self.devices:
            return self._run_packed(jobs, ctx)
        results: list[JobResult | None] = [None] * len(jobs)
        todo = list(range(len(jobs)))
        idle = list(self.actors)
        running: dict[Any, tuple[int, Any]] = {}  # object ref -> (job index, actor)
        datasets = list(dict.fromkeys(j.dataset for j in jobs))
        replaced = 0
        # A stream cell (issue 51): a job is admitted FIFO, no earlier than its arrival
        # (seconds after the window opened), onto an idle actor (at most max_parallel run);
        # with nothing running and the next job not yet arrived the cell sleeps with a
        # ``waiting`` heartbeat, as mp's does. Admission: just before its task is submitted;
        # completion: when the cell sees its result (the marks mp takes around a process).
        arrivals = ctx.arrivals
        origin = ctx.stream_origin if ctx.stream_origin is not None else time.perf_counter()
        admitted: dict[int, float] = {}
        peak = 0  # the most tasks in service at once: the row's max_parallel (measured)

        def arrived(index: int) -> bool:
            return arrivals is None or time.perf_counter() - origin >= arrivals[index]

        while todo or running:
            if arrivals is not None and todo and idle and not running:
                head = todo[0]
                wait_until(origin + arrivals[head], jobs[head].job_id, arrivals[head], ctx.emit)
            while todo and idle and arrived(todo[0]):
                i, actor = todo.pop(0), idle.pop(0)
                admitted[i] = time.perf_counter()
                running[actor.train.remote(jobs[i].to_dict(), self.hub)] = (i, actor)
            peak = max(peak, len(running))
            timeout = POLL_S
            if arrivals is not None and todo and idle:  # wake for the next arrival
                timeout = max(0.0, min(POLL_S, origin + arrivals[todo[0]] - time.perf_counter()))
            ready, _ = ray.wait(list(running), num_returns=1, timeout=timeout)
            ended = time.perf_counter()
            self._drain(ctx)
            for ref in ready:
                i, actor = running.pop(ref)
                if arrivals is not None:
                    ctx.stream_marks[jobs[i].job_id] = (admitted[i], ended)
                try:
                    results[i], self.spans[jobs[i].job_id] = ray.get(ref)
                    idle.append(actor)
                    self.trained_by[jobs[i].job_id] = actor  # holds its weights
                except ray.exceptions.RayError as exc:
                    # The actor's process died (a crash no Python handler saw): the job
                    # failed, a fresh actor takes the slot and the rest go on.
                    results[i] = JobResult(jobs[i], status="failed",
                                           error=f"ray actor died: {first_line(exc)}")
                    ray.kill(actor, no_restart=True)
                    self.actors.remove(actor)
                    fresh = self._new_actor(datasets, ctx)
                    self.actors.append(fresh)
                    idle.append(fresh)
                    replaced += 1
                self._job_done(ctx, results[i])
        self._drain(ctx)
        self.info["actors_replaced"] = replaced
        # measured, as mp's and unified_model's: a stream served one job at a time on a
        # pool of 2 said 2 (the pool's size, which stays in executor_info's actors)
        ctx.group["max_parallel"] = peak
        return [r for r in results if r is not None]

    def _run_packed(self, jobs: list[JobSpec], ctx: CellContext) -> list[JobResult]:
        """The pool under packing: the next job whose device has a free slot
        (``packing.Slots``) goes to an idle actor pinned to that device. An actor that dies
        is replaced by a fresh one, which takes the freed GPU share: the same device."""
        results: list[JobResult | None] = [None] * len(jobs)
        idle = {d: [a for a in self.actors if self.actor_device[a] == d] for d in self.devices}
        running: dict[Any, tuple[int, Any]] = {}
        datasets = list(dict.fromkeys(j.dataset for j in jobs))
        replaced = 0
        while self.slots.waiting() or running:
            while (i := self.slots.next()) is not None:
                device = self.devices[self.slots.placement[i]]
                actor = idle[device].pop(0)
                running[actor.train.remote(jobs[i].to_dict(), self.hub)] = (i, actor)
            ready, _ = ray.wait(list(running), num_returns=1, timeout=POLL_S)
            self._drain(ctx)
            for ref in ready:
                i, actor = running.pop(ref)
                device = self.actor_device[actor]
                try:
                    results[i], self.spans[jobs[i].job_id] = ray.get(ref)
                    idle[device].append(actor)
                    self.trained_by[jobs[i].job_id] = actor  # holds its weights
                except ray.exceptions.RayError as exc:
                    results[i] = JobResult(jobs[i], status="failed",
                                           error=f"ray actor died: {first_line(exc)}")
                    ray.kill(actor, no_restart=True)
                    self.actors.remove(actor)
                    fresh = self._new_actor(datasets, ctx)
                    self.actors.append(fresh)
                    self.actor_device[fresh] = device
                    idle[device].append(fresh)
                    replaced += 1
                results[i].device_uuid = device
                self.slots.done(i)
                self._job_done(ctx, results[i])
        self._drain(ctx)
        self.info["actors_replaced"] = replaced
        return [r for r in results if r is not None]

    def _run_tune(self, jobs: list[JobSpec], ctx: CellContext) -> list[JobResult]:
        run = self.tune_run
        if self.reuse:
            ray.get(self.hub.open.remote())  # the prepared trials take their jobs now
        else:
            run.start()  # fresh trial processes, all inside the window
        by_id = {j.job_id: j for j in jobs}
        while True:
            running = run.running
            self._drain(ctx)
            run.sha_step(self.hub, self.latest, self.finals)
            for job_id in list(self.finals):
                self._job_done(ctx, from_snapshot(by_id[job_id], self.finals[job_id]))
            if not running:
                break
            run.wait(POLL_S)
        results = run.results(self.latest, self.finals)
        if run.name != "fifo":  # the group's count of early stops (issue 25)
            ctx.group["trials_stopped"] = sum(1 for r in results if r.early_stopped)
        self.spans = {job_id: snap.get("train_spans", [])
                      for job_id, snap in self.latest.items()}
        # Checked in teardown (outside T_group): Tune stops those actors asynchronously.
        self.stopped_pids = [r.worker_pid for r in results if r.early_stopped and r.worker_pid]
        return results

    def hand_back(self, jobs, results, ctx, save, executor):
        """Pool actors: each ok job's weights digested (and saved) in the actor that
        trained it, one job at a time. Tune trials (:meth:`_hand_back_tune`): here, from
        what each trial handed off at its end."""
        if self.tune:
            return self._hand_back_tune(results, ctx, save)
        backs: dict[str, Any] = {}
        for result in results:
            actor = self.trained_by.get(result.job.job_id)
            if actor is None or result.status != "ok":
                continue
            try:
                back = ray.get(actor.hand_back.remote(
                    result.job.to_dict(), result, result.job.job_id in save,
                    None if ctx.attempt_dir is None else str(ctx.attempt_dir)))
            except ray.exceptions.RayError:  # the actor died since: no digest
                continue
            if back is not None:
                backs[result.job.job_id] = back
        return backs

    def _hand_back_tune(self, results, ctx, save) -> dict[str, Any]:
        """Tune trials: a trial's process ends (or takes the next trial) inside the window,
        so each trial handed its final weights off to the cell as it ended — completed,
        stopped by the scheduler (its weights at the stopping epoch) or at a sha rung
        (``engine.executors.ray.worker.hand_off``: a host copy, timed in the trial). Here,
        after the window, each ok trial's weights are rebuilt, digested and saved one at a
        time and let go. ``executor_info.tune_handoff_s``: the hand-offs' copies (seconds:
        sum and largest, and how many trials), inside the window; ``handoff_errors``:
        trials whose weights could not be handed off."""
        from engine.models.hand_back import hand_back_one
        from engine.models.transfer import from_records

        self._drain(ctx)  # a hand-off that reached the hub as Tune ended
        if self.handoff_s:
            self.info["tune_handoff_s"] = {"sum": round(sum(self.handoff_s.values()), 6),
                                           "max": round(max(self.handoff_s.values()), 6),
                                           "trials": len(self.handoff_s)}
        errors = {j: p["error"] for j, p in self.handed.items() if "error" in p}
        if errors:
            self.info["handoff_errors"] = errors
        backs: dict[str, Any] = {}
        attempt = None if ctx.attempt_dir is None else str(ctx.attempt_dir)
        for result in results:
            payload = self.handed.pop(result.job.job_id, None)
            if payload is None or "records" not in payload or result.status != "ok":
                continue
            state = from_records(payload.pop("records"))
            backs[result.job.job_id] = hand_back_one(result.job, result, state, "ray",
                                                     result.job.job_id in save, attempt)
            del state
        self.handed.clear()
        return backs

    # -- teardown ---------------------------------------------------------------------
    def teardown(self, ctx: CellContext) -> None:
        """Kill actors and hub, shut Ray down, stop anything of ours that is left."""
        if self.tune_run is not None and self.tune_run.running:
            # Setup gave up with Tune's trials waiting at the start gate: Tune ends them
            # (none takes its job) before the runtime goes.
            self.tune_run.abort()
        if self.tune and self.runtime is not None:
            self.info["stopped_trial_pids_alive"] = _alive(self.stopped_pids)
        for actor in [*self.actors, *([self.hub] if self.hub is not None else [])]:
            try:
                ray.kill(actor, no_restart=True)
            except Exception:  # already dead, or Ray already down
                pass
        self.actors, self.hub = [], None
        # Killed through Ray, while it is up, a worker is gone in tens of ms; shut down
        # first, it would exit by itself and spend seconds tearing torch down.
        _gone(self.info.get("actor_pids") or [], raytools.EXIT_WAIT_S)
        leftover = raytools.shutdown(self.runtime, ctx.attempt_dir or Path.cwd())
        if self.runtime is not None:
            self.info["leftover_pids_stopped"] = len(leftover)
        self.runtime = None
        if self.failure_line:
            # Ray's driver prints worker deaths to the log as they happen; once it is shut
            # down, the log's last line (what the runner reports) is ours again.
            print(self.failure_line, file=sys.stderr, flush=True)


def _gone(pids: list[int], wait_s: float) -> None:
    """Wait up to ``wait_s`` seconds for ``pids`` to exit."""
    import psutil

    procs = []
    for pid in pids:
        try:
            procs.append(psutil.Process(pid))
        except psutil.Error:
            continue
    psutil.wait_procs(procs, timeout=wait_s)


def _alive(pids: list[int], wait_s: float = 10.0) -> list[int]:
    """The pids of ``pids`` still running after up to ``wait_s`` seconds (Tune stops a
    stopped trial's actor asynchronously)."""
    import psutil

    deadline = time.monotonic() + wait_s
    alive = [p for p in pids if psutil.pid_exists(p)]
    while alive and time.monotonic() < deadline:
        time.sleep(0.1)
        alive = [p for p in alive if psutil.pid_exists(p)]
    return alive
