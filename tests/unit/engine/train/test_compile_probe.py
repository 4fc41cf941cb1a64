"""Compile warm-up in the per-job training loop (seq, mp, ray): compiled on a probe of the
job's first batch, its time in ``compile_warmup_s`` and outside ``train_time_s``, and the
training itself unchanged by the probe (docs/measurement.md, "Compile").

Real ``torch.compile`` (dynamo's graph capture) with cheap backends instead of
TorchInductor (13 s cold on this CPU): in this process a registered backend that runs the
captured graph eagerly and takes :data:`COMPILE_S` per graph it compiles, so every
compilation has a known cost and a known time; in a spawned mp worker dynamo's own
``eager`` backend, whose first capture in a fresh process takes about a second. Their
compiled code computes what eager code computes, so a compiled job must equal the eager job
bit for bit: any trace the probe left (a BatchNorm statistic moved, a dropout draw
consumed, an optimizer step) would show in the losses."""

from __future__ import annotations

import time
from types import SimpleNamespace

import pytest
import torch
from torch._dynamo import register_backend

import engine.train.loop as loop_mod
from engine.define.workloads import JobSpec
from engine.executors.base import CellContext
from engine.executors.seq import SeqExecutor
from engine.parts.datasets import load_dataset
from engine.train.data import to_device
from engine.train.loop import TrainSettings

CPU = torch.device("cpu")
EAGER = TrainSettings(CPU)
#: Seconds the test backend takes per graph; perf_counter times of its calls.
COMPILE_S = 0.25
COMPILES: list[float] = []
#: (start, end) perf_counter times of every compile_job call (the warm-up) in this process.
WARMUPS: list[tuple[float, float]] = []


def _slow_eager(gm, example_inputs):
    COMPILES.append(time.perf_counter())
    time.sleep(COMPILE_S)
    return gm.forward


if "fugue_test_slow_eager" not in torch._dynamo.list_backends(exclude_tags=()):
    register_backend(_slow_eager, name="fugue_test_slow_eager")
COMPILED = TrainSettings(CPU, compile_mode="default", compile_backend="fugue_test_slow_eager")


@pytest.fixture(autouse=True)
def cold_dynamo(monkeypatch):
    """Every test compiles from scratch: dynamo reuses a graph for another instance of the
    same module class, which would leave nothing to warm up. The warm-ups' times are
    recorded, so that a compilation is placed in or out of them by time stamps, whatever
    the machine's load (a bound on train_time_s failed at load 12)."""
    torch._dynamo.reset()
    COMPILES.clear()
    WARMUPS.clear()
    real = loop_mod.compile_job

    def timed(*args, **kwargs):
        t0 = time.perf_counter()
        try:
            return real(*args, **kwargs)
        finally:
            WARMUPS.append((t0, time.perf_counter()))

    monkeypatch.setattr(loop_mod, "compile_job", timed)
    yield
    torch._dynamo.reset()


def _job(i: int, model: str = "mlp_bn", **kw) -> JobSpec:
    base = {"job_id": f"J{i}", "exp_id": "X", "index": i, "seed": 42 + i, "model": model,
            "dataset": "wine", "task": None, "batch_size": 16, "epochs": 2, "lr": 0.01,
            "optimizer": "sgd", "optimizer_kwargs": {"momentum": 0.9}}
    base.update(kw)
    return JobSpec(**base)


@pytest.fixture(scope="module")
def wine():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield to_device(load_dataset("wine"), CPU)
    torch.set_num_threads(threads)


def _ctx(data, settings, events=None, **kw) -> CellContext:
    return CellContext(settings=settings, datasets=lambda name: data,
                       emit=lambda kind, **f: (events if events is not None else []).append(kind),
                       threads=1, **kw)


def _same_training(compiled, eager) -> None:
    """The compiled job trained exactly as the eager one (losses, accuracy, validation)."""
    assert compiled.status == eager.status == "ok", compiled.error
    assert [h["train_loss"] for h in compiled.history] == [h["train_loss"] for h in eager.history]
    for name in ("final_train_loss", "final_train_acc", "final_val_loss", "final_val_acc",
                 "samples"):
        assert getattr(compiled, name) == getattr(eager, name), name


def _warmup_apart(r, compiles: list[float] | None = COMPILES) -> None:
    """Compiled, the warm-up measured and inside the job's total, not its training time.
    ``compiles``: the test backend's call times (None: not countable, another process)."""
    assert r.compile_mode == "default" and r.compile_reason == ""
    assert r.compile_warmup_s is not None and r.compile_warmup_s > 0
    assert r.total_time_s >= r.compile_warmup_s + r.train_time_s + r.val_time_s
    if compiles is None:
        # Dynamo's first capture in a fresh process takes far longer than 2 x 8 steps of
        # a small MLP; before the probe it landed in train_time_s.
        assert r.train_time_s < r.compile_warmup_s
        return
    mine = [t for t in compiles if r.start <= t <= r.end]
    assert mine, "the job compiled nothing"
    # Every compilation of the job happened in its warm-up; none in its training steps.
    assert r.compile_warmup_s >= COMPILE_S * len(mine)
    outside = [t for t in mine if not any(a <= t <= b for a, b in WARMUPS)]
    assert not outside, f"{len(outside)} of {len(mine)} compilations outside the warm-up"


def test_seq_compiles_on_a_probe_and_trains_as_eager(wine):
    """BatchNorm (running statistics) and live dropout (global RNG): the probe's forward
    and backward on the first batch leave both as they were."""
    jobs = [_job(0, model_kwargs={"hidden": 32, "dropout": 0.3}), _job(1)]
    eager = SeqExecutor().run(jobs, _ctx(wine, EAGER))
    compiled = SeqExecutor().run(jobs, _ctx(wine, COMPILED))
    for c, e in zip(compiled, eager, strict=False):
        _warmup_apart(c)
        _same_training(c, e)
        assert e.compile_warmup_s is None  # no compile: empty, never 0


def _raising(fn):
    def broken(*args, **kwargs):
        raise RuntimeError("backend exploded")
    return broken


def _disagreeing(fn):
    """'Compiled' code that runs the real forward (moving BatchNorm statistics) and returns
    something else: the probe must refuse it and leave no trace."""
    def wrong(*args, **kwargs):
        return fn(*args, **kwargs) * 2.0
    return wrong


@pytest.mark.parametrize("compiler, why", [(_raising, "RuntimeError: backend exploded"),
                                           (_disagreeing, "outputs differ from eager")])
def test_a_failed_probe_trains_eagerly_and_says_why(wine, monkeypatch, compiler, why):
    monkeypatch.setattr(loop_mod, "compile_callable", lambda fn, mode, backend: compiler(fn))
    job = _job(0, model_kwargs={"hidden": 32, "dropout": 0.0})  # deterministic forward
    eager = loop_mod.train_job(job, wine, EAGER)
    r = loop_mod.train_job(job, wine, COMPILED)
    _same_training(r, eager)
    assert r.compile_mode == "off"
    assert r.compile_reason.startswith("compile probe (default) failed, trained eagerly: ")
    assert why in r.compile_reason
    assert r.compile_warmup_s is not None and r.compile_warmup_s > 0


def test_a_random_forward_is_compiled_although_its_draws_differ(wine, monkeypatch):
    """TorchInductor's dropout draws its own numbers: a forward that draws random numbers
    cannot be compared with eager, so the probe keeps the compiled code (output shape
    checked) instead of refusing every model with dropout."""
    def own_draws(fn):
        def compiled(*args, **kwargs):
            torch.rand(7)  # compiled code consuming the RNG differently from eager
            return fn(*args, **kwargs)
        return compiled

    monkeypatch.setattr(loop_mod, "compile_callable", lambda fn, mode, backend: own_draws(fn))
    r = loop_mod.train_job(_job(0, model_kwargs={"hidden": 32, "dropout": 0.3}), wine, COMPILED)
    assert r.status == "ok" and r.compile_mode == "default" and r.compile_reason == ""
    assert r.compile_warmup_s is not None


def test_unified_eager_member_with_dropout_is_compiled_alike(monkeypatch):
    """The same rule in unified_model's eager route (one member with live dropout): its
    probe does not refuse compiled code for drawing other dropout masks either."""
    import engine.executors.unified.bucket as bucket_mod
    from engine.executors.unified.executor import UnifiedExecutor
    from tests.unit.engine.executors.unified.test_unified_parity import (
        _ctx as unified_ctx,
    )
    from tests.unit.engine.executors.unified.test_unified_parity import _data
    from tests.unit.engine.executors.unified.test_unified_parity import (
        _job as unified_job,
    )

    def own_draws(fn):
        def compiled(*args, **kwargs):
            torch.rand(7)
            return fn(*args, **kwargs)
        return compiled

    monkeypatch.setattr(bucket_mod, "compile_callable", lambda fn, mode, backend: own_draws(fn))
    data = _data()
    data.pool_x = data.pool_x.float()
    ctx = unified_ctx(data, [])
    ctx.settings = COMPILED
    [r] = UnifiedExecutor().run([unified_job(0, epochs=1, model_kwargs={"hidden": 16,
                                                                        "dropout": 0.2})], ctx)
    assert r.status == "ok" and r.compile_mode == "default", r.compile_reason


def test_ray_actor_reports_the_warmup_apart(wine, monkeypatch):
    """A Ray pool actor's training (the class Ray runs remotely, here in this process) and
    the snapshot that carries its result to the cell."""
    from engine.executors.ray import worker
    from engine.executors.ray.worker import JobActor, from_snapshot, snapshot

    items: list = []
    hub = SimpleNamespace(put=SimpleNamespace(remote=items.append))  # progress: no wait
    monkeypatch.setattr(worker.Reporter, "_put",  # lifecycle messages wait on Ray: not here
                        lambda self, kind, payload: items.append((kind, self.job_id, payload)))
    actor = JobActor(1, [], COMPILED, "cpu")
    job = _job(0)
    result, spans = actor.train(job.to_dict(), hub)
    back = from_snapshot(job, snapshot(result))
    _warmup_apart(back)
    _same_training(back, loop_mod.train_job(job, wine, EAGER))
    # The group's training wall time (union of epoch spans) leaves the warm-up out too.
    assert sum(b - a for a, b in spans) == pytest.approx(back.train_time_s, rel=1e-6)


@pytest.mark.slow
def test_mp_worker_reports_the_warmup_apart(tmp_path, wine):
    """A real spawned mp worker: the backend reaches it, its result carries the warm-up,
    and the group's training wall time (its epoch spans) leaves the warm-up out."""
    from engine.executors.mp.executor import MPExecutor

    job = _job(0)
    ctx = _ctx(None, TrainSettings(CPU, compile_mode="default", compile_backend="eager"),
               max_parallel=1, attempt_dir=tmp_path / "attempt-1")
    executor = MPExecutor()
    executor.setup([job], ctx)
    try:
        [result] = executor.run([job], ctx)
    finally:
        executor.teardown(ctx)
    _warmup_apart(result, compiles=None)
    _same_training(result, loop_mod.train_job(job, wine, EAGER))
    assert executor.info["train_wall_s"] < result.compile_warmup_s
    assert ctx.group["train_throughput_sps"] == pytest.approx(
        result.samples / executor.info["train_wall_s"])


def test_the_job_row_says_why_compile_did_not_run(tmp_path, wine, monkeypatch):
    """The rows the cell writes: the warm-up and, for a job whose probe failed, the reason
    (before the probe such a job failed; the reason must not vanish into a log)."""
    import csv

    from engine.cell.rows import write_rows
    from tests.unit.engine.cell.cell_specs import hand_spec

    monkeypatch.setattr(loop_mod, "compile_callable", lambda fn, mode, backend: _raising(fn))
    results = [loop_mod.train_job(_job(0), wine, COMPILED)]
    spec = hand_spec(tmp_path, cell={"experiment": {"type": "ensemble", "size": None},
                                     "exp_id": "X", "compile_mode": "default",
                                     "jobs": [{"amp": False}], "key": "k", "pass_index": 0},
                     threads=1)
    events = SimpleNamespace(emit=lambda *a, **k: None)
    write_rows(spec, events, results, 1.0, 0.0, 0.0, {}, COMPILED, {})
    with open(tmp_path / "master_individual.csv", newline="") as fh:
        [row] = list(csv.DictReader(fh))
    assert row["compile_mode"] == "off"
    assert row["compile_reason"] == results[0].compile_reason
    assert "RuntimeError: backend exploded" in row["compile_reason"]
    assert float(row["compile_warmup_s"]) == pytest.approx(results[0].compile_warmup_s)
    with open(tmp_path / "master_groups.csv", newline="") as fh:
        [group] = list(csv.DictReader(fh))
    assert group["compile_requested"] == "default" and group["compile_mode"] == "off"
    assert float(group["compile_warmup_s"]) == pytest.approx(results[0].compile_warmup_s)
