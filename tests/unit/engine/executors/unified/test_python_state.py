"""Issue 45: Python state that vmap cannot carry.

A forward that changes a plain Python attribute of its module (a step counter feeding a
schedule) runs once per step on the stack's template for all members, not once per member:
the bucket passed every tensor check and then trained differently from seq. The checks
that already run forwards compare each module's Python state before and after
(``engine.executors.unified.python_state``); a change sends the bucket eager, naming the
attribute, and the eager route then trains as seq does (bit for bit: the contract's eager
row). A forward that only reads its attributes still stacks."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest

torch = pytest.importorskip("torch")

from torch import nn  # noqa: E402

import engine.executors.unified.bucket_build as bucket_build_mod  # noqa: E402
import engine.train.loop as training_mod  # noqa: E402
from engine.executors.seq import SeqExecutor  # noqa: E402
from engine.executors.unified import python_state  # noqa: E402
from engine.executors.unified.losses import loss_function  # noqa: E402
from engine.executors.unified.stack import member_generator  # noqa: E402
from engine.executors.unified.verify import own_forward_mismatch, verify_bucket  # noqa: E402
from engine.registry import MODELS, TASKS, register_model  # noqa: E402
from engine.train.loop import TrainSettings  # noqa: E402
from tests.unit.engine.executors.unified.test_parity_column import (  # noqa: E402
    _data,
    _job,
    _run,
    one_thread,  # noqa: F401 - the autouse fixture, for this module too
)


class Scheduled(nn.Module):
    """A linear model whose forward counts its calls in ``self.steps`` and scales its
    output by a schedule of that count (what the issue's user wrote)."""

    def __init__(self, in_shape, n_outputs):
        super().__init__()
        self.fc = nn.Linear(math.prod(in_shape), n_outputs)
        self.steps = 0

    def forward(self, x):
        self.steps += 1
        return self.fc(x.flatten(1)) / (1.0 + 0.5 * self.steps)


class ReadsOnly(nn.Module):
    """Python attributes of every kind the fingerprint describes, only read by forward
    (a rebinding to an equal tuple is no change either)."""

    def __init__(self, in_shape, n_outputs):
        super().__init__()
        self.fc = nn.Linear(math.prod(in_shape), n_outputs)
        self.scale, self.name, self.flag, self.none = 0.5, "reads", True, None
        self.shape = tuple(in_shape)
        self.table = [1.0, 2.0]
        self.nan = float("nan")

    def forward(self, x):
        self.shape = tuple(x.shape[1:])  # a new tuple of equal value each call
        assert self.name == "reads" and self.flag and self.none is None
        return self.fc(x.flatten(1)) * self.scale * self.table[0]


class Body(nn.Module):
    def __init__(self, size, n_outputs):
        super().__init__()
        self.fc = nn.Linear(size, n_outputs)
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        return self.fc(x)


class Net(nn.Module):
    """The counter lives in a submodule."""

    def __init__(self, in_shape, n_outputs):
        super().__init__()
        self.body = Body(math.prod(in_shape), n_outputs)

    def forward(self, x):
        return self.body(x.flatten(1))


class GradOnly(nn.Module):
    """Counts only forwards under autograd: the no-grad own-forward check does not see
    it, the probe's solo step on copies must."""

    def __init__(self, in_shape, n_outputs):
        super().__init__()
        self.fc = nn.Linear(math.prod(in_shape), n_outputs)
        self.history: list[float] = []

    def forward(self, x):
        if torch.is_grad_enabled():
            self.history.append(1.0)
        return self.fc(x.flatten(1))


@pytest.fixture
def models():
    names = {"py_scheduled": Scheduled, "py_reads_only": ReadsOnly}
    for name, cls in names.items():
        register_model(name, description="test: Python state")(
            lambda in_shape, n_outputs, _cls=cls, **kw: _cls(in_shape, n_outputs))
    yield
    for name in names:
        MODELS.items.pop(name, None)


def _captured(monkeypatch):
    """job_id → module, where seq and unified_model build their models."""
    built = {"seq": {}, "unified": {}}
    for label, module in (("seq", training_mod), ("unified", bucket_build_mod)):
        def build(*args, where="", _orig=module.build_model, _label=label, **kwargs):
            built[_label][where] = model = _orig(*args, where=where, **kwargs)
            return model

        monkeypatch.setattr(module, "build_model", build)
    return built


def test_a_forward_counting_steps_runs_eager_and_trains_as_seq(models, monkeypatch, parity):
    built = _captured(monkeypatch)
    jobs = [_job(i, model="py_scheduled", model_kwargs={}, optimizer_kwargs={}, epochs=2)
            for i in range(3)]
    data = _data()
    ctx, plan, _ = _run(jobs, data, features="vf:1,s:0,fl:0")
    SeqExecutor().run(jobs, SimpleNamespace(
        arrivals=None, settings=TrainSettings(torch.device("cpu")), datasets=lambda name: data, threads=1,
        seed=42, emit=lambda type_, **f: None, options={}, group={}))
    assert [(p["route"], p["check"]) for p in plan] == [("eager", "disagreed")], plan
    reason = plan[0]["reason"]
    assert reason.startswith("forward changes Python state: Scheduled.steps (0 → 1)"), reason
    g = ctx.group
    assert g["eager_buckets"] == f"1/1: {reason}"
    assert g["features"] == "vf:0,s:0,fl:0"
    assert "Scheduled.steps" in g["features_reason"]
    # The eager route: each member trains alone, as seq (the contract's exact row); the
    # checks put the real instances' counters back, so each counted what seq's counted.
    assert g["parity_contract"] == "exact"
    for job in jobs:
        ours, seqs = built["unified"][job.job_id], built["seq"][job.job_id]
        assert ours.steps == seqs.steps > 0
        want = seqs.state_dict()
        for name, value in ours.state_dict().items():
            parity.same(f"{job.job_id} {name}", value, want[name])


def test_attributes_forward_only_reads_still_stack(models):
    ctx, plan, _ = _run([_job(i, model="py_reads_only", model_kwargs={}) for i in range(2)])
    assert [(p["route"], p["check"]) for p in plan] == [("vectorised", "verified")], plan
    assert ctx.group["eager_buckets"] == "0/1"


def _batch(k=2, rows=8, shape=(1, 4, 4), classes=3):
    g = torch.Generator().manual_seed(1)
    return torch.randn(k, rows, *shape, generator=g), torch.randint(0, classes, (k, rows),
                                                                  generator=g)


def _members(cls, k=2):
    members = []
    for i in range(k):
        torch.manual_seed(i)
        members.append(cls((1, 4, 4), 3))
    return members


class Appends(nn.Module):
    def __init__(self, in_shape, n_outputs):
        super().__init__()
        self.fc = nn.Linear(math.prod(in_shape), n_outputs)
        self.history: list[int] = []

    def forward(self, x):
        self.history.append(x.shape[0])  # in place: re-binding cannot put it back
        return self.fc(x.flatten(1))


def test_a_submodules_counter_is_caught_and_put_back():
    members = _members(Net)
    x, _ = _batch()
    reason = own_forward_mismatch(members, None, x)
    assert reason is not None and reason.startswith(
        "forward changes Python state: Net.body.calls (0 → 1) (member 0)"), reason
    assert [m.body.calls for m in members] == [0, 0]  # the real instances left as found
    members = _members(Appends)
    lists = [m.history for m in members]
    reason = own_forward_mismatch(members, None, x)
    assert reason is not None and "Appends.history (member 0)" in reason, reason
    assert [m.history for m in members] == [[], []]  # emptied in place: the same lists
    assert all(m.history is h for m, h in zip(members, lists, strict=True))


def test_the_probe_catches_a_change_the_no_grad_check_cannot_see():
    members = _members(GradOnly)
    x, y = _batch()
    assert own_forward_mismatch(members, None, x) is None  # no grad: nothing appended
    task = TASKS.get("classification")
    verdict, _ = verify_bucket(
        members, [member_generator(torch.device("cpu")) for _ in members], x, y,
        constructed_alike=True, lrs=[0.1, 0.1], optimizer_kwargs=[{}, {}], task=task,
        optimizer="sgd", stacked_loss=loss_function(task, False), sample_shape=(1, 4, 4))
    assert verdict.verdict == "disagreed", verdict
    assert verdict.detail.startswith("forward changes Python state: GradOnly.history"), verdict
    assert [m.history for m in members] == [[], []]  # the probe ran on copies


def test_the_fingerprint_is_shallow():
    m = ReadsOnly((1, 4, 4), 3)
    before = python_state.snapshot(m)
    assert "ReadsOnly.fc" not in before and "ReadsOnly.training" not in before
    m.shape = (1, 4, 4)  # an equal tuple, another object; NaN equals itself
    m.nan = float("nan")
    assert python_state.change(m, before) is None
    m.table.append(3.0)  # a container by identity and size
    assert python_state.change(m, before) == "ReadsOnly.table"
    m.table = [1.0, 2.0]
    before = python_state.snapshot(m)
    m.table[0] = 5.0  # written in place at the same size: not seen (documented)
    assert python_state.change(m, before) is None
    m.t = torch.zeros(())
    before = python_state.snapshot(m)
    m.t += 1  # a plain tensor attribute by its version counter
    assert python_state.change(m, before) == "ReadsOnly.t"
    m.extra = 1
    assert python_state.change(m, before) == "ReadsOnly.extra (added)"


class SharedSchedule(nn.Module):
    """The user's counter on the class, not the instance: every member (and every seq job
    after the first) reads and moves the same count."""

    steps = 0

    def __init__(self, in_shape, n_outputs):
        super().__init__()
        self.fc = nn.Linear(math.prod(in_shape), n_outputs)

    def forward(self, x):
        type(self).steps += 1
        return self.fc(x.flatten(1)) / (1.0 + 0.5 * type(self).steps)


def test_a_forward_moving_shared_state_runs_eager_and_promises_nothing():
    """From a new user's trial: a class-level counter moved by forward sent the bucket
    eager (its own forward differs from a copy's) and the row said parity_contract `exact`
    — yet eager members interleave step by step over the one count, unlike seq's jobs one
    after another. The checks now see the shared state move and promise nothing."""
    register_model("py_shared_schedule", description="test: shared state")(
        lambda in_shape, n_outputs, **kw: SharedSchedule(in_shape, n_outputs))
    try:
        ctx, plan, _ = _run([_job(i, model="py_shared_schedule", model_kwargs={},
                                  optimizer_kwargs={}, epochs=1) for i in range(2)])
    finally:
        MODELS.items.pop("py_shared_schedule", None)
    assert [(p["route"], p["check"]) for p in plan] == [("eager", "disagreed")], plan
    assert plan[0]["reason"].startswith("forward changes shared state: SharedSchedule.steps")
    assert ctx.group["parity_contract"] is None  # nothing promised; never `exact`
