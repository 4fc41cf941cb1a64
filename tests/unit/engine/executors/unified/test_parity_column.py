"""The ``parity_contract`` column (issue 42; docs/fidelity.md, "A row's parity_contract"):
``exact`` only where the contract makes a path bit for bit by construction or where the
float32 one-step probe of a twin of the stack found it bit-identical to K solo steps on
this machine; otherwise the documented bound. Tested both ways, and by the rule rather
than this host's outcome: whether vmap's batched kernels round like the solo ones depends
on the CPU and its BLAS (the kernel-dispatch matrix runs the ``parity`` tests under other
settings), so no test here assumes the probe finds bit-identity for a batched bucket.
"""

from __future__ import annotations

import functools
from types import SimpleNamespace

import pytest

torch = pytest.importorskip("torch")

import engine.executors.unified.bucket_build as bucket_build_mod  # noqa: E402
import engine.train.loop as training_mod  # noqa: E402
from engine.define.workloads import JobSpec, SplitSpec  # noqa: E402
from engine.executors.seq import SeqExecutor  # noqa: E402
from engine.executors.unified import parity as rule  # noqa: E402
from engine.executors.unified import parity_probe as probe_mod  # noqa: E402
from engine.executors.unified.executor import UnifiedExecutor  # noqa: E402
from engine.results import parity_contract as pc  # noqa: E402
from engine.train.data import DeviceData  # noqa: E402
from engine.train.loop import TrainSettings  # noqa: E402


@pytest.fixture(autouse=True)
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _data(n=96, shape=(1, 4, 4), classes=3) -> DeviceData:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(n, *shape, generator=g)  # float32: what a cell trains
    y = torch.randint(0, classes, (n,), generator=g)
    return DeviceData("syn", "classification", shape, classes, x, y, None, None)


def _job(i, **kw) -> JobSpec:
    base = dict(job_id=f"j{i}", exp_id="X", index=i, seed=42 + i, model="mlp_bn",
                dataset="digits", task="classification", batch_size=16, epochs=1, lr=0.05,
                optimizer="sgd", optimizer_kwargs={"momentum": 0.9},
                model_kwargs={"hidden": 16, "dropout": 0.2}, split=SplitSpec("holdout", 0))
    base.update(kw)
    return JobSpec(**base)


def _run(jobs, data=None, **extra):
    data = data or _data()
    ctx = SimpleNamespace(arrivals=None, settings=TrainSettings(torch.device("cpu")),
                          datasets=lambda name: data, threads=1, seed=42,
                          emit=lambda type_, **f: None, options=extra.pop("options", {}),
                          features=extra.pop("features", None), max_parallel=None, group={},
                          outside_window=[])
    executor = UnifiedExecutor()
    results = executor.run(jobs, ctx)
    assert all(r.status == "ok" for r in results), [r.error for r in results]
    return ctx, ctx.group["executor_info"]["plan"], results


def _force_probe(monkeypatch):
    """Ask for the probe where the contract would not (exact kernels): the twin of an
    exact-kernel stack is bit for bit by construction, so its probe is identical on any
    host — the probe's 'identical' branch without leaning on this CPU."""
    def before_probe(**kw):
        if kw["route"] != "vectorised":
            return rule.before_probe(**kw)
        return rule.kernel_bound(kw["optimizer"]), True

    monkeypatch.setattr(bucket_build_mod, "before_probe", before_probe)


def _one_ulp_off(params):
    """A difference forced honestly into what the probe compares: the twin's first
    parameter moved by one ulp after its step."""
    p = next(iter(params.values()))
    p.view(-1)[0] = torch.nextafter(p.view(-1)[0], torch.tensor(float("inf")))


# -- the value's grammar -----------------------------------------------------------------

def test_values_are_parseable_and_a_group_carries_the_weakest():
    assert pc.bound("rounding_bound", "T", "n") == "bound:rounding_bound(T,n)"
    assert pc.is_value("exact") and pc.is_value("bound:compile_probe(1e-4)")
    for bad in ("", "0", "bound:rounding_bound", "bound:nonsense(1)", "exact "):
        assert not pc.is_value(bad), bad
    with pytest.raises(ValueError, match="unknown bound"):
        pc.bound("tight_bound")
    assert pc.weakest(["exact", None, "", float("nan"), "exact"]) == "exact"
    assert pc.weakest([None, ""]) is None  # missing stays missing, never 0
    assert pc.weakest(["exact", rule.FUSED, rule.ADAM, rule.ROUNDING]) == rule.ADAM
    assert pc.weakest([rule.COMPILED, rule.half_precision("bf16")]) == rule.COMPILED
    with pytest.raises(ValueError, match="not a parity_contract value"):
        pc.weakest(["exact", "bit for bit"])
    assert pc.wording("exact") == "bit for bit"
    assert pc.wording(rule.ROUNDING) == "within rounding_bound(T,n)"
    assert pc.wording(None) == "" and pc.wording("0") == ""


@pytest.mark.parametrize("case,want", [
    (dict(route="eager"), ("exact", False)),
    (dict(exact_kernels=True), ("exact", False)),
    (dict(exact_kernels=True, fused=True), (rule.FUSED, False)),
    (dict(exact_kernels=True, skipped_layers=["2"]), (rule.ROUNDING, True)),
    (dict(), (rule.ROUNDING, True)),
    (dict(optimizer="adamw"), (rule.ADAM, True)),
    (dict(precision="amp-bf16"), ("bound:half_precision(amp-bf16)", False)),
    (dict(precision="tf32", device_type="cuda"), (rule.ROUNDING, False)),
    (dict(device_type="cuda", dropout=True, exact_kernels=True), (rule.CUDA_DROPOUT, False)),
])
def test_the_contract_decides_before_any_probe(case, want):
    args = dict(route="vectorised", precision="fp32", exact_kernels=False,
                skipped_layers=None, fused=False, device_type="cpu", dropout=False,
                optimizer="sgd")
    args.update(case)
    assert rule.before_probe(**args) == want
    assert rule.after_probe(rule.ROUNDING, "identical", False) == "exact"
    assert rule.after_probe(rule.ROUNDING, "identical", True) == rule.FUSED
    assert rule.after_probe(rule.ADAM, "differs", False) == rule.ADAM
    assert rule.after_probe(rule.ADAM, "raised", False) == rule.ADAM


# -- exact by construction -----------------------------------------------------------------

def test_eager_route_is_exact_and_bit_for_bit_seqs(parity, monkeypatch):
    """The contract's eager-route row: vf:0 trains each member alone, so the row says
    exact without a probe, and its members equal seq's bit for bit (float32, dropout
    live)."""
    built = {"seq": {}, "unified": {}}
    for label, module in (("seq", training_mod), ("unified", bucket_build_mod)):
        original = module.build_model

        def build(*args, where="", _orig=original, _label=label, **kwargs):
            built[_label][where] = model = _orig(*args, where=where, **kwargs)
            return model

        monkeypatch.setattr(module, "build_model", build)
    jobs = [_job(i, lr=lr) for i, lr in enumerate((0.05, 0.02))]
    data = _data()
    ctx, plan, _ = _run(jobs, data, features="vf:0")
    SeqExecutor().run(jobs, SimpleNamespace(
        arrivals=None, settings=TrainSettings(torch.device("cpu")),
        datasets=lambda name: data, threads=1,
        seed=42, emit=lambda type_, **f: None, options={}, group={}))
    assert ctx.group["parity_contract"] == "exact"
    assert plan[0]["route"] == "eager" and plan[0]["parity_probe"] is None
    assert ctx.outside_window == []
    for job in jobs:
        want = built["seq"][job.job_id].state_dict()
        for name, value in built["unified"][job.job_id].state_dict().items():
            parity.same(f"{job.job_id} {name}", value, want[name])


def test_exact_kernels_are_exact_by_construction_without_a_probe():
    ctx, plan, _ = _run([_job(0), _job(1)], options={"kernels": "exact"})
    assert plan[0]["route"] == "vectorised" and plan[0]["exact_kernels_skipped"] == []
    assert ctx.group["parity_contract"] == "exact"
    assert plan[0]["parity_probe"] is None and plan[0]["parity_probe_s"] is None
    assert ctx.group["executor_info"]["outside_window_s"] == 0


# -- decided by the probe, both ways -------------------------------------------------------

def test_a_bit_identical_probe_makes_the_row_exact(monkeypatch):
    _force_probe(monkeypatch)
    ctx, plan, results = _run([_job(0), _job(1), _job(2)], options={"kernels": "exact"})
    assert plan[0]["parity_probe"] == {"outcome": "identical", "max_abs": 0.0, "detail": None,
                                       "bound": rule.ROUNDING}
    assert ctx.group["parity_contract"] == "exact"
    # its cost: in the plan, and kept out of T_group (the interval the cell subtracts)
    (start, end), = ctx.outside_window
    assert plan[0]["parity_probe_s"] == pytest.approx(end - start, abs=1e-4) and end > start
    assert ctx.group["executor_info"]["outside_window_s"] == pytest.approx(end - start,
                                                                         abs=1e-4)
    for r in results:  # the jobs' totals lose it too
        assert r.total_time_s == pytest.approx(r.end - r.start - (end - start))


def test_a_restack_leaves_what_the_probe_did_not_see(monkeypatch):
    """The probe spoke for the stack at the size it was built: once a member finishes
    and the survivors are re-stacked (retire = remove), the batched kernels run on other
    shapes, so the bucket keeps the bound."""
    _force_probe(monkeypatch)
    ctx, plan, _ = _run([_job(0), _job(1), _job(2, epochs=2)], options={"kernels": "exact"})
    assert plan[0]["restacks"] == [1], plan[0]
    assert plan[0]["parity_probe"]["outcome"] == "identical"
    assert ctx.group["parity_contract"] == rule.ROUNDING


@pytest.mark.parametrize("optimizer,kwargs,want", [
    ("sgd", {"momentum": 0.9}, rule.ROUNDING),
    ("adam", {}, rule.ADAM),
])
def test_a_probe_that_finds_a_difference_leaves_the_bound(monkeypatch, optimizer, kwargs,
                                                          want):
    _force_probe(monkeypatch)
    monkeypatch.setattr(bucket_build_mod, "parity_probe",
                        functools.partial(probe_mod.probe, perturb=_one_ulp_off))
    jobs = [_job(i, optimizer=optimizer, optimizer_kwargs=kwargs, lr=1e-3 * (i + 1))
            for i in range(2)]
    ctx, plan, _ = _run(jobs, options={"kernels": "exact"})
    found = plan[0]["parity_probe"]
    assert found["outcome"] == "differs" and 0 < found["max_abs"] < 1e-5
    assert found["detail"].startswith("member 0: parameter ")
    assert plan[0]["parity_contract"] == want and ctx.group["parity_contract"] == want


def test_a_group_carries_its_weakest_bucket(monkeypatch):
    """A bucket of one (eager: exact) beside a stacked bucket whose probe differs."""
    _force_probe(monkeypatch)
    monkeypatch.setattr(bucket_build_mod, "parity_probe",
                        functools.partial(probe_mod.probe, perturb=_one_ulp_off))
    jobs = [_job(0), _job(1), _job(2, model_kwargs={"hidden": 8, "dropout": 0.0})]
    ctx, plan, _ = _run(jobs, options={"kernels": "exact"})
    assert [p["parity_contract"] for p in plan] == [rule.ROUNDING, "exact"]
    assert ctx.group["parity_contract"] == rule.ROUNDING


def test_a_batched_bucket_says_exact_iff_its_probe_was_bit_identical():
    """The default batched kernels on this host: whatever the probe finds, the row
    follows it (exact iff identical; a difference is a float rounding, far inside the
    bound's scale). Dropout live, so the twin's masks must be the solo masks too."""
    ctx, plan, _ = _run([_job(0), _job(1, lr=0.02)])
    found = plan[0]["parity_probe"]
    assert found is not None and found["outcome"] in ("identical", "differs"), found
    assert (ctx.group["parity_contract"] == "exact") == (found["outcome"] == "identical")
    if found["outcome"] == "differs":
        assert ctx.group["parity_contract"] == rule.ROUNDING
        assert 0 < found["max_abs"] < 1e-4
    else:
        assert found["max_abs"] == 0.0
