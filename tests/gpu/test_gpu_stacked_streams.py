"""On a real GPU only (bench/gpu_check.py's part test_gpu_stacked_streams): under
``unified_model`` each bucket of a heterogeneous cell steps on its own CUDA stream (s:1),
with the same results as one stream (s:0) within float32 rounding. pytest-free (see
tests/gpu/__init__.py); the CPU cases of the same executor are in
tests/unit/engine/executors/unified/test_unified_buckets.py."""

from __future__ import annotations

import unittest
from types import SimpleNamespace

import torch

from engine.define.workloads import JobSpec, SplitSpec
from engine.executors.unified.executor import UnifiedExecutor
from engine.train.data import DeviceData
from engine.train.loop import TrainSettings


def _data(device: torch.device, n: int = 157, shape=(1, 4, 4), classes: int = 3) -> DeviceData:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(n, *shape, generator=g)
    y = torch.randint(0, classes, (n,), generator=g)
    return DeviceData("syn", "classification", shape, classes, x.to(device), y.to(device),
                      None, None)


def _job(i: int, **kw) -> JobSpec:
    base = dict(job_id=f"j{i}", exp_id="X", index=i, seed=42 + i, model="mlp_bn",
                dataset="digits", task="classification", batch_size=32, epochs=3, lr=0.05,
                optimizer="sgd", optimizer_kwargs={"momentum": 0.9},
                model_kwargs={"hidden": 16, "dropout": 0.0}, split=SplitSpec("holdout", 0))
    base.update(kw)
    return JobSpec(**base)


def _multi_model() -> list[JobSpec]:
    """Three buckets, as a multi_model cell (two members in the first, so one bucket is
    vectorised): different models, batch sizes and epoch budgets."""
    return [
        _job(0, model="mlp", model_kwargs={"hidden": 16}, epochs=2, lr=0.05),
        _job(1, model="mlp_bn", epochs=3, batch_size=16, optimizer="adam", lr=1e-3,
             optimizer_kwargs={}),
        _job(2, model="simplecnn", model_kwargs={}, epochs=1, batch_size=21,
             optimizer="adamw", lr=2e-3, optimizer_kwargs={}),
        _job(3, model="mlp", model_kwargs={"hidden": 16}, epochs=1, lr=0.02),
    ]


def _ctx(data: DeviceData, device: torch.device, features: str) -> SimpleNamespace:
    return SimpleNamespace(arrivals=None, settings=TrainSettings(device), datasets=lambda name: data,
                           threads=1, seed=42, emit=lambda type_, **f: None, options={},
                           features=features, max_parallel=None, group={})


def test_cuda_streams_per_bucket_equal_one_stream():
    """Streams recorded as effective, a stream per bucket, the same losses as s:0."""
    if not torch.cuda.is_available():
        raise unittest.SkipTest("needs a CUDA GPU (torch sees none)")
    device = torch.device("cuda")
    data = _data(device)
    jobs = _multi_model()
    out = {}
    for feats in ("vf:1,s:1,fl:0", "vf:1,s:0,fl:0"):
        executor = UnifiedExecutor()
        ctx = _ctx(data, device, feats)
        out[feats] = (executor.run(jobs, ctx), ctx, executor)
    with_s, ctx_s, ex_s = out["vf:1,s:1,fl:0"]
    without, _, _ = out["vf:1,s:0,fl:0"]
    assert ctx_s.group["features"] == "vf:1,s:1,fl:0" and ctx_s.group["features_reason"] is None
    assert ex_s.interleaves[0].streams and all(r.stream is not None for r in ex_s.runs)
    for a, b in zip(with_s, without, strict=False):
        assert a.status == b.status == "ok", (a.error, b.error)
        assert abs(a.final_train_loss - b.final_train_loss) <= 1e-5 * abs(b.final_train_loss)
