"""Tasks: what a job's loss is and what it reports as "accuracy".

Registered at import (torch-free): ``classification`` (cross-entropy over class indices,
metric = hit rate) and ``regression`` (mean squared error, metric = R²). The helpers below
import torch inside themselves.

Metrics accumulate on the device without host synchronisation: ``score_sums`` returns
0-dim/1-dim tensors that are added batch by batch (``add_sums``) and turned into one float
only at the end (``finalise``, the single ``.item()``-like transfer). R² is computed from
sums, so it is exact over the whole evaluated set, not an average of per-batch R²::

    R² = 1 - SS_res / SS_tot,  SS_res = Σ (y - ŷ)²,  SS_tot = Σ (y - ȳ)² = Σ y² - (Σ y)² / n

with ȳ the mean of the evaluated targets (as ``sklearn.metrics.r2_score``), averaged
uniformly over output columns when a model has several. Sums are float64 (float32 on
Apple's ``mps``, which has no float64) so that ``Σ y² - (Σ y)²/n`` keeps its digits.
"""

from __future__ import annotations

import math
from typing import Any

from engine.registry import TASKS, TaskSpec, register_task


def _torch() -> Any:
    import torch

    return torch


def _cross_entropy() -> Any:
    import torch

    return torch.nn.CrossEntropyLoss()


def _mse() -> Any:
    import torch

    return torch.nn.MSELoss()


# stacked_target: the per-member (K,) loss over stacked outputs (engine.executors.unified.losses).
register_task(TaskSpec("classification", _cross_entropy, target_dtype="long", metric="accuracy",
                       stacked_target="engine.executors.unified.losses:stacked_cross_entropy"))
register_task(TaskSpec("regression", _mse, target_dtype="float", metric="r2",
                       stacked_target="engine.executors.unified.losses:stacked_mse"))


def _spec(task: str | TaskSpec) -> TaskSpec:
    return task if isinstance(task, TaskSpec) else TASKS.get(task)


def resolve_task(task: str | None, dataset: str, where: str = "") -> TaskSpec:
    """The task a job trains: ``task`` when given, else the dataset's default task.

    Raises:
        ConfigError: unknown task or dataset (nearest valid name in the message).
    """
    from engine.registry import DATASETS

    name = task if task else DATASETS.get(dataset, where).task
    return TASKS.get(name, where)


def prepare(task: str | TaskSpec, output: Any, target: Any) -> tuple[Any, Any]:
    """Shape ``output`` and ``target`` for the task's loss and scores.

    classification: ``output`` (B, C) logits, ``target`` (B,) int64, returned unchanged.
    regression: ``output`` (B,) or (B, k), ``target`` (B,) or (B, k) → both (B, k); the
    target is cast to float32 and a half-precision output (autocast) is upcast to float32,
    because MSE on float16 loses the small residuals late in training.

    Raises:
        ValueError: regression output and target with different numbers of elements (a
            (B, 1) output against a (B,) target would otherwise broadcast to (B, B)).
    """
    spec = _spec(task)
    if spec.target_dtype != "float":
        return output, target
    if output.dim() == 1:
        output = output.unsqueeze(1)
    if target.dim() == 1:
        target = target.unsqueeze(1)
    if output.shape != target.shape:
        raise ValueError(f"regression output {tuple(output.shape)} does not match target "
                         f"{tuple(target.shape)}")
    if output.dtype in (_torch().float16, _torch().bfloat16):
        output = output.float()
    return output, target.to(dtype=output.dtype)


def loss_fn(task_name: str | TaskSpec) -> Any:
    """A loss callable ``loss(output, target) -> 0-dim tensor`` (mean over the batch).

    Wraps the task's criterion with ``prepare`` so that a (B, 1) regression output against
    (B,) targets gives a per-sample MSE instead of a broadcast (B, B) one.

    Raises:
        ConfigError: unknown task.
    """
    spec = _spec(task_name)
    criterion = spec.criterion()

    def loss(output: Any, target: Any) -> Any:
        out, tgt = prepare(spec, output, target)
        return criterion(out, tgt)

    loss.criterion = criterion  # type: ignore[attr-defined]  # for reduction/introspection
    loss.task = spec.name  # type: ignore[attr-defined]
    return loss


def _sum_dtype(device: Any) -> Any:
    torch = _torch()
    return torch.float32 if device.type == "mps" else torch.float64


def score_sums(task: str | TaskSpec, output: Any, target: Any) -> dict[str, Any]:
    """Sufficient statistics of the task's metric for one batch, as tensors on the device.

    classification → ``{"correct": int64 0-dim, "count": int64 0-dim}`` (argmax hits).
    regression → ``{"sse": (k,), "sum_y": (k,), "sum_y2": (k,), "count": 0-dim}`` in
    float64 (float32 on mps), k output columns. No host synchronisation: the count is
    made with a fill kernel, not copied from the host.

    Call under ``torch.no_grad()``; ``output`` may be detached or not.
    """
    torch = _torch()
    spec = _spec(task)
    output = output.detach()
    n = target.shape[0]
    if spec.metric == "accuracy":
        correct = (output.argmax(dim=1) == target).sum()
        return {"correct": correct,
                "count": torch.full((), n, dtype=torch.int64, device=output.device)}
    out, tgt = prepare(spec, output, target)
    dtype = _sum_dtype(out.device)
    out, tgt = out.to(dtype), tgt.to(dtype)
    return {
        "sse": ((tgt - out) ** 2).sum(dim=0),
        "sum_y": tgt.sum(dim=0),
        "sum_y2": (tgt * tgt).sum(dim=0),
        "count": torch.full((), n, dtype=dtype, device=out.device),
    }


def add_sums(total: dict[str, Any] | None, sums: dict[str, Any]) -> dict[str, Any]:
    """``total + sums`` key by key (``total`` may be ``None`` for the first batch)."""
    if total is None:
        return dict(sums)
    return {key: total[key] + value for key, value in sums.items()}


def finalise(task: str | TaskSpec, sums: dict[str, Any] | None) -> float:
    """The metric from accumulated sums: hit rate in [0, 1], or R² (≤ 1, may be negative).

    Returns NaN when nothing was evaluated. For R² with constant targets (SS_tot = 0) it
    follows ``sklearn.metrics.r2_score``: 1.0 for a perfect fit, else 0.0. One host transfer.
    """
    spec = _spec(task)
    if not sums:
        return math.nan
    if spec.metric == "accuracy":
        count = int(sums["count"])
        return float(sums["correct"]) / count if count else math.nan
    n = float(sums["count"])
    if n == 0:
        return math.nan
    sse = sums["sse"].cpu().double()
    sum_y2 = sums["sum_y2"].cpu().double()
    ss_tot = sum_y2 - sums["sum_y"].cpu().double() ** 2 / n
    scores = []
    for res, tot, y2 in zip(sse.tolist(), ss_tot.tolist(), sum_y2.tolist(), strict=False):
        # Σy² - (Σy)²/n of constant targets is a rounding residue, not exactly 0.
        if tot > 1e-12 * max(y2, 1e-300):
            scores.append(1.0 - res / tot)
        else:
            scores.append(1.0 if res == 0 else 0.0)
    return sum(scores) / len(scores)
