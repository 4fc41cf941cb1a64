"""Verification before vectorising: the structural fingerprint refuses members that differ
only in a dropout probability or an activation flag and accepts identical ones; the
one-step probe (train mode, dropout live) catches what a fingerprint cannot see and
reports exceptions as ``raised``."""

from __future__ import annotations

import copy

import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

from engine.executors.unified.losses import loss_function  # noqa: E402
from engine.executors.unified.stack import member_generator  # noqa: E402
from engine.executors.unified.verify import fingerprint_mismatch, probe  # noqa: E402
from engine.registry import TASKS  # noqa: E402

K, B, D, C = 3, 8, 5, 4


class Flagged(nn.Module):
    """A model whose forward reads a flag from ``self`` (invisible to shapes)."""

    def __init__(self, use_relu: bool = True, p: float = 0.0):
        super().__init__()
        self.use_relu = use_relu
        self.fc1 = nn.Linear(D, 16)
        self.bn = nn.BatchNorm1d(16)
        self.drop = nn.Dropout(p)
        self.fc2 = nn.Linear(16, C)

    def forward(self, x):
        h = self.bn(self.fc1(x))
        h = torch.relu(h) if self.use_relu else torch.tanh(h)
        return self.fc2(self.drop(h))


def _members(**per_member):
    """K members (seeds 0..K-1); keyword lists give each member its own constructor arg."""
    members, gens = [], []
    for k in range(K):
        torch.manual_seed(k)
        kwargs = {key: values[k] for key, values in per_member.items()}
        members.append(Flagged(**kwargs).double())
        gens.append(member_generator(torch.device("cpu")))
    return members, gens


def _probe(members, gens, optimizer="sgd", kwargs=None):
    g = torch.Generator().manual_seed(3)
    x = torch.randn(K, B, D, generator=g, dtype=torch.float64)
    y = torch.randint(0, C, (K, B), generator=g)
    task = TASKS.get("classification")
    return probe(members, gens, x, y, task=task, optimizer=optimizer, lrs=[0.1, 0.05, 0.01],
                 optimizer_kwargs=kwargs or [{"momentum": 0.9}] * K,
                 stacked_loss=loss_function(task, False), sample_shape=(D,))


def test_identical_members_pass_both_checks():  # the positive control
    members, gens = _members(p=[0.3] * K)
    assert fingerprint_mismatch(members) is None
    verdict = _probe(members, gens)
    assert verdict.verdict == "verified", verdict.detail


def test_fingerprint_refuses_a_different_dropout_probability():
    members, _ = _members(p=[0.3, 0.3, 0.5])
    reason = fingerprint_mismatch(members)
    assert reason is not None and "member 2" in reason and "'drop'" in reason and "p =" in reason


def test_fingerprint_refuses_a_different_activation_flag():
    members, _ = _members(use_relu=[True, False, True])
    reason = fingerprint_mismatch(members)
    assert reason is not None and "member 1" in reason and "use_relu" in reason


def test_fingerprint_refuses_different_batchnorm_settings_and_hooks():
    members, _ = _members()
    members[1].bn.eps = 1e-3
    assert "eps" in fingerprint_mismatch(members)
    members, _ = _members()
    members[2].fc1.register_forward_hook(lambda *a: None)
    assert "hooks" in fingerprint_mismatch(members)


def test_probe_alone_catches_an_activation_flag_in_train_mode():
    members, gens = _members(use_relu=[True, False, True])
    verdict = _probe(members, gens)
    assert verdict.verdict == "disagreed" and "member 1" in verdict.detail


def test_probe_alone_catches_a_dropout_probability_with_dropout_live():
    members, gens = _members(p=[0.3, 0.3, 0.6])
    verdict = _probe(members, gens)
    assert verdict.verdict == "disagreed" and "member 2" in verdict.detail


def test_probe_compares_buffers_a_stateful_layer_updating_through_a_copy():
    """A layer that updates a buffer in a way the stack does not carry: buffers differ."""

    class Counter(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("seen", torch.zeros(()))

        def forward(self, x):
            self.seen = self.seen + x.shape[0]  # rebinds the attribute: lost under vmap
            return x

    members, gens = _members()
    for m in members:
        m.fc1 = nn.Sequential(m.fc1, Counter())
    verdict = _probe(members, gens)
    assert verdict.verdict in ("disagreed", "raised"), verdict
    assert "seen" in verdict.detail or verdict.verdict == "raised"


def test_probe_reports_an_exception_as_raised():
    class Bad(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(D, C)

        def forward(self, x):
            if x.sum() > 0:  # data-dependent control flow: vmap cannot batch it
                return self.fc(x)
            return -self.fc(x)

    members = []
    for k in range(K):
        torch.manual_seed(k)
        members.append(Bad().double())
    verdict = _probe(members, None)
    assert verdict.verdict == "raised" and verdict.detail


def test_probe_does_not_touch_the_members_or_their_generators():
    members, gens = _members(p=[0.3] * K)
    state = [copy.deepcopy(m.state_dict()) for m in members]
    gen_states = [g.get_state() for g in gens]
    rng = torch.get_rng_state()
    _probe(members, gens, optimizer="adamw", kwargs=[{}] * K)
    for m, s in zip(members, state, strict=False):
        for name, value in m.state_dict().items():
            assert torch.equal(value, s[name]), name
    assert all(torch.equal(g.get_state(), s) for g, s in zip(gens, gen_states, strict=False))
    assert torch.equal(torch.get_rng_state(), rng)
