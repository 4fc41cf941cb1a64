"""The stack stores each parameter in the memory layout its gradient arrives in
(``Stack.adopt_gradient_layout``): autograd then takes every gradient as it comes instead
of copying it into the parameter's layout each step. A layout is not a value, but another
operand layout may pick another GEMM, whose bits are the host's (MKL keeps them on an Intel
AVX-512 host, not on an AMD EPYC one). The gate (``stack.layout_allowed``) asks what the
path promises: under batched kernels the probe's forward within the contract's one-pass
bound (``layout_within_bound``; that path promises a bound, on every host), under exact
kernels bit for bit (``layout_keeps_values``). Tests force the branch they test through
the gate, and training with the moved parameters is asserted within the parity contract's
rounding bound (engine.executors.unified.contract), not bit for bit: the gate sees one
forward, not every kernel of training. The probe must leave no trace (RNG, BatchNorm
statistics) in either branch, and where the gate says no, nothing moves."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
import torch.nn.functional as F  # noqa: E402
from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402

from engine.executors.unified import stack as stack_mod  # noqa: E402
from engine.executors.unified.contract import (  # noqa: E402
    layer_reduction,
    pass_bound,
    rounding_bound,
)
from engine.executors.unified.optim import build_stacked  # noqa: E402
from engine.executors.unified.stack import (  # noqa: E402
    Stack,
    _dense,
    layout_within_bound,
    member_generator,
    probe_bound,
)
from engine.parts import nets  # noqa: E402
from tests.parity import scale_of  # noqa: E402

K, B, IN, C = 4, 16, (1, 8, 8), 10
LINEAR_WEIGHTS = ["1.weight", "5.weight", "9.weight"]
STEPS = 6
#: Relaid against plain: the three Linear layers' GEMMs may differ (NN against NT), six
#: steps (mlp_bn 64 → 32 → 32 → 10, batch 16).
BOUND = rounding_bound(STEPS, layer_reduction(64, 32, B) + layer_reduction(32, 32, B)
                       + layer_reduction(32, C, B))


@pytest.fixture
def gate(monkeypatch):
    """``gate(True)`` / ``gate(False)``: the layout gate answers so, whatever this host's
    BLAS would say."""
    def force(adopt: bool) -> None:
        monkeypatch.setattr(stack_mod, "layout_allowed", lambda *args, **kwargs: adopt)
    return force


def _stack(shared_input, seed=0, exact=False, exact_linear=True):
    members, gens = [], []
    for k in range(K):
        torch.manual_seed(seed + k)
        members.append(nets.mlp_bn(IN, C, hidden=32, dropout=0.2))
        gens.append(member_generator(torch.device("cpu")))
    return Stack(members, gens, IN, B, shared_input=shared_input, exact_kernels=exact,
                 exact_linear=exact_linear)


#: The batched gate's bound for mlp_bn's three moved Linear weights (fan-ins 64, 32, 32).
PROBE_BOUND = pass_bound(64, 3)


def _train(stack, steps=STEPS, shared=False):
    opt = build_stacked("sgd", stack.params, [0.05] * K, [{"momentum": 0.9}] * K)
    g = torch.Generator().manual_seed(7)
    for _ in range(steps):
        shape = (B, *IN) if shared else (K, B, *IN)
        x = torch.randn(shape, generator=g)
        y = torch.randint(0, C, (K, B), generator=g)
        out = stack(x, shared_input=shared)
        loss = F.cross_entropy(out.reshape(K * B, -1), y.reshape(-1),
                               reduction="none").view(K, B).mean(1).sum()
        opt.zero_grad()
        copies = _CopyCount()
        with copies:
            loss.backward()
        # autograd took the relaid weights' gradients as they came; the plain stack's
        # AccumulateGrad copies each transposed Linear weight gradient, every step
        assert copies.n == (0 if stack.relaid else 3), copies.n
        opt.step()
    return opt


class _CopyCount(TorchDispatchMode):
    """Counts the copies made while active (AccumulateGrad's layout copies among them)."""

    def __init__(self):
        super().__init__()
        self.n = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func.overloadpacket.__name__ in ("copy_", "clone", "_to_copy"):
            self.n += 1
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize("shared", [False, True])
def test_linear_weights_take_their_gradients_layout_and_train_within_the_bound(
        shared, gate, parity):
    gate(False)
    plain = _stack(None) if not shared else _stack(shared)
    assert plain.relaid == []
    gate(True)
    relaid = _stack(shared)
    # The three Linear weights (vmap's batched matmul hands their gradients back
    # transposed); biases and BatchNorm affine parameters already match.
    assert relaid.relaid == LINEAR_WEIGHTS
    for name in relaid.relaid:
        p = relaid.params[name]
        assert not p.is_contiguous() and _dense(p) and p.is_leaf and p.requires_grad
        parity.same(f"moved {name}", p, plain.params[name])  # a copy: the same values
    opt_plain, opt_relaid = _train(plain, shared=shared), _train(relaid, shared=shared)
    momenta = {n: opt_plain.state[n]["momentum_buffer"] for n in plain.params}
    for name in plain.params:
        parity.within(f"param {name}", relaid.params[name], plain.params[name], BOUND)
        # normwise over the model: the biases before BatchNorm have gradients that are
        # zero in exact arithmetic (all rounding noise)
        parity.within(f"momentum {name}", opt_relaid.state[name]["momentum_buffer"],
                      momenta[name], BOUND, scale=scale_of(momenta))
    for name in plain.buffers:
        if plain.buffers[name].is_floating_point():
            parity.within(f"buffer {name}", relaid.buffers[name], plain.buffers[name],
                          BOUND)
        else:  # num_batches_tracked
            parity.same(f"buffer {name}", relaid.buffers[name], plain.buffers[name])


@pytest.mark.parametrize("shared", [False, True])
def test_batched_kernels_adopt_the_layout_on_every_host(shared, monkeypatch, parity):
    """Unforced, batched kernels: the gate holds the probe's forward to the one-pass bound,
    which the relaid forward keeps on every host (whether its bits match the plain one's
    is the BLAS's business: recorded, not asserted), so the Linear weights move and the
    three AccumulateGrad copies a step go."""
    seen = []
    real = stack_mod.layout_within_bound

    def spy(relaid, plain, bound):
        seen.append(bound)
        parity.within("probe forward, relaid against plain", relaid, plain, bound)
        parity.record("probe forward bit for bit", torch.equal(relaid, plain))
        return real(relaid, plain, bound)

    monkeypatch.setattr(stack_mod, "layout_within_bound", spy)
    monkeypatch.setattr(stack_mod, "layout_keeps_values",
                        lambda *a: pytest.fail("batched kernels asked for bits"))
    stack = _stack(shared)
    assert seen == [PROBE_BOUND]
    assert stack.relaid == LINEAR_WEIGHTS


def test_batched_gate_refuses_a_forward_outside_the_bound(monkeypatch):
    """The batched gate is a check, not a pass: a relaid forward one ulp off is adopted,
    one off by twice the bound (or not finite) leaves every parameter where it was."""
    real = stack_mod.layout_within_bound

    def off(scale):
        def gate(relaid, plain, bound):
            moved = relaid.clone()
            top = int(moved.abs().argmax())
            if scale is None:
                moved.view(-1)[0] = float("nan")
            elif scale == 0:
                moved.view(-1)[top] = torch.nextafter(moved.view(-1)[top],
                                                      torch.tensor(float("inf")))
            else:
                moved.view(-1)[top] += scale * bound * plain.abs().max()
            return real(moved, plain, bound)
        return gate

    monkeypatch.setattr(stack_mod, "layout_within_bound", off(0))
    assert _stack(False).relaid == LINEAR_WEIGHTS
    for scale in (2.0, None):
        monkeypatch.setattr(stack_mod, "layout_within_bound", off(scale))
        stack = _stack(False)
        assert stack.relaid == []
        assert all(p.is_contiguous() for p in stack.params.values())


def test_within_bound_reads_the_contract_normwise():
    plain = torch.tensor([[4.0, -2.0], [1.0, 0.0]])
    assert layout_within_bound(plain + 0.04, plain, 0.01)          # 0.04 <= 0.01 * 4
    assert not layout_within_bound(plain + 0.05, plain, 0.01)
    assert layout_within_bound(torch.zeros(2), torch.zeros(2), 0.01)
    assert not layout_within_bound(torch.tensor([1e-30]), torch.zeros(1), 0.01)
    inf = torch.tensor([float("inf"), 1.0])
    assert layout_within_bound(inf, inf.clone(), 0.01)             # bit for bit
    assert not layout_within_bound(torch.tensor([float("nan"), 1.0]),
                                   torch.tensor([float("nan"), 1.0]), 0.01)


def test_probe_bound_is_the_contracts_one_pass_bound():
    # a: a relaid Linear weight (K, out 32, in 64) stored transposed; c: a convolution's
    # (K, out 8, in 3, 3, 3). Fan-in: a member weight's elements per output, whatever the
    # memory layout: 64, 10's 32, the convolution's 27.
    w = {"a": torch.zeros(4, 64, 32).transpose(1, 2), "b": torch.zeros(4, 10, 32),
         "c": torch.zeros(4, 8, 3, 3, 3)}
    assert probe_bound(w) == pass_bound(64, 3)
    assert probe_bound({"b": w["b"].double()}) == pass_bound(32, 1, "float64")
    # no unit roundoff in the contract (half precisions), mixed dtypes, nothing moved:
    # no bound, and the gate falls back to bit for bit
    assert probe_bound({"b": w["b"].bfloat16()}) is None
    assert probe_bound({"a": w["a"], "b": w["b"].double()}) is None
    assert probe_bound({}) is None


def test_exact_kernels_keep_the_bit_for_bit_gate(monkeypatch):
    """Exact kernels promise seq's bits: their per-member Linear hands each gradient back
    in its parameter's layout, so nothing moves and the gate is not even asked; where vmap's
    Linear stays (exact_linear=False) the gate is bit for bit, never the bound."""
    asked = []
    monkeypatch.setattr(stack_mod, "layout_within_bound",
                        lambda *a: pytest.fail("exact kernels asked for a bound"))
    monkeypatch.setattr(stack_mod, "layout_keeps_values",
                        lambda relaid, plain: asked.append(1) or True)
    stack = _stack(False, exact=True)
    assert stack.relaid == [] and asked == []
    assert all(p.is_contiguous() for p in stack.params.values())
    assert _stack(False, exact=True, exact_linear=False).relaid == LINEAR_WEIGHTS
    assert asked == [1]


@pytest.mark.parametrize("adopt", [True, False])
def test_the_probe_leaves_no_trace(adopt, gate):
    """Either branch: no global RNG draw, no BatchNorm statistic moved, no gradient left on
    a parameter, the stack back in training mode."""
    stack = _stack(None)
    gate(adopt)
    before_rng = torch.get_rng_state()
    before = {n: b.clone() for n, b in stack.buffers.items()}
    gens = [g.get_state() for g in stack.generators]
    assert stack.adopt_gradient_layout(False) == (LINEAR_WEIGHTS if adopt else [])
    assert torch.equal(torch.get_rng_state(), before_rng)
    assert all(torch.equal(g.get_state(), s) for g, s in zip(stack.generators, gens, strict=False))
    for name, value in before.items():
        assert torch.equal(stack.buffers[name], value), name
    assert all(p.grad is None for p in stack.params.values())
    assert stack.training and stack.template.training


def test_nothing_moves_when_the_forward_would_not_be_bit_for_bit(monkeypatch):
    """The exact kernels' guard: a matmul library may round differently for another operand
    layout. If the forward with the moved parameters differs in any bit, every parameter
    stays: the real gate sees a forward that differs (one bit flipped in the moved side's
    output)."""
    real = stack_mod.layout_keeps_values
    seen = []

    def flipped(relaid, plain):
        off = relaid.clone()
        off.view(-1)[0] = torch.nextafter(off.view(-1)[0], torch.tensor(float("inf")))
        seen.append(real(off, plain))
        return seen[-1]

    monkeypatch.setattr(stack_mod, "layout_keeps_values", flipped)
    stack = _stack(False, exact=True, exact_linear=False)
    assert seen == [False]
    assert stack.relaid == []
    assert all(p.is_contiguous() for p in stack.params.values())


def test_a_probe_the_model_cannot_take_changes_nothing():
    """An input of the wrong shape for the model (its first Linear cannot take it): the
    probe fails quietly and the stack trains as before."""
    members = []
    for k in range(2):
        torch.manual_seed(k)
        members.append(torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(64, C)))
    stack = Stack(members, None, (3, 5), B, shared_input=False)  # not the model's shape
    assert stack.relaid == []
    assert all(p.is_contiguous() for p in stack.params.values())


def test_restacked_survivors_keep_the_gradients_layout(gate):
    gate(True)
    stack = _stack(False)
    survivors = stack.subset([0, 2])
    assert survivors.relaid == stack.relaid == LINEAR_WEIGHTS
    for name in survivors.relaid:
        assert survivors.params[name].stride() != survivors.params[name].contiguous().stride()


def test_dense_layouts():
    t = torch.zeros(4, 3, 5)
    assert _dense(t) and _dense(t.transpose(1, 2)) and _dense(t.permute(2, 0, 1))
    assert not _dense(t[:, :2])                      # a slice leaves gaps
    assert not _dense(torch.zeros(3, 1).expand(3, 4))  # a broadcast overlaps
    assert _dense(torch.zeros(1, 6)) and _dense(torch.zeros(0, 3))


def test_a_stack_is_freed_by_reference_counting_alone():
    """No reference cycle through a stack (its cached vmapped functions once held it):
    dropped, it is gone at once, without waiting for Python's cyclic collector — which
    a few allocations of huge tensors rarely trigger."""
    import gc
    import weakref

    stack = _stack(False)
    stack(torch.randn(K, B, *IN))          # fills the vmapped-function cache
    gone = weakref.ref(stack)
    weight = weakref.ref(stack.params["5.weight"])
    gc.disable()
    try:
        del stack
        assert gone() is None and weight() is None
    finally:
        gc.enable()
