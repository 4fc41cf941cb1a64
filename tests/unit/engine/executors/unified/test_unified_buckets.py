"""Heterogeneous cells under ``unified_model``: several buckets interleaved per step,
max_parallel chunks, the compile probe (fallback recorded, state restored, warm-up apart),
and the baseline switch. (CUDA streams per bucket need a GPU:
tests/gpu/test_gpu_stacked_streams.py.)

Each case compares with ``seq`` on the same jobs (float64, same helpers as
test_unified_parity.py): interleaving, chunking and probing must not change what any
member computes."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import engine.executors.unified.bucket as bucket_mod  # noqa: E402
from engine.executors.seq import SeqExecutor  # noqa: E402
from engine.executors.unified.executor import UnifiedExecutor  # noqa: E402
from engine.executors.unified.features import effective_features, features_string  # noqa: E402
from engine.train.data import EpochOrder, split_for  # noqa: E402
from engine.train.loop import TrainSettings  # noqa: E402
from tests.unit.engine.executors.unified.test_unified_parity import (  # noqa: E402,F401
    _assert_parity,
    _ctx,
    _data,
    _job,
    captured,
    float64,
)

N = 157


def _steps(job) -> int:
    return job.epochs * EpochOrder(job, split_for(job.split, N, None).train_idx).n_batches


def _multi_model():
    """Three buckets, as a multi_model cell (plus a second member in the first bucket, so
    one bucket is vectorised): different models, batch sizes and epoch budgets."""
    return [
        _job(0, model="mlp", model_kwargs={"hidden": 16}, epochs=2, lr=0.05),
        _job(1, model="mlp_bn", epochs=3, batch_size=16, optimizer="adam", lr=1e-3,
             optimizer_kwargs={}),
        _job(2, model="simplecnn", model_kwargs={}, epochs=1, batch_size=21,
             optimizer="adamw", lr=2e-3, optimizer_kwargs={}),
        _job(3, model="mlp", model_kwargs={"hidden": 16}, epochs=1, lr=0.02),
    ]


def _run(jobs, data, compile_mode="off", **extra):
    executor = UnifiedExecutor()
    executor.trace = []
    ctx = _ctx(data, [], **extra)
    ctx.settings = TrainSettings(torch.device("cpu"), compile_mode=compile_mode)
    return executor, ctx, executor.run(jobs, ctx)


def _seq(jobs, data):
    return SeqExecutor().run(jobs, _ctx(data, []))


@pytest.mark.parametrize("retire", ["remove", "mask"])
def test_three_buckets_round_robin_over_active_members(retire, captured):  # noqa: F811
    jobs = _multi_model()
    data = _data()
    seq = _seq(jobs, data)
    executor, ctx, uni = _run(jobs, data, options={"retire": retire})
    _assert_parity(seq, uni, captured)
    plans = ctx.group["executor_info"]["plan"]
    assert [p["jobs"] for p in plans] == [["j0", "j3"], ["j1"], ["j2"]]
    assert [p["route"] for p in plans] == ["vectorised", "eager", "eager"]
    assert {p["chunk"] for p in plans} == {0} and ctx.group["max_parallel"] == 4
    # The expected schedule: at global step t, every bucket with a member still short of
    # its step budget steps once, in bucket order, with exactly those members.
    steps = {j.job_id: _steps(j) for j in jobs}
    expected = []
    for t in range(max(steps.values())):
        for p in plans:
            active = tuple(j for j in p["jobs"] if steps[j] > t)
            if active:
                expected.append((p["bucket"], active))
    assert executor.trace == expected
    # Per job: one step per batch of its budget, never one more.
    for job in jobs:
        assert sum(job.job_id in members for _, members in executor.trace) == steps[job.job_id]
    # The vectorised bucket's template ran once per global step of that bucket; under
    # "remove" j3 (1 epoch) left the stack and j0 went on alone.
    run0 = executor.runs[0]
    assert run0.stack.forward_calls == steps["j0"]
    assert run0.restacks == ([1] if retire == "remove" else [])
    assert run0.stack.k == (1 if retire == "remove" else 2)


def test_chunks_run_one_after_another(captured):  # noqa: F811
    jobs = _multi_model()
    data = _data()
    seq = _seq(jobs, data)
    executor, ctx, uni = _run(jobs, data, max_parallel=2)
    _assert_parity(seq, uni, captured)
    plans = ctx.group["executor_info"]["plan"]
    # Jobs in bucket order (j0 j3 | j1 | j2) cut into chunks of two.
    assert [(p["chunk"], p["jobs"]) for p in plans] == [(0, ["j0", "j3"]), (1, ["j1"]),
                                                       (1, ["j2"])]
    assert ctx.group["max_parallel"] == 2
    chunk_of = {p["bucket"]: p["chunk"] for p in plans}
    chunks_in_order = [chunk_of[b] for b, _ in executor.trace]
    assert chunks_in_order == sorted(chunks_in_order)  # never back to an earlier chunk
    assert len(executor.interleaves) == 2
    assert ctx.group["train_throughput_sps"] > 0


def _disagreeing(fn):
    """A 'compiled' callable that runs the real one (drawing dropout noise, moving
    BatchNorm statistics) and returns something else: the probe must refuse it and
    restore every buffer and the RNG."""
    def wrong(*args, **kwargs):
        return fn(*args, **kwargs) + 1.0
    return wrong


def _raising(fn):
    def broken(*args, **kwargs):
        raise RuntimeError("backend exploded")
    return broken


@pytest.mark.parametrize("compiler, why", [(_disagreeing, "outputs differ from eager"),
                                           (_raising, "RuntimeError: backend exploded")])
def test_compile_probe_fallback_is_recorded_and_leaves_no_trace(compiler, why, captured,  # noqa: F811
                                                                monkeypatch):
    monkeypatch.setattr(bucket_mod, "compile_callable", lambda fn, mode, backend: compiler(fn))
    # BatchNorm and live dropout in the vectorised bucket; one eager bucket.
    jobs = [_job(i, lr=lr, model_kwargs={"hidden": 16, "dropout": 0.2})
            for i, lr in enumerate((0.05, 0.02))] + [_job(2, model="mlp",
                                                          model_kwargs={"hidden": 8})]
    data = _data()
    seq = _seq(jobs, data)
    executor, ctx, uni = _run(jobs, data, compile_mode="default")
    _assert_parity(seq, uni, captured)  # the probe restored buffers, generators and RNG
    for r in uni:
        assert r.compile_mode == "off"
        assert r.compile_reason.startswith("compile probe (default) failed, trained eagerly")
        assert why in r.compile_reason
        assert r.compile_warmup_s is not None and r.compile_warmup_s > 0
    g = ctx.group
    assert g["compile_mode"] == "off" and g["compile"] is False
    assert g["compile_warmup_s"] > 0
    # the single-member bucket trained eagerly: vf as ran is 0 (issue 45)
    assert g["features"] == "vf:0,s:0,fl:0" and g["eager_buckets"].startswith("1/2: one member")
    assert g["features_reason"].startswith(effective_features("vf:1,s:1,fl:0", "cpu",
                                                              "default", False)[1] + "; vf: ")
    assert "compile default: the probe failed" in g["features_reason"]
    for p in g["executor_info"]["plan"]:
        assert p["compile"].startswith("off (compile probe") and why in p["compile"]
    assert executor.runs[0].stack.forward_calls == _steps(jobs[0])  # probe calls not counted


@pytest.mark.slow
def test_compiled_buckets_train_as_seq(captured):  # noqa: F811
    """A real torch.compile (the 'eager' backend: dynamo's graph capture without code
    generation, seconds instead of a minute on this CPU) on a vectorised and an eager
    bucket: recorded as compiled, warm-up apart, results equal seq's."""
    jobs = [_job(i, lr=lr, model_kwargs={"hidden": 16, "dropout": 0.2}, epochs=2)
            for i, lr in enumerate((0.05, 0.02))] + [_job(2, model="mlp", epochs=2,
                                                          model_kwargs={"hidden": 8})]
    data = _data()
    seq = _seq(jobs, data)
    executor, ctx, uni = _run(jobs, data, compile_mode="default",
                              options={"compile_backend": "eager"})
    _assert_parity(seq, uni, captured)
    assert [r.compile_mode for r in uni] == ["default"] * 3
    assert all(r.compile_warmup_s > 0 for r in uni)
    g = ctx.group
    assert g["compile_mode"] == "default" and g["compile_warmup_s"] > 0
    # the single-member bucket trained eagerly: vf as ran is 0 (issue 45)
    assert g["features_reason"] == ("s: no CUDA streams on a cpu device; vf: 1 of 2 buckets "
                                    "trained eagerly (one member, nothing to stack; "
                                    "eager_buckets)")
    assert [p["compile"] for p in g["executor_info"]["plan"]] == ["default", "default"]


def test_baseline_switch_turns_everything_off(captured):  # noqa: F811
    jobs = _multi_model()
    data = _data()
    seq = _seq(jobs, data)
    executor, ctx, uni = _run(jobs, data, compile_mode="default",
                              options={"baseline": True})
    _assert_parity(seq, uni, captured)
    g = ctx.group
    assert g["features"] == "vf:0,s:0,fl:0" and g["compile_mode"] == "off"
    assert g["compile_warmup_s"] is None
    assert all(p["route"] == "eager" for p in g["executor_info"]["plan"])
    assert any("baseline" in n for n in g["executor_info"]["notes"])


def test_ablation_rungs_record_the_documented_function(captured):  # noqa: F811
    """The six rungs as the matrix hands them to the executor (requested features, compile
    on or off), on CPU with a compile probe that fails: each group's features and reason
    are effective_features(requested, 'cpu', mode, probe result)."""
    from engine.define.axes import ABLATION_LADDER

    monkeypatch = pytest.MonkeyPatch()
    monkeypatch.setattr(bucket_mod, "compile_callable", lambda fn, mode, backend: _raising(fn))
    try:
        jobs = [_job(i, lr=lr) for i, lr in enumerate((0.05, 0.02))]
        data = _data()
        rows = []
        for rung in ABLATION_LADDER:
            mode = "reduce-overhead" if rung.compile else "off"
            _, ctx, uni = _run(jobs, data, compile_mode=mode, features=rung.features)
            assert all(r.status == "ok" for r in uni)
            ok = None if mode == "off" else ctx.group["compile_mode"] != "off"
            have, why = effective_features(rung.features, "cpu", mode, ok)
            assert ctx.group["features"] == features_string(have), rung.name
            assert ctx.group["features_reason"] == why, rung.name
            rows.append(((rung.features, mode), ctx.group["features"]))
        # Six distinct requested signatures (features and compile: B and D ask for the
        # same features, D compiles); on CPU with a failing probe, three effective ones.
        assert len({req for req, _ in rows}) == 6
        assert len({have for _, have in rows}) == 3
    finally:
        monkeypatch.undo()
