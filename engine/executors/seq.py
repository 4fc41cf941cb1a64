"""``seq``: one job after another in the cell's process — the denominator of speedups.

hpo cells may early-stop trials (``[options.seq] scheduler``, ``grace_period``,
``reduction_factor``; decisions from ``engine.train.early_stop`` on each task's metric):

- ``fifo`` (default): every job runs its budget, in job order (as before the option).
- ``sha``: rung by rung in a fixed order: every live trial, in job order, trains up to the
  next rung (``grace_period · reduction_factor^k``); the rung's worst trials stop there
  and the rest go on; after the last rung the survivors finish in job order. Every live
  trial's model and optimizer stay in memory between rungs (``SteppedJob``: a job's
  results do not depend on the interleaving).
- ``asha``, ``median``, ``hyperband``: trial after trial in job order, each decided after
  every epoch as its result arrives (the arrival order is job order, epoch by epoch).

``executor_info.early_stop`` records the scheduler, its parameters, the metric, the
order the trials ran in and every decision (trial, epoch, value); ``decisions.json`` in the
attempt folder every rung decision in arrival order (``engine.results.decisions``).
"""

from __future__ import annotations

import time
from typing import Any

from engine.define.executor_options import from_table
from engine.define.workloads import JobSpec
from engine.events import job_done, job_progress, job_started
from engine.executors import SeqOptions
from engine.executors.arrivals import wait_until
from engine.executors.base import CellContext, Executor
from engine.results.decisions import DecisionLog
from engine.train import early_stop
from engine.train.loop import JobResult, SteppedJob, train_job


class SeqExecutor(Executor):
    """Trains jobs in job order. A failed job is recorded and the next one starts.

    Each job's final weights are kept until the hand-back after the window
    (:meth:`final_states`): only their tensors (``engine.train.loop.final_state``), so the
    cell's peak memory grows by the group's weights — not by gradients, optimizer state or
    activations, which go with each job's model as before."""

    def __init__(self) -> None:
        self.states: dict[str, dict[str, Any]] = {}

    def keeper(self, job: JobSpec):
        """The ``keep`` callback of ``job``'s training: its final weights, kept by job id."""
        def keep(state: dict[str, Any]) -> None:
            self.states[job.job_id] = state
        return keep

    def final_states(self, jobs, results, ctx):
        for job in jobs:
            state = self.states.pop(job.job_id, None)
            if state is not None:
                yield job, state
                del state  # dropped before the next job's digest

    def run(self, jobs: list[JobSpec], ctx: CellContext) -> list[JobResult]:
        name = getattr(ctx, "scheduler", None) or "fifo"
        if ctx.arrivals is not None:
            return self.serve(jobs, ctx)
        if name != "fifo":
            return EarlyStopRun(jobs, ctx, name, "seq", keep=self.keeper).run()
        results = []
        for job in jobs:
            job_started(job.job_id).send(ctx.emit)
            result = train_job(job, ctx.datasets(job.dataset), ctx.settings,
                               progress=lambda **fields: job_progress(**fields).send(ctx.emit),
                               keep=self.keeper(job))
            job_done(result).send(ctx.emit)
            results.append(result)
        return results


    def serve(self, jobs: list[JobSpec], ctx: CellContext) -> list[JobResult]:
        """A stream cell (issue 51): the jobs served FIFO as they arrive, one at a time.
        Job i starts at max(its arrival, the previous job's end); while the next job has
        not arrived the cell sleeps, sending a ``waiting`` event every
        :data:`~engine.executors.arrivals.HEARTBEAT_S` (the watchdog counts it as
        progress)."""
        assert ctx.arrivals is not None
        origin = ctx.stream_origin if ctx.stream_origin is not None else time.perf_counter()
        results = []
        for job, arrival in zip(jobs, ctx.arrivals, strict=True):
            wait_until(origin + arrival, job.job_id, arrival, ctx.emit)
            admitted = time.perf_counter()
            job_started(job.job_id).send(ctx.emit)
            result = train_job(job, ctx.datasets(job.dataset), ctx.settings,
                               progress=lambda **fields: job_progress(**fields).send(ctx.emit),
                               keep=self.keeper(job))
            ctx.stream_marks[job.job_id] = (admitted, time.perf_counter())
            job_done(result).send(ctx.emit)
            results.append(result)
        return results


def task_metric(job: JobSpec, ctx: CellContext | None = None) -> str:
    """The job's task's metric name (``accuracy``, ``r2``): its task, else its dataset's
    (from the registries: no data is loaded)."""
    from engine.parts import tasks as task_lib

    return task_lib.resolve_task(job.task, job.dataset, where=job.job_id).metric


class EarlyStopRun:
    """One cell's trials under an early-stopping scheduler, in the cell's process."""

    def __init__(self, jobs: list[JobSpec], ctx: CellContext, name: str, who: str,
                 options_type: type = SeqOptions, keep: Any = None) -> None:
        options = from_table(options_type, ctx.options)
        self.jobs, self.ctx, self.name = jobs, ctx, name
        self.grace, self.eta = int(options.grace_period), int(options.reduction_factor)
        self.max_t = max(j.epochs for j in jobs)
        metrics = {task_metric(j, ctx) for j in jobs}
        self.metric, self.mode = early_stop.objective(metrics.pop() if len(metrics) == 1
                                                      else "accuracy")
        # keep(job): where each trial's final weights go (a pruned one's at its stop)
        self.stepped = [SteppedJob(j, ctx.datasets(j.dataset), ctx.settings,
                                   progress=lambda **f: job_progress(**f).send(ctx.emit),
                                   keep=None if keep is None else keep(j))
                        for j in jobs]
        self.stops: list[early_stop.Stop] = []
        self.order: list[tuple[int, int]] = []  # (trial, epoch) as they ran
        # every rung decision in arrival order (attempt-N/decisions.json)
        self.log = DecisionLog(who, name, self.metric, self.mode, [j.job_id for j in jobs],
                               self.grace, self.eta, self.max_t)
        self.info: dict[str, Any] = {
            "scheduler": name, "grace_period": self.grace, "reduction_factor": self.eta,
            "max_t": self.max_t, "metric": self.metric, "mode": self.mode}
        for line in early_stop.pruning_warnings(name, len(jobs), 1, self.max_t, self.grace,
                                                self.eta, who=who):
            ctx.emit("warning", message=line)
            self.info.setdefault("warnings", []).append(line)

    # -- one epoch of one trial ----------------------------------------------------------
    def _advance(self, i: int) -> dict[str, Any] | None:
        s = self.stepped[i]
        if not s.started:
            job_started(s.job.job_id).send(self.ctx.emit)
        record = s.advance()
        if record is None:
            job_done(s.result).send(self.ctx.emit)
            return None
        self.order.append((i, record["epoch"]))
        return record

    def _stop(self, stop: early_stop.Stop) -> None:
        s = self.stepped[stop.trial]
        s.stop(stop.reason(s.job.epochs, self.metric))
        self.stops.append(stop)
        job_done(s.result).send(self.ctx.emit)

    def _value(self, record: dict[str, Any]) -> float:
        value = record.get(self.metric)
        return float("nan") if value is None else float(value)

    # -- the schedulers ------------------------------------------------------------------
    def run(self) -> list[JobResult]:
        if self.name == "sha":
            self._sha()
        else:
            self._asynchronous()
        self.info["order"] = ("rung by rung, job order within a rung" if self.name == "sha"
                              else "job after job, decided after every epoch")
        self.info["decisions"] = [{"trial": self.jobs[s.trial].job_id, "epoch": s.epoch,
                                   self.metric: s.value} for s in self.stops]
        self.info["trials_stopped"] = len(self.stops)
        self.ctx.group.update(scheduler=self.name, trials_stopped=len(self.stops))
        info = dict(self.ctx.group.get("executor_info") or {})
        info["early_stop"] = self.info
        self.ctx.group["executor_info"] = info
        self.log.write(self.ctx.attempt_dir)
        return [s.result for s in self.stepped]

    def _sha(self) -> None:
        budgets = {i: j.epochs for i, j in enumerate(self.jobs)}
        rungs = early_stop.Rungs(budgets, self.mode, self.grace, self.eta, log=self.log)
        epoch = {i: 0 for i in budgets}
        for rung in rungs.rungs:
            for i in sorted(rungs.alive):
                while epoch[i] < min(rung, budgets[i]):
                    record = self._advance(i)
                    if record is None:  # failed (or finished early): no rung waits for it
                        rungs.forget(i)
                        break
                    epoch[i] = record["epoch"]
                    rungs.report(i, epoch[i], self._value(record))
            if rungs.ready(rung):
                for stop in rungs.decide(rung):
                    self._stop(stop)
        for i in sorted(rungs.alive):  # the survivors, to their budgets
            while self._advance(i) is not None:
                pass

    def _asynchronous(self) -> None:
        decider = early_stop.asynchronous(self.name, self.max_t, self.mode, self.grace,
                                          self.eta, seed=self.ctx.seed)
        # hyperband: which bracket each trial was in (drawn from the campaign seed)
        self.info.update(early_stop.bracket_record(decider, [j.job_id for j in self.jobs]))
        for i, s in enumerate(self.stepped):
            while True:
                record = self._advance(i)
                if record is None:
                    break
                value = self._value(record)
                if (decider is not None and record["epoch"] < s.job.epochs
                        and early_stop.judged(decider, self.log, i, record["epoch"], value)):
                    self._stop(early_stop.Stop(i, record["epoch"], value, self.name))
                    break
