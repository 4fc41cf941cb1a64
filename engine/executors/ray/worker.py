"""What runs inside Ray worker processes (pool actors and Tune trials).

A worker is a separate process: it sets its own torch thread count and backend flags, loads
the plugins and its own copy of each dataset (once per process), and reports progress to
the cell through the hub actor (``engine.executors.ray.hub``), because only the cell writes
the events file.

Messages in the hub are tuples ``(kind, job_id, payload)``: ``("ready", None, facts)`` (a
pre-warmed Tune actor waits at the start gate), ``("started", id, pid)``,
``("progress", id, fields)``, ``("epoch", id, snapshot)`` and ``("done", id, snapshot)``,
where a snapshot is :func:`snapshot` of the job's :class:`~engine.train.loop.JobResult`;
a Tune trial that ends — completed (just before ``done``) or stopped — sends
``("held", id, {"records", "copy_s"})`` (:func:`hand_off`: its final weights for the
cell's hand-back after the window, issue 50).

One process, several jobs (a pool actor's jobs; a reused Tune actor's trials): everything a
job could see of an earlier one is rebuilt per job. ``train_job`` seeds the global RNG
(torch's CPU and CUDA generators) with the job seed right before the model build, builds a
fresh model and optimizer and draws the batch order from a generator of its own seeded with
the job seed; :func:`reset_job_state` puts back the torch thread count and backend flags
before each job. What stays is job-independent by construction: the imports, the plugins,
the stack dump handler, and the cell's datasets (host copies and their device copies, read
only: training gathers batches by index, which copies).
"""

from __future__ import annotations

import dataclasses
import math
import os
import threading
import time
from typing import Any

import torch

from engine.define.workloads import JobSpec
from engine.measure.spans import TrainSpans
from engine.train.loop import JobResult, JobStopped, TrainSettings

_HOST: dict[str, Any] = {}    # dataset name -> DatasetBundle (host tensors), per process
_DEVICE: dict[str, Any] = {}  # dataset name -> DeviceData, per process
_PREPARED: dict[str, Any] = {}
#: This process has been through the Tune start gate (``trial``): later trials it runs
#: (a reused actor) start at once.
_GATE: dict[str, bool] = {}


def prepare(threads: int) -> dict[str, Any]:
    """Set up this worker process once, as the cell sets up itself: its stack dump handler
    (:mod:`engine.stacks`), torch threads, backend flags, ``torch._dynamo`` pre-imported (``torch.optim`` imports it on first use, ~2 s),
    plugins. Returns ``{"pid", "threads"}``."""
    if not _PREPARED:
        from engine import stacks
        from engine.plugins import load_plugins
        from engine.train.backend import apply_backend_flags

        stacks.install("ray-worker")  # the runner's watchdog can ask this process for stacks
        torch.set_num_threads(threads)
        apply_backend_flags()
        torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.1)
        load_plugins()
        _PREPARED.update(pid=os.getpid(), threads=torch.get_num_threads())
    return dict(_PREPARED)


def reset_job_state(threads: int) -> None:
    """Before each job of a process that trains several: the campaign's torch thread count
    and the cell's backend flags again, whatever the job before set (a plugin model may
    change either). The RNG, model, optimizer and batch order are the job's own by
    construction (``engine.train.loop.train_job``)."""
    from engine.train.backend import apply_backend_flags

    torch.set_num_threads(threads)
    apply_backend_flags()


def load_host(names: list[str]) -> float:
    """Load datasets into this process's host memory (cached); return seconds spent."""
    from engine.parts.datasets import load_dataset

    t0 = time.perf_counter()
    for name in names:
        if name not in _HOST:
            _HOST[name] = load_dataset(name)
    return time.perf_counter() - t0


def device_data(name: str, device: torch.device):
    """The dataset on ``device``, copied once per process on first use."""
    if name not in _DEVICE:
        from engine.train.data import to_device

        load_host([name])
        _DEVICE[name] = to_device(_HOST[name], device)
    return _DEVICE[name]


def worker_device(device: str) -> torch.device:
    """The device under test as this worker sees it: Ray gives each worker only the GPU
    it assigned (``CUDA_VISIBLE_DEVICES``), which is then ``cuda:0``."""
    return torch.device("cuda", 0) if device.startswith("cuda") else torch.device(device)


def snapshot(result: JobResult) -> dict[str, Any]:
    """The result's fields (without the job) as plain values; a job still running gets
    ``total_time_s`` up to now (after its latest validation)."""
    out = {f.name: getattr(result, f.name) for f in dataclasses.fields(result)
           if f.name != "job"}
    if out["total_time_s"] is None and result.start is not None:
        out["total_time_s"] = time.perf_counter() - result.start
    return out


def from_snapshot(job: JobSpec, snap: dict[str, Any]) -> JobResult:
    """Rebuild a :class:`JobResult` in the cell from a worker's snapshot."""
    names = {f.name for f in dataclasses.fields(JobResult)} - {"job"}
    result = JobResult(job, **{k: v for k, v in snap.items() if k in names})
    if result.end is None and result.start is not None and result.total_time_s is not None:
        result.end = result.start + result.total_time_s  # the snapshot's moment
    return result




class Reporter:
    """Sends a job's events to the cell. Progress is fire-and-forget (the training loop
    must not wait on it); lifecycle messages and snapshots wait until the hub holds them,
    so they are there even if the worker is killed right after (Ray runs one caller's
    calls to an actor in the order they were made)."""

    def __init__(self, hub, job_id: str):
        self.hub, self.job_id = hub, job_id

    def _put(self, kind: str, payload: Any) -> None:
        import ray

        ray.get(self.hub.put.remote((kind, self.job_id, payload)))

    def started(self) -> None:
        self._put("started", os.getpid())

    def progress(self, **fields: Any) -> None:
        self.hub.put.remote(("progress", self.job_id, fields))

    def epoch(self, result: JobResult, spans=()) -> None:
        self._put("epoch", {**snapshot(result), "train_spans": list(spans)})

    def done(self, result: JobResult) -> None:
        self._put("done", snapshot(result))


class JobActor:
    """A pool actor (ensemble, cv, multi_model): prepared and holding its host datasets
    from its start (executor setup, outside ``T_group``); trains the jobs it is handed."""

    def __init__(self, threads: int, datasets: list[str], settings: TrainSettings,
                 device: str):
        self.info = prepare(threads)
        # What Ray pinned this process to (set before this code ran): a packed cell
        # dispatches each device's jobs to the actors that see it (issue 27).
        self.info["visible"] = os.environ.get("CUDA_VISIBLE_DEVICES")
        self.info["cuda_initialized"] = torch.cuda.is_initialized()
        self.info["data_load_s"] = load_host(datasets)
        self.threads = threads
        self.device = worker_device(device)
        self.settings = dataclasses.replace(settings, device=self.device)
        #: job id → final weights of the jobs this actor trained, kept until the cell's
        #: hand-back after the group window (issue 50): the tensors only
        self.held: dict[str, dict[str, torch.Tensor]] = {}

    def ready(self) -> dict[str, Any]:
        return self.info

    def train(self, job_dict: dict[str, Any], hub) -> tuple[JobResult, list[tuple[float, float]]]:
        """Train one job, reporting to ``hub``; return its result and its epochs' training
        spans."""
        from engine.train.loop import train_job

        job = JobSpec.from_dict(job_dict)
        report = Reporter(hub, job.job_id)
        report.started()
        reset_job_state(self.threads)
        spans = TrainSpans()
        result = train_job(job, device_data(job.dataset, self.device), self.settings,
                           progress=report.progress, on_epoch_end=spans,
                           keep=lambda state: self.held.__setitem__(job.job_id, state))
        return result, spans.spans

    def hand_back(self, job_dict: dict[str, Any], result: JobResult, save: bool,
                  attempt_dir: str | None):
        """After the group window: digest (and save) one job's held weights here, where
        they are, and let them go (``engine.models.hand_back.hand_back_one``). None when
        this actor holds none for the job."""
        from engine.models.hand_back import hand_back_one

        job = JobSpec.from_dict(job_dict)
        state = self.held.pop(job.job_id, None)
        if state is None:
            return None
        return hand_back_one(job, result, state, "ray", save, attempt_dir)


class StopAtRung(JobStopped):
    """sha: the cell stopped this trial at a rung. A BaseException, so that the training
    loop's own handler (which turns an Exception into a failed job) lets it through, after
    keeping the trial's weights at the rung."""


#: Set while this process has no trial between the end of its training and the end of its
#: weights' hand-off (:func:`hand_off`); :class:`WaitForHandOff` waits on it.
_HANDED = threading.Event()
_HANDED.set()
#: How long a stopping trial's actor waits for its training thread to hand its weights off.
HANDOFF_WAIT_S = 60.0


def hand_off(hub, job_id: str, held: dict[str, Any], wait: bool = True) -> None:
    """Send a Tune trial's final weights (``held["state"]``, kept by the training loop) to
    the cell through ``hub`` before the trial's process ends or takes the next trial (issue
    50): ``("held", id, {"records", "copy_s"})`` (:func:`engine.models.transfer.to_records`:
    plain data, the hub stays torch-free; ``copy_s``: the seconds the copy took here) or
    ``{"error": one line, "copy_s"}``. Inside the group window (the trial's process ends
    inside it), so only this copy happens here; the cell digests and saves after the
    window (``RayExecutor.hand_back``). Nothing when the loop kept no state (a failed job).

    ``wait``: wait until the hub holds it (one hub call: a stopped trial, whose process may
    end next). ``False``: only submit it; the caller's next awaited message to the hub
    (a finished trial's ``done``) returns after it, since Ray runs one caller's calls to an
    actor in submission order — so a finished trial pays no wait of its own."""
    import ray

    from engine.errors import failure_line
    from engine.models.transfer import to_records

    state = held.pop("state", None)
    if state is None:
        return
    t0 = time.perf_counter()
    try:
        payload: dict[str, Any] = {"records": to_records(state)}
    except Exception as exc:  # noqa: BLE001 - the trial's result stands; no digest
        payload = {"error": failure_line(exc)}
    del state
    payload["copy_s"] = time.perf_counter() - t0
    sent = hub.put.remote(("held", job_id, payload))
    del payload
    if wait:
        ray.get(sent)


class WaitForHandOff:
    """Mixin of the Tune trainable (``trial.__mixins__``). Tune stops a trial by releasing
    its training thread, blocked in ``tune.report``, which then raises ``SystemExit``
    (:func:`trial` hands the weights off on the way out), and — for a trial whose actor is
    not reused — ends the actor's process right after ``stop()`` returns, without waiting
    for that thread. ``cleanup`` (called by ``stop()``) waits up to
    :data:`HANDOFF_WAIT_S` for the hand-off, so the process outlives it."""

    def cleanup(self) -> None:
        try:
            super().cleanup()  # type: ignore[misc]
        finally:
            _HANDED.wait(HANDOFF_WAIT_S)


def _number(value: float | None) -> float:
    """A metric for Tune: NaN when the epoch has none (Tune needs the key every time)."""
    return math.nan if value is None else float(value)


def trial(config: dict[str, Any], jobs: list[dict[str, Any]], threads: int,
          settings: TrainSettings, device: str, hub, datasets: list[str] | None = None,
          rungs: list[int] | None = None) -> None:
    """A Ray Tune trainable (function API): one hpo job per trial.

    ``datasets`` given (``reuse_actors = true``): the trial actors are the strategy's
    runtime, started in executor setup. A process's first trial prepares the process
    (imports, plugins), loads the cell's datasets into host memory, tells the hub it is
    ``ready`` and waits at the start gate until the cell opens the group window; only then
    does it take its job. Later trials of a reused actor pass the gate at once.

    ``datasets`` None (``reuse_actors = false``, the ablation): a trial is a fresh process
    started inside the window and everything it does is the job's.

    Reports ``val_loss``, ``val_acc`` and ``epoch`` to Tune after every epoch (from the
    training loop's epoch-end hook; the scheduler judges the task's metric, ``val_acc`` —
    the R² — for regression; a missing value is NaN, which no scheduler ranks above a
    number); the cell gets the full snapshot through the hub first.

    As the trial ends — completed, stopped by Tune's scheduler (``SystemExit`` out of
    ``tune.report``) or at a sha rung — its final weights go to the cell (:func:`hand_off`;
    the training loop keeps them as of the stopping epoch), and the trainable's ``cleanup``
    (:class:`WaitForHandOff`) lets the process end only after that."""
    import ray
    from ray import tune

    from engine.train.loop import train_job

    facts = prepare(threads)
    if datasets is not None and not _GATE:
        load_s = load_host(datasets)
        ray.get(hub.put.remote(("ready", None, {**facts, "data_load_s": load_s})))
        ray.get(hub.wait_open.remote())
        _GATE["passed"] = True
    job = JobSpec.from_dict(jobs[config["job"]])
    dev = worker_device(device)
    report = Reporter(hub, job.job_id)
    report.started()
    reset_job_state(threads)

    waits = {r for r in (rungs or ()) if job.epochs > r}

    def on_epoch_end(result: JobResult, spans) -> None:
        report.epoch(result, spans)  # before tune.report: a stopped trial ends in it
        tune.report({"val_loss": _number(result.final_val_loss),
                     "val_acc": _number(result.final_val_acc), "epoch": result.epochs_run})
        if result.epochs_run in waits:  # sha: wait at the rung for the cell's verdict
            if ray.get(hub.verdict.remote(job.job_id, result.epochs_run)) == "stop":
                raise StopAtRung()

    held: dict[str, Any] = {}
    _HANDED.clear()
    try:
        try:
            result = train_job(job, device_data(job.dataset, dev),
                               dataclasses.replace(settings, device=dev),
                               progress=report.progress, on_epoch_end=TrainSpans(on_epoch_end),
                               keep=lambda state: held.__setitem__("state", state))
        except StopAtRung:
            # the cell keeps the rung's snapshot (report.epoch) as the trial's result; the
            # weights at the rung go to the cell
            hand_off(hub, job.job_id, held)
            return
        except SystemExit:
            # Tune stopped the trial in tune.report (its scheduler, or the trial's last
            # result under asha): the weights as of that epoch go to the cell, then the
            # thread ends as Tune asked
            hand_off(hub, job.job_id, held)
            raise
        hand_off(hub, job.job_id, held, wait=False)  # held by the hub when done returns
        report.done(result)
    finally:
        _HANDED.set()


trial.__mixins__ = (WaitForHandOff,)  # type: ignore[attr-defined]
