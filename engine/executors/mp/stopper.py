"""mp's early stopping (issue 25): the ``sha``, ``asha``, ``median`` and ``hyperband``
schedulers driving mp's worker processes, each worker's epoch message the decider's input,
a ``stop``/``go`` answer to a worker that waits at a decision epoch. Kept apart from the
executor (engine.executors.mp.executor: processes, MPS, admission) that calls it."""

from __future__ import annotations

import contextlib
import os
import signal
import time
from typing import TYPE_CHECKING, Any

from engine.bounds import DEFAULT_SEED
from engine.define.executor_options import from_table
from engine.define.workloads import JobSpec
from engine.errors import ConfigError
from engine.executors import MPOptions
from engine.executors.base import CellContext
from engine.results.decisions import DecisionLog
from engine.train import early_stop

if TYPE_CHECKING:  # the executor imports this module
    from engine.executors.mp.executor import MPExecutor
    from engine.executors.mp.executor import _Worker as Worker

__all__ = ["Stopper"]


class Stopper:
    """Early stopping for mp's workers (issue 25; decisions from
    ``engine.train.early_stop`` on the task's metric, fed by each worker's epoch message):

    - ``sha``: each worker waits after its rung epochs (``settings["rungs"]``) until the
      cell answers; when every trial that must pass a rung has reported there, the pruned
      workers get ``stop``, the others ``go``. Every trial must run at once
      (``max_parallel`` >= K), else a waiting worker would hold the slot a later trial needs.
    - ``asha``, ``median``, ``hyperband``: decided as each epoch message arrives; after
      each epoch the decider may judge it at (``early_stop.decision_epochs``) a worker
      waits for the verdict, answered at once (its epoch was judged as its epoch message
      came, just before its wait message). Its row keeps its result as of the deciding
      epoch.

    A stopped worker (``stop_sent``) stops right after the deciding epoch and holds its
    weights as of then for the hand-back after the window (issue 50), like a finished one.
    A stop at an epoch the worker did not wait at (none, by ``decision_epochs``) would end
    it by SIGTERM, its weights past the decision, so it would hand nothing back.
    """

    def __init__(self, name: str, jobs: list[JobSpec], metric: str, mode: str, grace: int,
                 factor: int, seed: int = DEFAULT_SEED) -> None:
        self.name, self.jobs, self.metric, self.mode = name, jobs, metric, mode
        self.grace, self.factor = grace, factor
        budgets = {i: j.epochs for i, j in enumerate(jobs)}
        # every rung decision in arrival order (attempt-N/decisions.json)
        self.log = DecisionLog("mp", name, metric, mode, [j.job_id for j in jobs], grace,
                               factor, max(budgets.values()))
        self.rungs = (early_stop.Rungs(budgets, mode, grace, factor, log=self.log)
                      if name == "sha" else None)
        self.decider = early_stop.asynchronous(name, max(budgets.values()), mode, grace,
                                               factor, seed=seed)
        self.stops: list[early_stop.Stop] = []
        self.decided: dict[int, dict[int, early_stop.Stop]] = {}

    @classmethod
    def make(cls, jobs: list[JobSpec], ctx: CellContext, parallel: int) -> Stopper | None:
        from engine.executors.seq import task_metric

        name = getattr(ctx, "scheduler", None) or "fifo"
        if name == "fifo":
            return None
        if name == "sha" and parallel < len(jobs):
            raise ConfigError(f"mp: scheduler sha needs every trial running at once "
                              f"(max_parallel >= {len(jobs)}, the cell's trials); got "
                              f"max_parallel {parallel}")
        options = from_table(MPOptions, ctx.options)
        grace, factor = int(options.grace_period), int(options.reduction_factor)
        metrics = {task_metric(j) for j in jobs}
        metric, mode = early_stop.objective(metrics.pop() if len(metrics) == 1 else "accuracy")
        for line in early_stop.pruning_warnings(name, len(jobs), parallel,
                                                max(j.epochs for j in jobs), grace, factor,
                                                who="mp"):
            ctx.emit("warning", message=line)
        return cls(name, jobs, metric, mode, grace, factor, seed=ctx.seed)

    def rungs_of(self, index: int) -> list[int]:
        """The epochs after which worker ``index`` waits for the cell's verdict: sha's rungs
        below its budget; for the asynchronous schedulers, every epoch the decider may
        judge it at (``early_stop.decision_epochs``), so that a stopped trial stops at the
        deciding epoch, with its weights as of then (issue 50), instead of training on
        until a signal reaches it."""
        if self.rungs is not None:
            return [r for r in self.rungs.rungs if self.jobs[index].epochs > r]
        if self.decider is None:
            return []
        return early_stop.decision_epochs(self.decider, index, self.jobs[index].epochs)

    def epoch(self, executor: MPExecutor, worker: Worker) -> None:
        """A worker's epoch message arrived (``worker.so_far`` is its result now)."""
        record = worker.so_far.history[-1]
        raw = record.get(self.metric)
        value, epoch = (float("nan") if raw is None else float(raw)), record["epoch"]
        if self.rungs is not None:
            self.rungs.report(worker.index, epoch, value)
            return
        if (self.decider is not None and epoch < worker.job.epochs
                and early_stop.judged(self.decider, self.log, worker.index, epoch, value)):
            stop = early_stop.Stop(worker.index, epoch, value, self.name)
            self.stops.append(stop)
            worker.stopped = (stop, worker.so_far, time.perf_counter())
            if epoch not in self.rungs_of(worker.index):
                # not an epoch it waits at (cannot happen with decision_epochs): it trains
                # on, so it is ended by a signal and hands nothing back
                with contextlib.suppress(ProcessLookupError, OSError):
                    os.kill(worker.pid, signal.SIGTERM)

    def settle(self, executor: MPExecutor) -> None:
        """Decide every rung that every trial it waits for reached; answer the waiters.
        Asynchronous schedulers: a worker's epoch was judged as its epoch message arrived,
        before its wait message: answer it at once."""
        if self.rungs is None:
            for worker in list(executor.workers.values()):
                if worker.waiting_at is None:
                    continue
                stop = worker.stopped is not None and worker.stopped[0].epoch == worker.waiting_at
                worker.waiting_at = None
                worker.stop_sent = stop
                with contextlib.suppress(OSError, EOFError):
                    worker.conn.send("stop" if stop else "go")
            return
        for rung in self.rungs.rungs:
            if self.rungs.ready(rung):
                self.decided[rung] = {s.trial: s for s in self.rungs.decide(rung)}
                self.stops.extend(self.decided[rung].values())
        # Answer every worker waiting at a decided rung (its "rung" message may come after
        # the decision: the rung is decided on the epoch messages).
        for worker in list(executor.workers.values()):
            rung = worker.waiting_at
            if rung is None or rung not in self.decided:
                continue
            worker.waiting_at = None
            stop = self.decided[rung].get(worker.index)
            if stop is not None:
                worker.stopped = (stop, worker.so_far, time.perf_counter())
                worker.stop_sent = True
            with contextlib.suppress(OSError, EOFError):
                worker.conn.send("stop" if stop is not None else "go")

    def forget(self, executor: MPExecutor, index: int) -> None:
        """A worker that ended without a result: no rung waits for it."""
        if self.rungs is not None:
            self.rungs.forget(index)
            self.settle(executor)

    def info(self) -> dict[str, Any]:
        return {"scheduler": self.name, "grace_period": self.grace,
                "reduction_factor": self.factor, "metric": self.metric, "mode": self.mode,
                "order": ("workers wait at each rung until every trial reached it"
                          if self.rungs is not None else
                          "decided as each worker's epoch arrives"),
                "decisions": [{"trial": self.jobs[s.trial].job_id, "epoch": s.epoch,
                               self.metric: s.value} for s in self.stops],
                "trials_stopped": len(self.stops),
                **early_stop.bracket_record(self.decider, [j.job_id for j in self.jobs])}
