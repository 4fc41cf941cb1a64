"""Verification that does not grow with K (issue 22): interchangeable members get one
probe of their representatives per bucket, while every member is still checked on its real
instance, so a member that is not interchangeable is caught wherever it sits."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

from engine.executors.unified import verify  # noqa: E402
from engine.executors.unified.losses import loss_function  # noqa: E402
from engine.executors.unified.stack import member_generator  # noqa: E402
from engine.registry import TASKS  # noqa: E402
from tests.unit.engine.executors.unified.test_unified_parity import (  # noqa: E402,F401 - fixtures
    _assert_parity,
    _data,
    _job,
    _run_both,
    captured,
    float64,
)

K, B, D, C = 6, 8, 5, 4


class Net(nn.Module):
    def __init__(self, p: float = 0.2):
        super().__init__()
        self.fc1 = nn.Linear(D, 16)
        self.bn = nn.BatchNorm1d(16)
        self.drop = nn.Dropout(p)
        self.fc2 = nn.Linear(16, C)

    def forward(self, x):
        return self.fc2(self.drop(torch.relu(self.bn(self.fc1(x)))))


def _members(k=K, cls=Net):
    members, gens = [], []
    for i in range(k):
        torch.manual_seed(i)
        members.append(cls().double())
        gens.append(member_generator(torch.device("cpu")))
    return members, gens


def _verify(members, gens, lrs=None, kwargs=None, alike=True):
    k = len(members)
    g = torch.Generator().manual_seed(3)
    x = torch.randn(k, B, D, generator=g, dtype=torch.float64)
    y = torch.randint(0, C, (k, B), generator=g)
    task = TASKS.get("classification")
    return verify.verify_bucket(
        members, gens, x, y, constructed_alike=alike, task=task, optimizer="sgd",
        lrs=lrs or [0.1] * k, optimizer_kwargs=kwargs or [{"momentum": 0.9}] * k,
        stacked_loss=loss_function(task, False), sample_shape=(D,))


@pytest.fixture
def probes(monkeypatch):
    """Every call of verify.probe: the number of members it trained."""
    seen: list[int] = []
    original = verify.probe

    def counting(members, *args, **kwargs):
        seen.append(len(members))
        return original(members, *args, **kwargs)

    monkeypatch.setattr(verify, "probe", counting)
    return seen


@pytest.mark.parametrize("k", [3, 12])
def test_interchangeable_members_get_one_probe_of_two_whatever_k(k, probes):
    members, gens = _members(k)
    verdict, probed = _verify(members, gens)
    assert verdict.verdict == "verified", verdict.detail
    assert probes == [2] and probed == [0, k - 1]
    assert f"members 0, {k - 1}" in verdict.detail


def test_members_not_alike_by_construction_are_all_probed(probes):
    members, gens = _members(4)
    verdict, probed = _verify(members, gens, alike=False)
    assert verdict.ok and probes == [4] and probed == [0, 1, 2, 3]


def test_representatives_cover_every_hyperparameter_that_differs():
    assert verify.representatives([0.1] * 8, [{}] * 8) == [0, 7]
    lrs = [0.1, 0.1, 0.1, 0.05, 0.1, 0.1, 0.1, 0.1]
    kwargs = [{"momentum": 0.9}] * 5 + [{"momentum": 0.5}] + [{"momentum": 0.9}] * 2
    assert verify.representatives(lrs, kwargs) == [0, 3, 5, 7]
    # a keyword only some members set counts as differing (torch's default elsewhere)
    assert verify.representatives([0.1] * 4, [{}, {}, {"weight_decay": 0.0}, {}]) == [0, 2, 3]


def test_per_member_hyperparameters_are_probed_through_the_per_member_branch(probes):
    members, gens = _members(8)
    lrs = [0.1] * 4 + [0.02] + [0.1] * 3
    verdict, probed = _verify(members, gens, lrs=lrs)
    assert verdict.ok, verdict.detail
    assert probed == [0, 4, 7] and probes == [3]


def test_a_member_with_state_outside_the_module_is_caught_where_no_probe_looks(probes):
    """Member 3 (not a representative) scales its output by a value kept by identity."""
    scale: dict[int, float] = {}

    class Outside(Net):
        def forward(self, x):
            return super().forward(x) * scale.get(id(self), 1.0)

    members, gens = _members(cls=Outside)
    scale[id(members[3])] = 2.0
    verdict, probed = _verify(members, gens)
    assert verdict.verdict == "disagreed" and verdict.detail.startswith(
        "member 3: its own forward differs from a copy's")
    assert probes == [] and probed == []  # caught before any probe


def test_a_forward_that_changes_state_outside_the_module_is_caught():
    """Its first call behaves as a copy would; the second does not (a counter by id)."""
    calls: dict[int, int] = {}

    class Counting(Net):
        def forward(self, x):
            calls[id(self)] = calls.get(id(self), 0) + 1
            return super().forward(x) * (1.0 if calls[id(self)] == 1 else 0.5)

    members, gens = _members(cls=Counting)
    verdict, _ = _verify(members, gens)
    assert verdict.verdict == "disagreed" and "does not repeat itself" in verdict.detail
    assert verdict.detail.startswith("member 0:")


def test_a_member_updating_a_buffer_from_outside_state_is_caught():
    momentum: dict[int, float] = {}

    class OutsideMomentum(Net):
        def forward(self, x):
            self.bn.momentum = momentum.get(id(self), 0.1)
            try:
                return super().forward(x)
            finally:
                self.bn.momentum = 0.1

    members, gens = _members(cls=OutsideMomentum)
    momentum[id(members[4])] = 0.9
    verdict, _ = _verify(members, gens)
    assert verdict.verdict == "disagreed", verdict.detail
    assert verdict.detail.startswith("member 4: its own forward updates buffer bn.running_")


def test_members_sharing_a_submodule_or_a_parameter_are_refused():
    members, gens = _members()
    members[5].fc2 = members[2].fc2  # one object in two members: a stack would untie it
    verdict, _ = _verify(members, gens)
    assert verdict.verdict == "disagreed" and "member 5's submodule 'fc2' is member 2's" \
        in verdict.detail
    members, gens = _members()
    members[4].fc1.weight = members[1].fc1.weight
    assert "member 4's parameter fc1.weight shares its storage with member 1's" in \
        verify.shared_state_mismatch(members)


def test_fingerprint_sees_closures_and_tensor_hooks_of_any_member():
    members, _ = _members()
    for i, m in enumerate(members):
        scale = 2.0 if i == 4 else 1.0
        m.post = lambda t, scale=scale: t * scale
    assert "member 4" in verify.fingerprint_mismatch(members)
    members, _ = _members()
    for i, m in enumerate(members):
        factor = 3.0 if i == 5 else 1.0
        m.post = (lambda f: (lambda t: t * f))(factor)
    assert "member 5" in verify.fingerprint_mismatch(members)
    members, _ = _members()
    members[3].fc1.weight.register_hook(lambda g: g * 10)
    reason = verify.fingerprint_mismatch(members)
    assert reason is not None and "member 3" in reason and "param:weight" in reason
    assert verify.fingerprint_mismatch(_members()[0]) is None  # identical members pass


def test_checks_leave_the_members_as_found():
    members, gens = _members()
    state = [{n: t.clone() for n, t in m.state_dict().items()} for m in members]
    gen_states = [g.get_state() for g in gens]
    x = torch.randn(K, B, D, dtype=torch.float64)
    rng = torch.get_rng_state()
    assert verify.own_forward_mismatch(members, gens, x) is None
    for m, s in zip(members, state, strict=True):
        assert all(torch.equal(v, s[n]) for n, v in m.state_dict().items())
    assert all(torch.equal(g.get_state(), s) for g, s in zip(gens, gen_states, strict=True))
    assert torch.equal(torch.get_rng_state(), rng)


def test_the_bucket_records_its_probed_representatives_and_trains_as_seq(captured, parity):  # noqa: F811
    jobs = [_job(i, epochs=2) for i in range(4)]
    seq, uni, executor, ctx, _, _ = _run_both(jobs, _data(), captured)
    _assert_parity(seq, uni, captured, parity)
    plan = ctx.group["executor_info"]["plan"][0]
    assert (plan["route"], plan["check"]) == ("vectorised", "verified")
    assert plan["probed"] == ["j0", "j3"] and plan["verify_s"] > 0
