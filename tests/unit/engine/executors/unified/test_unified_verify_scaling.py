"""The real-instance check of unified verification (issue 22): the template's side is one
vectorised call for all K members, each real instance runs two small no-grad forwards,
and what the check catches is unchanged — a member that differs is caught wherever it
sits, including where the vectorised twin cannot be used (autocast). Verification also
takes float64 inputs for float32 members (it casts them to the members' dtype)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

from engine.executors.unified import verify  # noqa: E402
from engine.executors.unified.stack import Stack  # noqa: E402
from tests.unit.engine.executors.unified.test_unified_verify_per_bucket import (  # noqa: E402
    B,
    C,
    D,
    Net,
    _members,
)

K = 12

#: Each instance's output scale, keyed by identity (state outside the module).
_SCALE: dict[int, float] = {}


class Registered(Net):
    def forward(self, x):
        return super().forward(x) * _SCALE.get(id(self), 1.0)


def _batch(k, dtype=torch.float64):
    g = torch.Generator().manual_seed(5)
    return torch.randn(k, B, D, generator=g, dtype=dtype), torch.randint(0, C, (k, B),
                                                                          generator=g)


@pytest.fixture
def calls(monkeypatch):
    """How often the per-member template forward and the stack's forward ran."""
    seen = {"template": 0, "stack": 0}
    template, forward = verify._template_forward, Stack.__call__

    def counting_template(*args, **kwargs):
        seen["template"] += 1
        return template(*args, **kwargs)

    def counting_stack(self, *args, **kwargs):
        seen["stack"] += 1
        return forward(self, *args, **kwargs)

    monkeypatch.setattr(verify, "_template_forward", counting_template)
    monkeypatch.setattr(Stack, "__call__", counting_stack)
    return seen


def test_the_template_side_is_one_vectorised_call_whatever_k(calls):
    members, gens = _members(K)
    x, _ = _batch(K)
    assert verify.own_forward_mismatch(members, gens, x) is None
    assert calls == {"template": 0, "stack": 1}


@pytest.mark.parametrize("where", [K - 3])  # not a representative (0, K - 1)
def test_a_member_with_state_outside_the_module_is_still_caught(where, calls):
    members, gens = _members(K, cls=Registered)
    _SCALE.clear()
    _SCALE[id(members[where])] = 3.0
    x, _ = _batch(K)
    reason = verify.own_forward_mismatch(members, gens, x)
    assert reason is not None and reason.startswith(f"member {where}:")
    assert "state outside the module" in reason
    assert calls["stack"] == 1
    # Under autocast the vectorised twin cannot stand in (another rounding): the per-member
    # template forward runs instead, and catches the same member.
    calls["template"] = 0
    float32 = [m.float() for m in members]
    with torch.autocast("cpu", dtype=torch.bfloat16):
        reason = verify.own_forward_mismatch(float32, gens, x.float())
    assert reason is not None and reason.startswith(f"member {where}:")
    assert calls["template"] == where + 1
    _SCALE.clear()


def test_a_member_whose_buffers_update_unlike_the_template_is_caught():
    members, gens = _members(K)
    _BOOST[id(members[7])] = True
    try:
        members = [_Boosting.wrap(m) for m in members]
        x, _ = _batch(K)
        reason = verify.own_forward_mismatch(members, gens, x)
    finally:
        _BOOST.clear()
    assert reason is not None and reason.startswith("member 7:")


_BOOST: dict[int, bool] = {}


class _Boosting(Net):
    """Momentum of its BatchNorm doubled for instances registered by identity."""

    @classmethod
    def wrap(cls, net):
        net.__class__ = cls
        return net

    def forward(self, x):
        boosted = _BOOST.get(id(self), False)
        old = self.bn.momentum
        if boosted:
            self.bn.momentum = 0.9
        try:
            return super().forward(x)
        finally:
            self.bn.momentum = old


def test_float64_inputs_for_float32_members_are_cast_not_refused():
    members, gens = _members(4)
    members = [m.float() for m in members]
    x, y = _batch(4, torch.float64)
    from engine.executors.unified.losses import loss_function
    from engine.registry import TASKS

    task = TASKS.get("classification")
    verdict, probed = verify.verify_bucket(
        members, gens, x, y, constructed_alike=True, task=task, optimizer="sgd",
        lrs=[0.1] * 4, optimizer_kwargs=[{}] * 4, stacked_loss=loss_function(task, False),
        sample_shape=(D,))
    assert verdict.verdict == "verified", verdict.detail
    assert probed == [0, 3]
    assert verify.member_input(members, x).dtype == torch.float32
    ids = torch.zeros(2, 3, dtype=torch.long)
    assert verify.member_input(members, ids) is ids  # token ids stay integers
    assert verify.member_input([nn.ReLU()], x) is x  # no parameters: left as given
