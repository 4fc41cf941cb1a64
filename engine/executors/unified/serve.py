"""``unified_model`` as an online scheduler of a stream cell (issue 52): dynamic stacking
(docs/measurement.md, "Streams").

The cell's jobs arrive over time (``CellContext.arrivals``: seconds after the group window
opened). One :class:`~engine.executors.unified.interleave.Interleave` runs for the whole
stream; :class:`StreamServe` is its ``feed`` (called before every segment) and its
``interrupt`` (asked after every global step):

* **admission**, FIFO: a job is admitted at the first step boundary at which it has
  arrived and fewer than ``max_parallel`` members are training (default: no limit, each
  job admitted on arrival). Admitted (``admitted_s``) means its member is built: the job
  seed before its model, its own batch order and dropout generator, as under seq;
* **joining**: if a bucket of the job's structure (``plan.bucket_key``) is running, the
  job is checked like a bucket's member and, if the checks agree, joins it at that step
  boundary (``engine.executors.unified.join``: the running stack and the newcomer are
  re-stacked, as the retire path re-stacks the survivors; a lone eager member and the
  newcomer become a stack of two); ``ctx.stream_joins`` records when (``joined_s``);
* otherwise the job starts a **bucket of its own** (one member: the eager route, until a
  job of its structure joins it), interleaved step by step with the others; a job the
  checks refused trains eagerly in its own bucket, the verdict in the plan;
* members **leave** as under a batch cell (``retire``): a finished member leaves its
  stack at the end of the segment and the survivors are re-stacked;
* while **nothing runs** and the next job has not arrived, the cell sleeps with the
  ``waiting`` heartbeat (``engine.executors.arrivals.wait_until``).

An arrival is noticed after the global step during which it arrived (the ``interrupt``
ends the segment there), so it waits at most one interleaved step, plus its build and
checks. ``vf:0`` (and ``baseline``) admit every job into an eager bucket of its own; no
parity probe runs in a stream cell (``BucketBuild.probe_parity``), so a stacked bucket's
``parity_contract`` is the contract's bound for its path (``exact`` under
``kernels = "exact"``). No early-stopping scheduler applies to a stream cell (as under
seq and mp). ``data_order = "shared"`` is not applied (a joining member is at another
epoch than the others): per member, noted in the plan.
"""

from __future__ import annotations

import time
import traceback
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from engine.define.workloads import JobSpec
from engine.errors import failure_line
from engine.executors.arrivals import wait_until
from engine.executors.unified import join as joining
from engine.executors.unified.bucket_build import Check
from engine.executors.unified.plan import BucketPlan, Plan, bucket_key
from engine.train.loop import JobResult

if TYPE_CHECKING:
    from engine.executors.base import CellContext
    from engine.executors.unified.bucket import BucketRun
    from engine.executors.unified.interleave import Interleave


class StreamServe:
    """The admissions of one stream cell (see the module docstring).

    Args:
        jobs, ctx: the cell's jobs (arrival order) and context (``arrivals``,
            ``stream_origin``, ``emit``; ``stream_marks`` and ``stream_joins`` are filled).
        tasks: job id → resolved task name (the bucket key's).
        bucket_run: makes the :class:`BucketRun` of a new bucket plan.
        plan: the cell's plan; each new bucket is appended to it.
        vectorise: False under ``vf:0``: every job its own eager bucket, no joins.
        max_parallel: most members training at once (None: no limit).
        release: drops what finished bucket runs hold beyond their results (the
            executor's ``release``, as for a batch cell's finished chunks).
    """

    #: The stream's clock (``time.perf_counter`` seconds) and how the cell waits for an
    #: arrival while nothing runs: tests replace them to put arrivals at chosen steps.
    clock: Callable[[], float] = staticmethod(time.perf_counter)
    wait: Callable[..., None] = staticmethod(wait_until)

    def __init__(self, jobs: list[JobSpec], ctx: CellContext, tasks: dict[str, str],
                 bucket_run: Callable[[BucketPlan], BucketRun], plan: Plan, *,
                 vectorise: bool, max_parallel: int | None,
                 release: Callable[[list[BucketRun]], None] = lambda runs: None):
        assert ctx.arrivals is not None
        self.jobs, self.ctx, self.tasks = jobs, ctx, tasks
        self.arrivals = ctx.arrivals
        self.bucket_run, self.plan = bucket_run, plan
        self.release = release
        self.vectorise = vectorise
        self.max_parallel = max_parallel
        self.origin = ctx.stream_origin if ctx.stream_origin is not None else self.clock()
        self.pending = deque(range(len(jobs)))
        self.results: dict[str, JobResult] = {}
        self.admitted: dict[str, float] = {}
        self.runs: list[BucketRun] = []
        #: the runs not released yet (what admission counts: a long stream's finished
        #: buckets are not walked at every step)
        self.running: list[BucketRun] = []
        #: per bucket key, the running bucket a job of that structure may join
        self.open: dict[tuple[Any, ...], BucketRun] = {}
        self.peak = 0

    # -- the interleave's hooks ----------------------------------------------------------
    def training(self) -> int:
        """Members training now (active, or held at a rung)."""
        return sum(1 for r in self.running for m in r.members if m.active or m.waiting)

    def _arrived(self, index: int) -> bool:
        return self.clock() - self.origin >= self.arrivals[index]

    def _room(self) -> bool:
        return self.max_parallel is None or self.training() < self.max_parallel

    def interrupt(self) -> bool:
        """After a global step: the next job has arrived and may be admitted."""
        return bool(self.pending) and self._arrived(self.pending[0]) and self._room()

    def feed(self, interleave: Interleave) -> bool:
        """Before a segment: admit every job that has arrived while there is room; while
        nothing runs, wait for the next arrival. Returns whether jobs remain."""
        self._release()
        # the loop walks only what still trains (a long stream's finished buckets stay in
        # self.runs for the results and the hand-back)
        interleave.runs[:] = [r for r in interleave.runs if r.active]
        while self.pending and self._room():
            head = self.pending[0]
            if not self._arrived(head):
                if any(r.active for r in interleave.runs):
                    break  # the next arrival interrupts a later segment
                job = self.jobs[head]
                self.wait(self.origin + self.arrivals[head], job.job_id, self.arrivals[head],
                          self.ctx.emit)
                continue
            self.pending.popleft()
            self._admit(self.jobs[head], interleave)
        self.peak = max(self.peak, self.training())
        return bool(self.pending)

    # -- admission -----------------------------------------------------------------------
    def _admit(self, job: JobSpec, interleave: Interleave) -> None:
        self.admitted[job.job_id] = self.clock()
        key = bucket_key(job, self.tasks[job.job_id])
        bucket = BucketPlan(len(self.plan.buckets), [job], key, route="eager",
                            check="single", reason="one member, nothing to stack")
        if not self.vectorise:
            bucket.check, bucket.reason = "off", "vf:0 (vectorised forward off)"
        run = self.bucket_run(bucket)
        for result in run.build():
            self.results[result.job.job_id] = result
        if not run.members:  # its build failed: recorded, nothing to train
            self.plan.buckets.append(bucket)
            return
        target = self.open.get(key) if self.vectorise else None
        if target is not None and target.active:
            member = run.members[0]
            try:
                found = joining.check(target, member)
            except Exception as exc:  # noqa: BLE001 - a check that breaks is a verdict
                traceback.print_exc()
                found = Check(False, "raised", failure_line(exc, 300))
            if found.ok:
                try:
                    size = joining.join(target, member, found)
                except Exception as exc:  # noqa: BLE001 - the running bucket broke
                    traceback.print_exc()
                    target.fail_all(exc)  # the newcomer too, once it is a member
                    if member.result.end is None:
                        run._fail(member.result, failure_line(exc))
                    return
                self.ctx.stream_joins[job.job_id] = self.clock()
                print(f"  joined: {job.job_id} → bucket {target.plan.index} (stack of {size}, "
                      f"{found.check})", flush=True)
                return
            bucket.check = found.check
            bucket.reason = f"did not join bucket {target.plan.index}: {found.reason}"
            bucket.shared_state = found.shared_state
            bucket.verify_s, bucket.probed = found.verify_s, found.probed
            if found.shared_state:  # both buckets move it, interleaved: nothing promised
                bucket.parity_contract = target.plan.parity_contract = None
                target.plan.shared_state = True
        elif self.vectorise:
            self.open[key] = run  # the bucket the next job of this structure joins
        self.plan.buckets.append(bucket)
        print("  decided: " + bucket.line(), flush=True)
        self.runs.append(run)
        self.running.append(run)
        interleave.add(run)

    def _release(self) -> None:
        """Drop what finished buckets hold beyond their results (as a batch cell's
        finished chunks); their members' final weights stay for the hand-back."""
        done = [r for r in self.running if not r.active]
        if done:
            self.running = [r for r in self.running if r.active]
            self.release(done)

    def marks(self) -> None:
        """Each admitted job's ``(admitted, completed)`` into ``ctx.stream_marks``."""
        for job_id, admitted in self.admitted.items():
            result = self.results.get(job_id)
            if result is not None and result.end is not None:
                self.ctx.stream_marks[job_id] = (admitted, result.end)


__all__ = ["StreamServe"]
