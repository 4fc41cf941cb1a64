"""Round axis ticks for the terminal charts (:mod:`fugue_tui.report.charts`): steps of 1, 2
or 5 × 10^k, labelled in plain decimals. Pure arithmetic, no plotext."""

from __future__ import annotations

import math


def nice_ticks(low: float, high: float, most: int, cover: bool = False
               ) -> tuple[list[float], list[str]]:
    """At most ``most`` (≥ 2) round tick positions (steps of 1, 2 or 5 × 10^k) in
    ``[low, high]`` — or, with ``cover``, from the round value at or below ``low`` to the one
    at or above ``high`` (an axis then spans its ticks) — and their labels in plain decimals
    with the step's precision (never ``4.8e2``, never uneven labels for even rows)."""
    most = max(2, int(most))
    span = high - low
    if not math.isfinite(span) or span <= 0:
        return [low], [_plain(low, 1.0)]
    power = 10 ** math.floor(math.log10(span / (most - 1)))
    for step in (m * power * scale for scale in (1, 10, 100) for m in (1, 2, 5)):
        if cover:
            first = math.floor(low / step + 1e-9) * step
            last = math.ceil(high / step - 1e-9) * step
        else:
            first = math.ceil(low / step - 1e-9) * step
            last = math.floor(high / step + 1e-9) * step
        count = int(round((last - first) / step)) + 1
        if count <= most:
            break
    ticks = [round(first + i * step, 12) for i in range(count)]
    return ticks, [_plain(t, step) for t in ticks]


def _plain(value: float, step: float) -> str:
    decimals = max(0, -math.floor(math.log10(step))) if step > 0 else 0
    return f"{value:,.{decimals}f}"
