"""Parity: jobs trained by ``unified_model`` equal the same jobs trained by ``seq``.

Both executors run the same JobSpecs on the same (synthetic, float64) dataset through
their real ``run``; the trained modules are captured where each executor builds them.
Initial weights, per-member data order and the loop are the same, so after training every
parameter and buffer (BatchNorm running statistics included) agrees within 1e-6, as do
the per-epoch losses and the validation metrics. Each case also asserts that the
vectorised path actually ran: the plan says vectorised and verified and the template was
called once per global step (a silent fallback to eager fails the test).
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

torch = pytest.importorskip("torch")

import engine.executors.unified.bucket_build as bucket_build_mod  # noqa: E402
import engine.train.loop as training_mod  # noqa: E402
from engine.define.workloads import JobSpec, SplitSpec  # noqa: E402
from engine.errors import ConfigError  # noqa: E402
from engine.executors.seq import SeqExecutor  # noqa: E402
from engine.executors.unified.executor import UnifiedExecutor  # noqa: E402
from engine.train.data import DeviceData, EpochOrder, split_for  # noqa: E402
from engine.train.loop import TrainSettings  # noqa: E402

TOL = 1e-6
#: this module's probes (tests/parity.py): the matrix records what each case trained
PARITY = None  # set per test by the module_parity fixture (tests/conftest.py)
pytestmark = pytest.mark.usefixtures("module_parity")


@pytest.fixture(autouse=True)
def float64():
    # One thread: on a shared 2-core host, OpenMP threads spin-wait (bench/README.md).
    old, threads = torch.get_default_dtype(), torch.get_num_threads()
    torch.set_default_dtype(torch.float64)
    torch.set_num_threads(1)
    yield
    torch.set_default_dtype(old)
    torch.set_num_threads(threads)


def _data(n=157, shape=(1, 4, 4), classes=3, regression=False) -> DeviceData:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(n, *shape, generator=g, dtype=torch.float64)
    if regression:
        y = x.flatten(1).sum(1, keepdim=False) * 0.3 + torch.randn(n, generator=g) * 0.1
        return DeviceData("syn", "regression", shape, 1, x, y, None, None)
    y = torch.randint(0, classes, (n,), generator=g)
    return DeviceData("syn", "classification", shape, classes, x, y, None, None)


def _job(i, **kw) -> JobSpec:
    base = dict(job_id=f"j{i}", exp_id="X", index=i, seed=42 + i, model="mlp_bn",
                dataset="digits", task="classification", batch_size=32, epochs=3, lr=0.05,
                optimizer="sgd", optimizer_kwargs={"momentum": 0.9},
                model_kwargs={"hidden": 16, "dropout": 0.0}, split=SplitSpec("holdout", 0))
    base.update(kw)
    return JobSpec(**base)


def _ctx(data, events, **extra):
    return SimpleNamespace(arrivals=None, settings=TrainSettings(torch.device("cpu")),
                           datasets=lambda name: data, threads=1, seed=42,
                           emit=lambda type_, **f: events.append((type_, f)),
                           options=extra.pop("options", {}), features=extra.pop("features", None),
                           max_parallel=extra.pop("max_parallel", None), group={})


@pytest.fixture
def captured(monkeypatch):
    """job_id → module, per executor, recorded where each executor builds its models."""
    built = {"seq": {}, "unified": {}}
    for label, module in (("seq", training_mod), ("unified", bucket_build_mod)):
        original = module.build_model

        def build(*args, where="", _orig=original, _label=label, **kwargs):
            model = _orig(*args, where=where, **kwargs)
            built[_label][where] = model
            return model

        monkeypatch.setattr(module, "build_model", build)
    return built


def _run_both(jobs, data, captured, **extra):
    seq_events, uni_events = [], []
    seq = SeqExecutor().run(jobs, _ctx(data, seq_events))
    executor = UnifiedExecutor()
    ctx = _ctx(data, uni_events, **extra)
    uni = executor.run(jobs, ctx)
    return seq, uni, executor, ctx, seq_events, uni_events


def _close(a, b, what):
    if a is None or b is None:
        assert a is None and b is None, what
        return
    assert abs(a - b) <= TOL * max(1.0, abs(b)), f"{what}: {a} vs {b}"


def _assert_parity(seq, uni, captured, parity=None):
    """``parity``: the probes to record through (tests/parity.py); this module's own
    tests record through theirs by default, other modules' tests that pass none compare
    through a probe that records nowhere (the same assertions)."""
    from tests.parity import Parity

    probe = parity or PARITY or Parity("", [])
    for s, u in zip(seq, uni, strict=False):
        jid = s.job.job_id
        assert u.job.job_id == jid
        assert (s.status, u.status) == ("ok", "ok"), (jid, u.error)
        for field in ("samples", "samples_dropped", "epochs_run", "val_source", "param_count"):
            assert getattr(s, field) == getattr(u, field), (jid, field)
        for field in ("final_train_loss", "final_train_acc", "final_val_loss", "final_val_acc"):
            _close(getattr(u, field), getattr(s, field), f"{jid} {field}")
        assert len(s.history) == len(u.history)
        for hs, hu in zip(s.history, u.history, strict=False):
            assert set(hs) == set(hu), jid
            for key in ("train_loss", "val_loss", "val_acc", "train_acc"):
                if key in hs:
                    _close(hu[key], hs[key], f"{jid} epoch {hs['epoch']} {key}")
        ms, mu = captured["seq"][jid].state_dict(), captured["unified"][jid].state_dict()
        assert set(ms) == set(mu)
        for name, value in ms.items():
            probe.within(f"{jid} {name}", mu[name].double(), value.double(), TOL,
                          absolute=True, kind="tolerance")
        assert u.train_time_s and u.total_time_s and u.total_time_s >= u.train_time_s


def _assert_vectorised(executor, jobs, data):
    """The plan says vectorised+verified and the template ran once per global step."""
    for run in executor.runs:
        if len(run.plan.jobs) < 2:
            continue
        assert (run.plan.route, run.plan.check) == ("vectorised", "verified"), run.plan.line()
        steps = []
        for job in run.plan.jobs:
            split = split_for(job.split, len(data.pool_y), None)
            steps.append(job.epochs * EpochOrder(job, split.train_idx).n_batches)
        assert run.stack.forward_calls == max(steps)


CASES = {
    # SGD with momentum, BatchNorm, distinct lrs, momenta, weight decay and epoch budgets.
    "sgd_momentum_bn": [
        _job(0), _job(1, lr=0.01, epochs=2),
        _job(2, optimizer_kwargs={"momentum": 0.5, "weight_decay": 1e-3}, epochs=4)],
    "sgd_nesterov": [
        _job(i, lr=lr, optimizer_kwargs={"momentum": 0.9, "nesterov": True})
        for i, lr in enumerate((0.1, 0.02))],
    "adam_mlp": [
        _job(0, model="mlp", model_kwargs={"hidden": 16}, optimizer="adam", lr=1e-3,
             optimizer_kwargs={}),
        _job(1, model="mlp", model_kwargs={"hidden": 16}, optimizer="adam", lr=3e-3,
             optimizer_kwargs={"betas": [0.8, 0.99]}, epochs=2),
        _job(2, model="mlp", model_kwargs={"hidden": 16}, optimizer="adam", lr=1e-2,
             optimizer_kwargs={"weight_decay": 0.01})],
    "adamw_bn": [
        _job(i, optimizer="adamw", lr=lr, optimizer_kwargs={"weight_decay": wd}, epochs=e)
        for i, (lr, wd, e) in enumerate(((1e-3, 0.01), (3e-3, 0.1), (2e-3, 0.0)) and
                                        ((1e-3, 0.01, 3), (3e-3, 0.1, 2), (2e-3, 0.0, 3)))],
    # Dropout live: per-member generators reproduce seq's masks on CPU.
    "sgd_dropout": [
        _job(i, lr=lr, model_kwargs={"hidden": 16, "dropout": 0.2})
        for i, lr in enumerate((0.05, 0.02, 0.08))],
    # hpo-like: validation after every epoch.
    "validate_every_epoch": [
        _job(i, optimizer="adam", lr=lr, optimizer_kwargs={}, validate_every_epoch=True)
        for i, lr in enumerate((1e-3, 5e-3))],
}


@pytest.mark.parametrize("retire", ["remove", "mask"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_unified_equals_seq(case, retire, captured):
    """Under both retire policies: finished members removed from the stack (re-stacking
    the survivors) or kept in it, frozen."""
    jobs = CASES[case]
    data = _data()
    seq, uni, executor, ctx, _, events = _run_both(jobs, data, captured,
                                                   options={"retire": retire})
    _assert_parity(seq, uni, captured)
    _assert_vectorised(executor, jobs, data)
    # Members that finish earlier than the last one leave the stack only under "remove".
    early = len({j.epochs for j in jobs}) > 1
    assert bool(executor.runs[0].restacks) == (early and retire == "remove")
    info = ctx.group["executor_info"]["plan"][0]
    assert info["route"] == "vectorised" and info["check"] == "verified"
    assert ctx.group["features"] == "vf:1,s:0,fl:0"
    assert ctx.group["max_parallel"] == len(jobs)
    done = [f["job_id"] for t, f in events if t == "job_done"]
    assert sorted(done) == sorted(j.job_id for j in jobs)


@pytest.mark.parametrize("retire", ["remove", "mask"])
def test_cv_folds_with_unequal_batch_counts_equal_seq(retire, captured):
    """5 folds of 157 samples: training sets of 125 and 126 → 5 and 6 batches of 21, so
    members reach their epoch ends at different global steps (simplecnn, adamw)."""
    jobs = [_job(i, model="simplecnn", model_kwargs={}, optimizer="adamw", lr=2e-3,
                 optimizer_kwargs={}, batch_size=21, epochs=2,
                 split=SplitSpec("fold", 0, fold=i, folds=5)) for i in range(5)]
    data = _data()
    counts = {EpochOrder(j, split_for(j.split, 157, None).train_idx).n_batches for j in jobs}
    assert counts == {5, 6}
    seq, uni, executor, _, _, _ = _run_both(jobs, data, captured, options={"retire": retire})
    _assert_parity(seq, uni, captured)
    _assert_vectorised(executor, jobs, data)
    # The 5-batch folds finish first: under "remove" the 6-batch ones go on as a stack of
    # their own (one re-stack at the 2-fold size).
    n6 = sum(EpochOrder(j, split_for(j.split, 157, None).train_idx).n_batches == 6
             for j in jobs)
    assert executor.runs[0].restacks == ([n6] if retire == "remove" else [])


def test_regression_and_fused_loss_equal_seq(captured):
    jobs = [_job(i, model="mlp", model_kwargs={"hidden": 8}, task="regression",
                 optimizer="adam", lr=lr, optimizer_kwargs={}, dataset="diabetes")
            for i, lr in enumerate((1e-3, 3e-3))]
    data = _data(shape=(6,), regression=True)
    seq, uni, executor, ctx, _, _ = _run_both(jobs, data, captured, features="vf:1,s:0,fl:1")
    _assert_parity(seq, uni, captured)
    _assert_vectorised(executor, jobs, data)
    assert ctx.group["features"] == "vf:1,s:0,fl:1"


def test_eager_route_equals_seq_and_says_so(captured):
    jobs = CASES["sgd_dropout"]
    seq, uni, executor, ctx, _, _ = _run_both(jobs, _data(), captured, features="vf:0")
    _assert_parity(seq, uni, captured)
    plan = ctx.group["executor_info"]["plan"][0]
    assert plan["route"] == "eager" and "vf:0" in plan["reason"]
    assert executor.runs[0].stack is None


def test_failed_verification_falls_back_to_eager_and_records_why(captured, monkeypatch):
    monkeypatch.setattr(bucket_build_mod, "fingerprint_mismatch",
                        lambda members: "member 1 differs at '4' (Dropout): p = 0.5 vs 0.2")
    jobs = CASES["sgd_momentum_bn"]
    seq, uni, _, ctx, _, _ = _run_both(jobs, _data(), captured)
    _assert_parity(seq, uni, captured)
    plan = ctx.group["executor_info"]["plan"][0]
    assert (plan["route"], plan["check"]) == ("eager", "disagreed")
    assert "p = 0.5" in plan["reason"]


def test_unverified_bucket_is_marked_unchecked(captured):
    jobs = CASES["adam_mlp"]
    _, _, _, ctx, _, _ = _run_both(jobs, _data(), captured, options={"verify": False})
    plan = ctx.group["executor_info"]["plan"][0]
    assert (plan["route"], plan["check"]) == ("vectorised", "unchecked")


def test_buckets_split_by_structure_and_max_parallel(captured):
    jobs = [_job(0), _job(1, model_kwargs={"hidden": 8, "dropout": 0.0}), _job(2), _job(3),
            _job(4, batch_size=16)]
    seq, uni, executor, ctx, _, _ = _run_both(jobs, _data(), captured, max_parallel=2)
    _assert_parity(seq, uni, captured)
    plans = ctx.group["executor_info"]["plan"]
    assert [p["jobs"] for p in plans] == [["j0", "j2"], ["j3"], ["j1"], ["j4"]]
    assert [p["route"] for p in plans] == ["vectorised", "eager", "eager", "eager"]
    assert ctx.group["max_parallel"] == 2


@pytest.mark.parametrize("retire", ["remove", "mask"])
def test_diverging_member_fails_alone(retire, captured):
    """A member whose loss becomes non-finite fails with seq's reason; its bucket mates
    train on and still equal seq."""
    # float64 losses (half precision alone is upcast): it takes lr 1e150 to overflow. No
    # BatchNorm: a BN-fed bias has a zero true gradient whose rounding noise, times such an
    # lr, would make the verification probe disagree and the bucket train eagerly.
    mlp = dict(model="mlp", model_kwargs={"hidden": 16})
    jobs = [_job(0, **mlp), _job(1, lr=1e150, optimizer_kwargs={"momentum": 0.9}, **mlp),
            _job(2, **mlp)]
    seq, uni, executor, _, _, _ = _run_both(jobs, _data(), captured,
                                            options={"retire": retire})
    assert [r.status for r in seq] == [r.status for r in uni] == ["ok", "failed", "ok"]
    assert uni[1].error.startswith("FloatingPointError: training loss is")
    assert uni[1].error == seq[1].error
    _assert_parity([seq[0], seq[2]], [uni[0], uni[2]], captured)
    assert executor.runs[0].plan.route == "vectorised"


def test_task_and_optimizer_without_stacked_form_are_refused_by_name(monkeypatch):
    import dataclasses

    from engine.registry import OPTIMIZERS, TASKS

    events = []
    data = _data()
    task = dataclasses.replace(TASKS.get("classification"), name="plain_cls",
                               stacked_target=None)
    monkeypatch.setitem(TASKS.items, "plain_cls", task)
    with pytest.raises(ConfigError, match="task 'plain_cls'.*no stacked form"):
        UnifiedExecutor().run([_job(0, task="plain_cls"), _job(1, task="plain_cls")],
                              _ctx(data, events))
    opt = dataclasses.replace(OPTIMIZERS.get("sgd"), name="plain_sgd", stacked_target=None)
    monkeypatch.setitem(OPTIMIZERS.items, "plain_sgd", opt)
    with pytest.raises(ConfigError, match="optimizer 'plain_sgd'.*no stacked form"):
        UnifiedExecutor().run([_job(0, optimizer="plain_sgd"), _job(1, optimizer="plain_sgd")],
                              _ctx(data, events))
    assert events == []  # nothing started
