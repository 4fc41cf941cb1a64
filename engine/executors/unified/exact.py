"""Per-member native kernels for the layers whose vmap batching rule changes the arithmetic.

Under ``vmap``, elementwise ops, pooling and ``Flatten`` fold K into the batch, bit for bit.
These layer families do not (LayerNorm and GroupNorm too: their batching rules reduce the
affine gradients, or regroup the channels, over all K members at once): BatchNorm's batching rule normalises the (B, K·C) reshaped
input and applies the affine part separately (outputs differ by an ulp, weight gradients by
~1e-6 relative); a convolution with stacked weights runs as one grouped convolution
(another accumulation order); and ``Linear`` becomes a batched matmul plus a bias add,
which is the solo ``addmm`` bit for bit only for small layers: the solo ``addmm`` starts its
sums from the bias, which a BLAS blocking a long contraction adds before the later blocks
(on this CPU from 400 input features on), and a solo matrix-vector product (batch size 1,
a layer with one output such as a regression head) takes the BLAS's vector path, which
sums in another order (both measured on this CPU's MKL, session 9). Training amplifies such
rounding differences chaotically: after a few epochs of float32 SGD a member can drift 1e-4
relative from its solo run.

With ``kernels = "exact"`` the stack's template swaps these layers (every ``Linear``: which
ones a BLAS rounds differently is the library's business) for subclasses whose
functional core is an ``autograd.Function`` with a custom ``vmap`` rule: under vmap it
calls the native kernel once per member on that member's slice (the solo run's exact
call), so forward, backward and running statistics equal seq's bit for bit. The cost is K
kernel launches per layer instead of one (``bench/RESULTS.md`` measures it);
``kernels = "batched"`` keeps vmap's rules.

Only exact classes are swapped (``type(m) is nn.BatchNorm2d``...), never subclasses that
may override ``forward``. Any other layer with parameters keeps vmap's rule, so it is not bit
for bit by construction: :func:`vmapped_layers` names them and the bucket's plan records
them (``exact_kernels_skipped``).
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import nn


def _physical(t: torch.Tensor | None, bdim: int | None, k: int) -> torch.Tensor | None:
    if t is None:
        return None
    return t.movedim(bdim, 0) if bdim is not None else t.expand(k, *t.shape)


def _members(t: torch.Tensor | None, k: int) -> list[torch.Tensor | None]:
    """The K member slices of a physical (K, ...) tensor through one ``unbind``: its
    backward stacks the K slice gradients once, where K ``t[i]`` selects would each
    scatter theirs into a zero (K, ...) tensor (K² memory traffic: at K = 64 the exact
    kernels' backward was 70 % ``fill_``)."""
    return [None] * k if t is None else list(t.unbind(0))


class _PerMember(torch.autograd.Function):
    """A functional layer whose vmap rule (the subclass's ``vmap``) calls the native kernel
    once per member. Outside vmap it is never differentiated: under vmap autograd records
    the per-member calls the rule makes, and differentiates those."""

    generate_vmap_rule = False

    @staticmethod
    def setup_context(ctx, inputs, output):
        pass

    @staticmethod
    def backward(ctx, grad):  # pragma: no cover - only ever called under vmap
        raise RuntimeError("a per-member kernel is differentiated through its vmap rule")


class _PerMemberBatchNorm(_PerMember):
    """``F.batch_norm`` whose vmap rule loops over members (running stats updated in the
    member's slice of the stacked buffer, in place, as the solo kernel does)."""

    @staticmethod
    def forward(x, running_mean, running_var, weight, bias, training, momentum, eps):
        return F.batch_norm(x, running_mean, running_var, weight, bias, training, momentum, eps)

    @staticmethod
    def vmap(info, in_dims, x, running_mean, running_var, weight, bias, training, momentum,
             eps):
        k = info.batch_size
        x, rm, rv, w, b = (_members(_physical(t, d, k), k) for t, d in
                           zip((x, running_mean, running_var, weight, bias), in_dims[:5], strict=False))
        outs = [F.batch_norm(x[i], rm[i], rv[i], w[i], b[i], training, momentum, eps)
                for i in range(k)]
        return torch.stack(outs), 0


class _ExactBatchNorm:
    """Mixin over ``nn.BatchNorm{1,2,3}d``: ``_BatchNorm.forward`` with the functional core
    replaced (momentum=None is refused before stacking, see ``stack.unsupported_reason``)."""

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        self._check_input_dim(input)
        factor = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats and self.num_batches_tracked is not None:
            self.num_batches_tracked.add_(1)
        bn_training = self.training or (self.running_mean is None and self.running_var is None)
        use_stats = not self.training or self.track_running_stats
        return _PerMemberBatchNorm.apply(
            input, self.running_mean if use_stats else None,
            self.running_var if use_stats else None, self.weight, self.bias, bn_training,
            factor, self.eps)


class _PerMemberConv(_PerMember):
    """``F.conv{1,2,3}d`` whose vmap rule loops over members."""

    @staticmethod
    def forward(x, weight, bias, conv, stride, padding, dilation, groups):
        return conv(x, weight, bias, stride, padding, dilation, groups)

    @staticmethod
    def vmap(info, in_dims, x, weight, bias, conv, stride, padding, dilation, groups):
        k = info.batch_size
        x, w, b = (_members(_physical(t, d, k), k) for t, d in
                   zip((x, weight, bias), in_dims[:3], strict=False))
        outs = [conv(x[i], w[i], b[i], stride, padding, dilation, groups) for i in range(k)]
        return torch.stack(outs), 0


_CONV = {nn.Conv1d: F.conv1d, nn.Conv2d: F.conv2d, nn.Conv3d: F.conv3d}


class _ExactConv:
    """Mixin over ``nn.Conv{1,2,3}d``: ``_conv_forward`` through :class:`_PerMemberConv`."""

    _functional: Any = None  # F.conv1d/2d/3d, set per swapped class

    def _conv_forward(self, input: torch.Tensor, weight: torch.Tensor,
                      bias: torch.Tensor | None) -> torch.Tensor:
        padding = self.padding
        if self.padding_mode != "zeros":  # as nn.ConvNd: pad explicitly, then no padding
            input = F.pad(input, self._reversed_padding_repeated_twice, mode=self.padding_mode)
            padding = tuple(0 for _ in self.padding)
        return _PerMemberConv.apply(input, weight, bias, type(self)._functional, self.stride,
                                    padding, self.dilation, self.groups)


class _PerMemberLinear(_PerMember):
    """``F.linear`` whose vmap rule loops over members (each member's ``addmm``/``mm``, and
    in the backward the solo run's matrix products)."""

    @staticmethod
    def forward(x, weight, bias):
        return F.linear(x, weight, bias)

    @staticmethod
    def vmap(info, in_dims, x, weight, bias):
        k = info.batch_size
        x, w, b = (_members(_physical(t, d, k), k) for t, d in zip((x, weight, bias), in_dims, strict=False))
        return torch.stack([F.linear(x[i], w[i], b[i]) for i in range(k)]), 0


class _ExactLinear:
    """Mixin over ``nn.Linear``: ``forward`` through :class:`_PerMemberLinear`."""

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        return _PerMemberLinear.apply(input, self.weight, self.bias)


class _PerMemberNorm(_PerMember):
    """``F.layer_norm`` or ``F.group_norm`` (``norm``, with its ``normalized_shape`` or
    ``num_groups`` as ``arg``) whose vmap rule loops over members: vmap's own rules reduce
    LayerNorm's affine gradients over all K·B rows at once and regroup GroupNorm's K·C
    channels (each ~1e-7 relative off the solo run)."""

    @staticmethod
    def forward(x, norm, arg, weight, bias, eps):
        return norm(x, arg, weight, bias, eps)

    @staticmethod
    def vmap(info, in_dims, x, norm, arg, weight, bias, eps):
        k = info.batch_size
        x, w, b = (_members(_physical(t, d, k), k) for t, d in
                   zip((x, weight, bias), (in_dims[0], in_dims[3], in_dims[4]), strict=False))
        return torch.stack([norm(x[i], arg, w[i], b[i], eps) for i in range(k)]), 0


class _ExactLayerNorm:
    """Mixin over ``nn.LayerNorm``: ``forward`` through :class:`_PerMemberNorm`."""

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        return _PerMemberNorm.apply(input, F.layer_norm, self.normalized_shape, self.weight,
                                    self.bias, self.eps)


class _ExactGroupNorm:
    """Mixin over ``nn.GroupNorm``: ``forward`` through :class:`_PerMemberNorm`."""

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        return _PerMemberNorm.apply(input, F.group_norm, self.num_groups, self.weight,
                                    self.bias, self.eps)


_SWAPS: dict[type, type] = {}
_SWAPS[nn.LayerNorm] = type("ExactLayerNorm", (_ExactLayerNorm, nn.LayerNorm), {})
_SWAPS[nn.GroupNorm] = type("ExactGroupNorm", (_ExactGroupNorm, nn.GroupNorm), {})
for _base in (nn.BatchNorm1d, nn.BatchNorm2d, nn.BatchNorm3d):
    _SWAPS[_base] = type(f"Exact{_base.__name__}", (_ExactBatchNorm, _base), {})
for _base, _fn in _CONV.items():
    _SWAPS[_base] = type(f"Exact{_base.__name__}", (_ExactConv, _base),
                         {"_functional": staticmethod(_fn)})


_EXACT_LINEAR = type("ExactLinear", (_ExactLinear, nn.Linear), {})


def vmapped_layers(template: nn.Module) -> list[str]:
    """Submodules that :func:`use_exact_kernels` left to vmap (``"name (Type)"``): those
    with parameters of their own and no per-member kernel (a PReLU's weight gradient,
    MultiheadAttention's projections, a plugin's own layer: within the parity contract's
    bound, not bit for bit by construction) and random layers drawing through vmap's
    randomness (:func:`_vmap_random`)."""
    swapped = set(_SWAPS.values()) | {_EXACT_LINEAR}
    return [f"{name} ({type(sub).__name__})" for name, sub in template.named_modules()
            if (type(sub) not in swapped and any(True for _ in sub.parameters(recurse=False)))
            or _vmap_random(sub)]


def _vmap_random(sub: nn.Module) -> bool:
    """A random layer the stack does not give the member's own generator (``Dropout2d``,
    ``AlphaDropout``...: only ``nn.Dropout`` becomes ``stack.MemberDropout``): its masks
    come from vmap's randomness, never seq's. The executor refuses such a bucket
    (``stack.unsupported_reason``); a stack built directly says so here."""
    return (isinstance(sub, nn.modules.dropout._DropoutNd) and type(sub) is not nn.Dropout
            and sub.p > 0)


def use_exact_kernels(template: nn.Module, linear: bool = True) -> list[str]:
    """Swap, in place, the class of every BatchNorm, Conv, LayerNorm and GroupNorm submodule
    of ``template`` — and with ``linear`` of every ``nn.Linear`` — for its per-member-kernel
    subclass. Returns the swapped submodules' names."""
    swapped = []
    for name, sub in template.named_modules():
        cls = _SWAPS.get(type(sub))
        if cls is None and linear and type(sub) is nn.Linear:
            cls = _EXACT_LINEAR
        if cls is not None:
            sub.__class__ = cls
            swapped.append(name)
    return swapped
