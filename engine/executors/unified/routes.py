"""The two routes by which one bucket's members take a training step, and the member record
they share (``docs/measurement.md``, "unified_model").

Both routes have one interface (``step``, ``set_active``, ``reset_scores``, ``scores_of``,
``sync_member``, ``compile_probe``, ``uncompile``), so :class:`~engine.executors.unified.
bucket.BucketRun` drives either without knowing which it has:

* vectorised (:class:`VectorRoute`): one ``Stack`` + ``StackedOptimizer``; one template call
  per step; finished members are frozen exactly (``Stack.forward(active=...)`` and
  ``StackedOptimizer.step(active)``) or, on :meth:`VectorRoute.restack`, dropped from a
  new stack of the survivors (``Stack.subset`` / ``StackedOptimizer.subset``, exact copies);
* eager (:class:`EagerRoute`): each member's own module and torch optimizer, stepped in
  member order (one step of every active member per global step); the global RNG is
  swapped to the member's state around its step, so dropout masks equal seq's.

Compile probe (per route): the route's step callable (the stack's vectorised call, or each
member's module on the eager route) is wrapped with the given compiler, its forward and
backward run once on one batch and its outputs are compared with the eager forward on the
same batch (``engine.train.compile_probe.differs``: by value, or by shape when the eager
forward drew random numbers, as for the training loop's probe; the stack draws its dropout
noise outside the compiled call, so its outputs are always compared by value); buffers,
dropout generators and the global RNG are restored afterwards, so training starts from the
same state. The bucket decides what to do with the answer (``BucketRun.compile_probe``).

Kept apart from the bucket loop because this is the part that must equal seq's arithmetic
step for step; the loop around it only schedules and books.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from engine.define.workloads import JobSpec
from engine.errors import failure_line
from engine.executors.unified.losses import member_sums, stacked_score_sums, upcast_half
from engine.executors.unified.optim import StackedOptimizer
from engine.executors.unified.scaler import StackedGradScaler
from engine.executors.unified.stack import Stack
from engine.parts import tasks as task_lib
from engine.train.compile_probe import differs as _differs
from engine.train.compile_probe import rng_state as _rng_state
from engine.train.compile_probe import set_rng_state as _set_rng_state
from engine.train.data import EpochOrder, JobSplit
from engine.train.loop import JobResult
from engine.train.precision import FP32, JobPrecision, autocast, cast_input


@dataclass
class Member:
    index: int
    job: JobSpec
    result: JobResult
    model: nn.Module
    generator: torch.Generator
    split: JobSplit
    order: EpochOrder
    val_x: torch.Tensor
    val_y: torch.Tensor
    precision: JobPrecision
    optimizer: Any = None
    scaler: Any = None
    skipped: Any = None  # amp-fp16 skipped steps: SkipCounter (eager) or scaler.MemberSkips
    epoch: int = 0
    step: int = 0
    batches: torch.Tensor | None = None
    active: bool = True
    #: Held at an early-stopping rung (sha): frozen like a retired member, but kept in its
    #: stack until the rung's decision resumes or stops it.
    waiting: bool = False
    clock0: float = 0.0
    scores: dict[str, torch.Tensor] = field(default_factory=dict)
    forward: Any = None  # the compiled module (eager route under compile), else None
    #: The member's final weights (``engine.train.loop.final_state``) once its chunk was
    #: released, kept for the hand-back after the group window (issue 50); else None.
    final: dict[str, torch.Tensor] | None = None


class VectorRoute:
    """One stacked step for every member of the stack: forward, per-member losses, backward
    of their (masked) sum, stacked optimizer step.

    ``slots``: the bucket member index of each stack position (all members until some are
    removed by :meth:`restack`). ``step`` returns the losses of all ``k_all`` bucket
    members (zeros for removed ones)."""

    name = "vectorised"

    def __init__(self, stack: Stack, optimizer: StackedOptimizer, loss_fn, task, k_all: int,
                 precision: JobPrecision = FP32, scaler: StackedGradScaler | None = None):
        #: The bucket's precision (one per cell): autocast around the vmapped call and the
        #: loss (amp-fp16, amp-bf16; parameters and optimizer state stay float32), or
        #: bfloat16 parameters with inputs cast (bf16).
        self.precision = precision
        #: amp-fp16: one GradScaler per member, vectorised (a member that overflows skips
        #: only its own step, ``engine.executors.unified.scaler``).
        self.scaler = scaler
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
        #: deferred steps: ((K, B) per-element losses, slot index) or (None, ready losses)
        self._pending: list[tuple[torch.Tensor | None, torch.Tensor | None]] = []

    def set_active(self, active: list[bool]) -> None:
        live = [active[s] for s in self.slots]
        self._live = None if all(live) else live
        self._mask = None if all(live) else torch.tensor(live, dtype=torch.bool,
                                                         device=self.stack.device)

    def step(self, xb, yb, active: list[bool], shared: bool, scoring: bool,
             defer: bool = False) -> torch.Tensor | None:
        """One stacked step of every active member. Returns the (K_all,) reported losses,
        or with ``defer`` queues them (:meth:`take`) and returns ``None``: on the exact
        path's plain cross-entropy on the CPU the per-member means of many steps are then
        reduced in one call (``losses.nll_mean``), the same values."""
        with autocast(self.stack.device, self.precision):
            out = self.stack(cast_input(xb, self.precision), shared_input=shared,
                             active=self._live)
            losses = self.loss_fn(out, yb)
        masked = (losses if self._mask is None
                  else torch.where(self._mask, losses, torch.zeros_like(losses)))
        if self.scaler is not None:
            masked = self.scaler.scale(masked)
        self.optimizer.zero_grad()
        masked.sum().backward()
        self.stack.settle()
        if self.scaler is None:
            self.optimizer.step(self._live)
        else:
            found = self.scaler.unscale_(self.stack.params)
            stepping = (torch.ones_like(found) if self._mask is None else self._mask)
            steps = (stepping & ~found).tolist()  # the one host sync: who steps
            self.optimizer.step(steps)
            self.scaler.update(found, stepping)
        if scoring:
            with torch.no_grad():
                sums = stacked_score_sums(self.task, out, yb)
            self.scores = sums if self.scores is None else {
                key: self.scores[key] + value for key, value in sums.items()}
        # What each member reports: on the exact path the solo criterion's values (forward
        # only); the backward above ran once through the fused loss (losses.StackedLoss).
        later = getattr(self.loss_fn, "deferred", None)
        elements = later(out) if defer and later is not None else None
        if elements is not None:
            self._pending.append((elements, self._slot_index))
            return None
        values = getattr(self.loss_fn, "values", None)
        with autocast(self.stack.device, self.precision):
            losses = values(out, yb, losses) if values is not None else losses.detach()
        full = self._full(losses, self._slot_index)
        if defer:
            self._pending.append((None, full))
            return None
        return full

    def _full(self, losses: torch.Tensor, slot_index: torch.Tensor | None) -> torch.Tensor:
        """(S,) losses of the stack's slots → (K_all,) with zeros for the bucket's others."""
        if slot_index is None:
            return losses
        full = losses.new_zeros(self.k_all)
        full[slot_index] = losses
        return full

    def pending(self) -> int:
        """Steps whose losses :meth:`take` has not handed out yet."""
        return len(self._pending)

    def take(self) -> list[torch.Tensor]:
        """The (K_all,) reported losses of the deferred steps, in step order; consecutive
        deferred steps are reduced together (``StackedLoss.reduce``)."""
        out: list[torch.Tensor] = []
        run: list[tuple[torch.Tensor, torch.Tensor | None]] = []

        def reduce_run() -> None:
            if run:
                values = self.loss_fn.reduce([elements for elements, _ in run])
                out.extend(self._full(v, slots) for v, (_, slots) in zip(values, run,
                                                                          strict=True))
                run.clear()

        for elements, ready in self._pending:
            if elements is None:
                reduce_run()
                out.append(ready)
            else:
                run.append((elements, ready))
        reduce_run()
        self._pending = []
        return out

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
        if self.scaler is not None:
            self.scaler = self.scaler.subset(positions)
        if self.scores is not None:
            idx = torch.tensor(positions, dtype=torch.long, device=self.stack.device)
            self.scores = {key: value.index_select(0, idx) for key, value in self.scores.items()}
        self.stack = stack
        self.slots = list(keep)
        self._slot_index = torch.tensor(self.slots, dtype=torch.long, device=stack.device)

    def join(self, keep: list[int], member: Member, optimizer_for: Any) -> None:
        """Keep bucket members ``keep`` (a subset of ``slots``, in slot order) and add
        ``member`` (its bucket index already given) in the last slot (issue 52: a stream's
        job joining at a step boundary): a new stack (``Stack.joined``) and a new stacked
        optimizer over it (``optimizer_for(params)``, every slot's own hyperparameters),
        into which each kept member's optimizer state is copied (``load_member``); the
        newcomer starts from torch's fresh state. Exact copies: every kept member's next
        step is the one it would have taken in the old stack. The caller accounts for the
        deferred losses first (:meth:`take` must hold nothing) and sets ``k_all``."""
        if self._pending:
            raise RuntimeError("join: the route still holds deferred losses")
        if self.scaler is not None:
            raise RuntimeError("join: a stack with per-member GradScalers takes no member")
        positions = [self.slots.index(k) for k in keep]
        stack = self.stack.joined(positions, member.model, member.generator)
        optimizer = optimizer_for(stack.params)
        for new, old in enumerate(positions):
            optimizer.load_member(new, *self.optimizer.member_state(old))
        if self.scores is not None:
            idx = torch.tensor(positions, dtype=torch.long, device=self.stack.device)
            self.scores = {key: torch.cat([value.index_select(0, idx),
                                           value.new_zeros((1, *value.shape[1:]))])
                           for key, value in self.scores.items()}
        self.stack, self.optimizer = stack, optimizer
        self.slots = [*keep, member.index]
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
                for g, st in zip(stack.generators, gens, strict=False):
                    g.set_state(st)
            _set_rng_state(stack.device, rng)

        xb = cast_input(xb, self.precision)
        try:
            with torch.no_grad(), autocast(stack.device, self.precision):
                ref = stack(xb, shared_input=shared)
            restore()
            stack.set_compiler(compiler)
            with autocast(stack.device, self.precision):
                out = stack(xb, shared_input=shared)
                loss = self.loss_fn(out, yb).sum()
            params = [p for p in stack.params.values() if p.requires_grad]
            torch.autograd.grad(loss, params, allow_unused=True)
            return _differs(out, ref)
        except Exception as exc:  # noqa: BLE001 - any failure is a fallback, with its reason
            return failure_line(exc, 300)
        finally:
            restore()
            stack.forward_calls = calls

    def uncompile(self) -> None:
        self.stack.set_compiler(None)


class EagerRoute:
    """Each active member steps on its own module and torch optimizer, in member order."""

    name = "eager"

    def __init__(self, members: list[Member], task, device: torch.device):
        self.members = members
        self.task = task
        self.criterion = task_lib.loss_fn(task).criterion
        self.device = device
        self.slots = [m.index for m in members]
        self._pending: list[torch.Tensor] = []

    def set_active(self, active: list[bool]) -> None:
        pass

    def _swap_in(self, m: Member) -> Any:
        if self.device.type == "cpu":
            saved = torch.get_rng_state()
            torch.set_rng_state(m.generator.get_state())
        else:
            saved = torch.cuda.get_rng_state(self.device)
            torch.cuda.set_rng_state(m.generator.get_state(), self.device)
        return saved

    def _swap_out(self, m: Member, saved: Any) -> None:
        if self.device.type == "cpu":
            m.generator.set_state(torch.get_rng_state())
            torch.set_rng_state(saved)
        else:
            m.generator.set_state(torch.cuda.get_rng_state(self.device))
            torch.cuda.set_rng_state(saved, self.device)

    def step(self, xb, yb, active: list[bool], shared: bool, scoring: bool,
             defer: bool = False) -> torch.Tensor | None:
        """One step of each active member, in member order; the (K,) losses, or with
        ``defer`` queued for :meth:`take` (as ``VectorRoute.step``)."""
        losses: torch.Tensor | None = None
        for m in self.members:
            k = m.index
            if not active[k]:
                continue
            x_k = xb if shared else xb[k]
            y_k = yb[k]
            saved = self._swap_in(m)
            try:
                with autocast(self.device, m.precision):
                    forward = m.forward or m.model
                    out, target = task_lib.prepare(
                        self.task, forward(cast_input(x_k, m.precision)), y_k)
                    loss = self.criterion(upcast_half(out), target)
                m.optimizer.zero_grad(set_to_none=True)
                if m.scaler is not None:
                    m.scaler.scale(loss).backward()
                    m.scaler.step(m.optimizer)
                    m.skipped.after_step(m.scaler, m.optimizer)
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
        if defer:
            self._pending.append(losses)
            return None
        return losses

    def pending(self) -> int:
        return len(self._pending)

    def take(self) -> list[torch.Tensor]:
        out, self._pending = self._pending, []
        return out

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

            def restore(m=m, buffers=buffers, gen=gen, rng=rng) -> None:  # bound now (B023)
                with torch.no_grad():
                    for n, b in m.model.named_buffers():
                        b.copy_(buffers[n])
                m.generator.set_state(gen)
                _set_rng_state(self.device, rng)

            try:
                saved = self._swap_in(m)
                try:
                    with torch.no_grad(), autocast(self.device, m.precision):
                        ref = m.model(cast_input(x_k, m.precision))
                finally:
                    self._swap_out(m, saved)
                # Dropout drew from the member's generator: compiled code may draw other
                # numbers (TorchInductor does), so its outputs cannot be compared by value.
                stochastic = not torch.equal(m.generator.get_state(), gen)
                restore()
                m.forward = compiler(m.model)
                saved = self._swap_in(m)
                try:
                    with autocast(self.device, m.precision):
                        out = m.forward(cast_input(x_k, m.precision))
                        o, t = task_lib.prepare(self.task, out, yb[m.index])
                        loss = self.criterion(upcast_half(o), t)
                    torch.autograd.grad(loss, [p for p in m.model.parameters()
                                               if p.requires_grad], allow_unused=True)
                finally:
                    self._swap_out(m, saved)
                why = _differs(out, ref, stochastic)
            except Exception as exc:  # noqa: BLE001
                why = failure_line(exc, 300)
            finally:
                restore()
            if why is not None:
                self.uncompile()
                return f"{m.job.job_id}: {why}"
        return None

    def uncompile(self) -> None:
        for m in self.members:
            m.forward = None
