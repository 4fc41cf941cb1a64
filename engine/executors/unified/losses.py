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
``tests/unit/engine/executors/unified/test_unified_fused_backward.py``), but the *reported* per-member losses are
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

    def deferred(self, out: torch.Tensor) -> torch.Tensor | None:
        """This step's (K, B) per-element losses when its reported values can be reduced
        later, many steps at once (:meth:`reduce`), else ``None`` (call :meth:`values`).
        Only the exact path's plain cross-entropy on the CPU defers (:func:`nll_mean`)."""
        defer = getattr(self._report, "__self__", None)
        if not isinstance(defer, _SharedLogSoftmax):
            return None
        return defer.elements(out)

    @staticmethod
    def reduce(elements: list[torch.Tensor]) -> torch.Tensor:
        """(L, K) reported values of L deferred steps (each (K, B) from :meth:`deferred`),
        in step order; bit for bit what :meth:`values` gave for each step."""
        if len({tuple(e.shape) for e in elements}) == 1:
            return nll_mean(torch.cat(elements)).view(len(elements), -1)
        return torch.stack([nll_mean(e) for e in elements])


#: Stacked targets whose backward is bit for bit each member's solo criterion backward
#: (checked by tests/unit/engine/executors/unified/test_unified_fused_backward.py): the exact path backpropagates
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
    (K·B, C) log-probabilities, and each member's value is bit for bit
    ``F.cross_entropy(out[k], target[k])`` (checked by the tests): on the CPU the mean of
    the per-element losses :meth:`train` already computed, in ``nll_loss``'s own summation
    order (:func:`nll_mean`, all K members at once, or many steps at once through
    :meth:`elements`); elsewhere one ``nll_loss`` call per member. At K = 64 on the CPU: one
    log-softmax per step, and ~25 small ops per up to 64 steps for the reported values,
    instead of 65 log-softmaxes and 64 criterion calls through the module per step."""

    def __init__(self) -> None:
        # (a weak reference to the stacked output, its detached (K, B, C) log-probabilities)
        # of the last training call. Weak: holding the output itself would keep its autograd
        # graph — and through it every parameter it was computed from — alive after the
        # step (verification's float64 copies of a large model: hundreds of MiB).
        self._last: tuple[weakref.ref, torch.Tensor, torch.Tensor] | None = None

    @staticmethod
    def _log_probs(out: torch.Tensor, k: int, b: int) -> torch.Tensor:
        return F.log_softmax(upcast_half(out.reshape(k * b, -1)), dim=1)

    def train(self, out: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        """(K, B, C) logits, (K, B) class indices → (K,) differentiable mean losses."""
        k, b = target.shape
        logp = self._log_probs(out, k, b)
        losses = F.nll_loss(logp, target.reshape(k * b), reduction="none")
        self._last = (weakref.ref(out), logp.detach().view(k, b, -1),
                      losses.detach().view(k, b))
        return losses.view(k, b).mean(dim=1)

    def elements(self, out: torch.Tensor) -> torch.Tensor | None:
        """The (K, B) per-element losses of the last :meth:`train` call when it was on
        ``out`` and :func:`nll_mean` reproduces their means (CPU, float32 or float64);
        else ``None``. Consumes the saved call."""
        last = self._last
        if (last is None or last[0]() is not out or last[2].device.type != "cpu"
                or last[2].dtype not in (torch.float32, torch.float64)):
            return None
        self._last = None
        return last[2]

    def report(self, out: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        """(K,) each member's cross-entropy, as its own criterion call computes it."""
        k, b = target.shape
        last, self._last = self._last, None
        if last is not None and last[0]() is out:
            if last[2].device.type == "cpu" and last[2].dtype in (torch.float32, torch.float64):
                return nll_mean(last[2])
            logp = last[1]
        else:  # not the output train() last saw (a caller reporting on its own)
            logp = self._log_probs(out, k, b).view(k, b, -1)
        return torch.stack([F.nll_loss(logp[i], target[i]) for i in range(k)])


def _ceil_log2(n: int) -> int:
    """ATen's ``CeilLog2`` (``ATen/native/cpu/utils.h``): 1 for n <= 2."""
    return 1 if n <= 2 else (n - 1).bit_length()


def nll_mean(elements: torch.Tensor) -> torch.Tensor:
    """Row means of per-element losses, summed in the order of ATen's CPU ``nll_loss``
    with ``reduction="mean"``: (N, B) float32/float64 → (N,), row n bit for bit
    ``F.nll_loss(logp_n, t_n)`` where ``elements[n] = F.nll_loss(logp_n, t_n,
    reduction="none")`` (no class weights, no ignored targets: the plain cross-entropy of
    :func:`_plain_cross_entropy` over class indices).

    Why: the kernel (``nll_loss_out_frame``, ``aten/src/ATen/native/LossNLL.cpp``) sums a
    row in a cascade — element 0 straight to the top of 8 levels, then runs of
    ``2**p`` elements (``p = max(4, CeilLog2(B) // 8)``: 16 for any real batch) summed one
    after the other, each completed run added to the level above, each completed group of
    ``2**p`` runs added further up, the levels' leftovers added bottom to top at the end,
    then divided by B — an order no vectorised sum follows. Reproduced here with one op per
    position in a run for **all** rows at once (~25 small ops for B = 64, whatever N is),
    instead of one ``nll_loss`` call per row: the exact path reports K members' losses of
    many steps in one call (``routes.VectorRoute``). A run padded with ``+0.0`` is the
    same sum (nothing here is ever ``-0.0``: every partial sum starts from ``+0.0``).
    ``tests/unit/engine/executors/unified/test_unified_fused_backward.py`` compares it with ``F.nll_loss`` over
    B = 1…300 and larger, float32 and float64, and the runtime caller uses it only where it
    has been checked (the CPU). CUDA's kernel reduces in another order: not this function.
    """
    n, b = elements.shape
    run = 1 << max(4, _ceil_log2(b) // 8)
    zero = elements.new_zeros(n)
    top = zero + elements[:, 0]  # element 0: pushed through every level at once
    leftovers: list[torch.Tensor] = []
    items = elements[:, 1:]
    level = 0
    while items.shape[1]:
        full, rest = divmod(items.shape[1], run)
        groups = full + (1 if rest else 0)
        runs = items.new_zeros(n, groups * run)
        runs[:, :items.shape[1]] = items
        # (run, N, groups): position i of every run of every row, one contiguous slice
        cols = runs.view(n, groups, run).permute(2, 0, 1).contiguous()
        acc = zero.unsqueeze(1) + cols[0]
        for i in range(1, run):
            acc += cols[i]
        if rest:  # the last run is not complete: it stays at this level
            leftovers.append(acc[:, full])
        items = acc[:, :full]
        level += 1
        if level == 7 and items.shape[1]:  # pushed onto element 0's level: not reproduced
            raise ValueError(f"nll_mean: a batch of {b} reaches the cascade's top level")
    out = zero
    for leftover in leftovers:
        out = out + leftover
    out = out + top
    return out / b


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
