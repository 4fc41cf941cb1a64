"""How far a cell's validation accuracy and loss may lie outside seq's spread and still be
``within`` (the report's ``parity`` verdict, issue 45), per precision.

The numbers are docs/fidelity.md's "Precision" table (the columns "final train loss" and
"val accuracy") as data: this module is their one source. The table's cells are checked
against it (``tests/unit/engine/results/test_parity_loss.py`` fails when the two drift),
and the precision tests (``tests/unit/engine/train/test_precision_training.py``) assert
the same band. Why the readers of results own it and not the contract module
(``engine.executors.unified.contract``): the import contracts keep the results side from
importing the executors, while the executors may import this.

Torch-free, no imports of the engine.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Band:
    """The widening of seq's [min, max] for one precision.

    ``accuracy``: absolute (accuracy is a fraction, R² for regression); ``loss``: relative
    to the bound's magnitude (a loss's scale depends on the task), so the loss range
    ``[lo, hi]`` becomes ``[lo − loss·|lo|, hi + loss·|hi|]``."""

    accuracy: float
    loss: float


#: fp32 and tf32 (tf32 runs fp32 on a CPU): "equal" in the table — no widening; seq's own
#: spread over passes is the noise the verdict allows.
EXACT = Band(accuracy=0.0, loss=0.0)
#: The half precisions: val accuracy within 0.05, loss within 1 %.
HALF = Band(accuracy=0.05, loss=0.01)

#: Per ``precision`` value (what ran, docs/measurement.md "Precision").
PRECISION_BANDS: dict[str, Band] = {
    "fp32": EXACT, "tf32": EXACT, "amp-fp16": HALF, "amp-bf16": HALF, "bf16": HALF,
}


def band(precision: object) -> Band:
    """The band of ``precision``; :data:`EXACT` (no widening claimed) for a value the
    table has no row for (a plugin's precision, a missing one)."""
    return PRECISION_BANDS.get(str(precision), EXACT)
