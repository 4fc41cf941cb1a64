"""The stacked optimizer equals K independent torch optimizers, member by member, bit for
bit, with per-member hyperparameters (each run of members sharing a value goes through
torch's own scalar kernels); a frozen member does not move at all; state round-trips.

Float64, and float32 where rounding would show first."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from engine.executors.unified.optim import StackedOptimizer  # noqa: E402
from engine.parts.optimizers import build_optimizer  # noqa: E402

K = 3
#: this module's probes (tests/parity.py): every test here is parity-sensitive (the
#: stacked optimizers are bit for bit by construction: torch's own elementwise kernels)
PARITY = None  # set per test by the module_parity fixture (tests/conftest.py)
pytestmark = pytest.mark.usefixtures("module_parity")


SHAPES = {"w": (4, 3), "b": (4,), "s": ()}

CASES = {
    "sgd_momentum": ("sgd", [0.1, 0.03, 0.5],
                     [{"momentum": 0.9}, {"momentum": 0.5, "weight_decay": 1e-2},
                      {"momentum": 0.0, "dampening": 0.1}]),
    "sgd_dampening": ("sgd", [0.1, 0.2, 0.05],
                      [{"momentum": 0.9, "dampening": 0.3}, {"momentum": 0.7},
                       {"momentum": 0.2, "dampening": 0.5, "weight_decay": 1e-3}]),
    "sgd_nesterov": ("sgd", [0.1, 0.2, 0.05],
                     [{"momentum": 0.9, "nesterov": True},
                      {"momentum": 0.5, "nesterov": True, "weight_decay": 1e-2},
                      {"momentum": 0.1, "nesterov": True}]),
    "sgd_maximize": ("sgd", [0.1, 0.2, 0.05],
                     [{"momentum": 0.9, "maximize": True}] * 3),
    "adam": ("adam", [1e-3, 3e-3, 1e-2],
             [{}, {"betas": (0.8, 0.99), "eps": 1e-6}, {"weight_decay": 0.1}]),
    "adam_amsgrad": ("adam", [1e-3, 3e-3, 1e-2],
                     [{"amsgrad": True}, {"amsgrad": True, "betas": (0.5, 0.9)},
                      {"amsgrad": True, "weight_decay": 1e-2}]),
    "adamw": ("adamw", [1e-3, 3e-3, 1e-2],
              [{}, {"weight_decay": 0.1, "betas": (0.85, 0.995)}, {"weight_decay": 0.0}]),
}


def _members(seed: int = 0, dtype=torch.float64) -> list[dict[str, torch.Tensor]]:
    g = torch.Generator().manual_seed(seed)
    return [{n: torch.randn(s, generator=g, dtype=dtype) for n, s in SHAPES.items()}
            for _ in range(K)]


def _grads(step: int, dtype=torch.float64) -> list[dict[str, torch.Tensor]]:
    return _members(100 + step, dtype)


def _run(kind, lrs, kwargs, steps, active_at=lambda step: [True] * K, dtype=torch.float64):
    """Train stacked and solo side by side; solo member k steps only when active."""
    members = _members(dtype=dtype)
    solo = [{n: t.clone().requires_grad_() for n, t in m.items()} for m in members]
    solo_opts = [build_optimizer(kind, list(p.values()), lrs[k], kwargs[k])
                 for k, p in enumerate(solo)]
    stacked = {n: torch.stack([m[n] for m in members]).requires_grad_() for n in SHAPES}
    opt = StackedOptimizer(kind, stacked, lrs, kwargs)
    for step in range(steps):
        grads = _grads(step, dtype)
        active = active_at(step)
        for k in range(K):
            if active[k]:
                for n, p in solo[k].items():
                    p.grad = grads[k][n].clone()
                solo_opts[k].step()
        for n, p in stacked.items():
            p.grad = torch.stack([g[n] for g in grads])
        opt.step(active)
    return solo, stacked, opt, solo_opts


def _assert_equal(solo, stacked):
    for k in range(K):
        for n in SHAPES:
            PARITY.same(f"member {k} param {n}", stacked[n][k].detach(), solo[k][n].detach())


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("case", sorted(CASES))
def test_stacked_steps_equal_independent_torch_optimizers(case, dtype):
    kind, lrs, kwargs = CASES[case]
    solo, stacked, _, _ = _run(kind, lrs, kwargs, steps=7, dtype=dtype)
    _assert_equal(solo, stacked)


@pytest.mark.parametrize("kind", ["sgd", "adam", "adamw"])
def test_members_with_other_values_some_frozen_stay_bit_for_bit_torch(kind):
    """Float32, values shared by runs of members and not by others, members frozen on some
    steps: every member's parameters equal its own torch optimizer's exactly (per-member
    values as (K, 1) tensors multiplied where torch fuses, and a float64 tensor ``pow``
    for Adam's bias corrections, missed this by an ulp now and then)."""
    lrs = [0.01, 0.01, 3e-3]
    if kind == "sgd":
        kwargs = [{"momentum": 0.9, "weight_decay": 1e-3}, {"momentum": 0.9},
                  {"momentum": 0.5, "dampening": 0.1, "weight_decay": 1e-2}]
    else:
        kwargs = [{"weight_decay": 0.01}, {"weight_decay": 0.01, "betas": (0.8, 0.99)},
                  {"eps": 1e-6}]
    plan = [[True, True, True], [True, False, True], [False, True, True], [True, True, False]]
    solo, stacked, _, _ = _run(kind, lrs, kwargs, steps=12, dtype=torch.float32,
                               active_at=lambda step: plan[step % len(plan)])
    _assert_equal(solo, stacked)


def test_distinct_learning_rates_are_not_collapsed_onto_the_first():
    kind, lrs, kwargs = CASES["sgd_momentum"]
    _, stacked, _, _ = _run(kind, lrs, kwargs, steps=3)
    _, stacked_same, _, _ = _run(kind, [lrs[0]] * K, kwargs, steps=3)
    assert not torch.allclose(stacked["w"][1], stacked_same["w"][1])
    torch.testing.assert_close(stacked["w"][0], stacked_same["w"][0], rtol=0, atol=0)


@pytest.mark.parametrize("case", ["sgd_momentum", "adam", "adamw"])
def test_frozen_member_is_exactly_still_and_equals_solo(case):
    """Member 1 stops after step 2 (with momentum, Adam moments and AdamW decay live)."""
    kind, lrs, kwargs = CASES[case]
    schedule = lambda step: [True, step < 2, True]  # noqa: E731
    solo, stacked, opt, _ = _run(kind, lrs, kwargs, steps=6, active_at=schedule)
    _assert_equal(solo, stacked)
    before = {n: p[1].detach().clone() for n, p in stacked.items()}
    state_before = {n: {k: v[1].clone() for k, v in s.items()} for n, s in opt.state.items()}
    for p in stacked.values():
        p.grad = torch.ones_like(p)
    opt.step([True, False, True])
    for n, p in stacked.items():
        assert torch.equal(p[1].detach(), before[n]), n
        for key, value in opt.state[n].items():
            assert torch.equal(value[1], state_before[n][key]), (n, key)
    assert opt._steps_host[1] == 2


def test_member_that_never_stepped_starts_its_momentum_like_torch():
    """A member inactive at first (a late starter) gets buffer = grad on its first step."""
    kind, lrs, kwargs = CASES["sgd_momentum"]
    schedule = lambda step: [True, step >= 2, True]  # noqa: E731
    solo, stacked, _, _ = _run(kind, lrs, kwargs, steps=5, active_at=schedule)
    _assert_equal(solo, stacked)


@pytest.mark.parametrize("case", ["sgd_momentum", "adam_amsgrad", "adamw"])
def test_state_dict_round_trip_resumes_identically(case):
    kind, lrs, kwargs = CASES[case]
    _, stacked, opt, _ = _run(kind, lrs, kwargs, steps=3)
    saved_params = {n: p.detach().clone() for n, p in stacked.items()}
    state = opt.state_dict()
    grads = _grads(50)
    for n, p in stacked.items():
        p.grad = torch.stack([g[n] for g in grads])
    opt.step()
    expected = {n: p.detach().clone() for n, p in stacked.items()}

    params2 = {n: t.clone().requires_grad_() for n, t in saved_params.items()}
    opt2 = StackedOptimizer(kind, params2, [9.0] * K, [{}] * K if kind != "sgd"
                            else [{"momentum": 0.1}] * K)
    if kind == "sgd":
        opt2.load_state_dict(state)
    else:
        opt2 = StackedOptimizer(kind, params2, [9.0] * K,
                                [{"amsgrad": kwargs[0].get("amsgrad", False)}] * K)
        opt2.load_state_dict(state)
    for n, p in params2.items():
        p.grad = torch.stack([g[n] for g in grads])
    opt2.step()
    for n in SHAPES:
        assert torch.equal(params2[n].detach(), expected[n]), n


def test_refusals_are_named():
    params = {"w": torch.zeros(2, 3, requires_grad=True)}
    with pytest.raises(ValueError, match="nesterov"):
        StackedOptimizer("sgd", params, [0.1, 0.1], [{"nesterov": True, "momentum": 0.9}, {}])
    with pytest.raises(ValueError, match="learning rate"):
        StackedOptimizer("sgd", params, [0.1, -1.0], [{}, {}])
    with pytest.raises(ValueError, match="beta"):
        StackedOptimizer("adam", params, [0.1, 0.1], [{}, {"betas": (1.0, 0.9)}])
    with pytest.raises(ValueError, match="no stacked form"):
        StackedOptimizer("rmsprop", params, [0.1, 0.1], [{}, {}])
    with pytest.raises(ValueError, match="no keyword"):
        StackedOptimizer("sgd", params, [0.1, 0.1], [{"betas": (0.9, 0.9)}, {}])


def test_registry_names_the_stacked_forms():
    from engine.registry import OPTIMIZERS, TASKS

    for name in ("sgd", "adam", "adamw"):
        assert OPTIMIZERS.get(name).stacked_target.startswith("engine.executors.unified.optim:")
    for name in ("classification", "regression"):
        assert TASKS.get(name).stacked_target.startswith("engine.executors.unified.losses:")


@pytest.mark.parametrize("kwargs", [{"momentum": 0.9}, {"momentum": 0.9, "dampening": 0.2},
                                    {"momentum": 0.8, "nesterov": True, "weight_decay": 1e-2},
                                    {"momentum": 0.9, "maximize": True}])
def test_shared_momentum_updates_equal_torch_bit_for_bit(kwargs):
    """Every member with the same SGD hyperparameters takes the in-place path (torch's own
    ``buf.mul_(m).add_(g, alpha=1 - d)``): parameters and momentum buffers must equal each
    member's torch.optim.SGD exactly (not within a tolerance), also across a step where a
    member is frozen (the masked path) and after it resumes."""
    lrs = [0.05] * K
    active = [[True] * K, [True] * K, [True, False, True], [True] * K, [True] * K]
    solo, stacked, opt, solo_opts = _run("sgd", lrs, [kwargs] * K, steps=len(active),
                                         active_at=lambda step: active[step])
    _assert_equal(solo, stacked)
    for k in range(K):  # PARITY.same asserts bit for bit
        for n in SHAPES:
            buf = opt.state[n]["momentum_buffer"][k]
            PARITY.same(f"member {k} momentum {n}", buf,
                        solo_opts[k].state[solo[k][n]]["momentum_buffer"])
