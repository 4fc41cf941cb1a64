"""Vectorised float16 AMP with one GradScaler per member (issue 26): the stacked scaler
agrees with K separate ``torch.amp.GradScaler("cpu")`` — the same skipped steps, the same
scales and growth trackers, bit-identical unscaled gradients and parameters — and a member
that overflows skips only its own step."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

#: parity-sensitive: scripts/parity_matrix.py re-runs this module under other kernels
pytestmark = pytest.mark.parity
from torch import nn  # noqa: E402

from engine.executors.unified.losses import loss_function  # noqa: E402
from engine.executors.unified.optim import build_stacked  # noqa: E402
from engine.executors.unified.routes import VectorRoute  # noqa: E402
from engine.executors.unified.scaler import MemberSkips, StackedGradScaler  # noqa: E402
from engine.executors.unified.stack import Stack  # noqa: E402
from engine.registry import TASKS  # noqa: E402
from engine.train.precision import autocast, job_precision  # noqa: E402

CPU = torch.device("cpu")
K, N, STEPS, INTERVAL = 4, 6, 14, 3
#: (step, member) whose gradient is made non-finite: overflow at different steps, twice in
#: a row for member 1, never for member 3 (it grows every INTERVAL steps).
INJECT = {(1, 0): float("inf"), (2, 1): float("nan"), (3, 1): float("inf"),
          (7, 2): float("-inf"), (8, 0): float("inf")}


def test_the_stacked_scaler_is_k_torch_gradscalers():
    g = torch.Generator().manual_seed(0)
    init = torch.randn(K, N, generator=g)
    coeffs = torch.randn(STEPS, K, N, generator=g)
    solo_p = [init[k].clone().requires_grad_() for k in range(K)]
    solo_opt = [torch.optim.SGD([p], lr=0.1, momentum=0.9) for p in solo_p]
    solo_sc = [torch.amp.GradScaler("cpu", growth_interval=INTERVAL) for _ in range(K)]
    stacked = {"w": init.clone().requires_grad_()}
    opt = build_stacked("sgd", stacked, [0.1] * K, [{"momentum": 0.9}] * K)
    scaler = StackedGradScaler(solo_sc, CPU)
    skips = [MemberSkips(scaler, k) for k in range(K)]
    solo_skips = [0] * K
    for step in range(STEPS):
        c = coeffs[step].clone()
        for (s, k), bad in INJECT.items():
            if s == step:
                c[k, 0] = bad
        for k in range(K):  # K solo runs, as engine.train.loop steps one
            solo_opt[k].zero_grad()
            solo_sc[k].scale((solo_p[k] * c[k]).sum()).backward()
            solo_sc[k].unscale_(solo_opt[k])
            unscaled = solo_p[k].grad.clone()
            solo_sc[k].step(solo_opt[k])
            found = sum(v.item() for v in solo_sc[k]._found_inf_per_device(solo_opt[k])
                        .values())
            solo_skips[k] += int(found)
            solo_sc[k].update()
            if not found:
                assert torch.equal(unscaled, solo_p[k].grad)
        opt.zero_grad()
        scaler.scale((stacked["w"] * c).sum(dim=1)).sum().backward()
        found = scaler.unscale_(stacked)
        opt.step((~found).tolist())
        scaler.update(found)
        assert found.tolist() == [(step, k) in INJECT for k in range(K)], step
        if step == 3:
            backed_off = scaler.scale_[1].item()
        for k in range(K):
            assert scaler.scale_[k].item() == solo_sc[k].get_scale(), (step, k)
            assert int(scaler.growth_tracker[k]) == solo_sc[k]._get_growth_tracker()
            assert torch.equal(stacked["w"][k].detach(), solo_p[k].detach()), (step, k)
            if (step, k) not in INJECT:
                assert torch.equal(stacked["w"].grad[k], solo_p[k].grad), (step, k)
    assert [s.value() for s in skips] == solo_skips == [2, 2, 1, 0]
    # the schedule exercised both directions: member 1 backed off twice in a row, member 3
    # (never overflowing) grew at every INTERVAL-th step
    assert backed_off == 65536.0 / 4
    assert scaler.scale_[3].item() == 65536.0 * 2 ** (STEPS // INTERVAL)


def test_members_that_do_not_step_keep_their_scale_and_tracker():
    scaler = StackedGradScaler([torch.amp.GradScaler("cpu", growth_interval=2)
                                for _ in range(3)], CPU)
    found = torch.tensor([True, True, False])
    scaler.update(found, stepping=torch.tensor([True, False, False]))
    assert scaler.scale_.tolist() == [32768.0, 65536.0, 65536.0]
    assert scaler.growth_tracker.tolist() == [0, 0, 0]
    assert scaler.skipped.tolist() == [1, 0, 0]
    part = scaler.subset([1, 2])  # a restack keeps each member's own state and count
    part.update(torch.tensor([False, True]))
    assert part.scale_.tolist() == [65536.0, 32768.0]
    assert scaler.skipped.tolist() == [1, 0, 1]


class Mlp(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(8, 16)
        self.fc2 = nn.Linear(16, 3)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


def test_a_stacked_amp_fp16_step_skips_only_the_member_that_overflowed():
    """Member 1's inputs (1e4) overflow float16 gradients at the initial scale; the others
    train. Against K solo loops with autocast(float16) and their own GradScaler: the same
    skipped steps and scales; parameters within float16 AMP's bound (docs/fidelity.md)."""
    task = TASKS.get("classification")
    precision = job_precision(False, "amp-fp16", CPU, True)
    assert precision.scaled
    members = []
    for i in range(3):
        torch.manual_seed(i)
        members.append(Mlp())
    solo = [Mlp() for _ in range(3)]
    for s, m in zip(solo, members, strict=True):
        s.load_state_dict(m.state_dict())
    g = torch.Generator().manual_seed(1)
    xs = torch.randn(6, 3, 16, 8, generator=g)
    xs[:, 1] *= 1e4
    ys = torch.randint(0, 3, (6, 3, 16), generator=g)
    stack = Stack(members, None, (8,), 16)
    opt = build_stacked("sgd", stack.params, [0.05] * 3, [{}] * 3)
    scaler = StackedGradScaler([torch.amp.GradScaler("cpu") for _ in range(3)], CPU)
    route = VectorRoute(stack, opt, loss_function(task, False), task, 3, precision, scaler)
    solo_opt = [torch.optim.SGD(m.parameters(), lr=0.05) for m in solo]
    solo_sc = [torch.amp.GradScaler("cpu") for _ in solo]
    skipped = [0, 0, 0]
    criterion = task.criterion()
    for x, y in zip(xs, ys, strict=True):
        losses = route.step(x, y, [True] * 3, False, False)
        assert torch.isfinite(losses[0]) and torch.isfinite(losses[2])
        for k, m in enumerate(solo):
            with autocast(CPU, precision):
                loss = criterion(m(x[k]).float(), y[k])
            solo_opt[k].zero_grad()
            solo_sc[k].scale(loss).backward()
            solo_sc[k].step(solo_opt[k])
            skipped[k] += int(sum(v.item() for v in
                                  solo_sc[k]._found_inf_per_device(solo_opt[k]).values()))
            solo_sc[k].update()
    assert skipped[0] == skipped[2] == 0 and skipped[1] >= 1
    assert scaler.skipped.tolist() == skipped
    assert scaler.scale_.tolist() == [s.get_scale() for s in solo_sc]
    for k, m in enumerate(solo):
        for n, p in m.named_parameters():
            assert (stack.params[n][k].detach() - p.detach()).abs().max() <= 2.0 ** -10
