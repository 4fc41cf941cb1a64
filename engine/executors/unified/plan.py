"""Which jobs train together, and how: the unified model's plan.

Bucket key (jobs that agree on all of it may share one vectorised module): model,
model_kwargs, dataset, batch size, task, amp, optimizer family, and the optimizer flags
that cannot vary per member (``engine.executors.unified.optim.FLAG_KEYS``: nesterov, maximize,
amsgrad). Everything else may differ per member: seed, data order, split (cv folds),
learning rate, momentum, dampening, betas, eps, weight decay and epoch budget.

Buckets keep the order of their first job; jobs keep job order inside a bucket. The jobs,
in bucket order, are cut into *chunks* of at most ``max_parallel`` jobs (all jobs when
unset): the chunks train one after another, the buckets of one chunk together, interleaved
step by step (``engine.executors.unified.interleave.Interleave``). A bucket cut by a
chunk boundary becomes one bucket per chunk. The group records the largest chunk (``max_parallel``).

The plan is printed before training (the cell's log) and stored in the group row's
``executor_info``: per bucket its jobs, the route (``vectorised`` or ``eager``), the check
(``verified``, ``unchecked`` or the fallback verdict ``disagreed``/``raised``/``refused``)
and why.
"""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass, field
from typing import Any

from engine.define.workloads import JobSpec

#: Optimizer keywords that cannot differ between the members of one stack (mirrors
#: ``engine.executors.unified.optim.FLAG_KEYS``; kept torch-free here).
FLAG_KEYS: dict[str, tuple[str, ...]] = {
    "sgd": ("nesterov", "maximize"),
    "adam": ("amsgrad", "maximize"),
    "adamw": ("amsgrad", "maximize"),
}


def bucket_key(job: JobSpec, task: str) -> tuple[Any, ...]:
    """The bucket key of ``job`` whose resolved task is ``task`` (hashable)."""
    flags = tuple((f, bool(job.optimizer_kwargs.get(f, False)))
                  for f in FLAG_KEYS.get(job.optimizer, ()))
    return (job.model, json.dumps(job.model_kwargs, sort_keys=True), job.dataset,
            job.batch_size, task, bool(job.amp), job.optimizer, flags)


@dataclass
class BucketPlan:
    """One bucket (or one chunk of a bucket) and what was decided for it."""

    index: int
    jobs: list[JobSpec]
    key: tuple[Any, ...]
    route: str = "vectorised"        # vectorised | eager
    check: str = "pending"           # verified | unchecked | disagreed | raised | refused | single
    reason: str = ""
    data_order: str = "per_member"   # per_member | shared
    dropout_masks: str = ""          # how dropout masks are drawn in the vectorised route
    verify_s: float | None = None
    chunk: int = 0
    #: The checks' forwards changed state all members share (engine.train.isolation's
    #: watched class attributes and module globals): eager, and no parity promised.
    shared_state: bool = False
    compile: str = "off"             # off | the mode that ran | "off (probe failed: ...)"
    compile_warmup_s: float | None = None
    #: stack sizes after each re-stack: a removal (members finished), or a stream's job
    #: joining (``joins``)
    restacks: list[int] = field(default_factory=list)
    #: job ids whose training step verification probed (the bucket's representatives);
    #: None when no probe ran
    probed: list[str] | None = None
    #: under ``kernels = "exact"``: the layers with parameters that kept vmap's batching
    #: rule (not bit for bit seq's by construction, docs/fidelity.md "The parity
    #: contract"); None when the bucket does not stack with exact kernels
    exact_kernels_skipped: list[str] | None = None
    #: the bucket's ``parity_contract`` (``exact`` or ``bound:...``,
    #: engine.results.parity_contract; the group row carries the weakest); None: no member
    #: was built
    parity_contract: str | None = None
    #: the float32 one-step parity probe (engine.executors.unified.parity_probe): its
    #: outcome, max |Δ| and first difference, and its wall time (outside T_group); None
    #: when the contract decided without it
    parity_probe: dict[str, Any] | None = None
    parity_probe_s: float | None = None
    #: a stream cell's jobs that joined this bucket while it ran (issue 52,
    #: ``engine.executors.unified.join``), in order: ``{"job", "stack" (its size after the
    #: join), "check", "probed", "verify_s"}``
    joins: list[dict[str, Any]] = field(default_factory=list)

    def line(self) -> str:
        n = len(self.jobs)
        what = f"{n} member{'s' if n != 1 else ''}"
        key = f"{self.key[0]} on {self.key[2]}, batch {self.key[3]}, {self.key[6]}"
        text = f"bucket {self.index}  chunk {self.chunk}  {what:<11} {self.route:<10} {self.check}"
        if self.reason:
            text += f" ({self.reason})"
        return f"{text}  [{key}; data order {self.data_order}]"

    def info(self) -> dict[str, Any]:
        return {"bucket": self.index, "jobs": [j.job_id for j in self.jobs],
                "model": self.key[0], "dataset": self.key[2], "batch_size": self.key[3],
                "task": self.key[4], "optimizer": self.key[6], "route": self.route,
                "check": self.check, "reason": self.reason or None,
                "data_order": self.data_order, "dropout_masks": self.dropout_masks or None,
                "verify_s": None if self.verify_s is None else round(self.verify_s, 4),
                "chunk": self.chunk, "compile": self.compile,
                "compile_warmup_s": None if self.compile_warmup_s is None
                else round(self.compile_warmup_s, 4), "restacks": list(self.restacks),
                "probed": None if self.probed is None else list(self.probed),
                "exact_kernels_skipped": None if self.exact_kernels_skipped is None
                else list(self.exact_kernels_skipped),
                "parity_contract": self.parity_contract,
                "parity_probe": None if self.parity_probe is None else dict(self.parity_probe),
                "parity_probe_s": None if self.parity_probe_s is None
                else round(self.parity_probe_s, 4),
                **({"joins": [dict(j) for j in self.joins]} if self.joins else {})}


@dataclass
class Plan:
    """All buckets of one cell, in training order."""

    buckets: list[BucketPlan] = field(default_factory=list)
    features: str = ""
    notes: list[str] = field(default_factory=list)
    #: a stream cell's job count (issue 52: its buckets are formed as the jobs arrive);
    #: None in a batch cell
    stream_jobs: int | None = None

    def text(self) -> str:
        n_jobs = sum(len(b.jobs) for b in self.buckets)
        n_chunks = len({b.chunk for b in self.buckets})
        head = (f"unified_model plan: {n_jobs} job{'s' if n_jobs != 1 else ''} → "
                f"{len(self.buckets)} bucket{'s' if len(self.buckets) != 1 else ''}"
                f"{f' in {n_chunks} chunks' if n_chunks > 1 else ''}, "
                f"features {self.features}")
        if self.stream_jobs is not None and not self.buckets:
            head = (f"unified_model plan: a stream of {self.stream_jobs} job"
                    f"{'s' if self.stream_jobs != 1 else ''}, buckets formed as they "
                    f"arrive, features {self.features}")
        return "\n".join([head, *("  " + b.line() for b in self.buckets),
                          *("  note: " + n for n in self.notes)])

    def info(self) -> dict[str, Any]:
        return {"plan": [b.info() for b in self.buckets], "features": self.features,
                "notes": self.notes}


def make_buckets(jobs: list[JobSpec], tasks: dict[str, str],
                 max_parallel: int | None = None) -> list[BucketPlan]:
    """Group ``jobs`` by :func:`bucket_key` (``tasks``: job id → resolved task name), cut
    the jobs in bucket order into chunks of at most ``max_parallel`` and split each
    bucket at chunk boundaries; single-member buckets are eager (nothing to stack)."""
    groups: dict[tuple[Any, ...], list[JobSpec]] = {}
    for job in jobs:
        groups.setdefault(bucket_key(job, tasks[job.job_id]), []).append(job)
    ordered = [(key, job) for key, members in groups.items() for job in members]
    size = max_parallel or len(ordered) or 1
    out: list[BucketPlan] = []
    for chunk, start in enumerate(range(0, len(ordered), size)):
        part = ordered[start:start + size]
        for key, members in itertools.groupby(part, key=lambda kj: kj[0]):
            plan = BucketPlan(len(out), [job for _, job in members], key, chunk=chunk)
            if len(plan.jobs) == 1:
                plan.route, plan.check = "eager", "single"
                plan.reason = "one member, nothing to stack"
            out.append(plan)
    return out


def chunks(buckets: list[BucketPlan]) -> list[list[BucketPlan]]:
    """The buckets of each chunk, in chunk order."""
    out: list[list[BucketPlan]] = []
    for b in buckets:
        if not out or out[-1][0].chunk != b.chunk:
            out.append([])
        out[-1].append(b)
    return out


def planned_singles(jobs: list[dict[str, Any]], max_parallel: int | None = None
                    ) -> tuple[int, int]:
    """``(one-member buckets, buckets)`` of a unified_model cell as :func:`make_buckets`
    will form them, from the cell's job dicts, before any training (the dry run's
    forecast). Torch-free: a job's resolved task is a function of its ``task`` and
    ``dataset`` alone, so that pair stands in for the resolved name and the grouping is
    the executor's. Only one-member buckets are known in advance: whether a bucket of
    several stacks is decided by the verification when the cell runs."""
    specs = [JobSpec.from_dict(j) for j in jobs]
    tasks = {job.job_id: f"{job.task}\0{job.dataset}" for job in specs}
    buckets = make_buckets(specs, tasks, max_parallel)
    return sum(1 for b in buckets if b.check == "single"), len(buckets)

