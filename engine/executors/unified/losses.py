"""Per-member losses and scores over stacked outputs (the tasks' ``stacked_target``).

A stacked loss returns the K per-member mean losses, shape (K,). The step backpropagates
their **sum**: the gradient of ``sum_k L_k`` with respect to member k's parameters is
exactly ``dL_k/dθ_k`` (members share no parameters), i.e. each member's solo gradient.
Averaging instead would scale every member's step by 1/K.

``fused`` (feature ``fl:1``): one criterion call over the flattened (K·B) batch with
``reduction="none"``, then a per-member mean; the reported losses are those values.

Exact (``fl:0``, the default): the step still **backpropagates once through the fused
loss** when the task's stacked form is one whose gradient is bit for bit the solo
criterion's (:data:`GRADIENT_EXACT`: per-element cross-entropy or squared error, then a
per-member mean — the backward of ``mean`` hands every element ``1/B``, the same float the
solo ``reduction="mean"`` backward uses; checked for B = 1…300, K = 1…9, float32/float64 by
``tests/unit/test_unified_fused_backward.py``), but the *reported* per-member losses are
the task's own criterion called per member under ``no_grad``, exactly as
``engine.train.loop`` computes them (the fused forward sums in another order: values differ
by up to ~5e-7, gradients do not). K forward-only criterion calls instead of K forward +
backward slices; for the plain cross-entropy one log-softmax over the stack serves both the
training loss and the K reported values (:class:`_SharedLogSoftmax`, the same values). A
task whose stacked form is not known to be gradient-exact (a plugin's) keeps the per-member
criterion for both.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F

from engine.parts import tasks as task_lib


def upcast_half(out: torch.Tensor) -> torch.Tensor:
    """The loss input as ``engine.train.loop``'s step casts it: float16/bfloat16 (autocast
    outputs) → float32; every other dtype (float32, float64) unchanged."""
    return out.float() if out.dtype in (torch.float16, torch.bfloat16) else out


def _as_columns(out: torch.Tensor, target: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Regression shapes, stacked: (K, B) or (K, B, k) → (K, B, k) for both, the target in
    the output's dtype and half precision upcast (as ``engine.parts.tasks.prepare``)."""
    if out.dim() == 2:
        out = out.unsqueeze(2)
    if target.dim() == 2:
        target = target.unsqueeze(2)
    if out.shape != target.shape:
        raise ValueError(f"regression output {tuple(out.shape)} does not match target "
                         f"{tuple(target.shape)}")
    if out.dtype in (torch.float16, torch.bfloat16):
        out = out.float()
    return out, target.to(dtype=out.dtype)


def stacked_cross_entropy(out: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Per-member mean cross-entropy: logits (K, B, C), class indices (K, B) → (K,)."""
    k, b = target.shape
    logits = out.reshape(k * b, -1)
    # Cast exactly as engine.train.loop's step does (half precision → float32, float32 and
    # float64 as they are), so a float64 stack computes the loss as a float64 solo run does.
    logits = upcast_half(logits)
    losses = F.cross_entropy(logits, target.reshape(k * b), reduction="none")
    return losses.view(k, b).mean(dim=1)


def stacked_mse(out: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Per-member mean squared error over every element of the member's batch:
    (K, B[, k]) against (K, B[, k]) → (K,) (``nn.MSELoss()`` per member)."""
    out, target = _as_columns(out, target)
    return ((out - target) ** 2).mean(dim=(1, 2))


class StackedLoss:
    """The per-member loss a stacked step trains with.

    ``loss(out, target)`` → (K,) differentiable per-member losses (what ``backward`` runs
    through); ``loss.values(out, target, losses)`` → (K,) detached, the values reported as
    each member's training loss. ``fused``: the feature ``fl``; ``fused_backward``: the
    backward runs through one fused op (also on the exact path, see the module docstring).
    """

    def __init__(self, train: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
                 report: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] | None,
                 fused: bool, fused_backward: bool):
        self._train = train
        self._report = report
        self.fused = fused
        self.fused_backward = fused_backward

    def __call__(self, out: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return self._train(out, target)

    def values(self, out: torch.Tensor, target: torch.Tensor,
               losses: torch.Tensor) -> torch.Tensor:
        """The (K,) losses to report for this step (``losses``: what ``__call__`` gave)."""
        if self._report is None:
            return losses.detach()
        with torch.no_grad():
            return self._report(out, target)  # under no_grad: no graph


#: Stacked targets whose backward is bit for bit each member's solo criterion backward
#: (checked by tests/unit/test_unified_fused_backward.py): the exact path backpropagates
#: through them once instead of through K criterion calls.
GRADIENT_EXACT = frozenset({
    "engine.executors.unified.losses:stacked_cross_entropy",
    "engine.executors.unified.losses:stacked_mse",
})


def loss_function(task: Any, fused: bool) -> StackedLoss:
    """The (K,) per-member loss of ``task`` (a ``TaskSpec``) over stacked outputs.

    ``fused`` (``fl:1``): the fused loss, its values reported. Otherwise the exact path:
    backward through the fused loss when the task's stacked form is in
    :data:`GRADIENT_EXACT`, values from the task's criterion per member (as seq).

    Raises:
        ValueError: the task has no stacked form (``stacked_target`` unset).
    """
    if not task.stacked_target:
        raise ValueError(f"task '{task.name}' has no stacked form")
    module, _, name = task.stacked_target.partition(":")
    import importlib

    stacked = getattr(importlib.import_module(module), name)
    if fused:
        return StackedLoss(stacked, None, fused=True, fused_backward=True)
    criterion = task.criterion()

    def per_member(out: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        losses = []
        for k in range(out.shape[0]):
            o, t = task_lib.prepare(task, out[k], target[k])
            losses.append(criterion(upcast_half(o), t))
        return torch.stack(losses)

    if _plain_cross_entropy(criterion) and task.stacked_target in GRADIENT_EXACT:
        shared = _SharedLogSoftmax()
        return StackedLoss(shared.train, shared.report, fused=False, fused_backward=True)

    if task.stacked_target in GRADIENT_EXACT:
        return StackedLoss(stacked, per_member, fused=False, fused_backward=True)
    return StackedLoss(per_member, None, fused=False, fused_backward=False)


def _plain_cross_entropy(criterion: Any) -> bool:
    """``nn.CrossEntropyLoss()`` with every default (no weights, no label smoothing, mean
    over the batch, ignore_index -100): the criterion :func:`_cross_entropy_values`
    reproduces."""
    return (type(criterion) is torch.nn.CrossEntropyLoss and criterion.weight is None
            and criterion.label_smoothing == 0.0 and criterion.reduction == "mean"
            and criterion.ignore_index == -100)


class _SharedLogSoftmax:
    """The exact path's plain cross-entropy, its training loss and its reported values from
    ONE log-softmax over the stack.

    ATen's cross-entropy *is* ``nll_loss(log_softmax(x, 1), t)`` (also for autograd: it is
    a composite of those two ops), so :meth:`train` — the same two ops with
    ``reduction="none"``, then a per-member mean — is bit for bit
    :func:`stacked_cross_entropy`, gradients included. A row's log-softmax does not depend
    on the rows around it, so :meth:`report` takes each member's rows from the same
    (K·B, C) log-probabilities; only the mean reduction (``nll_loss``'s cascade sum, in an
    order no vectorised sum reproduces) stays a call per member. Each member's value is
    bit for bit ``F.cross_entropy(out[k], target[k])`` (checked by the tests). At K = 64 on
    CPU: one log-softmax and 64 ``nll_loss`` calls per step instead of 65 log-softmaxes and
    64 criterion calls through the module."""

    def __init__(self) -> None:
        # (a weak reference to the stacked output, its detached (K, B, C) log-probabilities)
        # of the last training call. Weak: holding the output itself would keep its autograd
        # graph — and through it every parameter it was computed from — alive after the
        # step (verification's float64 copies of a large model: hundreds of MiB).
        self._last: tuple[weakref.ref, torch.Tensor] | None = None

    @staticmethod
    def _log_probs(out: torch.Tensor, k: int, b: int) -> torch.Tensor:
        return F.log_softmax(upcast_half(out.reshape(k * b, -1)), dim=1)

    def train(self, out: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        """(K, B, C) logits, (K, B) class indices → (K,) differentiable mean losses."""
        k, b = target.shape
        logp = self._log_probs(out, k, b)
        self._last = (weakref.ref(out), logp.detach().view(k, b, -1))
        losses = F.nll_loss(logp, target.reshape(k * b), reduction="none")
        return losses.view(k, b).mean(dim=1)

    def report(self, out: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        """(K,) each member's cross-entropy, as its own criterion call computes it."""
        k, b = target.shape
        last, self._last = self._last, None
        if last is not None and last[0]() is out:
            logp = last[1]
        else:  # not the output train() last saw (a caller reporting on its own)
            logp = self._log_probs(out, k, b).view(k, b, -1)
        return torch.stack([F.nll_loss(logp[i], target[i]) for i in range(k)])


def stacked_score_sums(task: Any, out: torch.Tensor,
                       target: torch.Tensor) -> dict[str, torch.Tensor]:
    """``engine.parts.tasks.score_sums`` for K members at once: every value gains a leading K.

    classification: ``correct`` (K,) int64, ``count`` (K,) int64; regression: ``sse``,
    ``sum_y``, ``sum_y2`` (K, k) float64, ``count`` (K,) float64. No host sync.
    """
    out = out.detach()
    k, b = target.shape[0], target.shape[1]
    if task.metric == "accuracy":
        correct = (out.argmax(dim=2) == target).sum(dim=1)
        return {"correct": correct,
                "count": torch.full((k,), b, dtype=torch.int64, device=out.device)}
    o, t = _as_columns(out, target)
    dtype = torch.float32 if o.device.type == "mps" else torch.float64
    o, t = o.to(dtype), t.to(dtype)
    return {"sse": ((t - o) ** 2).sum(dim=1), "sum_y": t.sum(dim=1),
            "sum_y2": (t * t).sum(dim=1),
            "count": torch.full((k,), b, dtype=dtype, device=o.device)}


def member_sums(sums: dict[str, torch.Tensor], index: int) -> dict[str, torch.Tensor]:
    """Member ``index``'s slice of :func:`stacked_score_sums` (for ``tasks.finalise``)."""
    return {key: value[index] for key, value in sums.items()}
