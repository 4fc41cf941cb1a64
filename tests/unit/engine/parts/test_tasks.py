"""Task losses and metrics accumulated over batches."""

from __future__ import annotations

import math

import pytest
import torch
from sklearn.metrics import r2_score

from engine.parts import tasks
from engine.registry import TASKS


def test_registered_tasks():
    assert TASKS.get("classification").target_dtype == "long"
    assert TASKS.get("classification").metric == "accuracy"
    assert TASKS.get("regression").target_dtype == "float"
    assert TASKS.get("regression").metric == "r2"
    assert tasks.resolve_task(None, "diabetes").name == "regression"
    assert tasks.resolve_task("classification", "diabetes").name == "classification"


@pytest.mark.parametrize("out_shape", [(10, 1), (10,)])
@pytest.mark.parametrize("tgt_shape", [(10, 1), (10,)])
def test_r2_over_three_batches_matches_sklearn(out_shape, tgt_shape):
    gen = torch.Generator().manual_seed(1)
    y = torch.randn(30, generator=gen) * 3 + 5
    pred = y + torch.randn(30, generator=gen)
    total = None
    for i in range(3):
        sl = slice(10 * i, 10 * (i + 1))
        total = tasks.add_sums(total, tasks.score_sums("regression", pred[sl].reshape(out_shape),
                                                       y[sl].reshape(tgt_shape)))
    assert tasks.finalise("regression", total) == pytest.approx(
        r2_score(y.numpy(), pred.numpy()), abs=1e-6)


def test_r2_constant_targets_follows_sklearn():
    y = torch.full((4,), 2.0)
    exact = tasks.score_sums("regression", y.clone().unsqueeze(1), y)
    off = tasks.score_sums("regression", (y + 1).unsqueeze(1), y)
    assert tasks.finalise("regression", exact) == r2_score(y.numpy(), y.numpy()) == 1.0
    assert tasks.finalise("regression", off) == r2_score(y.numpy(), (y + 1).numpy()) == 0.0


def test_accuracy_matches_hand_count():
    logits = torch.tensor([[2.0, 0.1, 0.0], [0.0, 3.0, 0.0], [0.0, 0.0, 1.0],
                           [1.0, 0.0, 0.5], [0.0, 0.2, 0.1]])
    target = torch.tensor([0, 1, 0, 2, 1])  # hits: rows 0, 1, 4
    total = tasks.add_sums(None, tasks.score_sums("classification", logits[:2], target[:2]))
    total = tasks.add_sums(total, tasks.score_sums("classification", logits[2:], target[2:]))
    assert total["correct"].dtype == torch.int64
    assert tasks.finalise("classification", total) == pytest.approx(3 / 5)


def test_nothing_evaluated_is_nan():
    assert math.isnan(tasks.finalise("classification", None))
    assert math.isnan(tasks.finalise("regression", {}))


def test_regression_loss_does_not_broadcast():
    out = torch.tensor([[1.0], [2.0], [4.0]], requires_grad=True)
    y = torch.tensor([1.0, 2.0, 3.0])
    loss = tasks.loss_fn("regression")(out, y)
    assert loss.item() == pytest.approx(1 / 3)  # (B, B) broadcasting would give 2.0
    loss.backward()
    assert out.grad.shape == (3, 1)
    with pytest.raises(ValueError, match="does not match"):
        tasks.loss_fn("regression")(torch.zeros(3, 2), y)


def test_classification_loss_is_cross_entropy():
    logits = torch.tensor([[0.0, 0.0], [1.0, -1.0]])
    y = torch.tensor([1, 0])
    expected = torch.nn.functional.cross_entropy(logits, y)
    assert tasks.loss_fn("classification")(logits, y).item() == pytest.approx(expected.item())


def test_half_precision_regression_output_is_upcast():
    out = torch.tensor([[1.0], [2.0]], dtype=torch.bfloat16)
    loss = tasks.loss_fn("regression")(out, torch.tensor([1.0, 2.5]))
    assert loss.dtype == torch.float32
