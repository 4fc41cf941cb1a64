"""``unified_model``: every job of the cell in this process, identical models stacked into
one vectorised module (``engine.executors.unified``), each member trained exactly as ``seq`` would
train it alone.

Run: refuse tasks/optimizers without a stacked form (by name, before any training) →
bucket the jobs and cut them into chunks of at most ``max_parallel`` jobs
(``engine.executors.unified.plan``) → per chunk, build every bucket's members (job seed before each
build), verify (fingerprint + one-step probe), probe compile when asked for, then train the
chunk's buckets together, interleaved per step round-robin over the buckets with active
members (``engine.executors.unified.interleave.Interleave``) → results in job order.
Chunks train one after another; each dataset is copied to the device once
(``ctx.datasets``).

A stream cell (``ctx.arrivals``, issue 52) has no chunks: one interleaved loop serves the
whole stream, each job admitted as it arrives and joining the running bucket of its
structure at a step boundary, or starting its own (``engine.executors.unified.serve``,
``engine.executors.unified.join``); ``max_parallel`` bounds the members training at once.

Switches (campaign ``[options.unified_model]``, ``--option unified_model.KEY=VALUE``;
``--features``, ``--sweep``, ``--max-parallel`` on ``fugue-tui run``):

* ``features`` (``vf:1,s:1,fl:0`` by default; the ablation sweep sets it per rung):
  ``vf`` vectorised forward (0 trains every bucket eagerly), ``s`` one CUDA stream per
  bucket, ``fl`` fused loss. What runs is ``engine.executors.unified.features.effective_features``
  of (requested, device, compile mode, compile probe result);
* compile: the cell's ``compile_mode`` (campaign ``compile``/``compile_mode``), probed per
  bucket on its first batch, falling back to eager with the reason;
* ``baseline`` (bool): every extension and compile off (rung A, the paper's model);
* ``retire``: ``remove`` (default: finished members leave their stack) or ``mask``;
* ``max_parallel`` (chunk size), ``verify``, ``data_order``, ``kernels``,
  ``compile_backend`` (``inductor``; another torch.compile backend for debugging).

Group columns set here: ``features`` (effective; ``vf`` 1 only if every bucket ran
vectorised), ``features_reason``, ``eager_buckets`` (``n/m: <first reason>``), ``max_parallel``
(largest chunk), ``compile_mode`` (what ran), ``compile_warmup_s`` (the buckets' compile
probes, wall time), ``train_throughput_sps`` (samples ÷ the chunks' training-step wall
time) and ``executor_info`` (the plan).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from engine.define.executor_options import from_table
from engine.define.workloads import JobSpec
from engine.errors import ConfigError
from engine.executors import UnifiedOptions
from engine.executors.base import CellContext, Executor
from engine.executors.step_observer import StepObserver
from engine.executors.unified.features import (
    BASELINE_FEATURES,
    DEFAULT_FEATURES,
    FLAGS,
    eager_buckets,
    eager_buckets_text,
    effective_features,
    features_string,
    requested_features,
)
from engine.executors.unified.parity import COMPILED, IDENTICAL
from engine.registry import OPTIMIZERS
from engine.results.parity_contract import weakest
from engine.train.loop import JobResult, final_state

if TYPE_CHECKING:  # bucket imports torch at module level; the executor loads it in run()
    from engine.executors.unified.bucket import BucketRun

__all__ = ["UnifiedExecutor", "DEFAULT_FEATURES", "effective_features", "features_string"]


def _requested(ctx: CellContext, options: UnifiedOptions) -> dict[str, int]:
    text = getattr(ctx, "features", None) or options.features or DEFAULT_FEATURES
    try:
        return requested_features(text)
    except ValueError as exc:
        raise ConfigError(f"unified_model features: {exc}") from None


class UnifiedExecutor(Executor):
    """Trains the cell's jobs in stacked buckets; see the module docstring."""

    #: When a list, every bucket step of every chunk is appended as (bucket index, job ids
    #: of the members stepped): the round-robin order, for tests.
    trace: list | None = None

    def run(self, jobs: list[JobSpec], ctx: CellContext) -> list[JobResult]:
        from engine.executors.unified.bucket import BucketRun
        from engine.executors.unified.bucket_build import RETIRE
        from engine.executors.unified.plan import Plan, chunks, make_buckets
        from engine.parts import tasks as task_lib

        # The declared defaults (engine.executors.UnifiedOptions) for what the table leaves out.
        options = from_table(UnifiedOptions, ctx.options)
        want = _requested(ctx, options)
        compile_mode = ctx.settings.compile_mode
        baseline = bool(options.baseline)
        notes = []
        if baseline:
            want = requested_features(BASELINE_FEATURES)
            if compile_mode != "off":
                notes.append(f"baseline = true: compile {compile_mode} not applied")
            compile_mode = "off"
        settings = dataclasses.replace(ctx.settings, compile_mode=compile_mode)
        device_type = settings.device.type
        max_parallel = getattr(ctx, "max_parallel", None) or options.max_parallel
        verify = bool(options.verify)
        data_order = options.data_order or UnifiedOptions.data_order
        kernels = options.kernels or UnifiedOptions.kernels
        retire = options.retire or UnifiedOptions.retire
        if retire not in RETIRE:
            raise ConfigError(f"unified_model retire: expected one of {', '.join(RETIRE)}, "
                              f"got {retire!r}")
        backend = options.compile_backend or UnifiedOptions.compile_backend
        # Known before any training: everything but the compile probe's result.
        features, reason = effective_features(want, device_type, compile_mode, None)

        tasks = {job.job_id: task_lib.resolve_task(job.task, job.dataset, where=job.job_id).name
                 for job in jobs}
        stream = getattr(ctx, "arrivals", None) is not None
        # A stream cell (issue 52) refuses what a batch cell of the same jobs would: a
        # structure with two jobs or more may stack, whenever they arrive.
        buckets = make_buckets(jobs, tasks, None if stream else max_parallel)
        if not features["vf"]:
            for b in buckets:
                if b.route == "vectorised":
                    b.route, b.check, b.reason = "eager", "off", "vf:0 (vectorised forward off)"
        _refuse_unstackable(buckets, tasks)
        plan = Plan([] if stream else buckets, features_string(features))
        if stream:
            plan.stream_jobs = len(jobs)
            plan.notes.append("stream: each job admitted as it arrives; a job joins the "
                              "running bucket of its structure at a step boundary, else "
                              "starts its own (engine.executors.unified.serve)")
            if data_order == "shared":
                plan.notes.append("data_order = shared not applied to a stream: per member "
                                  "(a joining member is at another epoch)")
                data_order = "per_member"
        plan.notes.extend(notes)
        if reason:
            plan.notes.append(reason)
        if compile_mode != "off":
            plan.notes.append(f"compile {compile_mode} ({backend}): probed per bucket on its "
                              "first batch")
        if retire == "mask":
            plan.notes.append("retire = mask: finished members stay in their stack, frozen")
        print(plan.text(), flush=True)  # before any training (checks still pending)

        results: dict[str, JobResult] = {}
        train_clock = 0.0
        samples = 0
        largest = 0
        warmup = 0.0
        chunk_features: list[tuple[dict[str, int], str | None]] = []
        self.runs = []  # the bucket runs, for inspection (tests: stack.forward_calls)
        self.interleaves = []
        #: (start, end) of the parity probes on perf_counter: outside T_group (the cell
        #: subtracts them, CellContext.outside_window; docs/measurement.md)
        outside: list[tuple[float, float]] = []
        self.outside = outside

        def decide_streams(runs: list[BucketRun], stream: bool = False) -> bool:
            # a stream cell decides before any bucket exists: its buckets compile as they
            # come, so it counts on compile running (no side streams under CUDA graphs)
            ok = ((True if stream else any(r.compile_mode != "off" for r in runs))
                  if compile_mode != "off" else None)
            chunk_features.append(effective_features(want, device_type, compile_mode, ok))
            return bool(chunk_features[-1][0]["s"])

        # no early stopping in a stream cell (as under seq and mp)
        stopper = None if stream else self._stopper(jobs, ctx, options, chunks(buckets))

        def bucket_run(bucket) -> BucketRun:
            run = BucketRun(bucket, ctx.datasets(bucket.jobs[0].dataset), settings, ctx.emit,
                            fused=bool(features["fl"]), verify=verify, data_order=data_order,
                            exact_kernels=kernels == "exact",
                            announce=None if stream else
                            (lambda b: print("  decided: " + b.line(), flush=True)),
                            retire=retire, compile_backend=backend, outside=outside,
                            probe_parity=not stream)
            run.stopper = stopper
            return run

        if stream:
            interleave, runs, largest = self._serve(
                jobs, ctx, tasks, bucket_run, plan, settings, bool(features["vf"]),
                max_parallel, results, lambda runs: decide_streams(runs, stream=True))
            train_clock = interleave.train_clock_s
            samples = sum(r.samples for r in runs)
            warmup = self._settle(runs, compile_mode)
            release(runs)  # what the last buckets hold beyond their members' final weights
        finished: list[BucketRun] = []
        for part in [] if stream else chunks(buckets):
            # max_parallel bounds what trains at once, so it must bound memory too: the
            # previous chunk's models, optimizers and stacks go before the next is built
            # (they were kept until the cell ended: a cell in chunks of 8 grew past a
            # single stack of 8, docs/profiles.md "Chunks")
            release(finished)
            interleave, runs = self._train_chunk(part, bucket_run, settings, decide_streams,
                                                 results, getattr(ctx, "step_observer", None))
            train_clock += interleave.train_clock_s
            samples += sum(r.samples for r in runs)
            largest = max(largest, sum(len(b.jobs) for b in part))
            warmup += self._settle(runs, compile_mode)
            finished = runs
        _keep_outside(outside, results.values(), ctx)

        if chunk_features:  # the effective features over every chunk that trained
            features = {f: min(cf[0][f] for cf in chunk_features) for f in FLAGS}
            reasons = list(dict.fromkeys(cf[1] for cf in chunk_features if cf[1]))
            reason = "; ".join(reasons) or None
        # vf as ran: 1 only if every bucket that trained (whose route was decided) ran
        # vectorised; a bucket sent eager (by its checks, or a single member) makes it 0
        eager = eager_buckets([(b.route, b.reason or b.check) for b in plan.buckets
                               if b.check != "pending"])
        if eager[0]:  # (features are effective already: the only new reasons are vf's, fl's)
            features, why = effective_features(features, device_type, eager=eager)
            reason = "; ".join(r for r in (reason, why) if r) or None
        plan.features = features_string(features)
        group: dict[str, Any] | None = getattr(ctx, "group", None)
        if group is not None:
            group.update(self._group_facts(plan, features, reason, largest, compile_mode,
                                           warmup, samples, train_clock, results))
            if eager[1]:  # "n/m: <first reason>", "0/m" all vectorised; missing: no bucket
                group["eager_buckets"] = eager_buckets_text(eager)
            # a bucket that promises nothing (eager over shared outside state) leaves
            # nothing to promise for the group: weakest() alone would skip it
            trained = [b for b in plan.buckets if b.check != "pending"]
            group["parity_contract"] = (
                None if any(b.parity_contract is None for b in trained)
                else weakest(b.parity_contract for b in plan.buckets))
            info = dict(group.get("executor_info") or {})
            info["outside_window_s"] = round(sum(b - a for a, b in outside), 4)
            group["executor_info"] = info
            if stopper is not None:
                info = dict(group.get("executor_info") or {})
                info["early_stop"] = stopper.info(int(options.grace_period),
                                                  int(options.reduction_factor))
                group.update(scheduler=stopper.name, trials_stopped=len(stopper.stops),
                             executor_info=info)
        if stopper is not None:
            stopper.log.write(getattr(ctx, "attempt_dir", None))
        self.plan = plan
        self.train_clock_s = train_clock
        return [results[job.job_id] for job in jobs]

    @staticmethod
    def _stopper(jobs: list[JobSpec], ctx: CellContext, options: UnifiedOptions,
                 parts: list[list[Any]]):
        """The cell's early-stopping decisions (``engine.executors.unified.stopping``), or
        None under fifo.

        Raises:
            ConfigError: sha with the trials in several chunks (a rung would wait for a
                chunk that trains only after it).
        """
        from engine.executors.seq import task_metric
        from engine.executors.unified.stopping import MemberStopper
        from engine.train import early_stop

        name = getattr(ctx, "scheduler", None) or "fifo"
        if name == "fifo":
            return None
        if name == "sha" and len(parts) > 1:
            raise ConfigError(f"unified_model: scheduler sha needs every trial in one chunk "
                              f"(max_parallel >= {len(jobs)}, the cell's trials); got "
                              f"{len(parts)} chunks")
        grace, factor = int(options.grace_period), int(options.reduction_factor)
        metrics = {task_metric(j, ctx) for j in jobs}
        metric, mode = early_stop.objective(metrics.pop() if len(metrics) == 1 else "accuracy")
        max_t = max(j.epochs for j in jobs)
        # Chunks train one after another: at most the largest chunk's trials run at once
        # (max_parallel = 1: one trial at a time, as seq; the warning says what that means).
        concurrent = max((sum(len(b.jobs) for b in part) for part in parts), default=1)
        for line in early_stop.pruning_warnings(name, len(jobs), concurrent, max_t, grace,
                                                factor, who="unified_model"):
            ctx.emit("warning", message=line)
        return MemberStopper(name, jobs, metric, mode, grace, factor, seed=ctx.seed)

    @staticmethod
    def _settle(runs: list[BucketRun], compile_mode: str) -> float:
        """After training: each bucket's plan takes its re-stacks, what was compiled and its
        final ``parity_contract``; returns the buckets' compile warm-up."""
        warmup = 0.0
        for run in runs:
            b = run.plan
            b.restacks = list(run.restacks)
            if compile_mode != "off" and run.routed:
                b.compile = (run.compile_mode if run.compile_mode != "off"
                             else f"off ({run.compile_reason or 'not probed'})")
                b.compile_warmup_s = run.compile_warmup_s
                warmup += run.compile_warmup_s
            if b.restacks and b.parity_probe and b.parity_probe["outcome"] == IDENTICAL:
                # the probe spoke for the stack it was built at: a re-stack to fewer
                # members runs the batched kernels on other shapes
                b.parity_contract = b.parity_probe["bound"]
            if run.compile_mode != "off" and b.parity_contract is not None:
                b.parity_contract = weakest([b.parity_contract, COMPILED])
        return warmup

    def _serve(self, jobs, ctx, tasks, bucket_run, plan, settings, vectorise: bool,
               max_parallel, results: dict[str, JobResult], decide_streams):
        """A stream cell (issue 52): one interleaved loop for the whole stream, its
        admissions and joins by :class:`~engine.executors.unified.serve.StreamServe`.
        Returns the interleave, every bucket run and the most members trained at once."""
        from engine.executors.unified.interleave import Interleave
        from engine.executors.unified.serve import StreamServe

        serve = StreamServe(jobs, ctx, tasks, bucket_run, plan, vectorise=vectorise,
                            max_parallel=max_parallel, release=release)
        interleave = Interleave([], settings.device, streams=decide_streams, trace=self.trace,
                                observer=getattr(ctx, "step_observer", None),
                                feed=serve.feed, interrupt=serve.interrupt)
        interleave.run()
        serve.marks()
        results.update(serve.results)
        self.runs.extend(serve.runs)
        self.interleaves.append(interleave)
        self.serve = serve
        return interleave, serve.runs, serve.peak

    def _train_chunk(self, part, bucket_run, settings, decide_streams,
                     results: dict[str, JobResult], observer: StepObserver | None = None):
        """Build the chunk's buckets (their results land in ``results``) and train them
        interleaved step by step, told to ``observer`` (the context's ``step_observer``);
        returns the :class:`Interleave` that ran them and the chunk's bucket runs (all of
        them: the interleave keeps only those that trained)."""
        from engine.executors.unified.interleave import Interleave

        runs = []
        for bucket in part:
            run = bucket_run(bucket)
            for result in run.build():
                results[result.job.job_id] = result
            runs.append(run)
        stopper = next((r.stopper for r in runs if r.stopper is not None), None)
        if stopper is not None:  # trials that failed while building: no rung waits for them
            for result in results.values():
                if result.status != "ok":
                    stopper.forget_job(result.job.job_id)
        interleave = Interleave(runs, settings.device, streams=decide_streams, trace=self.trace,
                                observer=observer)
        interleave.run()
        if stopper is not None:
            stopper.abandon()
        self.runs.extend(runs)
        self.interleaves.append(interleave)
        return interleave, runs

    def final_states(self, jobs, results, ctx):
        return final_states(getattr(self, "runs", []), jobs)

    def _group_facts(self, plan, features: dict[str, int], reason: str | None, largest: int,
                     compile_mode: str, warmup: float, samples: int, train_clock: float,
                     results: dict[str, JobResult]) -> dict[str, Any]:
        """The group columns this executor decides: the effective features and why, the
        largest chunk trained at once, what was compiled (and its warm-up, outside the
        training clock), the stacked training throughput (only when every job ended ok)."""
        compiled = [r.compile_mode for r in self.runs if r.compile_mode != "off"]
        return dict(features=features_string(features), features_reason=reason,
                    max_parallel=largest, compile_mode=compiled[0] if compiled else "off",
                    compile=bool(compiled),
                    compile_warmup_s=warmup if compile_mode != "off" else None,
                    train_throughput_sps=samples / train_clock if train_clock > 0
                    and all(r.status == "ok" for r in results.values()) else None,
                    executor_info=plan.info())


def final_states(runs: list[BucketRun], jobs: list[JobSpec]):
    """Each ok member's final weights, member by member in job order, for the hand-back
    (``engine.models.hand_back``): its module's state (synced with the stack at its last
    epoch or its stop; a retired member has left its stack, so the stack's
    ``member_state`` no longer holds it) as views, no copy. The previous member's state is
    dropped here before the next is produced: at most one is handed out at a time."""
    members = {m.job.job_id: m for run in runs for m in run.members}
    for job in jobs:
        m = members.get(job.job_id)
        if m is None or m.result.status != "ok":
            continue
        state = m.final if m.final is not None else (
            final_state(m.model) if m.model is not None else None)
        m.final = None
        if state is not None:
            yield job, state
        del state


def _keep_outside(outside: list[tuple[float, float]], results, ctx: CellContext) -> None:
    """Keep the parity probes' time out of the measurements (docs/measurement.md, the
    window rule): each job's ``total_time_s`` loses the part of them inside its own span,
    and the cell is told the intervals (``CellContext.outside_window``), which it takes
    out of ``T_group``."""
    if not outside:
        return
    for r in results:
        if r.start is None or r.end is None or r.total_time_s is None:
            continue
        r.total_time_s -= sum(max(0.0, min(b, r.end) - max(a, r.start)) for a, b in outside)
    window = getattr(ctx, "outside_window", None)
    if isinstance(window, list):
        window.extend(outside)


def release(runs: list[BucketRun]) -> None:
    """Drop what finished bucket runs hold beyond their results: each member's model,
    optimizer, scaler, compiled forward, batch order and validation tensors, and the run's
    route and stack (the stacked parameters and optimizer state). Their plans, counters and
    results stay; the runs remain in ``UnifiedExecutor.runs`` for inspection, without
    ``stack`` (None)."""
    for run in runs:
        for member in run.members:
            if member.model is not None and member.result.status == "ok":
                # its final weights (synced at its last epoch or its stop) stay for the
                # hand-back after the window: the tensors only, not the module's grads
                member.final = final_state(member.model)
            member.model = member.optimizer = member.scaler = member.forward = None
            member.batches = member.val_x = member.val_y = None
            member.scores = {}
        run.route = run.stack = None
        for name in ("_live", "_seg", "loss_sums"):
            if hasattr(run, name):
                setattr(run, name, None)


def _refuse_unstackable(buckets, tasks: dict[str, str]) -> None:
    """Refuse, by name and before any training, what the vectorised route cannot train: a
    task or an optimizer without a stacked form.

    Raises:
        ConfigError: naming the task or optimizer and the job.
    """
    from engine.registry import TASKS

    for b in buckets:
        if b.route != "vectorised":
            continue
        job = b.jobs[0]
        task = TASKS.get(tasks[job.job_id])
        if not task.stacked_target:
            raise ConfigError(f"unified_model: task '{task.name}' (job {job.job_id}) has "
                              "no stacked form; run it with another executor or vf:0")
        opt = OPTIMIZERS.get(job.optimizer, job.job_id)
        if not opt.stacked_target:
            raise ConfigError(f"unified_model: optimizer '{opt.name}' (job {job.job_id}) "
                              "has no stacked form; run it with another executor or vf:0")
