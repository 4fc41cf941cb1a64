"""``unified_model``: every job of the cell in this process, identical models stacked into
one vectorised module (``engine.stacked``), each member trained exactly as ``seq`` would
train it alone.

Run: refuse tasks/optimizers without a stacked form (by name, before any training) →
bucket the jobs (``engine.stacked.plan``) → per bucket, build the members (job seed before
each build), verify (fingerprint + one-step probe) and train vectorised or eagerly
(``engine.stacked.loop``) → results in job order. Buckets train one after another; each
dataset is copied to the device once (``ctx.datasets``).

Features (``vf:1,s:1,fl:0`` requested by default): ``vf`` vectorised forward (0 trains
every bucket eagerly, round-robin per step); ``fl`` fused loss (one criterion call over the
stack); ``s`` CUDA streams — none on CPU, and not implemented yet on CUDA (issue 7), so the
effective ``s`` is always 0 with the reason in ``features_reason``. Options:
``max_parallel`` (chunk size), ``verify`` (default true), ``data_order`` (``per_member``,
the default and seq's order, or ``shared``).

Group columns set here: ``features`` (effective), ``features_reason``, ``max_parallel``
(largest bucket trained at once), ``train_throughput_sps`` (samples ÷ the buckets'
training-step wall time) and ``executor_info`` (the plan).
"""

from __future__ import annotations

from typing import Any

from engine.axes import parse_features
from engine.errors import ConfigError
from engine.executors.base import CellContext, Executor
from engine.registry import OPTIMIZERS
from engine.training import JobResult
from engine.workloads import JobSpec

DEFAULT_FEATURES = "vf:1,s:1,fl:0"


def effective_features(requested: str, device_type: str) -> tuple[dict[str, int], str | None]:
    """The features that will actually run, and why they differ from ``requested``.

    Raises:
        ConfigError: a malformed features string.
    """
    try:
        want = {"vf": 1, "s": 1, "fl": 0, **parse_features(requested)}
    except ValueError as exc:
        raise ConfigError(f"unified_model features: {exc}") from None
    have = dict(want)
    reasons = []
    if want["s"]:
        have["s"] = 0
        reasons.append("s: no CUDA streams on a CPU device" if device_type != "cuda"
                       else "s: bucket streams are not implemented yet (issue 7)")
    if want["fl"] and not want["vf"]:
        have["fl"] = 0
        reasons.append("fl: a fused loss needs the vectorised forward (vf:0)")
    return have, "; ".join(reasons) or None


def features_string(features: dict[str, int]) -> str:
    return f"vf:{features['vf']},s:{features['s']},fl:{features['fl']}"


class UnifiedExecutor(Executor):
    """Trains the cell's jobs in stacked buckets; see the module docstring."""

    def run(self, jobs: list[JobSpec], ctx: CellContext) -> list[JobResult]:
        from engine import tasks as task_lib
        from engine.registry import TASKS
        from engine.stacked.loop import BucketRun
        from engine.stacked.plan import Plan, make_buckets

        options = dict(ctx.options or {})
        requested = (getattr(ctx, "features", None) or options.get("features")
                     or DEFAULT_FEATURES)
        features, reason = effective_features(requested, ctx.settings.device.type)
        max_parallel = getattr(ctx, "max_parallel", None) or options.get("max_parallel")
        verify = bool(options.get("verify", True))
        data_order = options.get("data_order") or "per_member"
        kernels = options.get("kernels") or "batched"

        tasks = {job.job_id: task_lib.resolve_task(job.task, job.dataset, where=job.job_id).name
                 for job in jobs}
        buckets = make_buckets(jobs, tasks, max_parallel)
        if not features["vf"]:
            for b in buckets:
                if b.route == "vectorised":
                    b.route, b.check, b.reason = "eager", "off", "vf:0 (vectorised forward off)"
        # Refuse, by name and before any training, what the vectorised route cannot train.
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

        plan = Plan(buckets, features_string(features))
        if reason:
            plan.notes.append(reason)
        if ctx.settings.compile_mode != "off":
            plan.notes.append(f"compile_mode {ctx.settings.compile_mode} requested: not "
                              "applied (compile of the stacked step is issue 7)")
        print(plan.text(), flush=True)  # before any training (checks still pending)

        results: dict[str, JobResult] = {}
        train_clock = 0.0
        samples = 0
        largest = 0
        self.runs = []  # the bucket runs, for inspection (tests: stack.forward_calls)
        for bucket in buckets:
            run = BucketRun(bucket, ctx.datasets(bucket.jobs[0].dataset), ctx.settings,
                            ctx.emit, fused=bool(features["fl"]), verify=verify,
                            data_order=data_order, exact_kernels=kernels == "exact",
                            announce=lambda b: print("  decided: " + b.line(), flush=True))
            for result in run.run():
                results[result.job.job_id] = result
            self.runs.append(run)
            train_clock += run.train_clock_s
            samples += run.samples
            largest = max(largest, len(bucket.jobs))

        group: dict[str, Any] | None = getattr(ctx, "group", None)
        if group is not None:
            group.update(features=features_string(features), features_reason=reason,
                         max_parallel=largest,
                         train_throughput_sps=samples / train_clock if train_clock > 0
                         and all(r.status == "ok" for r in results.values()) else None,
                         executor_info=plan.info())
        self.plan = plan
        return [results[job.job_id] for job in jobs]
