"""One bucket's training: ``engine.train.loop.train_job``'s contract, per member, for K
members trained at once (``docs/measurement.md``, "unified_model"). :class:`BucketRun`
(its members and route built by :class:`~engine.executors.unified.bucket_build.BucketBuild`)
is stepped by :class:`~engine.executors.unified.interleave.Interleave` in pieces: ``start``,
then per segment ``remaining`` / ``prepare`` / ``step`` x L / ``finish``.

Per member, exactly as a solo run: the short tail batch is dropped; hpo jobs validate after
every epoch, others after the last; ``final_train_loss`` is the mean of the last epoch's
batch losses and ``final_train_acc`` the score over the last epoch's training batches; a
non-finite epoch loss fails the member (``FloatingPointError``) and the others go on.
Events: ``job_started``, ``job_progress`` (at most every ``PROGRESS_INTERVAL_S`` and at
every epoch end, with seq's fields) and ``job_done``.

Finished members (``retire``): ``"mask"`` keeps them in their stack, frozen exactly
(``Stack.forward(active=...)`` and ``StackedOptimizer.step(active)``) but still computed;
``"remove"`` (default) re-stacks the survivors (``Stack.subset`` / ``StackedOptimizer
.subset``, exact copies) so retired members stop costing compute. Without compile the
survivors are re-stacked as soon as a member retires; under compile only when they fall to
half the stack or fewer (sizes K, K/2, K/4, ...: each new size recompiles).

Compile (``compile_mode`` not ``off``): the bucket's step callable is wrapped with
``torch.compile`` (:func:`compile_callable`) and probed by its route on the bucket's first
batch (see ``routes``). The probe's time is the bucket's compile warm-up
(``compile_warmup_s``, outside the training clock). A probe that raises or disagrees leaves
the bucket eager, with the reason.

Times, per member (seconds, ``time.perf_counter``, after a device sync on CUDA):
``train_time_s`` = sum over its epochs of the chunk's training-step wall time while that
epoch ran (every active member is charged the full interleaved step: they train
simultaneously); ``val_time_s`` = its own validations; ``total_time_s`` = from the start of
its model build to the end of its last validation (so it includes building, verifying and
compile warm-up of its bucket).
"""

from __future__ import annotations

import time
from typing import Any

import torch

from engine.errors import failure_line
from engine.events import job_done, job_progress
from engine.executors.unified.bucket_build import BucketBuild
from engine.executors.unified.interleave import Clock, Interleave
from engine.executors.unified.routes import Member, VectorRoute
from engine.parts import tasks as task_lib
from engine.train.compile_probe import compile_callable
from engine.train.data import EpochOrder, rows
from engine.train.loop import (
    PROGRESS_INTERVAL_S,
    JobResult,
    count_epoch,
    epoch_progress,
    evaluate,
    record_epoch,
    sync,
)

#: Steps whose reported losses a route may hold back (CPU) before the bucket accounts for
#: them: bounds the (K, B) per-element losses kept (64 steps of K = 64, B = 1024: 16 MiB).
MAX_PENDING = 64


class BucketRun(BucketBuild):
    """Train the jobs of one bucket (``plan``) on ``data``: :meth:`build` builds the
    members and decides the route (updating ``plan``), then an :class:`Interleave` steps
    it (alone through :meth:`run`, or with the other buckets of its chunk). Arguments: see
    :class:`~engine.executors.unified.bucket_build.BucketBuild`."""

    def run(self) -> list[JobResult]:
        """Build and train this bucket alone."""
        self.build()
        Interleave([self], self.device).run()
        return self.results

    # -- the loop, in pieces (driven by Interleave) --------------------------------------
    def start(self, clock: Clock) -> None:
        self.clock = clock
        k_all = len(self.members)
        self.active_mask = [m.active for m in self.members]
        self.route.set_active(self.active_mask)
        self.loss_sums = torch.zeros(k_all, device=self.device)
        self.defer = self.device.type == "cpu"
        self.shared_order = (EpochOrder(self.members[0].job, self.members[0].split.train_idx)
                             if self.shared else None)
        self._shared_state: dict[str, Any] = {"epoch": -1, "batches": None}
        self._last_report = time.perf_counter()
        for m in self.members:
            if m.active:
                self._start_epoch(m)

    def _start_epoch(self, m: Member) -> None:
        if self.shared_order is not None:
            if self._shared_state["epoch"] < m.epoch:
                self._shared_state["epoch"] = m.epoch
                self._shared_state["batches"] = self.shared_order.batches(self.device)
            m.batches = self._shared_state["batches"]
        else:
            m.batches = m.order.batches(self.device)
        m.step = 0
        m.clock0 = self.clock.s
        if self.defer:  # steps still held back belong to the epoch before: add them first
            self._account()
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
        xb, yb = rows(self.data.pool_x, idx), rows(self.data.pool_y, idx)
        if self.shared:
            yb = yb.expand(len(self.route.slots), *yb.shape)
        # On the CPU the route may hold the reported losses back and reduce many steps'
        # at once (routes.VectorRoute.take); on CUDA they are added here, on the bucket's
        # stream (a tensor read on another stream after its own is freed could be reused).
        losses = self.route.step(xb, yb, self.active_mask, self.shared, self._scoring,
                                 defer=self.defer)
        if losses is not None:
            self.loss_sums += losses
        now = time.perf_counter()
        if now - self._last_report >= PROGRESS_INTERVAL_S:
            self._last_report = now
            values = (losses if losses is not None else self._account()).tolist()
            for m in self._live:
                done = m.result.samples + (m.step + i + 1) * m.order.batch_size
                job_progress(job_id=m.job.job_id, epoch=m.epoch + 1, epochs=m.job.epochs,
                             step=m.step + i + 1, steps=m.order.n_batches, samples=done,
                             loss=values[m.index],
                             elapsed=now - m.result.start).send(self.emit)
        elif self.defer and self.route.pending() >= MAX_PENDING:
            self._account()

    def _account(self) -> torch.Tensor | None:
        """Add the steps' reported losses the route still holds to ``loss_sums`` (step by
        step, in step order: the sums are the ones a per-step addition makes); returns the
        last step's (K_all,) losses."""
        last = None
        for losses in self.route.take():
            self.loss_sums += losses
            last = losses
        return last

    def finish(self, length: int) -> None:
        """After a segment: account for its losses, advance the members, end their epochs,
        retire the finished ones and (``retire = "remove"``) re-stack the survivors."""
        self._account()
        for m in self._live:
            m.step += length
        for m in self._live:
            if m.step == m.order.n_batches:
                self._end_epoch(m)
        self._maybe_restack()

    def _maybe_restack(self) -> None:
        route = self.route
        if self.retire != "remove" or not isinstance(route, VectorRoute):
            return
        keep = [k for k in route.slots if self.members[k].active or self.members[k].waiting]
        if not keep or len(keep) == len(route.slots):
            return
        if self.compile_mode != "off" and len(keep) > len(route.slots) // 2:
            return  # under compile: only at halving sizes (each new size recompiles)
        self.hand_stack_to_main()
        route.restack(keep)
        self.stack = route.stack
        route.set_active(self.active_mask)
        self.restacks.append(len(keep))
        if self.compile_mode != "off":
            self._needs_probe = True  # a new member count: compile and probe again

    def hand_stack_to_main(self) -> None:
        """Before a re-stack on the current stream (a removal, a stream's join): what the
        old stack allocated on the bucket's own CUDA stream is recorded on the current
        one, so its memory is not reused while the copies still read it."""
        route = self.route
        if self.stream is None or not isinstance(route, VectorRoute):
            return
        main = torch.cuda.current_stream(self.device)
        for t in [*route.stack.params.values(), *route.stack.buffers.values(),
                  *(v for st in route.optimizer.state.values() for v in st.values())]:
            t.record_stream(main)

    def _end_epoch(self, m: Member) -> None:
        r = m.result
        job = m.job
        order = m.order
        train_s = self.clock.s - m.clock0
        self.samples += order.n_batches * order.batch_size
        last_epoch = m.epoch == job.epochs - 1
        try:
            epoch_loss = count_epoch(r, order, m.epoch, train_s, self.loss_sums[m.index])
        except FloatingPointError as exc:
            self._retire(m)
            self._fail(r, failure_line(exc))
            if self.stopper is not None:
                self.stopper.forget(m)
            return
        if job.validate_every_epoch or last_epoch:
            self.route.sync_member(m.index)  # the member's module gets the stack's weights
        record = record_epoch(
            r, job, m.epoch, train_s, epoch_loss,
            train_score=lambda: task_lib.finalise(self.task, self.route.scores_of(m.index)),
            validate=lambda: evaluate(m.model, m.val_x, m.val_y, m.split.val_idx, self.task,
                                      m.precision))
        job_progress(**epoch_progress(r, job, order, record, time.perf_counter(),
                                     metric=self.task.metric)).send(self.emit)
        if last_epoch:
            self._retire(m)
            sync(self.device)
            if m.skipped is not None:
                r.amp_skipped_steps = m.skipped.value()
            r.end = time.perf_counter()
            r.total_time_s = r.end - r.start
            if self.device.type == "cuda":  # the stacked process's peak so far (shared)
                r.torch_peak_allocated_mb = torch.cuda.max_memory_allocated(self.device) / 2**20
                r.torch_peak_reserved_mb = torch.cuda.max_memory_reserved(self.device) / 2**20
            job_done(r).send(self.emit)
        elif self.stopper is None or self.stopper.epoch_end(self, m, record):
            m.epoch += 1
            self._start_epoch(m)

    # -- early stopping (engine.executors.unified.stopping) --------------------------------
    def hold(self, m: Member) -> None:
        """Member ``m`` waits at a rung: frozen exactly as a retired member, kept in its
        stack."""
        self._retire(m)
        m.waiting = True

    def resume(self, m: Member) -> None:
        """The rung let ``m`` go on: active again from its next epoch."""
        m.waiting = False
        m.active = True
        self.active_mask[m.index] = True
        self.route.set_active(self.active_mask)
        m.epoch += 1
        self._start_epoch(m)

    def stop_member(self, m: Member, reason: str) -> None:
        """Stop ``m`` early, after the epochs it ran: retired (it leaves its stack at the
        next re-stack), its row says why; its final training loss is its last epoch's."""
        # its module gets the stack's weights before it leaves the stack: what the
        # hand-back after the window digests (a copy of one member, as a validation does)
        self.route.sync_member(m.index)
        self._retire(m)
        m.waiting = False
        r = m.result
        r.early_stopped, r.stop_reason = True, reason
        if r.history:
            r.final_train_loss = r.history[-1].get("train_loss")
        sync(self.device)
        r.end = time.perf_counter()
        r.total_time_s = r.end - r.start
        if self.device.type == "cuda":
            r.torch_peak_allocated_mb = torch.cuda.max_memory_allocated(self.device) / 2**20
            r.torch_peak_reserved_mb = torch.cuda.max_memory_reserved(self.device) / 2**20
        job_done(r).send(self.emit)

    def _retire(self, m: Member) -> None:
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
        sync(self.device)
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
        sync(self.device)
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

