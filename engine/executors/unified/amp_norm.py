"""BatchNorm under autocast on a GPU, stacked: the input of the batching rule in fp32.

Seq's BatchNorm under autocast gets a half-precision input (the convolution before it ran
in fp16/bf16) and keeps its weight, bias and running statistics in fp32: cuDNN's and
ATen's CUDA kernels take that mix. Stacked, the same call goes through vmap's BatchNorm
batching rule, which on CUDA hands the kernel weights in the input's dtype: the first GPU
run (torch 2.11, H200) failed every amp-fp16 job with "Expected tensor for argument #2
'weight' to have scalar type Float ... cudnn_batch_norm" and every amp-bf16 job with
"Expected running_mean to have type BFloat16 but got Float" — the mixed-dtype batching
rule is an open PyTorch defect (pytorch/pytorch#184890). The CPU has it too ("expected
scalar type BFloat16 but found Float"), but CPU runs rarely reach it: under CPU autocast a
vmapped convolution or biased Linear is not cast (torch 2.14), so the BatchNorm after it
gets fp32 there.

What is done instead, wherever the input under autocast is not in the layer's dtype: the
layer normalises the input cast to its own dtype (fp32; the cast of an fp16/bf16 value to
fp32 is exact) and casts the result back to the input's dtype, so the next layer sees what
seq's would. The kernels compute in fp32 either way (mixed
BatchNorm accumulates in fp32), so what changes is only where the output is rounded: the
amp paths are "within a bound" in the parity contract already (contract.py). fp32, tf32
and bf16 (weights in bf16) never take this path; nor does ``kernels = "exact"``, whose
per-member BatchNorm calls the solo kernel.
"""

from __future__ import annotations

import torch
from torch import nn


class _Fp32InputBatchNorm:
    """Mixin over ``nn.BatchNorm{1,2,3}d`` (see the module docstring)."""

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        own = self.weight if self.weight is not None else self.running_mean
        if (own is not None and input.dtype != own.dtype
                and torch.is_autocast_enabled(input.device.type)):
            return super().forward(input.to(own.dtype)).to(input.dtype)  # type: ignore[misc]
        return super().forward(input)  # type: ignore[misc]


_SWAPS: dict[type, type] = {
    base: type(f"Fp32Input{base.__name__}", (_Fp32InputBatchNorm, base), {})
    for base in (nn.BatchNorm1d, nn.BatchNorm2d, nn.BatchNorm3d)}


def guard_batch_norms(template: nn.Module) -> list[str]:
    """Swap, in place, the class of every ``nn.BatchNorm{1,2,3}d`` of ``template`` (exact
    classes only, as ``exact.use_exact_kernels`` does: a subclass may override ``forward``)
    for its fp32-input form. Returns the swapped submodules' names. Nothing changes for a
    call outside autocast or with an input in the layer's own dtype."""
    swapped = []
    for name, sub in template.named_modules():
        cls = _SWAPS.get(type(sub))
        if cls is not None:
            sub.__class__ = cls
            swapped.append(name)
    return swapped
