"""``seq``: one job after another in the cell's process — the denominator of speedups."""

from __future__ import annotations

from engine.executors.base import CellContext, Executor
from engine.train.loop import JobResult, train_job
from engine.define.workloads import JobSpec


class SeqExecutor(Executor):
    """Trains jobs in job order. A failed job is recorded and the next one starts."""

    def run(self, jobs: list[JobSpec], ctx: CellContext) -> list[JobResult]:
        results = []
        for job in jobs:
            ctx.emit("job_started", job_id=job.job_id)
            result = train_job(job, ctx.datasets(job.dataset), ctx.settings,
                               progress=lambda **fields: ctx.emit("job_progress", **fields))
            ctx.emit("job_done", job_id=job.job_id, status=result.status, error=result.error,
                     total_time_s=result.total_time_s, samples=result.samples,
                     final_val_acc=result.final_val_acc)
            results.append(result)
        return results
