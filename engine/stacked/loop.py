"""The bucket training loop: ``engine.training.train_job``'s contract, per member, for K
members trained at once (``docs/measurement.md``, "unified_model").

Per member, exactly as a solo run: the global RNG is seeded with the job seed just before
its model is built (so initial weights equal seq's) and its dropout generator continues
from there; its batch order is its own ``EpochOrder`` (job seed) over its own split; the
short tail batch is dropped; hpo jobs validate after every epoch, others after the last;
``final_train_loss`` is the mean of the last epoch's batch losses and ``final_train_acc``
the score over the last epoch's training batches; a non-finite epoch loss fails the member
(``FloatingPointError``) and the others go on. Events: ``job_started``, ``job_progress``
(at most every ``PROGRESS_INTERVAL_S`` and at every epoch end, with seq's fields) and
``job_done``.

Two routes share this loop:

* vectorised: one ``Stack`` + ``StackedOptimizer``; one template call per step;
* eager: each member's own module and torch optimizer, stepped round-robin (one step of
  every active member per global step); the global RNG is swapped to the member's state
  around its step, so dropout masks equal seq's.

Members whose epochs have different numbers of batches (cv folds of unequal size) or
budgets simply reach their epoch ends at different global steps: the loop runs in
*segments* of steps during which no member crosses an epoch boundary, and does the
bookkeeping of the members that reached one between segments. A finished member is frozen
exactly (``Stack.forward(active=...)`` and ``StackedOptimizer.step(active)``).

Times, per member (seconds, ``time.perf_counter``, after a device sync on CUDA):
``train_time_s`` = sum over its epochs of the bucket's training-step wall time while that
epoch ran (every active member is charged the full stacked step: they train
simultaneously); ``val_time_s`` = its own validations; ``total_time_s`` = from the start of
its model build to the end of its last validation (so it includes building and verifying
its bucket). ``BucketRun.train_clock_s`` is the bucket's training-step wall time (the
denominator of the group's ``train_throughput_sps``).
"""

from __future__ import annotations

import contextlib
import math
import os
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from engine import tasks as task_lib
from engine.data import DeviceData, EpochOrder, JobSplit, split_for
from engine.models import build_model
from engine.optimizers import build_optimizer
from engine.stacked.losses import loss_function, member_sums, stacked_score_sums
from engine.stacked.optim import StackedOptimizer, build_stacked
from engine.stacked.plan import BucketPlan
from engine.stacked.stack import Stack, member_generator, unsupported_reason
from engine.stacked.verify import fingerprint_mismatch, probe
from engine.training import PROGRESS_INTERVAL_S, JobResult, TrainSettings, evaluate
from engine.workloads import JobSpec

Emit = Callable[..., Any]


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _autocast(device: torch.device, amp: bool):
    if amp and device.type == "cuda":
        return torch.autocast("cuda", dtype=torch.float16)
    return contextlib.nullcontext()


@dataclass
class _Member:
    index: int
    job: JobSpec
    result: JobResult
    model: nn.Module
    generator: torch.Generator
    split: JobSplit
    order: EpochOrder
    val_x: torch.Tensor
    val_y: torch.Tensor
    amp: bool
    optimizer: Any = None
    scaler: Any = None
    epoch: int = 0
    step: int = 0
    batches: torch.Tensor | None = None
    active: bool = True
    clock0: float = 0.0
    scores: dict[str, torch.Tensor] = field(default_factory=dict)


class _VectorRoute:
    """One stacked step for every member: forward, per-member losses, backward of their
    (masked) sum, stacked optimizer step."""

    name = "vectorised"

    def __init__(self, stack: Stack, optimizer: StackedOptimizer, loss_fn, task):
        self.stack = stack
        self.optimizer = optimizer
        self.loss_fn = loss_fn
        self.task = task
        self.scores: dict[str, torch.Tensor] | None = None
        self._mask: torch.Tensor | None = None

    def set_active(self, active: list[bool]) -> None:
        self._mask = None if all(active) else torch.tensor(active, dtype=torch.bool,
                                                             device=self.stack.device)

    def step(self, xb, yb, active: list[bool], shared: bool, scoring: bool) -> torch.Tensor:
        live = None if self._mask is None else active
        out = self.stack(xb, shared_input=shared, active=live)
        losses = self.loss_fn(out, yb)
        total = (losses.sum() if self._mask is None
                 else torch.where(self._mask, losses, torch.zeros_like(losses)).sum())
        self.optimizer.zero_grad()
        total.backward()
        self.stack.settle()
        self.optimizer.step(live)
        if scoring:
            with torch.no_grad():
                sums = stacked_score_sums(self.task, out, yb)
            self.scores = sums if self.scores is None else {
                key: self.scores[key] + value for key, value in sums.items()}
        return losses.detach()

    def reset_scores(self, k: int) -> None:
        if self.scores is not None:
            for value in self.scores.values():
                value[k] = 0

    def scores_of(self, k: int) -> dict[str, torch.Tensor] | None:
        return None if self.scores is None else member_sums(self.scores, k)

    def sync_member(self, k: int) -> None:
        self.stack.write_back(k)


class _EagerRoute:
    """Each active member steps on its own module and torch optimizer, in member order."""

    name = "eager"

    def __init__(self, members: list[_Member], task, device: torch.device):
        self.members = members
        self.task = task
        self.criterion = task_lib.loss_fn(task).criterion
        self.device = device

    def set_active(self, active: list[bool]) -> None:
        pass

    def _swap_in(self, m: _Member) -> Any:
        if self.device.type == "cpu":
            saved = torch.get_rng_state()
            torch.set_rng_state(m.generator.get_state())
        else:
            saved = torch.cuda.get_rng_state(self.device)
            torch.cuda.set_rng_state(m.generator.get_state(), self.device)
        return saved

    def _swap_out(self, m: _Member, saved: Any) -> None:
        if self.device.type == "cpu":
            m.generator.set_state(torch.get_rng_state())
            torch.set_rng_state(saved)
        else:
            m.generator.set_state(torch.cuda.get_rng_state(self.device))
            torch.cuda.set_rng_state(saved, self.device)

    def step(self, xb, yb, active: list[bool], shared: bool, scoring: bool) -> torch.Tensor:
        losses = []
        for m in self.members:
            k = m.index
            if not active[k]:
                losses.append(torch.zeros((), device=self.device))
                continue
            x_k = xb if shared else xb[k]
            y_k = yb[k]
            saved = self._swap_in(m)
            try:
                with _autocast(self.device, m.amp):
                    out, target = task_lib.prepare(self.task, m.model(x_k), y_k)
                    loss = self.criterion(out if out.dtype == torch.float32 else out.float(),
                                          target)
                m.optimizer.zero_grad(set_to_none=True)
                if m.scaler is not None:
                    m.scaler.scale(loss).backward()
                    m.scaler.step(m.optimizer)
                    m.scaler.update()
                else:
                    loss.backward()
                    m.optimizer.step()
            finally:
                self._swap_out(m, saved)
            losses.append(loss.detach().float())
            if scoring and m.epoch == m.job.epochs - 1:
                with torch.no_grad():
                    for key, value in task_lib.score_sums(self.task, out, target).items():
                        m.scores[key] = m.scores[key] + value if key in m.scores else value
        return torch.stack(losses)

    def reset_scores(self, k: int) -> None:
        self.members[k].scores = {}

    def scores_of(self, k: int) -> dict[str, torch.Tensor] | None:
        return self.members[k].scores

    def sync_member(self, k: int) -> None:
        pass


class BucketRun:
    """Train the jobs of one bucket (``plan``) on ``data``; :meth:`run` returns their
    :class:`JobResult` in the bucket's job order and updates ``plan`` with what was
    decided (route, check, reason).

    Args:
        fused: ``fl`` feature (one loss call over the stack instead of one per member).
        verify: run the fingerprint and the one-step probe before vectorising.
        data_order: ``per_member`` (each job's own order, seq's) or ``shared`` (member 0's
            order for all: one gather per step; only when the members' training sets are
            identical, else per_member with a note).
    """

    def __init__(self, plan: BucketPlan, data: DeviceData, settings: TrainSettings,
                 emit: Emit, *, fused: bool = False, verify: bool = True,
                 data_order: str = "per_member", exact_kernels: bool = False,
                 announce: Callable[[BucketPlan], Any] | None = None):
        self.plan = plan
        self.announce = announce
        self.data = data
        self.settings = settings
        self.device = settings.device
        self.emit = emit
        self.fused = fused
        self.verify = verify
        self.data_order = data_order
        self.exact_kernels = exact_kernels
        self.train_clock_s = 0.0
        self.samples = 0
        self.stack: Stack | None = None
        self.route: Any = None
        self.members: list[_Member] = []

    # -- members -----------------------------------------------------------------------
    def _build(self, job: JobSpec, index: int, result: JobResult) -> _Member:
        device = self.device
        data = self.data
        _sync(device)
        result.worker_pid = os.getpid()
        result.start = time.perf_counter()
        torch.manual_seed(job.seed)  # initial weights and dropout: the job seed, as in seq
        model = build_model(job.model, data.in_shape, data.n_outputs, job.model_kwargs,
                            where=job.job_id).to(device)
        generator = member_generator(device)
        result.param_count = sum(p.numel() for p in model.parameters())
        amp = bool(job.amp and self.settings.amp_allowed)
        result.amp_applied = amp
        if self.settings.compile_mode != "off":
            result.compile_reason = ("unified_model does not compile yet (issue 7): trained "
                                     "without torch.compile")
        split = split_for(job.split, len(data.pool_y),
                          None if data.test_y is None else len(data.test_y))
        result.val_source = split.val_source
        val_x, val_y = ((data.test_x, data.test_y) if split.val_source == "test"
                        else (data.pool_x, data.pool_y))
        order = EpochOrder(job, split.train_idx)
        # The torch optimizer is built for both routes: it validates the hyperparameters
        # exactly as seq does (a bad value fails this job only) and trains the eager route.
        optimizer = build_optimizer(job.optimizer, model.parameters(), job.lr,
                                    job.optimizer_kwargs, where=job.job_id)
        return _Member(index, job, result, model, generator, split, order, val_x, val_y, amp,
                       optimizer=optimizer,
                       scaler=torch.amp.GradScaler("cuda") if amp else None)

    def _fail(self, result: JobResult, error: str) -> None:
        result.status = "failed"
        result.error = error.splitlines()[0][:500]
        result.end = time.perf_counter()
        if result.start is not None:
            result.total_time_s = result.end - result.start
        self.emit("job_done", job_id=result.job.job_id, status=result.status,
                  error=result.error, total_time_s=result.total_time_s,
                  samples=result.samples, final_val_acc=result.final_val_acc)

    # -- the decision --------------------------------------------------------------------
    def _decide(self, task) -> None:
        """Vectorise or not; fills plan.route/check/reason. Called with built members."""
        plan = self.plan
        members = self.members
        if plan.route != "vectorised":
            return
        if len(members) < 2:
            plan.route, plan.check, plan.reason = "eager", "single", "one member left to train"
            return
        if any(m.amp for m in members):
            plan.route, plan.check = "eager", "refused"
            plan.reason = "AMP (autocast + GradScaler) is not vectorised yet"
            return
        reason = unsupported_reason(members[0].model)
        if reason is not None:
            plan.route, plan.check, plan.reason = "eager", "refused", reason
            return
        t0 = time.perf_counter()
        mismatch = fingerprint_mismatch([m.model for m in members])
        if mismatch is not None:
            plan.route, plan.check, plan.reason = "eager", "disagreed", f"structure: {mismatch}"
            plan.verify_s = time.perf_counter() - t0
            return
        if not self.verify:
            plan.check, plan.reason = "unchecked", "verify = false"
            return
        bs = plan.jobs[0].batch_size
        idx = torch.stack([m.split.train_idx[:bs] for m in members]).to(self.device)
        verdict = probe([m.model for m in members], [m.generator for m in members],
                        self.data.pool_x[idx], self.data.pool_y[idx], task=task,
                        optimizer=members[0].job.optimizer,
                        lrs=[m.job.lr for m in members],
                        optimizer_kwargs=[dict(m.job.optimizer_kwargs) for m in members],
                        stacked_loss=loss_function(task, self.fused),
                        sample_shape=tuple(self.data.in_shape),
                        exact_kernels=self.exact_kernels)
        plan.verify_s = time.perf_counter() - t0
        if verdict.ok:
            plan.check, plan.reason = "verified", ""
        else:
            plan.route, plan.check, plan.reason = "eager", verdict.verdict, verdict.detail

    def _data_order(self) -> bool:
        """True for a shared order (decided once per bucket, recorded in the plan)."""
        if self.data_order != "shared" or len(self.members) < 2:
            self.plan.data_order = "per_member"
            return False
        ref = self.members[0].split.train_idx
        if all(torch.equal(m.split.train_idx, ref) for m in self.members[1:]):
            self.plan.data_order = "shared"
            return True
        self.plan.data_order = "per_member"
        self.plan.reason = (self.plan.reason + "; " if self.plan.reason else "") + \
            "shared data order needs identical training sets (folds differ)"
        return False

    # -- run -----------------------------------------------------------------------------
    def run(self) -> list[JobResult]:
        results: list[JobResult] = []
        for job in self.plan.jobs:
            self.emit("job_started", job_id=job.job_id)
            result = JobResult(job)
            results.append(result)
            try:
                self.members.append(self._build(job, len(self.members), result))
            except Exception as exc:  # the job fails, as it would under seq
                traceback.print_exc()
                self._fail(result, f"{type(exc).__name__}: {exc}")
        if not self.members:
            return results
        task = task_lib.resolve_task(self.members[0].job.task or self.data.task,
                                     self.members[0].job.dataset)
        try:
            self._decide(task)
            shared = self._data_order()
            self.plan.dropout_masks = self._mask_source()
            if self.announce is not None:  # the decision, before this bucket trains
                self.announce(self.plan)
            if self.plan.route == "vectorised":
                self.stack = Stack([m.model for m in self.members],
                                   [m.generator for m in self.members],
                                   tuple(self.data.in_shape), self.plan.jobs[0].batch_size,
                                   exact_kernels=self.exact_kernels)
                optimizer = build_stacked(
                    self.members[0].job.optimizer, self.stack.params,
                    [m.job.lr for m in self.members],
                    [dict(m.job.optimizer_kwargs) for m in self.members])
                for m in self.members:  # the stack trains; the solo optimizers are unused
                    m.optimizer = None
                self.route = _VectorRoute(self.stack, optimizer,
                                          loss_function(task, self.fused), task)
            else:
                self.route = _EagerRoute(self.members, task, self.device)
            self._loop(task, shared)
        except Exception as exc:  # the bucket itself broke: its unfinished members fail
            traceback.print_exc()
            for m in self.members:
                if m.active:
                    m.active = False
                    self._fail(m.result, f"{type(exc).__name__}: {exc}")
        return results

    def _mask_source(self) -> str:
        if not any(type(s) is nn.Dropout for s in self.members[0].model.modules()):
            return ""
        if self.plan.route == "eager":
            return "global generator swapped per member (seq's masks)"
        if self.device.type == "cpu":
            return "per-member generators (seq's masks)"
        return f"per-member generators (not seq's masks on {self.device.type})"

    def _loop(self, task, shared: bool) -> None:
        members = self.members
        device = self.device
        route = self.route
        k_all = len(members)
        x_all, y_all = self.data.pool_x, self.data.pool_y
        active = [True] * k_all
        route.set_active(active)
        loss_sums = torch.zeros(k_all, device=device)
        shared_order = EpochOrder(members[0].job, members[0].split.train_idx) if shared else None
        shared_state = {"epoch": -1, "batches": None}

        def start_epoch(m: _Member) -> None:
            if shared_order is not None:
                if shared_state["epoch"] < m.epoch:
                    shared_state["epoch"] = m.epoch
                    shared_state["batches"] = shared_order.batches(device)
                m.batches = shared_state["batches"]
            else:
                m.batches = m.order.batches(device)
            m.step = 0
            m.clock0 = self.train_clock_s
            loss_sums[m.index] = 0
            if m.epoch == m.job.epochs - 1:
                route.reset_scores(m.index)

        for m in members:
            start_epoch(m)
        last_report = time.perf_counter()
        while any(active):
            live = [m for m in members if m.active]
            length = min(m.order.n_batches - m.step for m in live)
            if shared:
                seg = live[0].batches[live[0].step:live[0].step + length]       # (L, B)
            else:
                filler = live[0].batches[live[0].step:live[0].step + length]
                seg = torch.stack([m.batches[m.step:m.step + length] if m.active else filler
                                   for m in members], dim=1)                     # (L, K, B)
            scoring = any(m.epoch == m.job.epochs - 1 for m in live)
            _sync(device)
            t0 = time.perf_counter()
            for i in range(length):
                idx = seg[i]
                xb, yb = x_all[idx], y_all[idx]
                if shared:
                    yb = yb.expand(k_all, *yb.shape)
                losses = route.step(xb, yb, active, shared, scoring)
                loss_sums += losses
                now = time.perf_counter()
                if now - last_report >= PROGRESS_INTERVAL_S:
                    last_report = now
                    values = losses.tolist()
                    for m in live:
                        done = m.result.samples + (m.step + i + 1) * m.order.batch_size
                        self.emit("job_progress", job_id=m.job.job_id, epoch=m.epoch + 1,
                                  epochs=m.job.epochs, step=m.step + i + 1,
                                  steps=m.order.n_batches, samples=done, loss=values[m.index],
                                  elapsed=now - m.result.start)
            _sync(device)
            self.train_clock_s += time.perf_counter() - t0
            for m in live:
                m.step += length
            for m in live:
                if m.step == m.order.n_batches:
                    self._end_epoch(m, task, loss_sums, active, start_epoch)

    def _end_epoch(self, m: _Member, task, loss_sums: torch.Tensor, active: list[bool],
                   start_epoch: Callable[[_Member], None]) -> None:
        r = m.result
        job = m.job
        order = m.order
        train_s = self.train_clock_s - m.clock0
        r.train_time_s = (r.train_time_s or 0.0) + train_s
        r.samples += order.n_batches * order.batch_size
        self.samples += order.n_batches * order.batch_size
        r.samples_dropped += order.dropped_per_epoch
        r.epochs_run = m.epoch + 1
        epoch_loss = float(loss_sums[m.index]) / order.n_batches
        last_epoch = m.epoch == job.epochs - 1
        if not math.isfinite(epoch_loss):
            self._retire(m, active)
            self._fail(r, f"FloatingPointError: training loss is {epoch_loss} at epoch "
                          f"{m.epoch + 1}")
            return
        record: dict[str, Any] = {"epoch": m.epoch + 1, "train_loss": epoch_loss,
                                  "train_s": train_s}
        if last_epoch:
            r.final_train_loss = epoch_loss
            r.final_train_acc = task_lib.finalise(task, self.route.scores_of(m.index))
            record["train_acc"] = r.final_train_acc
        if job.validate_every_epoch or last_epoch:
            self.route.sync_member(m.index)
            t_val = time.perf_counter()
            val_loss, val_acc = evaluate(m.model, m.val_x, m.val_y, m.split.val_idx, task, m.amp)
            r.val_time_s = (r.val_time_s or 0.0) + time.perf_counter() - t_val
            record.update(val_loss=val_loss, val_acc=val_acc)
            r.final_val_loss, r.final_val_acc = val_loss, val_acc
        r.history.append(record)
        now = time.perf_counter()
        self.emit("job_progress", job_id=job.job_id, epoch=m.epoch + 1, epochs=job.epochs,
                  step=order.n_batches, steps=order.n_batches, samples=r.samples,
                  loss=epoch_loss, val_loss=record.get("val_loss"),
                  val_acc=record.get("val_acc"), elapsed=now - r.start, epoch_end=True,
                  train_sps=r.samples / r.train_time_s if r.train_time_s else None)
        if last_epoch:
            self._retire(m, active)
            _sync(self.device)
            r.end = time.perf_counter()
            r.total_time_s = r.end - r.start
            if self.device.type == "cuda":  # the stacked process's peak so far (shared)
                r.torch_peak_allocated_mb = torch.cuda.max_memory_allocated(self.device) / 2**20
                r.torch_peak_reserved_mb = torch.cuda.max_memory_reserved(self.device) / 2**20
            self.emit("job_done", job_id=job.job_id, status=r.status, error=r.error,
                      total_time_s=r.total_time_s, samples=r.samples,
                      final_val_acc=r.final_val_acc)
        else:
            m.epoch += 1
            start_epoch(m)

    def _retire(self, m: _Member, active: list[bool]) -> None:
        """Freeze member ``m``: from the next step on its parameters, optimizer state and
        buffers no longer change."""
        m.active = False
        active[m.index] = False
        self.route.set_active(active)
