"""The points a terminal chart draws, prepared without plotext: missing values (None, NaN)
told apart, long series reduced to what a terminal can show, best-so-far curves as step
corners. Used by :mod:`fugue_tui.report.charts` and the hpo report."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np


def is_missing(value: Any) -> bool:
    """True for None, NaN, ±inf and anything that is not a number: never drawn, never 0."""
    if value is None:
        return True
    try:
        return not math.isfinite(float(value))
    except (TypeError, ValueError):
        return True


def downsample(xs: Sequence[float], ys: Sequence[float], buckets: int
               ) -> tuple[np.ndarray, np.ndarray]:
    """Reduce a series to at most ``2 * buckets`` points, keeping its shape.

    Min/max per bucket: the points (NaN y dropped first) are cut into ``buckets``
    consecutive runs of (nearly) equal length, and each run is replaced by its minimum and
    its maximum point, in x order — so every spike survives and the global min and max are
    always kept (a bucket mean would flatten them). A series with at most ``2 * buckets``
    points is returned unchanged.
    """
    x = np.asarray(xs, dtype=float)
    y = np.asarray(ys, dtype=float)
    keep = np.isfinite(y) & np.isfinite(x)
    x, y = x[keep], y[keep]
    buckets = max(1, int(buckets))
    if len(y) <= 2 * buckets:
        return x, y
    edges = np.linspace(0, len(y), buckets + 1).astype(int)
    out_x: list[np.ndarray] = []
    out_y: list[np.ndarray] = []
    for lo, hi in zip(edges[:-1], edges[1:], strict=False):
        if hi <= lo:
            continue
        seg = y[lo:hi]
        picks = sorted({lo + int(np.argmin(seg)), lo + int(np.argmax(seg))})
        out_x.append(x[picks])
        out_y.append(y[picks])
    return np.concatenate(out_x), np.concatenate(out_y)


def step_points(curve: Sequence[tuple[float, float]], end: float | None = None
                ) -> tuple[list[float], list[float]]:
    """A best-so-far curve (``[(t, best), ...]`` at each improvement) as the corners of its
    step line: each value holds until the next improvement, the last until ``end`` (the
    group's end, when later than the last improvement)."""
    xs: list[float] = []
    ys: list[float] = []
    for i, (t, v) in enumerate(curve):
        if i:
            xs.append(float(t))
            ys.append(ys[-1])
        xs.append(float(t))
        ys.append(float(v))
    if xs and end is not None and not is_missing(end) and end > xs[-1]:
        xs.append(float(end))
        ys.append(ys[-1])
    return xs, ys
