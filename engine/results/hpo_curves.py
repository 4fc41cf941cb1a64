"""Time to best per hpo cell, and its best-so-far curves (issue 25), as the report and
the export show them. A pure function of loaded rows (:func:`engine.results.load.load_runs`):
pandas, no torch, no UI.

A cell is what :func:`engine.results.analysis.speedups` calls one (provenance key ×
:data:`~engine.results.analysis.CELL_COLUMNS`), restricted to ok ``hpo`` group rows. Per
cell: its passes, each with ``time_to_best_s``, ``best_val_metric``, ``best_trial``,
``trials_stopped``, ``T_group`` and the best-so-far curve from ``executor_info.best_so_far``
(``[[seconds since the group window's start, best metric so far], ...]`` at each
improvement; ``engine.results.hpo_best``); the aggregates the report prints (mean, min and
max time to best, mean best metric, the trial most often best and in how many passes, mean
trials stopped). A missing value stays NaN / None, never 0: a pass without a validation has
no curve and no time to best.

The **representative pass** of a cell (the one its terminal chart draws) is the pass of
median time to best (the lower median with an even count; the first pass when none has
one): one real curve, not an average of curves whose steps fall at different times.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from engine.results.analysis import CELL_COLUMNS, provenance_columns


@dataclass(frozen=True)
class HpoPass:
    """One ok group row of an hpo cell. Seconds from the group window's start."""

    group_id: str
    pass_index: int | None
    attempt: int | None
    time_to_best_s: float
    best_val_metric: float
    best_trial: str | None
    trials_stopped: float
    T_group: float
    curve: tuple[tuple[float, float], ...] = ()


@dataclass(frozen=True)
class HpoCell:
    """One hpo cell: its identity, the metric its trials were judged on, and its passes."""

    provenance: dict[str, Any]
    cell: dict[str, Any]
    metric: str | None
    mode: str | None
    passes: tuple[HpoPass, ...] = field(default_factory=tuple)

    @property
    def label(self) -> str:
        """``ray asha`` / ``unified_model sha amp-bf16`` (the precision when not fp32)."""
        parts = [str(self.cell["executor"])]
        for column in ("scheduler", "features", "mp_start", "tune_actors"):
            if self.cell.get(column):
                parts.append(str(self.cell[column]))
        if self.cell.get("rung"):
            parts.append(f"rung {self.cell['rung']}")
        if self.cell.get("compile_mode", "off") not in ("off", ""):
            parts.append(f"compile={self.cell['compile_mode']}")
        if self.cell.get("precision") not in (None, "", "fp32"):
            parts.append(str(self.cell["precision"]))
        return " ".join(parts)

    def _values(self, name: str) -> list[float]:
        return [v for v in (getattr(p, name) for p in self.passes) if math.isfinite(v)]

    @property
    def n(self) -> int:
        return len(self.passes)

    @property
    def ttb_mean(self) -> float:
        values = self._values("time_to_best_s")
        return sum(values) / len(values) if values else math.nan

    @property
    def ttb_range(self) -> tuple[float, float]:
        values = self._values("time_to_best_s")
        return (min(values), max(values)) if values else (math.nan, math.nan)

    @property
    def best_metric_mean(self) -> float:
        values = self._values("best_val_metric")
        return sum(values) / len(values) if values else math.nan

    @property
    def trials_stopped_mean(self) -> float:
        values = self._values("trials_stopped")
        return sum(values) / len(values) if values else math.nan

    @property
    def best_trial(self) -> tuple[str | None, int]:
        """The trial most often best over the passes and in how many (first seen wins a
        tie); ``(None, 0)`` when no pass named one."""
        counts = Counter(p.best_trial for p in self.passes if p.best_trial)
        if not counts:
            return None, 0
        return counts.most_common(1)[0]

    @property
    def representative(self) -> HpoPass | None:
        """The pass of median time to best (module doc); None without passes."""
        timed = sorted((p for p in self.passes if math.isfinite(p.time_to_best_s)),
                       key=lambda p: p.time_to_best_s)
        if timed:
            return timed[(len(timed) - 1) // 2]
        return self.passes[0] if self.passes else None


def _curve(info: Any) -> tuple[str | None, str | None, tuple[tuple[float, float], ...]]:
    """``executor_info`` (JSON text) → metric, mode and the curve (``()`` without one)."""
    if not isinstance(info, str) or not info.strip():
        return None, None, ()
    try:
        found = json.loads(info).get("best_so_far") or {}
    except (ValueError, AttributeError):
        return None, None, ()
    points = []
    for point in found.get("curve") or []:
        try:
            t, v = float(point[0]), float(point[1])
        except (TypeError, ValueError, IndexError):
            continue
        if math.isfinite(t) and math.isfinite(v):
            points.append((t, v))
    return found.get("metric"), found.get("mode"), tuple(points)


def _number(value: Any) -> float:
    try:
        out = float(value)
    except (TypeError, ValueError):
        return math.nan
    return out


def _int(value: Any) -> int | None:
    number = _number(value)
    return int(number) if math.isfinite(number) else None


def key_text(values: dict[str, Any], columns: list[str]) -> tuple[str, ...]:
    """A cell key as text, NaN and None as ``""``, integral floats as integers: the same for
    the rows here and the cells of :func:`~engine.results.analysis.speedups`."""
    out = []
    for column in columns:
        value = values.get(column)
        if value is None or (isinstance(value, float) and math.isnan(value)):
            out.append("")
        elif isinstance(value, float) and value.is_integer():
            out.append(str(int(value)))
        else:
            out.append(str(value))
    return tuple(out)


def hpo_cells(runs: Any, by_campaign: bool = False) -> list[HpoCell]:
    """The hpo cells of ``runs`` (a :class:`~engine.results.load.Runs`), in load order,
    each with its ok passes (module doc); ``[]`` without an ok hpo row, or when no hpo row
    recorded a time to best or a curve (rows older than issue 25, the harness's)."""
    groups = runs.groups
    if not len(groups) or "mode" not in groups.columns:
        return []
    ok = groups[(groups["status"] == "ok") & (groups["mode"] == "hpo")]
    if not len(ok):
        return []
    prov = provenance_columns(by_campaign)
    keys = prov + [c for c in CELL_COLUMNS if c in ok.columns]
    found: dict[tuple[str, ...], dict[str, Any]] = {}
    for row in ok.to_dict("records"):
        key = key_text(row, keys)
        entry = found.setdefault(key, {"row": row, "passes": [], "metric": None,
                                       "mode": None})
        metric, mode, curve = _curve(row.get("executor_info"))
        entry["metric"] = entry["metric"] or metric
        entry["mode"] = entry["mode"] or mode
        entry["passes"].append(HpoPass(
            group_id=str(row.get("group_id") or ""), pass_index=_int(row.get("pass")),
            attempt=_int(row.get("attempt")),
            time_to_best_s=_number(row.get("time_to_best_s")),
            best_val_metric=_number(row.get("best_val_metric")),
            best_trial=str(row.get("best_trial") or "") or None,
            trials_stopped=_number(row.get("trials_stopped")),
            T_group=_number(row.get("T_group")), curve=curve))
    if not any(p.curve or math.isfinite(p.time_to_best_s)
               for entry in found.values() for p in entry["passes"]):
        return []  # hpo rows that never measured it (the fugue harness's): nothing to show
    out = []
    for entry in found.values():
        row = entry["row"]
        out.append(HpoCell(provenance={p: row.get(p) for p in prov},
                           cell={c: row.get(c) for c in CELL_COLUMNS},
                           metric=entry["metric"], mode=entry["mode"],
                           passes=tuple(entry["passes"])))
    return out


def ttb_speedups(table: pd.DataFrame, by_campaign: bool = False
                 ) -> dict[tuple[str, ...], tuple[float, str]]:
    """``(ttb_speedup, ttb_baseline)`` per cell key (:func:`key_text`) of a
    :func:`~engine.results.analysis.speedups` table (time to best over seq under the same
    scheduler; the reason in ``ttb_baseline`` when there is none)."""
    if not len(table) or "ttb_speedup" not in table.columns:
        return {}
    keys = provenance_columns(by_campaign) + [c for c in CELL_COLUMNS if c in table.columns]
    return {key_text(r, keys): (_number(r.get("ttb_speedup")), str(r.get("ttb_baseline") or ""))
            for r in table.to_dict("records")}
