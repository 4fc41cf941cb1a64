"""``kernels = "exact"``: every layer whose batching rule a BLAS or vmap may round
differently runs per member with its native kernel, so a stacked step is each solo step bit
for bit — Linear layers included, where vmap's batched matmul plus bias add differs from the
solo ``addmm`` for long contractions (the BLAS adds the bias before later blocks) and for
matrix-vector products (batch size 1; one output feature, a regression head)."""

from __future__ import annotations

import copy

import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

from engine.executors.unified.stack import Stack  # noqa: E402

K = 3


def _mlp(seed: int, n_in: int, n_out: int) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(n_in, 512), nn.ReLU(), nn.Linear(512, 64), nn.ReLU(),
                         nn.Linear(64, n_out))


@pytest.mark.parametrize("batch,n_in,n_out", [(64, 1024, 10), (1, 13, 3), (32, 10, 1)])
def test_exact_linear_is_each_solo_step_bit_for_bit(batch, n_in, n_out, parity):
    members = [_mlp(k, n_in, n_out) for k in range(K)]
    solo = [copy.deepcopy(m) for m in members]
    stack = Stack(members, None, (n_in,), batch, exact_kernels=True)
    assert stack.exact_layers == ["0", "2", "4"]
    g = torch.Generator().manual_seed(batch)
    x = torch.randn(K, batch, n_in, generator=g)
    out = stack(x)
    grad_out = torch.randn(out.shape, generator=g)
    out.backward(grad_out)
    for k, m in enumerate(solo):
        o = m(x[k])
        parity.same(f"output {k}", out[k], o)
        o.backward(grad_out[k])
        for name, p in m.named_parameters():
            parity.same(f"grad {k} {name}", stack.params[name].grad[k], p.grad)


def test_the_verification_twins_keep_vmaps_linear():
    """Verification's vectorised twins compare within a tolerance: they keep vmap's Linear
    (one batched call) and swap only BatchNorm and convolutions."""
    members = [nn.Sequential(nn.Conv2d(1, 2, 3), nn.Flatten(), nn.Linear(8, 3))
               for _ in range(K)]
    stack = Stack(members, None, (1, 4, 4), 2, exact_kernels=True, exact_linear=False)
    assert stack.exact_layers == ["0"]
    assert Stack(members, None, (1, 4, 4), 2, exact_kernels=True).exact_layers == ["0", "2"]
