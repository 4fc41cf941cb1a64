"""One bucket's set-up: its members built and its route decided (``docs/measurement.md``,
"unified_model"). :class:`BucketBuild` is the first half of
:class:`~engine.executors.unified.bucket.BucketRun` (which adds the training loop); it holds
the bucket's state and :meth:`BucketBuild.build` fills it.

Per member, exactly as a solo run: the global RNG is seeded with the job seed just before
its model is built (so initial weights equal seq's) and its dropout generator continues
from there; its batch order is its own ``EpochOrder`` (job seed) over its own split; the
torch optimizer is built for both routes, so a bad hyperparameter fails that job only, as
under seq. A member whose build raises fails; the others go on.

The decision (``plan.route``/``check``/``reason``): vectorised only with two or more
members (float16 AMP included: a GradScaler per member, ``scaler.StackedGradScaler``), no
unsupported layer, identical
structure (``fingerprint_mismatch``) and, unless ``verify = false``,
``verify.verify_bucket`` agrees: every member's own forward against the stack's template
(state outside the module) and one one-step probe of both routes on copies of the bucket's
representatives (not K probes), in the precision the bucket trains in; otherwise eager,
with the reason; the probed members are recorded (``plan.probed``). Then the data order
(``shared`` only when the members' training sets are identical) and where the dropout
masks come from are recorded in the plan.

Kept apart from the loop: everything here runs once per bucket, before the training clock
starts, and is what the printed/stored plan reports.
"""

from __future__ import annotations

import json
import os
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from engine.define.workloads import JobSpec
from engine.errors import failure_line
from engine.events import job_done, job_started
from engine.executors.unified.interleave import Clock
from engine.executors.unified.losses import loss_function
from engine.executors.unified.optim import build_stacked
from engine.executors.unified.parity import after_probe, before_probe
from engine.executors.unified.parity_probe import probe as parity_probe
from engine.executors.unified.plan import BucketPlan
from engine.executors.unified.routes import EagerRoute, Member, VectorRoute
from engine.executors.unified.scaler import MemberSkips, StackedGradScaler
from engine.executors.unified.stack import Stack, member_generator, unsupported_reason
from engine.executors.unified.verify import (
    fingerprint_mismatch,
    verify_bucket,
)
from engine.parts import tasks as task_lib
from engine.parts.models import build_model
from engine.parts.optimizers import build_optimizer
from engine.train import isolation
from engine.train.data import DeviceData
from engine.train.loop import (
    JobResult,
    TrainSettings,
    job_split,
    record_precision,
    seed_job,
    sync,
)
from engine.train.precision import (
    SkipCounter,
    autocast,
    cast_input,
    cast_model,
    job_precision,
    make_scaler,
)

Emit = Callable[..., Any]
RETIRE = ("remove", "mask")


@dataclass
class Check:
    """What :meth:`BucketBuild.check_members` found: ``ok`` (they may train stacked),
    the plan's ``check`` (``verified``, ``unchecked``, ``disagreed``, ``raised``,
    ``refused``) and ``reason``, the probed members' job ids (None: no probe ran), the
    checks' wall time and whether their forwards changed state every member shares."""

    ok: bool
    check: str
    reason: str
    probed: list[str] | None = None
    verify_s: float | None = None
    shared_state: bool = False


class BucketBuild:
    """The state of one bucket (``plan``) on ``data`` and :meth:`build`, which builds the
    members and decides the route (updating ``plan``); :class:`~engine.executors.unified.
    bucket.BucketRun` adds the training loop, which an ``Interleave`` steps (alone through
    ``BucketRun.run``, or with the other buckets of its chunk).

    Args:
        fused: ``fl`` feature (one loss call over the stack instead of one per member).
        verify: run the fingerprint and the one-step probe before vectorising.
        data_order: ``per_member`` (each job's own order, seq's) or ``shared`` (member 0's
            order for all: one gather per step; only when the members' training sets are
            identical, else per_member with a note).
        retire: ``remove`` (re-stack the survivors) or ``mask`` (keep finished members
            frozen in the stack).
        outside: where the parity probe's ``(start, end)`` on ``time.perf_counter`` is
            appended: time the cell keeps out of ``T_group`` (``CellContext.outside_window``).
        probe_parity: False: no float32 parity probe (a stream cell's buckets: the
            contract's bound stands).
    """

    def __init__(self, plan: BucketPlan, data: DeviceData, settings: TrainSettings,
                 emit: Emit, *, fused: bool = False, verify: bool = True,
                 data_order: str = "per_member", exact_kernels: bool = False,
                 announce: Callable[[BucketPlan], Any] | None = None,
                 retire: str = "remove", compile_backend: str = "inductor",
                 outside: list[tuple[float, float]] | None = None,
                 probe_parity: bool = True):
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
        #: The cell's early-stopping decisions (``engine.executors.unified.stopping``), set
        #: by the executor on hpo cells under a scheduler; None under fifo.
        self.stopper = None
        self.compile_backend = compile_backend
        self.outside = outside if outside is not None else []
        #: run the float32 one-step parity probe where the contract asks for it (False in
        #: a stream cell: its time could not be kept out of the jobs' completion times,
        #: so the bucket keeps the contract's bound)
        self.probe_parity = probe_parity
        self.clock = Clock()
        #: training-step wall time of the chunk while this bucket had active members
        self.train_clock_s = 0.0
        self.samples = 0
        self.stack: Stack | None = None
        self.route: Any = None
        self.members: list[Member] = []
        self.results: list[JobResult] = []
        self.task: Any = None
        self.shared = False
        self.stream: Any = None
        #: compile: "off", the mode that runs, or None while not probed yet
        self.compile_mode = "off"
        self.compile_reason = ""
        self.compile_warmup_s = 0.0
        self.restacks: list[int] = []  # stack sizes after each re-stack
        #: its route was built (a bucket whose build broke has none; kept after release)
        self.routed = False
        self._needs_probe = False
        self._last_report = 0.0

    @property
    def active(self) -> bool:
        return any(m.active for m in self.members)

    # -- members -----------------------------------------------------------------------
    def _build(self, job: JobSpec, index: int, result: JobResult) -> Member:
        device = self.device
        data = self.data
        sync(device)
        result.worker_pid = os.getpid()
        # Each member's build judged as a job's (engine.train.isolation): members are built
        # one after another in this process, so a member built from state an earlier one
        # changed reads so.
        shared = isolation.job_start(job.model)
        result.isolation = isolation.verdict(shared)  # a build that fails keeps this one
        result.start = time.perf_counter()
        seed_job(job.seed, device)  # initial weights and dropout: the job seed, as in seq
        # Built here, not through loop.start_job: the parity tests watch where each
        # executor builds its models.
        model = build_model(job.model, data.in_shape, data.n_outputs, job.model_kwargs,
                            where=job.job_id).to(device)
        result.isolation = isolation.job_built(job.model, model, shared)
        generator = member_generator(device)
        result.param_count = sum(p.numel() for p in model.parameters())
        precision = record_precision(result, job_precision(
            job.amp, self.settings.precision, device, self.settings.amp_allowed))
        cast_model(model, precision)  # bf16: bfloat16 weights, as seq's job has
        split, val_x, val_y, order = job_split(job, data, result)
        # The torch optimizer is built for both routes: it validates the hyperparameters
        # exactly as seq does (a bad value fails this job only) and trains the eager route.
        optimizer = build_optimizer(job.optimizer, model.parameters(), job.lr,
                                    job.optimizer_kwargs, where=job.job_id)
        scaler = make_scaler(device, precision)
        return Member(index, job, result, model, generator, split, order, val_x, val_y,
                      precision, optimizer=optimizer, scaler=scaler,
                      skipped=SkipCounter(device) if scaler is not None else None)

    def _fail(self, result: JobResult, error: str) -> None:
        result.status = "failed"
        result.error = error.splitlines()[0][:500]
        result.end = time.perf_counter()
        if result.start is not None:
            result.total_time_s = result.end - result.start
        job_done(result).send(self.emit)

    def fail_all(self, exc: BaseException) -> None:
        """The bucket itself broke: its unfinished members fail."""
        for m in self.members:
            if m.active or m.waiting:
                m.active = m.waiting = False
                self._fail(m.result, failure_line(exc))
                if self.stopper is not None:
                    self.stopper.forget(m)

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
        found = self.check_members(members, task)
        plan.verify_s = found.verify_s
        plan.probed = found.probed
        plan.check, plan.reason = found.check, found.reason
        if not found.ok:
            plan.route = "eager"
            plan.shared_state = found.shared_state

    def check_members(self, members: list[Member], task) -> Check:
        """The checks that decide whether ``members`` (built, two or more) may train in one
        stack: a layer without a vectorised form, the structure (fingerprint) and, unless
        ``verify = false``, ``verify.verify_bucket`` plus the shared-state watch. Used for
        a bucket's members before training and for a stream's job joining a running stack
        (issue 52: checked with the stack's first member as a bucket member is). Runs on
        the members' modules as they stand; changes none of them."""
        reason = unsupported_reason(members[0].model)
        if reason is not None:
            return Check(False, "refused", reason)
        t0 = time.perf_counter()
        mismatch = fingerprint_mismatch([m.model for m in members])
        if mismatch is not None:
            return Check(False, "disagreed", f"structure: {mismatch}",
                         verify_s=time.perf_counter() - t0)
        if not self.verify:
            return Check(True, "unchecked", "verify = false")
        bs = members[0].job.batch_size
        idx = torch.stack([m.split.train_idx[:bs] for m in members]).to(self.device)
        precision = members[0].precision
        # Interchangeable by construction: one model, one set of constructor arguments
        # (the bucket key already holds them equal; checked here, not assumed).
        alike = len({(m.job.model, json.dumps(m.job.model_kwargs, sort_keys=True, default=repr))
                     for m in members}) == 1
        # State every member shares (a class attribute, a global of the plugin's module)
        # that the checks' forwards change: no route trains the members as seq's jobs
        # (each one alone, in turn), so the bucket runs eager and promises nothing.
        shared_before = isolation.shared_snapshot(members[0].job.model)
        # Both routes checked in the precision they train in (autocast; bf16 inputs).
        with autocast(self.device, precision):
            verdict, probed = verify_bucket(
                [m.model for m in members], [m.generator for m in members],
                cast_input(self.data.pool_x[idx], precision), self.data.pool_y[idx],
                constructed_alike=alike, task=task,
                optimizer=members[0].job.optimizer, lrs=[m.job.lr for m in members],
                optimizer_kwargs=[dict(m.job.optimizer_kwargs) for m in members],
                stacked_loss=loss_function(task, self.fused),
                sample_shape=tuple(self.data.in_shape), exact_kernels=self.exact_kernels)
        verify_s = time.perf_counter() - t0
        names = [members[i].job.job_id for i in probed]
        shared = isolation.shared_changes(members[0].job.model, shared_before)
        if shared:
            return Check(False, "disagreed",
                         f"forward changes shared state: {', '.join(shared[:3])} (every "
                         f"member sees it: trained eager, nothing promised against seq)",
                         names, verify_s, shared_state=True)
        if verdict.ok:
            return Check(True, "verified", "", names, verify_s)
        return Check(False, verdict.verdict, verdict.detail, names, verify_s)

    def _parity(self) -> None:
        """The bucket's ``parity_contract`` (engine.executors.unified.parity): decided by
        the contract, or by the float32 one-step probe of a twin of the stack that trains
        against K solo steps, run here, after the stack was built and before training. The
        probe's wall time goes to the plan and to :attr:`outside` (kept out of T_group)."""
        plan, members = self.plan, self.members
        first = members[0]
        value, probe = before_probe(
            route=plan.route, precision=first.precision.applied,
            exact_kernels=self.exact_kernels, skipped_layers=plan.exact_kernels_skipped,
            fused=self.fused, device_type=self.device.type,
            dropout=any(type(s) is nn.Dropout for s in first.model.modules()),
            optimizer=first.job.optimizer,
            shared_state=plan.shared_state)
        plan.parity_contract = value
        if not probe or not self.probe_parity or self.stack is None or value is None:
            return
        bs = plan.jobs[0].batch_size
        idx = torch.stack([m.split.train_idx[:bs] for m in members]).to(self.device)
        found = parity_probe(
            [m.model for m in members], [m.generator for m in members],
            self.data.pool_x[idx], self.data.pool_y[idx], task=self.task,
            optimizer=first.job.optimizer, lrs=[m.job.lr for m in members],
            optimizer_kwargs=[dict(m.job.optimizer_kwargs) for m in members],
            stacked_loss=loss_function(self.task, self.fused),
            sample_shape=tuple(self.data.in_shape), exact_kernels=self.exact_kernels,
            shared=self.shared)
        sync(self.device)
        end = time.perf_counter()
        self.outside.append((found.started, end))
        plan.parity_probe_s = end - found.started
        # "bound": what stands where the probe does not speak (a re-stack, executor.py)
        plan.parity_probe = {**found.info(), "bound": value}
        plan.parity_contract = after_probe(value, found.outcome, self.fused)
        delta = "" if found.max_abs is None else f", max |Δ| {found.max_abs:.3g}"
        print(f"  parity: bucket {plan.index} {plan.parity_contract} (float32 one-step probe: "
              f"{found.outcome}{delta}; {plan.parity_probe_s:.3f} s, outside T_group)",
              flush=True)

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

    def new_stack(self, members: list[Member]) -> Stack:
        """The stack ``members`` train in (their modules as they stand, their dropout
        generators)."""
        return Stack([m.model for m in members], [m.generator for m in members],
                     tuple(self.data.in_shape), members[0].job.batch_size,
                     exact_kernels=self.exact_kernels,
                     # the gradient layout probe runs without autocast: under AMP the
                     # gradients come through casts, in their own layout
                     shared_input=None if members[0].precision.amp else self.shared)

    def stacked_optimizer(self, members: list[Member], params: dict[str, torch.Tensor]) -> Any:
        """The stacked optimizer over ``params`` with each of ``members``' own learning rate
        and keywords (fresh state)."""
        return build_stacked(members[0].job.optimizer, params, [m.job.lr for m in members],
                             [dict(m.job.optimizer_kwargs) for m in members])

    # -- build ---------------------------------------------------------------------------
    def build(self) -> list[JobResult]:
        """Build every member (a failing build fails that job, as under seq), decide the
        route and create it. Returns the results in the bucket's job order."""
        for job in self.plan.jobs:
            job_started(job.job_id).send(self.emit)
            result = JobResult(job)
            self.results.append(result)
            try:
                self.members.append(self._build(job, len(self.members), result))
            except Exception as exc:  # the job fails, as it would under seq
                traceback.print_exc()
                self._fail(result, failure_line(exc))
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
                self.stack = self.new_stack(self.members)
                if self.exact_kernels:
                    self.plan.exact_kernels_skipped = list(self.stack.vmapped_layers)
                optimizer = self.stacked_optimizer(self.members, self.stack.params)
                for m in self.members:  # the stack trains; the solo optimizers are unused
                    m.optimizer = None
                scaler = None
                if self.members[0].precision.scaled:
                    # amp-fp16: one GradScaler per member, vectorised (one for the stack
                    # would let one member's overflow skip every member's step).
                    scaler = StackedGradScaler([m.scaler for m in self.members],
                                               self.stack.device, len(self.members))
                    for m in self.members:
                        m.scaler, m.skipped = None, MemberSkips(scaler, m.index)
                self.route = VectorRoute(self.stack, optimizer,
                                          loss_function(self.task, self.fused), self.task,
                                          len(self.members), self.members[0].precision,
                                          scaler)
            else:
                self.route = EagerRoute(self.members, self.task, self.device)
            self.routed = True
            self._parity()
            self._needs_probe = self.settings.compile_mode != "off"
        except Exception as exc:  # the bucket itself broke: its unfinished members fail
            traceback.print_exc()
            self.fail_all(exc)
        return self.results
