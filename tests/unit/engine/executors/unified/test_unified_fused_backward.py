"""The exact path backpropagates once through the fused loss (issue 22): every member's
gradient is bit for bit its solo run's, and the reported losses are the solo criterion's.

The loss is bit for bit by construction (the parity contract,
engine.executors.unified.contract): given the same outputs, each member's gradient and
reported value come from the solo kernels' own arithmetic. A whole stacked step is so only
under ``kernels = "exact"``; with vmap's batched Linear (the default) the outputs
themselves come from another GEMM (``sgemm_batch`` against the solo ``addmm``), which
rounds like the solo one on some CPUs (Intel AVX-512 + MKL) and not on others (AMD EPYC),
so there the step is asserted within the contract's rounding bound.

A test that would not notice mixed members is worthless, so each comparison also runs the
step with the members' losses averaged instead of summed (each member's step scaled by
1/K) and asserts that this is caught."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

from engine.executors.unified.contract import (  # noqa: E402
    layer_reduction,
    pass_bound,
    rounding_bound,  # noqa: E402
)
from engine.executors.unified.losses import GRADIENT_EXACT, loss_function  # noqa: E402
from engine.executors.unified.optim import build_stacked  # noqa: E402
from engine.executors.unified.routes import VectorRoute  # noqa: E402
from engine.executors.unified.stack import Stack  # noqa: E402
from engine.parts import tasks as task_lib  # noqa: E402
from engine.registry import TASKS  # noqa: E402
from tests.parity import scale_of  # noqa: E402

D = 6


def _outputs(task, k, b, dtype, shape_tail, seed):
    g = torch.Generator().manual_seed(seed)
    out = torch.randn(k, b, *shape_tail, generator=g, dtype=dtype, requires_grad=True)
    if task.name == "classification":
        y = torch.randint(0, shape_tail[0], (k, b), generator=g)
    else:
        y = torch.randn(k, b, *shape_tail, generator=g, dtype=dtype)
    return out, y


def _solo_grads(task, out, y):
    criterion = task.criterion()
    grads, values = [], []
    for k in range(out.shape[0]):
        o = out.detach()[k].clone().requires_grad_()
        o2, t = task_lib.prepare(task, o, y[k])
        loss = criterion(o2, t)
        loss.backward()
        grads.append(o.grad)
        values.append(loss.detach())
    return torch.stack(grads), torch.stack(values)


@pytest.mark.parametrize("task_name,tail", [("classification", (10,)), ("regression", ()),
                                           ("regression", (1,)), ("regression", (3,))])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_fused_backward_gives_each_member_its_solo_gradient_bit_for_bit(task_name, tail,
                                                                       dtype, parity):
    task = TASKS.get(task_name)
    loss = loss_function(task, fused=False)
    assert task.stacked_target in GRADIENT_EXACT and loss.fused_backward
    for k, b in ((1, 1), (4, 7), (9, 64), (3, 300)):
        out, y = _outputs(task, k, b, dtype, tail, seed=k * 1000 + b)
        solo, solo_values = _solo_grads(task, out, y)
        losses = loss(out, y)
        losses.sum().backward()
        parity.same(f"gradient k={k} b={b}", out.grad, solo)
        # Reported values are the solo criterion's, bit for bit.
        parity.same(f"reported k={k} b={b}", loss.values(out, y, losses), solo_values)
        if k > 1:  # averaging over members instead of summing is caught
            out.grad = None
            loss(out, y).mean().backward()
            assert not torch.equal(out.grad, solo)


class Mlp(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(D, 16)
        self.fc2 = nn.Linear(16, 4)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


def _stacked_step(k, b, total_of=None, exact=False):
    """One VectorRoute step on K float32 MLPs; returns (grads, params after, losses) of
    the stack and of K solo runs (SGD, as engine.train.loop's step). ``exact``: the stack
    runs its Linear layers per member (``kernels = "exact"``)."""
    task = TASKS.get("classification")
    members = []
    for i in range(k):
        torch.manual_seed(i)
        members.append(Mlp())
    solo = [Mlp() for _ in range(k)]
    for s, m in zip(solo, members, strict=True):
        s.load_state_dict(m.state_dict())
    g = torch.Generator().manual_seed(7)
    x = torch.randn(k, b, D, generator=g)
    y = torch.randint(0, 4, (k, b), generator=g)
    stack = Stack(members, None, (D,), b, exact_kernels=exact)
    opt = build_stacked("sgd", stack.params, [0.1] * k, [{"momentum": 0.9}] * k)
    loss = loss_function(task, fused=False)
    if total_of is not None:  # a deliberately wrong reduction over members
        real = loss

        class Wrong:
            values = staticmethod(real.values)

            def __call__(self, out, target):
                return total_of(real(out, target)) * torch.ones(k)

        loss = Wrong()
    route = VectorRoute(stack, opt, loss, task, k)
    reported = route.step(x, y, [True] * k, False, False)
    grads = {n: p.grad.clone() for n, p in stack.params.items()}
    criterion = task.criterion()
    solo_grads, solo_losses = [], []
    for i, m in enumerate(solo):
        o = torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
        loss_i = criterion(m(x[i]), y[i])
        o.zero_grad()
        loss_i.backward()
        solo_grads.append({n: p.grad.clone() for n, p in m.named_parameters()})
        o.step()
        solo_losses.append(loss_i.detach())
    return stack, grads, reported, solo, solo_grads, torch.stack(solo_losses)


def test_the_exact_stacked_step_trains_each_member_exactly_as_seq(parity):
    """kernels = "exact": the same kernels on the same shapes, bit for bit on any host."""
    k = 5
    stack, grads, reported, solo, solo_grads, solo_losses = _stacked_step(k, 32, exact=True)
    assert stack.exact_layers == ["fc1", "fc2"]
    parity.same("reported", reported, solo_losses)
    for i, m in enumerate(solo):
        for n, p in m.named_parameters():
            parity.same(f"grad {i} {n}", grads[n][i], solo_grads[i][n])
            parity.same(f"param {i} {n}", stack.params[n][i].detach(), p.detach())


#: One step of the MLP (6 → 16 → 4, batch 32), both Linear layers' GEMMs batched: the
#: gradients and reported losses are one pass (two chained reductions of length <= 32),
#: the parameters after the step one step of training.
ONE_PASS = pass_bound(32, layers=2)
ONE_STEP = rounding_bound(1, layer_reduction(D, 16, 32) + layer_reduction(16, 4, 32))


def test_the_batched_stacked_step_trains_each_member_as_seq_within_the_bound(parity):
    """The default batched kernels: the contract's bounds (the gradients and reported
    losses one pass, the parameters one step of training); gradients normwise over each
    member's model."""
    k = 5
    stack, grads, reported, solo, solo_grads, solo_losses = _stacked_step(k, 32)
    assert stack.exact_layers == []
    parity.within("reported", reported, solo_losses, ONE_PASS, kind="pass")
    for i, m in enumerate(solo):
        scale = scale_of(solo_grads[i])
        for n, p in m.named_parameters():
            parity.within(f"grad {i} {n}", grads[n][i], solo_grads[i][n], ONE_PASS,
                          scale=scale, kind="pass")
            parity.within(f"param {i} {n}", stack.params[n][i].detach(), p.detach(),
                          ONE_STEP)


def test_a_step_that_averages_the_members_losses_is_caught():
    k = 5
    _, grads, _, _, solo_grads, _ = _stacked_step(k, 32, total_of=lambda v: v.mean() / k)
    assert not torch.equal(grads["fc1.weight"][0], solo_grads[0]["fc1.weight"])
    ratio = (solo_grads[0]["fc2.bias"] / grads["fc2.bias"][0]).mean()
    assert ratio == pytest.approx(k * 1.0, rel=1e-4)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_reported_cross_entropy_is_each_members_criterion_bit_for_bit(dtype, parity):
    """The exact path's reported cross-entropy comes from one log-softmax over the stack
    (losses._cross_entropy_values): it must equal each member's own criterion call, bit
    for bit, across class counts, batch sizes (nll_loss's cascade sum changes its grouping
    above 16 and at powers of two) and logit scales."""
    task = TASKS.get("classification")
    loss = loss_function(task, fused=False)
    criterion = task.criterion()
    for k, b, c in ((1, 1, 2), (5, 17, 3), (8, 64, 10), (3, 257, 100), (2, 1000, 7)):
        for scale in (1.0, 30.0):
            g = torch.Generator().manual_seed(k * 7919 + b + c)
            out = (torch.randn(k, b, c, generator=g) * scale).to(dtype)
            y = torch.randint(0, c, (k, b), generator=g)
            solo = torch.stack([criterion(out[i].float() if dtype == torch.bfloat16
                                          else out[i], y[i]) for i in range(k)])
            got = loss.values(out, y, loss(out, y))  # from the training call's log-softmax
            assert got.dtype == solo.dtype
            parity.same(f"reported {(k, b, c, scale)}", got, solo)
            alone = loss.values(out, y, None)  # no training call before: its own
            parity.same(f"alone {(k, b, c, scale)}", alone, solo)


def test_a_cross_entropy_with_options_keeps_the_per_member_criterion():
    """Label smoothing (or class weights) changes what cross-entropy computes: such a
    criterion is not the plain one the one-log-softmax report reproduces, so the report
    calls it per member (its values still equal the criterion's)."""
    from engine.executors.unified import losses as losses_mod

    assert losses_mod._plain_cross_entropy(nn.CrossEntropyLoss())
    assert not losses_mod._plain_cross_entropy(nn.CrossEntropyLoss(label_smoothing=0.1))
    assert not losses_mod._plain_cross_entropy(nn.CrossEntropyLoss(weight=torch.ones(3)))
    assert not losses_mod._plain_cross_entropy(nn.CrossEntropyLoss(reduction="sum"))

    import dataclasses

    smoothed = dataclasses.replace(TASKS.get("classification"),
                                   criterion=lambda: nn.CrossEntropyLoss(label_smoothing=0.1))
    loss = loss_function(smoothed, fused=False)
    g = torch.Generator().manual_seed(3)
    out, y = torch.randn(4, 9, 5, generator=g), torch.randint(0, 5, (4, 9), generator=g)
    want = torch.stack([nn.CrossEntropyLoss(label_smoothing=0.1)(out[i], y[i])
                        for i in range(4)])
    assert torch.equal(loss.values(out, y, loss(out, y)), want)


def test_the_loss_keeps_no_step_alive():
    """The shared log-softmax remembers the last step's log-probabilities for the report,
    never the output itself: an output holds its autograd graph and, through it, every
    parameter it came from (verification's float64 copies of a large model stayed
    resident through training when it did)."""
    import gc
    import weakref

    task = TASKS.get("classification")
    loss = loss_function(task, fused=False)
    w = torch.randn(3, 5, 4, dtype=torch.float64, requires_grad=True)
    x, y = torch.randn(3, 7, 5, dtype=torch.float64), torch.randint(0, 4, (3, 7))
    out = torch.bmm(x, w)
    loss(out, y).sum().backward()  # a step whose values are never reported (a probe's)
    alive_w, alive_out = weakref.ref(w), weakref.ref(out)
    del w, out
    gc.collect()
    assert alive_w() is None and alive_out() is None


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_nll_mean_sums_in_the_cpu_kernels_order(dtype, parity):
    """``losses.nll_mean`` reproduces ATen's CPU ``nll_loss`` mean (its cascade: element 0
    at the top, runs of 16, groups of 16 runs) bit for bit, for batch sizes on every side
    of its boundaries, logits that round many elements to exactly 0 (confident rows) and
    rows of mixed magnitude; a plain ``sum(1) / B`` (the obvious vectorised reduction) must
    disagree somewhere in the same sweep, or the test could not tell the two apart."""
    import torch.nn.functional as F

    from engine.executors.unified.losses import nll_mean

    sizes = [*range(1, 70), 255, 256, 257, 272, 273, 511, 4095, 4096, 4097, 4113, 65537]
    naive_differs = False
    for b in sizes:
        g = torch.Generator().manual_seed(b)
        x = torch.randn(3, b, 7, generator=g, dtype=dtype) * (1000.0 if b % 3 else 0.01)
        if b % 5 == 0:
            x[0, :, 2] += 100  # row 0: the targets' log-probabilities round to exactly 0
        y = torch.randint(0, 7, (3, b), generator=g)
        y[0] = 2
        logp = F.log_softmax(x.reshape(3 * b, 7), 1)
        elements = F.nll_loss(logp, y.reshape(-1), reduction="none").view(3, b)
        want = torch.stack([F.nll_loss(logp.view(3, b, 7)[i], y[i]) for i in range(3)])
        got = nll_mean(elements)
        parity.same(f"nll_mean b={b}", got, want)
        assert not torch.signbit(got).any(), b
        naive_differs |= not torch.equal(elements.sum(1) / b, want)
    assert naive_differs


def test_deferred_losses_are_the_per_step_values_in_step_order():
    """On the CPU the bucket lets the route hold the reported losses back and reduce many
    steps at once (``VectorRoute.step(defer=True)`` / ``take``): the values handed out are,
    step by step, those the undeferred step returns (same stack, same batches), and a
    stack re-stacked to a subset scatters each step's values to the slots it had then."""
    k, b = 4, 19
    task = TASKS.get("classification")

    def route_of():
        members = []
        for i in range(k):
            torch.manual_seed(i)
            members.append(Mlp())
        stack = Stack(members, None, (D,), b)
        opt = build_stacked("sgd", stack.params, [0.1] * k, [{}] * k)
        return VectorRoute(stack, opt, loss_function(task, fused=False), task, k)

    g = torch.Generator().manual_seed(5)
    batches = [(torch.randn(k, b, D, generator=g), torch.randint(0, 4, (k, b), generator=g))
               for _ in range(5)]
    now, later = route_of(), route_of()
    want = [now.step(x, y, [True] * k, False, False) for x, y in batches[:3]]
    assert all(later.step(x, y, [True] * k, False, False, defer=True) is None
               for x, y in batches[:3])
    assert later.pending() == 3
    got = later.take()
    assert later.pending() == 0 and len(got) == 3
    assert all(torch.equal(a, w) for a, w in zip(got, want, strict=True))
    # members 1 and 3 left: their slots keep their values, the others read 0
    for route in (now, later):
        route.restack([1, 3])
    want = [now.step(x[[1, 3]], y[[1, 3]], [True] * k, False, False) for x, y in batches[3:]]
    for x, y in batches[3:]:
        later.step(x[[1, 3]], y[[1, 3]], [True] * k, False, False, defer=True)
    got = later.take()
    assert [tuple(v.shape) for v in got] == [(k,), (k,)]
    assert all(torch.equal(a, w) for a, w in zip(got, want, strict=True))
    assert float(got[0][0]) == 0.0 and float(got[0][1]) > 0.0


@pytest.mark.parametrize("task_name,tail", [("classification", (10,)), ("regression", (1,))])
def test_fused_loss_values_are_each_members_criterion_within_the_bound(task_name, tail,
                                                                       parity):
    """``fl:1`` reports the fused loss's own values: one vectorised reduction of each
    member's B per-element losses, another summation order than the solo criterion's
    cascade, so the contract bounds them by one pass of one reduction of length B (B
    non-negative terms: relative to the value); its gradients are the exact path's (the
    same fused backward)."""
    task = TASKS.get(task_name)
    fused = loss_function(task, fused=True)
    assert fused.fused and fused.fused_backward
    for k, b in ((1, 1), (4, 7), (9, 64), (3, 300), (2, 1000)):
        out, y = _outputs(task, k, b, torch.float32, tail, seed=k * 1000 + b)
        solo, solo_values = _solo_grads(task, out, y)
        losses = fused(out, y)
        losses.sum().backward()
        parity.same(f"gradient k={k} b={b}", out.grad, solo)
        parity.within(f"values k={k} b={b}", fused.values(out, y, losses), solo_values,
                      pass_bound(b), kind="pass")
