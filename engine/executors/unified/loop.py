"""The bucket training loop: ``engine.train.loop.train_job``'s contract, per member, for K
members trained at once, and several buckets interleaved in one process
(``docs/measurement.md``, "unified_model").

Per member, exactly as a solo run: the global RNG is seeded with the job seed just before
its model is built (so initial weights equal seq's) and its dropout generator continues
from there; its batch order is its own ``EpochOrder`` (job seed) over its own split; the
short tail batch is dropped; hpo jobs validate after every epoch, others after the last;
``final_train_loss`` is the mean of the last epoch's batch losses and ``final_train_acc``
the score over the last epoch's training batches; a non-finite epoch loss fails the member
(``FloatingPointError``) and the others go on. Events: ``job_started``, ``job_progress``
(at most every ``PROGRESS_INTERVAL_S`` and at every epoch end, with seq's fields) and
``job_done``.

Two routes per bucket:

* vectorised: one ``Stack`` + ``StackedOptimizer``; one template call per step;
* eager: each member's own module and torch optimizer, stepped in member order (one step
  of every active member per global step); the global RNG is swapped to the member's state
  around its step, so dropout masks equal seq's.

:class:`Interleave` trains the buckets of one chunk together: every global step gives one
step to every bucket that still has an active member, in bucket order (round-robin over
active members only; a bucket whose members have all finished is never stepped again, and
the loop ends with the last member's last step). Members whose epochs have different
numbers of batches or budgets reach their epoch ends at different global steps: the loop
runs in *segments* of steps during which no member of any bucket crosses an epoch boundary,
and does the bookkeeping of the members that reached one between segments.

Finished members (``retire``): ``"mask"`` keeps them in their stack, frozen exactly
(``Stack.forward(active=...)`` and ``StackedOptimizer.step(active)``) but still computed;
``"remove"`` (default) re-stacks the survivors (``Stack.subset`` / ``StackedOptimizer
.subset``, exact copies) so retired members stop costing compute. Without compile the
survivors are re-stacked as soon as a member retires; under compile only when they fall to
half the stack or fewer (sizes K, K/2, K/4, ...: each new size recompiles).

Streams (CUDA, feature ``s``): each bucket steps on its own stream; per segment the side
streams ``wait_stream`` the current stream before reading what it produced (batch
indices, parameters after validation), tensors allocated on the current stream and used on
a side stream are ``record_stream``-ed on it, and the current stream waits for every side
stream before any bookkeeping reads losses or parameters.

Compile (``compile_mode`` not ``off``): each bucket's step callable (the stack's vectorised
call, or each member's module on the eager route) is wrapped with ``torch.compile`` and
probed on the bucket's first batch: the compiled forward and backward run once, their
outputs are compared with the eager forward on the same batch, and buffers, dropout
generators and the global RNG are restored afterwards, so training starts from the same
state. The probe's time is the bucket's compile warm-up (``compile_warmup_s``, outside the
training clock). A probe that raises or disagrees leaves the bucket eager, with the reason.

Times, per member (seconds, ``time.perf_counter``, after a device sync on CUDA):
``train_time_s`` = sum over its epochs of the chunk's training-step wall time while that
epoch ran (every active member is charged the full interleaved step: they train
simultaneously); ``val_time_s`` = its own validations; ``total_time_s`` = from the start of
its model build to the end of its last validation (so it includes building, verifying and
compile warm-up of its bucket). ``Interleave.train_clock_s`` is the chunk's training-step
wall time (the denominator of the group's ``train_throughput_sps``).
"""

from __future__ import annotations

import contextlib
import math
import os
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from engine.parts import tasks as task_lib
from engine.train.data import DeviceData, EpochOrder, JobSplit, split_for
from engine.parts.models import build_model
from engine.parts.optimizers import build_optimizer
from engine.executors.unified.losses import (loss_function, member_sums, stacked_score_sums,
                                   upcast_half)
from engine.executors.unified.optim import StackedOptimizer, build_stacked
from engine.executors.unified.plan import BucketPlan
from engine.executors.unified.stack import Stack, member_generator, unsupported_reason
from engine.executors.unified.verify import fingerprint_mismatch, probe
from engine.train.loop import PROGRESS_INTERVAL_S, JobResult, TrainSettings, evaluate
from engine.define.workloads import JobSpec

Emit = Callable[..., Any]
RETIRE = ("remove", "mask")
#: Compile probe tolerance (compiled vs eager forward on the first batch): fusion reorders
#: floating-point accumulation, so equality is up to rounding.
PROBE_RTOL, PROBE_ATOL = 1e-4, 1e-5


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _autocast(device: torch.device, amp: bool):
    if amp and device.type == "cuda":
        return torch.autocast("cuda", dtype=torch.float16)
    return contextlib.nullcontext()


def compile_callable(fn: Callable, mode: str, backend: str = "inductor") -> Callable:
    """``torch.compile(fn)`` in ``mode`` ("default" → torch's default) with ``backend``
    (inductor takes the mode; another backend, e.g. ``eager`` for debugging, ignores it)."""
    if backend and backend != "inductor":
        return torch.compile(fn, backend=backend)
    return torch.compile(fn, mode=None if mode == "default" else mode)


def _rng_state(device: torch.device) -> tuple[Any, Any]:
    cuda = torch.cuda.get_rng_state(device) if device.type == "cuda" else None
    return torch.get_rng_state(), cuda


def _set_rng_state(device: torch.device, state: tuple[Any, Any]) -> None:
    torch.set_rng_state(state[0])
    if state[1] is not None:
        torch.cuda.set_rng_state(state[1], device)


def _differs(a: torch.Tensor, b: torch.Tensor) -> str | None:
    a, b = a.detach(), b.detach()
    if a.shape != b.shape:
        return f"output shape {tuple(a.shape)} vs eager {tuple(b.shape)}"
    a, b = a.double(), b.double()
    if torch.allclose(a, b, rtol=PROBE_RTOL, atol=PROBE_ATOL, equal_nan=True):
        return None
    return f"outputs differ from eager (max |Δ| {float((a - b).abs().max()):.3g})"


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
    forward: Any = None  # the compiled module (eager route under compile), else None


class _VectorRoute:
    """One stacked step for every member of the stack: forward, per-member losses, backward
    of their (masked) sum, stacked optimizer step.

    ``slots``: the bucket member index of each stack position (all members until some are
    removed by :meth:`restack`). ``step`` returns the losses of all ``k_all`` bucket
    members (zeros for removed ones)."""

    name = "vectorised"

    def __init__(self, stack: Stack, optimizer: StackedOptimizer, loss_fn, task, k_all: int):
        self.stack = stack
        self.optimizer = optimizer
        self.loss_fn = loss_fn
        self.task = task
        self.k_all = k_all
        self.slots = list(range(stack.k))
        self._slot_index: torch.Tensor | None = None
        self.scores: dict[str, torch.Tensor] | None = None
        self._mask: torch.Tensor | None = None
        self._live: list[bool] | None = None

    def set_active(self, active: list[bool]) -> None:
        live = [active[s] for s in self.slots]
        self._live = None if all(live) else live
        self._mask = None if all(live) else torch.tensor(live, dtype=torch.bool,
                                                         device=self.stack.device)

    def step(self, xb, yb, active: list[bool], shared: bool, scoring: bool) -> torch.Tensor:
        out = self.stack(xb, shared_input=shared, active=self._live)
        losses = self.loss_fn(out, yb)
        total = (losses.sum() if self._mask is None
                 else torch.where(self._mask, losses, torch.zeros_like(losses)).sum())
        self.optimizer.zero_grad()
        total.backward()
        self.stack.settle()
        self.optimizer.step(self._live)
        if scoring:
            with torch.no_grad():
                sums = stacked_score_sums(self.task, out, yb)
            self.scores = sums if self.scores is None else {
                key: self.scores[key] + value for key, value in sums.items()}
        losses = losses.detach()
        if self._slot_index is None:
            return losses
        full = losses.new_zeros(self.k_all)
        full[self._slot_index] = losses
        return full

    def reset_scores(self, k: int) -> None:
        if self.scores is not None and k in self.slots:
            for value in self.scores.values():
                value[self.slots.index(k)] = 0

    def scores_of(self, k: int) -> dict[str, torch.Tensor] | None:
        return None if self.scores is None else member_sums(self.scores, self.slots.index(k))

    def sync_member(self, k: int) -> None:
        self.stack.write_back(self.slots.index(k))

    def restack(self, keep: list[int]) -> None:
        """Keep only bucket members ``keep`` (a subset of ``slots``, in slot order): a new
        stack and optimizer of the survivors, exact copies of their current state."""
        positions = [self.slots.index(k) for k in keep]
        stack = self.stack.subset(positions)
        self.optimizer = self.optimizer.subset(positions, stack.params)
        if self.scores is not None:
            idx = torch.tensor(positions, dtype=torch.long, device=self.stack.device)
            self.scores = {key: value.index_select(0, idx) for key, value in self.scores.items()}
        self.stack = stack
        self.slots = list(keep)
        self._slot_index = torch.tensor(self.slots, dtype=torch.long, device=stack.device)

    # -- compile -------------------------------------------------------------------------
    def compile_probe(self, compiler, xb, yb, shared: bool) -> str | None:
        """Compile the stack's vectorised call and probe it on one batch; restores every
        buffer, dropout generator and the global RNG. Returns None (compiled) or why not."""
        stack = self.stack
        gens = [g.get_state() for g in stack.generators] if stack.generators else None
        buffers = {n: b.clone() for n, b in stack.buffers.items()}
        rng = _rng_state(stack.device)
        calls = stack.forward_calls

        def restore() -> None:
            with torch.no_grad():
                for n, b in stack.buffers.items():
                    b.copy_(buffers[n])
            if gens is not None:
                for g, st in zip(stack.generators, gens):
                    g.set_state(st)
            _set_rng_state(stack.device, rng)

        try:
            with torch.no_grad():
                ref = stack(xb, shared_input=shared)
            restore()
            stack.set_compiler(compiler)
            out = stack(xb, shared_input=shared)
            params = [p for p in stack.params.values() if p.requires_grad]
            torch.autograd.grad(self.loss_fn(out, yb).sum(), params, allow_unused=True)
            return _differs(out, ref)
        except Exception as exc:  # noqa: BLE001 - any failure is a fallback, with its reason
            return f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
        finally:
            restore()
            stack.forward_calls = calls

    def uncompile(self) -> None:
        self.stack.set_compiler(None)


class _EagerRoute:
    """Each active member steps on its own module and torch optimizer, in member order."""

    name = "eager"

    def __init__(self, members: list[_Member], task, device: torch.device):
        self.members = members
        self.task = task
        self.criterion = task_lib.loss_fn(task).criterion
        self.device = device
        self.slots = [m.index for m in members]

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
        losses: torch.Tensor | None = None
        for m in self.members:
            k = m.index
            if not active[k]:
                continue
            x_k = xb if shared else xb[k]
            y_k = yb[k]
            saved = self._swap_in(m)
            try:
                with _autocast(self.device, m.amp):
                    forward = m.forward or m.model
                    out, target = task_lib.prepare(self.task, forward(x_k), y_k)
                    loss = self.criterion(upcast_half(out), target)
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
            value = loss.detach()
            if losses is None:
                losses = torch.zeros(len(self.members), dtype=value.dtype, device=value.device)
            losses[k] = value
            if scoring and m.epoch == m.job.epochs - 1:
                with torch.no_grad():
                    for key, value in task_lib.score_sums(self.task, out, target).items():
                        m.scores[key] = m.scores[key] + value if key in m.scores else value
        if losses is None:
            losses = torch.zeros(len(self.members), device=self.device)
        return losses

    def reset_scores(self, k: int) -> None:
        self.members[k].scores = {}

    def scores_of(self, k: int) -> dict[str, torch.Tensor] | None:
        return self.members[k].scores

    def sync_member(self, k: int) -> None:
        pass

    def compile_probe(self, compiler, xb, yb, shared: bool) -> str | None:
        """Compile every member's module and probe each on its first batch (buffers, its
        generator and the global RNG restored). None (compiled) or why not."""
        for m in self.members:
            x_k = xb if shared else xb[m.index]
            buffers = {n: b.clone() for n, b in m.model.named_buffers()}
            rng = _rng_state(self.device)
            gen = m.generator.get_state()

            def restore() -> None:
                with torch.no_grad():
                    for n, b in m.model.named_buffers():
                        b.copy_(buffers[n])
                m.generator.set_state(gen)
                _set_rng_state(self.device, rng)

            try:
                saved = self._swap_in(m)
                try:
                    with torch.no_grad(), _autocast(self.device, m.amp):
                        ref = m.model(x_k)
                finally:
                    self._swap_out(m, saved)
                restore()
                m.forward = compiler(m.model)
                saved = self._swap_in(m)
                try:
                    with _autocast(self.device, m.amp):
                        out = m.forward(x_k)
                        o, t = task_lib.prepare(self.task, out, yb[m.index])
                        loss = self.criterion(upcast_half(o), t)
                    torch.autograd.grad(loss, [p for p in m.model.parameters()
                                               if p.requires_grad], allow_unused=True)
                finally:
                    self._swap_out(m, saved)
                why = _differs(out, ref)
            except Exception as exc:  # noqa: BLE001
                why = f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
            finally:
                restore()
            if why is not None:
                self.uncompile()
                return f"{m.job.job_id}: {why}"
        return None

    def uncompile(self) -> None:
        for m in self.members:
            m.forward = None


class _Clock:
    """The chunk's training-step wall time so far (shared by its buckets)."""

    def __init__(self) -> None:
        self.s = 0.0


class BucketRun:
    """Train the jobs of one bucket (``plan``) on ``data``: :meth:`build` builds the
    members and decides the route (updating ``plan``), then an :class:`Interleave` steps
    it (alone through :meth:`run`, or with the other buckets of its chunk).

    Args:
        fused: ``fl`` feature (one loss call over the stack instead of one per member).
        verify: run the fingerprint and the one-step probe before vectorising.
        data_order: ``per_member`` (each job's own order, seq's) or ``shared`` (member 0's
            order for all: one gather per step; only when the members' training sets are
            identical, else per_member with a note).
        retire: ``remove`` (re-stack the survivors) or ``mask`` (keep finished members
            frozen in the stack).
    """

    def __init__(self, plan: BucketPlan, data: DeviceData, settings: TrainSettings,
                 emit: Emit, *, fused: bool = False, verify: bool = True,
                 data_order: str = "per_member", exact_kernels: bool = False,
                 announce: Callable[[BucketPlan], Any] | None = None,
                 retire: str = "remove", compile_backend: str = "inductor"):
        if retire not in RETIRE:
            raise ValueError(f"retire must be one of {RETIRE}, got {retire!r}")
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
        self.retire = retire
        self.compile_backend = compile_backend
        self.clock = _Clock()
        #: training-step wall time of the chunk while this bucket had active members
        self.train_clock_s = 0.0
        self.samples = 0
        self.stack: Stack | None = None
        self.route: Any = None
        self.members: list[_Member] = []
        self.results: list[JobResult] = []
        self.task: Any = None
        self.shared = False
        self.stream: Any = None
        #: compile: "off", the mode that runs, or None while not probed yet
        self.compile_mode = "off"
        self.compile_reason = ""
        self.compile_warmup_s = 0.0
        self.restacks: list[int] = []  # stack sizes after each re-stack
        self._needs_probe = False
        self._last_report = 0.0

    @property
    def active(self) -> bool:
        return any(m.active for m in self.members)

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

    def fail_all(self, exc: BaseException) -> None:
        """The bucket itself broke: its unfinished members fail."""
        for m in self.members:
            if m.active:
                m.active = False
                self._fail(m.result, f"{type(exc).__name__}: {exc}")

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

    def _mask_source(self) -> str:
        if not any(type(s) is nn.Dropout for s in self.members[0].model.modules()):
            return ""
        if self.plan.route == "eager":
            return "global generator swapped per member (seq's masks)"
        if self.device.type == "cpu":
            return "per-member generators (seq's masks)"
        return f"per-member generators (not seq's masks on {self.device.type})"

    # -- build ---------------------------------------------------------------------------
    def build(self) -> list[JobResult]:
        """Build every member (a failing build fails that job, as under seq), decide the
        route and create it. Returns the results in the bucket's job order."""
        for job in self.plan.jobs:
            self.emit("job_started", job_id=job.job_id)
            result = JobResult(job)
            self.results.append(result)
            try:
                self.members.append(self._build(job, len(self.members), result))
            except Exception as exc:  # the job fails, as it would under seq
                traceback.print_exc()
                self._fail(result, f"{type(exc).__name__}: {exc}")
        if not self.members:
            return self.results
        self.task = task_lib.resolve_task(self.members[0].job.task or self.data.task,
                                          self.members[0].job.dataset)
        try:
            self._decide(self.task)
            self.shared = self._data_order()
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
                                          loss_function(self.task, self.fused), self.task,
                                          len(self.members))
            else:
                self.route = _EagerRoute(self.members, self.task, self.device)
            self._needs_probe = self.settings.compile_mode != "off"
        except Exception as exc:  # the bucket itself broke: its unfinished members fail
            traceback.print_exc()
            self.fail_all(exc)
        return self.results

    def run(self) -> list[JobResult]:
        """Build and train this bucket alone."""
        self.build()
        Interleave([self], self.device).run()
        return self.results

    # -- the loop, in pieces (driven by Interleave) --------------------------------------
    def start(self, clock: _Clock) -> None:
        self.clock = clock
        k_all = len(self.members)
        self.active_mask = [m.active for m in self.members]
        self.route.set_active(self.active_mask)
        self.loss_sums = torch.zeros(k_all, device=self.device)
        self.shared_order = (EpochOrder(self.members[0].job, self.members[0].split.train_idx)
                             if self.shared else None)
        self._shared_state: dict[str, Any] = {"epoch": -1, "batches": None}
        self._last_report = time.perf_counter()
        for m in self.members:
            if m.active:
                self._start_epoch(m)

    def _start_epoch(self, m: _Member) -> None:
        if self.shared_order is not None:
            if self._shared_state["epoch"] < m.epoch:
                self._shared_state["epoch"] = m.epoch
                self._shared_state["batches"] = self.shared_order.batches(self.device)
            m.batches = self._shared_state["batches"]
        else:
            m.batches = m.order.batches(self.device)
        m.step = 0
        m.clock0 = self.clock.s
        self.loss_sums[m.index] = 0
        if m.epoch == m.job.epochs - 1:
            self.route.reset_scores(m.index)

    def remaining(self) -> int:
        """Steps until the next epoch end of any active member."""
        return min(m.order.n_batches - m.step for m in self.members if m.active)

    def prepare(self, length: int) -> None:
        """The batch indices of the next ``length`` steps (one tensor, made on the current
        stream)."""
        live = [m for m in self.members if m.active]
        self._live = live
        if self.shared:
            self._seg = live[0].batches[live[0].step:live[0].step + length]      # (L, B)
        else:
            filler = live[0].batches[live[0].step:live[0].step + length]
            rows = [self.members[k] for k in self.route.slots]
            self._seg = torch.stack([m.batches[m.step:m.step + length] if m.active else filler
                                     for m in rows], dim=1)                       # (L, S, B)
        self._scoring = any(m.epoch == m.job.epochs - 1 for m in live)

    def step(self, i: int) -> None:
        """Global step ``i`` of the prepared segment: one step of every active member."""
        idx = self._seg[i]
        xb, yb = self.data.pool_x[idx], self.data.pool_y[idx]
        if self.shared:
            yb = yb.expand(len(self.route.slots), *yb.shape)
        losses = self.route.step(xb, yb, self.active_mask, self.shared, self._scoring)
        self.loss_sums += losses
        now = time.perf_counter()
        if now - self._last_report >= PROGRESS_INTERVAL_S:
            self._last_report = now
            values = losses.tolist()
            for m in self._live:
                done = m.result.samples + (m.step + i + 1) * m.order.batch_size
                self.emit("job_progress", job_id=m.job.job_id, epoch=m.epoch + 1,
                          epochs=m.job.epochs, step=m.step + i + 1,
                          steps=m.order.n_batches, samples=done, loss=values[m.index],
                          elapsed=now - m.result.start)

    def finish(self, length: int) -> None:
        """After a segment: advance the members, end their epochs, retire the finished
        ones and (``retire = "remove"``) re-stack the survivors."""
        for m in self._live:
            m.step += length
        for m in self._live:
            if m.step == m.order.n_batches:
                self._end_epoch(m)
        self._maybe_restack()

    def _maybe_restack(self) -> None:
        route = self.route
        if self.retire != "remove" or not isinstance(route, _VectorRoute):
            return
        keep = [k for k in route.slots if self.members[k].active]
        if not keep or len(keep) == len(route.slots):
            return
        if self.compile_mode != "off" and len(keep) > len(route.slots) // 2:
            return  # under compile: only at halving sizes (each new size recompiles)
        if self.stream is not None:  # what the old stack allocated on its stream
            main = torch.cuda.current_stream(self.device)
            for t in [*route.stack.params.values(), *route.stack.buffers.values(),
                      *(v for st in route.optimizer.state.values() for v in st.values())]:
                t.record_stream(main)
        route.restack(keep)
        self.stack = route.stack
        route.set_active(self.active_mask)
        self.restacks.append(len(keep))
        if self.compile_mode != "off":
            self._needs_probe = True  # a new member count: compile and probe again

    def _end_epoch(self, m: _Member) -> None:
        r = m.result
        job = m.job
        order = m.order
        train_s = self.clock.s - m.clock0
        r.train_time_s = (r.train_time_s or 0.0) + train_s
        r.samples += order.n_batches * order.batch_size
        self.samples += order.n_batches * order.batch_size
        r.samples_dropped += order.dropped_per_epoch
        r.epochs_run = m.epoch + 1
        epoch_loss = float(self.loss_sums[m.index]) / order.n_batches
        last_epoch = m.epoch == job.epochs - 1
        if not math.isfinite(epoch_loss):
            self._retire(m)
            self._fail(r, f"FloatingPointError: training loss is {epoch_loss} at epoch "
                          f"{m.epoch + 1}")
            return
        record: dict[str, Any] = {"epoch": m.epoch + 1, "train_loss": epoch_loss,
                                  "train_s": train_s}
        if last_epoch:
            r.final_train_loss = epoch_loss
            r.final_train_acc = task_lib.finalise(self.task, self.route.scores_of(m.index))
            record["train_acc"] = r.final_train_acc
        if job.validate_every_epoch or last_epoch:
            self.route.sync_member(m.index)
            t_val = time.perf_counter()
            val_loss, val_acc = evaluate(m.model, m.val_x, m.val_y, m.split.val_idx,
                                         self.task, m.amp)
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
            self._retire(m)
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
            self._start_epoch(m)

    def _retire(self, m: _Member) -> None:
        """Freeze member ``m``: from the next step on its parameters, optimizer state and
        buffers no longer change (and with ``retire = "remove"`` it leaves the stack at
        the end of the segment)."""
        m.active = False
        self.active_mask[m.index] = False
        self.route.set_active(self.active_mask)

    # -- compile -------------------------------------------------------------------------
    def compile_probe(self) -> None:
        """Compile this bucket's step callable and probe it on the next batch (see the
        module docstring); records the mode or the fallback reason and the warm-up."""
        self._needs_probe = False
        mode = self.settings.compile_mode
        if mode == "off" or self.route is None or not self.active:
            return
        if self.compile_mode == "off" and self.compile_reason:
            return  # an earlier probe failed: this bucket stays eager
        _sync(self.device)
        t0 = time.perf_counter()
        self.prepare(1)
        idx = self._seg[0]
        xb, yb = self.data.pool_x[idx], self.data.pool_y[idx]
        if self.shared:
            yb = yb.expand(len(self.route.slots), *yb.shape)
        backend = self.compile_backend

        def compiler(fn):
            return compile_callable(fn, mode, backend)

        why = self.route.compile_probe(compiler, xb, yb, self.shared)
        _sync(self.device)
        warmup = time.perf_counter() - t0
        self.compile_warmup_s += warmup
        if why is None:
            self.compile_mode = mode
        else:
            self.route.uncompile()
            self.compile_mode = "off"
            self.compile_reason = (f"compile probe ({mode}) failed, trained eagerly: {why}")
        for m in self.members:
            r = m.result
            if m.active:
                r.compile_warmup_s = (r.compile_warmup_s or 0.0) + warmup
            r.compile_mode = self.compile_mode
            r.compile_reason = self.compile_reason


class Interleave:
    """Train the buckets ``runs`` (built) of one chunk together, round-robin per global
    step over the buckets with active members; see the module docstring.

    ``streams``: one CUDA stream per bucket (CUDA only), or a callable deciding it from
    the runs once their compile probes are done (streams never meet CUDA-graph capture).
    ``trace``: when a list, one ``(bucket index, member job ids stepped)`` tuple is
    appended per bucket step (tests)."""

    def __init__(self, runs: Sequence[BucketRun], device: torch.device, *,
                 streams: bool | Callable[[list[BucketRun]], bool] = False,
                 trace: list | None = None):
        self.runs = [r for r in runs if r.route is not None and r.active]
        self.device = device
        self._streams = streams
        self.streams = False
        self.trace = trace
        self.clock = _Clock()

    def _probe(self, runs: list[BucketRun]) -> None:
        for r in runs:
            if r._needs_probe and r.active:
                try:
                    r.compile_probe()
                except Exception as exc:  # noqa: BLE001 - the bucket broke
                    traceback.print_exc()
                    r.fail_all(exc)

    @property
    def train_clock_s(self) -> float:
        return self.clock.s

    def run(self) -> None:
        runs = self.runs
        for r in runs:
            try:
                r.start(self.clock)
            except Exception as exc:  # noqa: BLE001
                traceback.print_exc()
                r.fail_all(exc)
        self._probe(runs)
        want = self._streams(runs) if callable(self._streams) else self._streams
        self.streams = bool(want) and self.device.type == "cuda"
        if self.streams:
            for r in runs:
                r.stream = torch.cuda.Stream(self.device)
        while True:
            live = [r for r in runs if r.active]
            self._probe(live)  # buckets re-stacked under compile
            live = [r for r in live if r.active]
            if not live:
                break
            length = min(r.remaining() for r in live)
            for r in live:
                r.prepare(length)
            main = torch.cuda.current_stream(self.device) if self.streams else None
            if main is not None:
                for r in live:
                    r.stream.wait_stream(main)    # indices, parameters, state: ready
                    r._seg.record_stream(r.stream)
                    r.loss_sums.record_stream(r.stream)
            _sync(self.device)
            t0 = time.perf_counter()
            broken: set[int] = set()
            for i in range(length):
                for j, r in enumerate(live):
                    if j in broken:
                        continue
                    try:
                        if main is not None:
                            with torch.cuda.stream(r.stream):
                                r.step(i)
                        else:
                            r.step(i)
                    except Exception as exc:  # noqa: BLE001 - that bucket broke
                        traceback.print_exc()
                        broken.add(j)
                        r.fail_all(exc)
                    if self.trace is not None:
                        self.trace.append((r.plan.index, tuple(
                            m.job.job_id for m in r.members if m.active)))
            if main is not None:
                for r in live:
                    main.wait_stream(r.stream)  # losses, parameters: before bookkeeping
            _sync(self.device)
            elapsed = time.perf_counter() - t0
            self.clock.s += elapsed
            for j, r in enumerate(live):
                r.train_clock_s += elapsed
                if j in broken:
                    continue
                try:
                    r.finish(length)
                except Exception as exc:  # noqa: BLE001
                    traceback.print_exc()
                    r.fail_all(exc)
