"""The one training loop (``docs/measurement.md``): every executor that trains a single
model per job (seq, mp, ray) calls :func:`train_job`; the unified model reproduces the same
contract stacked.

Per job: seed the global RNG with the job seed, build the model, build the optimizer, then
for each epoch draw the job's batch order (``engine.train.data.EpochOrder``), train on full
batches only, and validate on the job's validation split after every epoch for hpo jobs
(``validate_every_epoch``) and after the last epoch otherwise.

Times (seconds, ``time.perf_counter``; on CUDA the clock is read after a device sync):
``total_time_s`` from the start of model build to the end of the last validation;
``train_time_s`` the sum of the epochs' training-step phases; ``val_time_s`` the sum of
validations. ``train_throughput_sps`` = samples trained ÷ ``train_time_s``. Under compile
the model is compiled on a probe of the first batch before the first epoch's clock starts
(:func:`compile_job`): ``compile_warmup_s``, inside ``total_time_s``, never in
``train_time_s``.

Only imported inside cell and worker processes (imports torch at module level).
"""

from __future__ import annotations

import math
import os
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from engine.define.workloads import JobSpec
from engine.errors import failure_line
from engine.parts import tasks as task_lib
from engine.parts.models import build_model
from engine.parts.optimizers import build_optimizer
from engine.train import isolation
from engine.train.backend import apply_backend_flags
from engine.train.compile_probe import compile_callable, probe_compiled
from engine.train.data import DeviceData, EpochOrder, JobSplit, rows, split_for
from engine.train.precision import (  # noqa: F401 - autocast: re-exported for the executors
    JobPrecision,
    SkipCounter,
    autocast,
    cast_input,
    cast_model,
    job_precision,
    make_scaler,
)

#: How often (seconds) a job reports training progress, besides every epoch end.
PROGRESS_INTERVAL_S = 0.25
#: Validation batch size: large, because eval results do not depend on it (eval mode).
EVAL_BATCH = 1024


@dataclass
class TrainSettings:
    """What the cell decided for every job of the group (recorded in the rows)."""

    device: torch.device
    compile_mode: str = "off"       # "off" or a torch.compile mode ("default", ...)
    amp_allowed: bool = False       # the legacy per-job amp flag applies (CUDA only)
    #: The cell's requested precision (``engine.precision``): applies to every job
    #: on every device; None: each job's legacy ``amp`` flag (where ``amp_allowed``).
    precision: str | None = None
    #: torch.compile backend: "inductor" (what cells run); another registered backend
    #: ("eager", "aot_eager") compiles in seconds instead of a minute (tests, debugging)
    compile_backend: str = "inductor"


@dataclass
class JobResult:
    """Outcome of one job. Metrics that were not measured stay ``None`` (an empty cell)."""

    job: JobSpec
    status: str = "ok"              # ok | failed
    error: str = ""
    start: float | None = None      # perf_counter at model build start
    end: float | None = None
    total_time_s: float | None = None
    train_time_s: float | None = None
    val_time_s: float | None = None
    samples: int = 0                # samples actually trained (full batches only)
    samples_dropped: int = 0        # tail samples skipped over all epochs
    epochs_run: int = 0
    final_train_loss: float | None = None
    final_train_acc: float | None = None
    final_val_loss: float | None = None
    final_val_acc: float | None = None
    param_count: int | None = None
    amp_applied: bool = False
    precision_requested: str = "fp32"
    precision: str = "fp32"         # what ran (engine.train.precision)
    precision_reason: str = ""      # why it is not the requested one, else ""
    amp_skipped_steps: int | None = None  # GradScaler-skipped steps; None without a scaler
    compile_mode: str = "off"       # effective
    compile_reason: str = ""
    val_source: str = ""
    history: list[dict[str, Any]] = field(default_factory=list)
    early_stopped: bool = False     # a scheduler stopped the trial before its epoch budget
    stop_reason: str = ""           # why it stopped early (scheduler decision), else ""
    worker_pid: int | None = None   # process that trained the job
    device_uuid: str | None = None  # GPU a packed cell pinned the job's worker to (issue 27)
    torch_peak_allocated_mb: float | None = None  # torch.cuda.max_memory_allocated, MiB
    torch_peak_reserved_mb: float | None = None   # torch.cuda.max_memory_reserved, MiB
    compile_warmup_s: float | None = None         # compile probe(s), s (inside total, not train)
    worker_start_s: float | None = None  # request for the job's worker → ready to train, s
    #: ``ok`` or ``shared state changed: Net.counter`` (engine.train.isolation: the state
    #: the job's build started from against its process's first); None: not checked
    isolation: str | None = None
    #: the canonical digest of the job's final weights (engine.models.digest), set by the
    #: hand-back after the group window; None for a failed job or before the hand-back
    weights_sha256: str | None = None

    @property
    def train_throughput_sps(self) -> float | None:
        if not self.train_time_s:
            return None
        return self.samples / self.train_time_s

    @property
    def throughput_sps(self) -> float | None:
        if not self.total_time_s:
            return None
        return self.samples / self.total_time_s


ProgressFn = Callable[..., None]


def sync(device: torch.device) -> None:
    """Wait for the device's queued work (CUDA; nothing on the CPU): every clock of the
    contract is read after it."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def evaluate(model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor, idx: torch.Tensor,
             task: str, amp: JobPrecision | bool) -> tuple[float, float]:
    """Mean loss and accuracy (or R²) of ``model`` over ``x[idx]``, in eval mode.

    Returns floats (one host sync at the end). Restores the module's training mode.
    """
    was_training = model.training
    model.eval()
    criterion = task_lib.loss_fn(task)
    loss_sum = torch.zeros((), device=x.device)
    sums: dict[str, torch.Tensor] = {}
    idx = idx.to(x.device)
    with torch.no_grad(), autocast(x.device, amp):
        for start in range(0, len(idx), EVAL_BATCH):
            batch = idx[start:start + EVAL_BATCH]
            xb = rows(x, batch) if isinstance(amp, bool) else cast_input(rows(x, batch), amp)
            out, target = task_lib.prepare(task, model(xb), rows(y, batch))
            loss_sum += criterion(out.float(), target) * len(batch)
            for key, value in task_lib.score_sums(task, out.float(), target).items():
                sums[key] = sums[key] + value if key in sums else value
    model.train(was_training)
    return float(loss_sum) / len(idx), task_lib.finalise(task, sums)


def seed_job(seed: int, device: torch.device) -> None:
    """Seed the global generators a job on ``device`` draws from (initial weights, dropout)
    with its seed: ``torch.manual_seed(seed)``, except for a CPU job in a process where no
    CUDA context exists yet, where only the CPU generator is seeded.

    Why: before CUDA is initialised, ``torch.manual_seed`` queues the CUDA (and XPU, MTIA)
    seeding for later and records a formatted stack trace with each queued call; that was
    0.2-0.5 ms per job (34 ms of a 64-member stacked run on this CPU, more than its
    verification). A CPU job draws from the CPU generator only, and every job on a GPU
    starts with a device sync (:func:`sync`), which initialises CUDA first, so its seeding
    here is ``torch.manual_seed``'s whole effect. What is left out is the seed a CUDA
    context created *later* in a CPU job's process would have started from: every job that
    uses the GPU seeds it again itself."""
    if device.type == "cpu" and not torch.cuda.is_initialized():
        torch.default_generator.manual_seed(int(seed))
    else:
        torch.manual_seed(seed)


def start_job(job: JobSpec, data: DeviceData, settings: TrainSettings,
              result: JobResult) -> tuple[torch.nn.Module, JobPrecision]:
    """A job's start, the same under every executor: the device synced, the job's process
    and start time recorded (``total_time_s`` counts from here), its shared state judged
    (``result.isolation``, :mod:`engine.train.isolation`), the global RNG seeded with
    the job seed (model init and dropout masks), its model built on the device (in
    bfloat16 for ``bf16``). Returns the model and the job's precision (recorded in
    ``result``)."""
    sync(settings.device)
    result.worker_pid = os.getpid()
    # Jobs are independent (docs/measurement.md): the plugin state this job builds from,
    # against what its process showed the first job (before the clock: microseconds).
    shared = isolation.job_start(job.model)
    result.isolation = isolation.verdict(shared)  # a build that fails keeps this one
    result.start = time.perf_counter()
    seed_job(job.seed, settings.device)
    model = build_model(job.model, data.in_shape, data.n_outputs, job.model_kwargs,
                        where=job.job_id).to(settings.device)
    result.isolation = isolation.job_built(job.model, model, shared)
    result.param_count = sum(p.numel() for p in model.parameters())
    precision = record_precision(result, job_precision(job.amp, settings.precision,
                                                       settings.device, settings.amp_allowed))
    return cast_model(model, precision), precision


def record_precision(result: JobResult, precision: JobPrecision) -> JobPrecision:
    """The job's requested and applied precision in its result (its row's columns), and
    the process's backend flags set for it (TF32 on for ``tf32`` only): set per job, so a
    worker process that trains several jobs never carries one job's flags into the next."""
    apply_backend_flags(precision.applied)
    result.amp_applied = precision.amp
    result.precision_requested = precision.requested
    result.precision = precision.applied
    result.precision_reason = precision.reason
    return precision



def job_split(job: JobSpec, data: DeviceData, result: JobResult
              ) -> tuple[JobSplit, torch.Tensor, torch.Tensor, EpochOrder]:
    """A job's split of the data: the split, its validation inputs and targets (the test
    set or the pool; ``result.val_source`` says which) and its batch order."""
    split = split_for(job.split, len(data.pool_y),
                      None if data.test_y is None else len(data.test_y))
    result.val_source = split.val_source
    val_x, val_y = ((data.test_x, data.test_y) if split.val_source == "test"
                    else (data.pool_x, data.pool_y))
    return split, val_x, val_y, EpochOrder(job, split.train_idx)


def count_epoch(result: JobResult, order: EpochOrder, epoch: int, train_s: float,
                loss_sum: Any) -> float:
    """An epoch's accounting, the same for the training loop and the stacked model: its
    training time, samples and dropped samples added to ``result``; returns its mean training
    loss (``loss_sum`` over its batches). Raises ``FloatingPointError`` (the job fails) when
    that loss is not finite."""
    result.train_time_s = (result.train_time_s or 0.0) + train_s
    result.samples += order.n_batches * order.batch_size
    result.samples_dropped += order.dropped_per_epoch
    result.epochs_run = epoch + 1
    epoch_loss = float(loss_sum) / order.n_batches
    if not math.isfinite(epoch_loss):
        raise FloatingPointError(f"training loss is {epoch_loss} at epoch {epoch + 1}")
    return epoch_loss


def record_epoch(result: JobResult, job: JobSpec, epoch: int, train_s: float,
                 epoch_loss: float, train_score: Callable[[], float | None],
                 validate: Callable[[], tuple[float, float]]) -> dict[str, Any]:
    """An epoch's record in ``result.history``, the same for the training loop and the
    stacked model: after the last epoch the final training loss and ``train_score()``; after
    a validated epoch (every epoch for hpo jobs, else the last) ``validate()``'s loss and
    accuracy, its time added to ``val_time_s``. Returns the record."""
    last_epoch = epoch == job.epochs - 1
    record: dict[str, Any] = {"epoch": epoch + 1, "train_loss": epoch_loss, "train_s": train_s}
    if last_epoch:
        result.final_train_loss = epoch_loss
        result.final_train_acc = train_score()
        record["train_acc"] = result.final_train_acc
    if job.validate_every_epoch or last_epoch:
        t_val = time.perf_counter()
        val_loss, val_acc = validate()
        result.val_time_s = (result.val_time_s or 0.0) + time.perf_counter() - t_val
        # "t": when this validation ended (perf_counter: system-wide monotonic, so workers'
        # times compare with the cell's window) — the time-to-best of hpo groups.
        record.update(val_loss=val_loss, val_acc=val_acc, t=time.perf_counter())
        result.final_val_loss, result.final_val_acc = val_loss, val_acc
    result.history.append(record)
    return record


def epoch_progress(result: JobResult, job: JobSpec, order: EpochOrder, record: dict[str, Any],
                   now: float, metric: str | None = None) -> dict[str, Any]:
    """The fields of an epoch's ``job_progress`` event (``epoch_end=True``); ``metric``: the
    task's metric name (``accuracy``, ``r2``), sent as ``val_metric`` so the live views label
    ``val_acc`` by what it holds (R² for regression), not by guess."""
    extra = {"val_metric": metric} if metric and record.get("val_acc") is not None else {}
    return dict(**extra, job_id=job.job_id, epoch=record["epoch"], epochs=job.epochs,
                step=order.n_batches, steps=order.n_batches, samples=result.samples,
                loss=record["train_loss"], val_loss=record.get("val_loss"),
                val_acc=record.get("val_acc"), elapsed=now - result.start, epoch_end=True,
                train_sps=result.samples / result.train_time_s if result.train_time_s else None)


def compile_job(model: torch.nn.Module, settings: TrainSettings, result: JobResult,
                first_batch: Callable[[Callable], tuple[torch.Tensor, torch.Tensor]]
                ) -> Callable[[torch.Tensor], torch.Tensor]:
    """``model`` under ``torch.compile`` (``settings.compile_mode``/``compile_backend``),
    compiled by :func:`~engine.train.compile_probe.probe_compiled` on the job's first batch
    (``first_batch(forward)`` → (output, loss), as the training step computes them).

    Records in ``result``: ``compile_warmup_s`` (the probe's wall time, device synced;
    inside ``total_time_s``, outside ``train_time_s``), ``compile_mode`` (the mode, or
    ``off`` when the probe failed) and ``compile_reason`` (why not). Returns the compiled
    module, or ``model`` itself when the probe failed (the job trains eagerly). The probe
    leaves parameters, buffers, gradients and the RNG as they were, so the job trains from
    the state it would have had without compile.
    """
    device, mode = settings.device, settings.compile_mode
    sync(device)
    t0 = time.perf_counter()
    compiled = compile_callable(model, mode, settings.compile_backend)
    why = probe_compiled(model, compiled, device, first_batch)
    sync(device)
    result.compile_warmup_s = time.perf_counter() - t0
    if why is None:
        result.compile_mode = mode
        return compiled
    result.compile_mode = "off"
    result.compile_reason = f"compile probe ({mode}) failed, trained eagerly: {why}"
    return model


def train_job(job: JobSpec, data: DeviceData, settings: TrainSettings,
              progress: ProgressFn | None = None,
              on_epoch_end: Callable[[JobResult], None] | None = None,
              keep: Callable[[dict[str, torch.Tensor]], None] | None = None) -> JobResult:
    """Train one job to completion and return its :class:`JobResult`.

    Never raises for a failure of the job itself: the result carries ``status="failed"``
    and a one-line ``error`` (the traceback goes to stderr, i.e. the cell's log).
    ``progress(job_id=..., epoch=..., step=..., ...)`` is called at most every
    ``PROGRESS_INTERVAL_S`` seconds and at every epoch end. ``on_epoch_end(result)`` is
    called with the live result after each epoch's record and progress event (Ray Tune
    reports from it: a trial its scheduler stops is killed, so the last epoch's snapshot is
    all that remains of it); an exception it raises fails the job like any other.
    ``keep(state)`` receives the job's final weights (:func:`final_state`) when it ended
    ok: what the hand-back after the group window digests (engine.models.hand_back); also
    when ``on_epoch_end`` stopped the job with a BaseException (:class:`JobStopped`, Ray
    Tune's ``SystemExit``): the weights at that epoch's end, the exception re-raised.
    """
    result = JobResult(job)
    try:
        _train(job, data, settings, progress or (lambda **_: None), result, on_epoch_end,
               keep)
    except Exception as exc:  # the job failed; the group goes on and records it
        traceback.print_exc()
        result.status = "failed"
        result.error = failure_line(exc)
        result.end = time.perf_counter()
        if result.start is not None:
            result.total_time_s = result.end - result.start
    return result


def _train(job: JobSpec, data: DeviceData, settings: TrainSettings, progress: ProgressFn,
           result: JobResult,
           on_epoch_end: Callable[[JobResult], None] | None = None,
           keep: Callable[[dict[str, torch.Tensor]], None] | None = None) -> None:
    for _ in _epochs(job, data, settings, progress, result, on_epoch_end, keep):
        pass


class SteppedJob:
    """A job trained one epoch at a time under its caller's control (seq's early-stopping
    schedulers, ``engine.executors.seq``): :meth:`advance` runs the next epoch exactly as
    :func:`train_job` would, :meth:`stop` ends the job early. Jobs may be interleaved
    (sha's rung-by-rung order): each job's global RNG state (model init, dropout; CPU and
    CUDA) is kept between its epochs and restored before the next, so a job's results do
    not depend on what ran between its epochs — a survivor equals its unpruned run.

    Times: ``total_time_s`` is the sum of the job's own spans (its epochs, validations and
    model build), not the wall time between its first and last epoch, which other jobs'
    epochs fill under interleaving. Per-job CUDA peaks are reset at each job's start, so
    under interleaving they cover whatever ran since.
    """

    def __init__(self, job: JobSpec, data: DeviceData, settings: TrainSettings,
                 progress: ProgressFn | None = None,
                 keep: Callable[[dict[str, torch.Tensor]], None] | None = None) -> None:
        self.job, self.settings = job, settings
        self.result = JobResult(job)
        self._epochs = _epochs(job, data, settings, progress or (lambda **_: None),
                               self.result, None, keep)
        self._rng: tuple[Any, Any] | None = None
        self.busy_s = 0.0
        self.done = False
        self.started = False

    def advance(self) -> dict[str, Any] | None:
        """Train the next epoch; its history record, or None when the job has ended
        (finished after its last epoch, or failed: ``result.status``)."""
        if self.done:
            return None
        device = self.settings.device
        if self._rng is not None:
            torch.set_rng_state(self._rng[0])
            if self._rng[1] is not None:
                torch.cuda.set_rng_state(self._rng[1], device)
        t0 = time.perf_counter()
        self.started = True
        try:
            record = next(self._epochs)
        except StopIteration:
            record = None
            self.done = True
        except Exception as exc:  # the job failed: as train_job records it
            traceback.print_exc()
            self.done = True
            self.result.status, self.result.error = "failed", failure_line(exc)
            self.result.end = time.perf_counter()
            record = None
        self.busy_s += time.perf_counter() - t0
        if self.done:
            if self.result.start is not None:
                self.result.total_time_s = self.busy_s
            return None
        self._rng = (torch.get_rng_state(),
                     torch.cuda.get_rng_state(device) if device.type == "cuda" else None)
        return record

    def stop(self, reason: str) -> None:
        """End the job after the epochs it ran: ``early_stopped`` with ``reason``; its final
        training loss is the last epoch's (its accuracy is only scored in a job's planned
        last epoch, so it stays empty, as under ray)."""
        self._epochs.close()
        self.done = True
        r = self.result
        r.early_stopped, r.stop_reason = True, reason
        if r.history:
            r.final_train_loss = r.history[-1].get("train_loss")
        sync(self.settings.device)
        r.end = time.perf_counter()
        if r.start is not None:
            r.total_time_s = self.busy_s


class JobStopped(BaseException):
    """Raised by an ``on_epoch_end`` hook when a scheduler stopped the job after this epoch
    (mp's and Ray's early-stopped trials): :func:`train_job` lets it through — a
    BaseException, so the loop's handler does not turn it into a failed job — after
    ``keep`` received the weights as they are at this epoch's end."""


def final_state(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """A trained model's parameters and buffers by name (detached views, no copy): what an
    executor keeps of a job until the hand-back after the group window. Only the weights'
    storage stays alive: gradients, optimizer state and activations go with the model."""
    return {k: v.detach() for k, v in model.state_dict().items()}


def _epochs(job: JobSpec, data: DeviceData, settings: TrainSettings, progress: ProgressFn,
            result: JobResult, on_epoch_end: Callable[[JobResult], None] | None = None,
            keep: Callable[[dict[str, torch.Tensor]], None] | None = None):
    """The training loop as a generator: yields each epoch's history record after its
    progress event and ``on_epoch_end``; the job's end (times, peaks) after the last.
    ``keep(final_state(model))`` after the last epoch, or when the generator is closed
    after an epoch (a scheduler stopped the trial: its weights as they were then)."""
    device = settings.device
    task = job.task or data.task
    if device.type == "cuda":  # per-job peaks: jobs in one process run one after another here
        torch.cuda.reset_peak_memory_stats(device)
    model, amp = start_job(job, data, settings, result)
    optimizer = build_optimizer(job.optimizer, model.parameters(), job.lr, job.optimizer_kwargs,
                                where=job.job_id)
    scaler = make_scaler(device, amp)
    skipped = SkipCounter(device) if scaler is not None else None
    # Resolved once: the step below calls the raw criterion on already-shaped tensors, so
    # the loop pays no registry lookup and no second shaping per step (bench/RESULTS.md).
    task = task_lib.resolve_task(task, job.dataset, where=job.job_id)
    criterion = task_lib.loss_fn(task).criterion

    forward: Callable[[torch.Tensor], torch.Tensor] = model
    split, val_x, val_y, order = job_split(job, data, result)
    limiter_interval = PROGRESS_INTERVAL_S
    last_report = time.perf_counter()
    x_all, y_all = data.pool_x, data.pool_y
    model.train()

    for epoch in range(job.epochs):
        last_epoch = epoch == job.epochs - 1
        batches = order.batches(device)
        if epoch == 0 and settings.compile_mode != "off":
            # Before the epoch's clock starts: compilation is warm-up, not training time.
            def first_batch(fwd: Callable, xb: torch.Tensor = x_all[batches[0]],
                            yb: torch.Tensor = y_all[batches[0]]
                            ) -> tuple[torch.Tensor, torch.Tensor]:
                with autocast(device, amp):  # as the step below computes it
                    out, target = task_lib.prepare(task, fwd(cast_input(xb, amp)), yb)
                    half = out.dtype in (torch.float16, torch.bfloat16)
                    return out, criterion(out.float() if half else out, target)

            forward = compile_job(model, settings, result, first_batch)
        loss_sum = torch.zeros((), device=device)
        score: dict[str, torch.Tensor] = {}
        sync(device)
        t_epoch = time.perf_counter()
        for step in range(order.n_batches):
            idx = batches[step]
            xb, yb = rows(x_all, idx), rows(y_all, idx)
            with autocast(device, amp):
                out, target = task_lib.prepare(task, forward(cast_input(xb, amp)), yb)
                loss = criterion(out.float() if out.dtype in (torch.float16, torch.bfloat16) else out, target)
            optimizer.zero_grad(set_to_none=True)
            if scaler is not None:
                scaler.scale(loss).backward()
                scaler.step(optimizer)
                skipped.after_step(scaler, optimizer)
                scaler.update()
            else:
                loss.backward()
                optimizer.step()
            detached = loss.detach()
            loss_sum += detached
            if last_epoch:  # final_train_acc: only the last epoch pays for scoring
                with torch.no_grad():
                    for key, value in task_lib.score_sums(task, out, target).items():
                        score[key] = score[key] + value if key in score else value
            now = time.perf_counter()
            if now - last_report >= limiter_interval:
                last_report = now
                done = result.samples + (step + 1) * order.batch_size
                progress(job_id=job.job_id, epoch=epoch + 1, epochs=job.epochs, step=step + 1,
                         steps=order.n_batches, samples=done, loss=float(detached),
                         elapsed=now - result.start)
        sync(device)
        train_s = time.perf_counter() - t_epoch
        epoch_loss = count_epoch(result, order, epoch, train_s, loss_sum)
        record = record_epoch(
            result, job, epoch, train_s, epoch_loss,
            train_score=lambda score=score: task_lib.finalise(task, score),
            validate=lambda: evaluate(model, val_x, val_y, split.val_idx, task, amp))
        now = time.perf_counter()
        last_report = now
        progress(**epoch_progress(result, job, order, record, now, metric=task.metric))
        if on_epoch_end is not None:
            try:
                on_epoch_end(result)
            except BaseException as exc:
                # A scheduler stopped the job in its epoch-end hook (Ray Tune's SystemExit
                # out of tune.report, a worker's JobStopped): its weights are this epoch's.
                # A failure (an Exception) keeps nothing.
                if keep is not None and not isinstance(exc, Exception):
                    keep(final_state(model))
                raise
        try:
            yield record
        except GeneratorExit:  # stopped early (SteppedJob.stop): its weights at the stop
            if keep is not None:
                keep(final_state(model))
            raise
    sync(device)
    if keep is not None:
        keep(final_state(model))
    result.end = time.perf_counter()
    result.total_time_s = result.end - result.start
    if skipped is not None:
        result.amp_skipped_steps = skipped.value()
    if device.type == "cuda":
        result.torch_peak_allocated_mb = torch.cuda.max_memory_allocated(device) / 2**20
        result.torch_peak_reserved_mb = torch.cuda.max_memory_reserved(device) / 2**20
