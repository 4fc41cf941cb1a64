"""``seq``: one job after another in the cell's process — the denominator of speedups."""

from __future__ import annotations

from engine.define.workloads import JobSpec
from engine.events import job_done, job_progress, job_started
from engine.executors.base import CellContext, Executor
from engine.train.loop import JobResult, train_job


class SeqExecutor(Executor):
    """Trains jobs in job order. A failed job is recorded and the next one starts."""

    def run(self, jobs: list[JobSpec], ctx: CellContext) -> list[JobResult]:
        results = []
        for job in jobs:
            job_started(job.job_id).send(ctx.emit)
            result = train_job(job, ctx.datasets(job.dataset), ctx.settings,
                               progress=lambda **fields: job_progress(**fields).send(ctx.emit))
            job_done(result).send(ctx.emit)
            results.append(result)
        return results
