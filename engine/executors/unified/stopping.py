"""Early stopping inside the stacked model (issue 25): one :class:`MemberStopper` per hpo
cell under a scheduler, shared by every bucket of the cell; decisions from
``engine.train.early_stop`` on the task's metric.

- ``sha``: a member whose epoch is a rung **waits** there (``BucketRun.hold``: frozen
  exactly as a retired member, kept in its stack); when the last trial that must pass the
  rung reports, the rung decides: the pruned members stop (``BucketRun.stop_member``:
  retired, so with ``retire = "remove"`` they leave the stack at the next re-stack and stop
  costing compute), the others resume. Decisions depend only on the rung's metrics, so
  they are seq's. Every trial must be in one chunk (chunks train one after another: a
  rung could never see a later chunk's trials), else the cell refuses with one line.
- ``asha``, ``median``, ``hyperband``: decided as each member's epoch ends (arrival order:
  the order of the buckets' epoch ends), a stopped member retired at once.

Every rung decision is logged in arrival order (:attr:`MemberStopper.log`), which the
executor writes to ``decisions.json`` in the attempt folder (``engine.results.decisions``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from engine.bounds import DEFAULT_SEED
from engine.results.decisions import DecisionLog
from engine.train import early_stop

if TYPE_CHECKING:
    from engine.define.workloads import JobSpec
    from engine.executors.unified.bucket import BucketRun
    from engine.executors.unified.routes import Member


class MemberStopper:
    """The cell's decisions over its members (see the module docstring)."""

    def __init__(self, name: str, jobs: list[JobSpec], metric: str, mode: str,
                 grace_period: int, reduction_factor: int, seed: int = DEFAULT_SEED) -> None:
        self.name, self.metric, self.mode = name, metric, mode
        self.trial = {job.job_id: i for i, job in enumerate(jobs)}
        self.jobs = jobs
        budgets = {i: job.epochs for i, job in enumerate(jobs)}
        max_t = max(budgets.values())
        # every rung decision in arrival order (attempt-N/decisions.json)
        self.log = DecisionLog("unified_model", name, metric, mode,
                               [j.job_id for j in jobs], grace_period, reduction_factor, max_t)
        self.rungs = (early_stop.Rungs(budgets, mode, grace_period, reduction_factor,
                                       log=self.log)
                      if name == "sha" else None)
        self.decider = early_stop.asynchronous(name, max_t, mode, grace_period,
                                               reduction_factor, seed=seed)
        self.waiting: dict[int, tuple[BucketRun, Member]] = {}
        self.stops: list[early_stop.Stop] = []

    def epoch_end(self, bucket: BucketRun, m: Member, record: dict[str, Any]) -> bool:
        """After a non-final epoch of ``m`` (its record just written): whether it goes on
        now (False: it waits at a rung, or was stopped)."""
        i = self.trial[m.job.job_id]
        epoch = record["epoch"]
        raw = record.get(self.metric)
        value = float("nan") if raw is None else float(raw)
        if self.rungs is not None:
            self.rungs.report(i, epoch, value)
            if not self.rungs.is_rung(epoch, i):
                return True
            bucket.hold(m)
            self.waiting[i] = (bucket, m)
            self._settle()
            return False
        if self.decider is not None and early_stop.judged(self.decider, self.log, i, epoch,
                                                          value):
            self._stop(bucket, m, early_stop.Stop(i, epoch, value, self.name))
            return False
        return True

    def forget(self, m: Member) -> None:
        """A member that failed: no rung waits for it."""
        self.forget_job(m.job.job_id)

    def forget_job(self, job_id: str) -> None:
        """A trial that failed (also before training: a bucket that could not be built)."""
        i = self.trial.get(job_id)
        if self.rungs is not None and i is not None:
            self.waiting.pop(i, None)
            self.rungs.forget(i)
            self._settle()

    def abandon(self) -> None:
        """After the chunk's loop: a member still waiting would mean a rung that could not
        decide; it fails, saying so, rather than passing as finished."""
        for bucket, m in list(self.waiting.values()):
            m.waiting = False
            bucket._fail(m.result, "sha: waited at a rung that never decided (a trial that "
                                   "should have reached it did not report)")
        self.waiting.clear()

    def _settle(self) -> None:
        assert self.rungs is not None
        for rung in self.rungs.rungs:
            if not self.rungs.ready(rung):
                continue
            for stop in self.rungs.decide(rung):
                bucket, m = self.waiting.pop(stop.trial)
                self._stop(bucket, m, stop)
            for i, (bucket, m) in list(self.waiting.items()):
                if m.epoch + 1 == rung:
                    del self.waiting[i]
                    bucket.resume(m)

    def _stop(self, bucket: BucketRun, m: Member, stop: early_stop.Stop) -> None:
        self.stops.append(stop)
        bucket.stop_member(m, stop.reason(m.job.epochs, self.metric))

    def info(self, grace_period: int, reduction_factor: int) -> dict[str, Any]:
        """``executor_info.early_stop``: the scheduler, its parameters and every decision."""
        return {"scheduler": self.name, "grace_period": grace_period,
                "reduction_factor": reduction_factor,
                "max_t": max(j.epochs for j in self.jobs), "metric": self.metric,
                "mode": self.mode,
                "order": ("members wait at each rung until every trial reached it"
                          if self.rungs is not None else
                          "decided as each member's epoch ends (buckets interleaved)"),
                "decisions": [{"trial": self.jobs[s.trial].job_id, "epoch": s.epoch,
                               self.metric: s.value} for s in self.stops],
                "trials_stopped": len(self.stops),
                **early_stop.bracket_record(self.decider, [j.job_id for j in self.jobs])}
