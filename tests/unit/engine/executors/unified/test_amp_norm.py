"""The stacked BatchNorm under autocast (``engine.executors.unified.amp_norm``): given an
input in the autocast dtype, the batching rule gets it in the layer's fp32 (vmap's rule
fails on the mix: pytorch/pytorch#184890), the output comes back in the input's dtype,
gradients reach the fp32 weights, and the values are seq's (solo modules under the same
autocast) within the half precision's rounding; outside autocast nothing changes."""

from __future__ import annotations

import copy

import pytest

torch = pytest.importorskip("torch")
import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402

from engine.executors.unified.stack import Stack  # noqa: E402

K, B = 3, 8


def _members():
    out = []
    for seed in range(K):
        torch.manual_seed(seed)
        # A bias-free Linear before the BatchNorm: under CPU autocast only that vmapped
        # layer runs in bf16 (a vmapped conv2d or biased Linear stays fp32 there, torch
        # 2.14), so the BatchNorm gets the mixed input it gets after a conv on CUDA
        out.append(nn.Sequential(nn.Flatten(), nn.Linear(64, 6, bias=False),
                                 nn.BatchNorm1d(6), nn.ReLU(), nn.Linear(6, 3, bias=False)))
    return out


def test_stacked_batch_norm_under_autocast_normalises_in_fp32_as_seq_does(monkeypatch):
    seen = []
    real = F.batch_norm

    def spy(input, *args, **kwargs):
        seen.append(input.dtype)
        return real(input, *args, **kwargs)

    members = _members()
    solo = [copy.deepcopy(m) for m in members]
    stack = Stack(members, None, (1, 8, 8), B)
    x = torch.randn(K, B, 1, 8, 8, generator=torch.Generator().manual_seed(3))
    monkeypatch.setattr(F, "batch_norm", spy)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = stack.forward(x)
        ref = torch.stack([m(x[i]) for i, m in enumerate(solo)])
    assert seen[0] == torch.float32  # the stacked call: fed fp32
    assert seen[1:] == [torch.bfloat16] * K  # seq's: the mixed input, as its kernel takes it
    assert out.dtype == ref.dtype  # what the next layer sees
    out.float().square().sum().backward()
    ref.float().square().sum().backward()
    grad = stack.params["2.weight"].grad
    assert grad is not None and grad.dtype == torch.float32 and grad.abs().sum() > 0
    # the same arithmetic up to where results are rounded to bf16 (2**-8 relative)
    scale = ref.float().abs().max()
    assert (out.float() - ref.float()).abs().max() <= 4 * 2.0 ** -8 * scale
    solo_grad = torch.stack([m[2].weight.grad for m in solo])
    torch.testing.assert_close(grad, solo_grad, rtol=0.05, atol=0.05 * solo_grad.abs().max())
    torch.testing.assert_close(stack.buffers["2.running_mean"],
                               torch.stack([m[2].running_mean for m in solo]),
                               rtol=2.0 ** -7, atol=1e-6)


def test_nothing_changes_outside_autocast():
    members = _members()
    stack = Stack([copy.deepcopy(m) for m in members], None, (1, 8, 8), B)
    assert [type(m).__name__ for m in stack.template.modules()
            if isinstance(m, nn.BatchNorm1d)] == ["Fp32InputBatchNorm1d"]
    x = torch.randn(K, B, 1, 8, 8, generator=torch.Generator().manual_seed(5))
    out = stack.forward(x)
    solo = torch.stack([m(x[i]) for i, m in enumerate(members)])
    torch.testing.assert_close(out, solo, rtol=1e-5, atol=1e-5)
