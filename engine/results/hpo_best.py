"""Time to best for hpo groups (issue 25): from each trial's validations (when, value), the
group's best metric, which trial reached it, how soon the best was known, and the
best-so-far curve. Torch-free, pure.

``time_to_best_s``: seconds from the group window's start until some trial's validation
metric first came within :data:`EPSILON` (relative) of the group's final best — for a
loss, ``value <= best + EPSILON·|best|``; for R², ``value >= best - EPSILON·|best|``. The
ε keeps a last-digit improvement late in the run from hiding that the configuration was
known much earlier; 1 % is within the run-to-run spread of these small models.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

#: Relative tolerance of ``time_to_best_s`` (see the module docstring).
EPSILON = 0.01


def best_so_far(trials: Iterable[tuple[str, Sequence[tuple[float, float]]]], mode: str
                ) -> dict[str, Any] | None:
    """``trials``: (job id, [(seconds since the window's start, metric), ...]) per trial;
    ``mode`` ``min`` or ``max``. Returns ``best_trial``, ``best_val_metric``,
    ``time_to_best_s`` and ``curve`` (``[[t, best so far], ...]`` at each improvement), or
    None when no trial validated (missing is empty, never 0)."""
    points = sorted((t, v, job) for job, pts in trials for t, v in pts
                    if t is not None and v is not None and math.isfinite(v))
    if not points:
        return None
    pick = min if mode == "min" else max
    best = pick(v for _, v, _ in points)
    tol = EPSILON * abs(best)
    near = [t for t, v, _ in points if (v <= best + tol if mode == "min" else v >= best - tol)]
    best_trial = next(job for t, v, job in points if v == best)
    curve: list[list[float]] = []
    for t, v, _ in points:
        if not curve or (v < curve[-1][1] if mode == "min" else v > curve[-1][1]):
            curve.append([t, v])
    return {"best_trial": best_trial, "best_val_metric": best, "time_to_best_s": near[0],
            "curve": curve}
