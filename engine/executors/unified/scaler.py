"""K ``torch.amp.GradScaler``s in one: float16 AMP for a stack of members (issue 26).

One GradScaler for a whole stack would be wrong: one member's overflow would skip every
member's step and halve everyone's scale (docs/unified-model-pitfalls.md). Here each member
keeps what its own ``torch.amp.GradScaler`` would keep, as (K,) tensors:

* ``scale`` (float32) and ``growth_tracker`` (int32), per member;
* :meth:`StackedGradScaler.scale`: member k's loss times member k's scale, so backward of
  the summed scaled losses gives member k's parameters ``scale_k · dL_k/dθ_k`` (members
  share no parameters), exactly ``scaler.scale(loss).backward()`` of a solo run;
* :meth:`StackedGradScaler.unscale_`: per member, an inf/NaN check of its gradient slices
  (on the scaled values, as ``torch._amp_foreach_non_finite_check_and_unscale_`` does) and
  the multiplication by its inverse scale (``scale.double().reciprocal().float()``, torch's
  arithmetic), so unscaled gradients are bit for bit the solo ones;
* :meth:`StackedGradScaler.update`: per member, ``torch._amp_update_scale_``'s rule: an
  overflow multiplies the scale by ``backoff_factor`` and resets the tracker; otherwise the
  tracker counts up, and on reaching ``growth_interval`` the scale grows by
  ``growth_factor`` (if the result is finite) and the tracker resets;
* the step of a member that overflowed is skipped — only that member's
  (``StackedOptimizer.step(active)`` leaves it exactly as it was) — and counted in
  ``skipped`` (per bucket member, read by :class:`MemberSkips` as ``amp_skipped_steps``).

Members not stepping this step (finished, frozen at a rung) are left alone: no check, no
update, no count, as their own scaler would not be called.

One host sync per step (which members step), where K solo scalers sync K times.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch


class StackedGradScaler:
    """Per-member gradient scaling of a stack of K members.

    Args:
        scalers: the K members' own ``torch.amp.GradScaler`` (their settings and current
            scale and tracker are taken over; they are not used afterwards).
        device: the stack's device.
        k_all: the bucket's member count (``skipped`` is indexed by bucket member).

    Attributes:
        scale_: (K,) float32 current scales; growth_tracker: (K,) int32;
        skipped: (k_all,) int64 steps skipped per bucket member.
    """

    def __init__(self, scalers: Sequence[Any], device: torch.device, k_all: int | None = None):
        if not scalers:
            raise ValueError("a stacked GradScaler needs at least one member's scaler")
        self.device = device
        f32 = dict(dtype=torch.float32, device=device)
        self.scale_ = torch.tensor([float(s.get_scale()) for s in scalers], **f32)
        self.growth_tracker = torch.tensor([int(s._get_growth_tracker()) for s in scalers],
                                           dtype=torch.int32, device=device)
        self.growth_factor = torch.tensor([s.get_growth_factor() for s in scalers], **f32)
        self.backoff_factor = torch.tensor([s.get_backoff_factor() for s in scalers], **f32)
        self.growth_interval = torch.tensor([s.get_growth_interval() for s in scalers],
                                            dtype=torch.int32, device=device)
        k_all = len(scalers) if k_all is None else k_all
        self.skipped = torch.zeros(k_all, dtype=torch.int64, device=device)
        #: Bucket member index of each stack position (the route's ``slots``).
        self.slots = torch.arange(len(scalers), device=device)

    @property
    def k(self) -> int:
        return int(self.scale_.shape[0])

    def scale(self, losses: torch.Tensor) -> torch.Tensor:
        """(K,) losses → (K,) scaled losses (``loss_k · scale_k``); sum and backward them."""
        return losses * self.scale_.to(losses.dtype)

    @torch.no_grad()
    def unscale_(self, params: Mapping[str, torch.Tensor]) -> torch.Tensor:
        """Unscale every stacked gradient in place; returns found_inf, (K,) bool: member k's
        gradient had an inf or NaN (before unscaling, as torch checks)."""
        inv = self.scale_.double().reciprocal().float()
        found = torch.zeros(self.k, dtype=torch.bool, device=self.device)
        for p in params.values():
            g = p.grad
            if g is None:
                continue
            if g.is_sparse:
                raise ValueError("a stacked GradScaler does not unscale sparse gradients")
            found |= ~torch.isfinite(g).reshape(self.k, -1).all(dim=1)
            g.mul_(inv.to(g.dtype).view(self.k, *([1] * (g.dim() - 1))))
        return found

    @torch.no_grad()
    def update(self, found: torch.Tensor, stepping: torch.Tensor | None = None) -> None:
        """Per member ``torch._amp_update_scale_`` for the members ``stepping`` this step
        ((K,) bool; all when None); the others keep their scale and tracker. Counts the
        skipped steps (found_inf of a stepping member)."""
        live = torch.ones_like(found) if stepping is None else stepping
        bad = found & live
        good = ~found & live
        successful = self.growth_tracker + 1
        due = good & (successful == self.growth_interval)
        grown = self.scale_ * self.growth_factor
        grow = due & torch.isfinite(grown)
        scale = torch.where(bad, self.scale_ * self.backoff_factor,
                            torch.where(grow, grown, self.scale_))
        tracker = torch.where(bad | due, torch.zeros_like(successful),
                              torch.where(good, successful, self.growth_tracker))
        self.scale_ = scale
        self.growth_tracker = tracker
        self.skipped.index_add_(0, self.slots, bad.to(torch.int64))

    def subset(self, positions: Sequence[int]) -> "StackedGradScaler":
        """The scaler of a new stack keeping stack positions ``positions`` (exact copies;
        the skip counts, per bucket member, are shared with this one)."""
        out = object.__new__(StackedGradScaler)
        idx = torch.tensor(list(positions), dtype=torch.long, device=self.device)
        out.device = self.device
        for name in ("scale_", "growth_tracker", "growth_factor", "backoff_factor",
                     "growth_interval", "slots"):
            setattr(out, name, getattr(self, name).index_select(0, idx))
        out.skipped = self.skipped
        return out


class MemberSkips:
    """A member's ``amp_skipped_steps`` read from its stack's :class:`StackedGradScaler`
    (the interface of ``engine.train.precision.SkipCounter``: ``value()``)."""

    def __init__(self, scaler: StackedGradScaler, index: int):
        self._scaler = scaler
        self._index = index

    def value(self) -> int:
        return int(self._scaler.skipped[self._index].item())
