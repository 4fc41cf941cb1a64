"""The throughput-vs-K curve of a K sweep and its knee (issue 23). Pure analysis of loaded
rows (:func:`engine.results.load.load_runs`): pandas and numpy, no torch, no UI.

Curves
    A curve is one strategy on one workload and machine: the ok group rows sharing the
    provenance key (:mod:`engine.results.analysis`) and ``exp_id``, ``executor``,
    ``compile_mode`` and the variant columns (``scheduler``, ``features``, ``rung``,
    ``mp_start``, ``tune_actors``), at two or more distinct ``K``. Each K is a
    :class:`Point`: its rows' mean throughput, their number (passes), energy per trained
    model (``energy_group / K``, mean over the rows that measured it; NaN when none did —
    never 0) and peak memory (``vram_peak_mb`` on a GPU, else the process tree's
    ``rss_peak_mb``; the largest over the rows).

Throughput
    Training throughput in samples/s: ``train_throughput_sps`` (samples trained ÷ the
    wall time during which a job was training) when every row of the curve has it, else
    ``throughput_group`` (samples ÷ ``T_group``: the harness's rows, which lack the
    former). :attr:`Curve.metric` names the one used.

The knee (:func:`find_knee`)
    Between two points K_a < K_b the throughput gain *per doubling* of K is
    ``(X(K_b) / X(K_a)) ** (1 / log2(K_b / K_a)) - 1`` (a sweep over powers of two
    compares each K with its double; another list is normalised to a doubling). The
    **knee** is the smallest K of the sweep beyond which doubling K gains less than
    ``fraction`` (default :data:`DEFAULT_FRACTION`, 10 %): from the knee to *every* larger
    K of the sweep the gain per doubling is below the fraction. Comparing with every larger
    K, not only the next one, keeps a dip from faking a knee (462, 123, 113, 153, 134
    samples/s at K = 1 … 16 has its knee at 1, not at 8 after the +35 % step 4 → 8) and
    lets a later rise veto an early plateau. The sweep's largest K has nothing beyond it:
    when no smaller K qualifies there is no knee inside the sweep (``None``: "still
    growing at K = max; sweep further"). A larger fraction puts the knee at a smaller or
    equal K; :attr:`Curve.knees` gives it for each of :data:`FRACTIONS`, so a reader sees
    how the choice moves it. The **best K** is the K of the highest mean throughput.

Intervals
    With at least :data:`~engine.results.analysis.MIN_BOOT_N` rows at every K, each
    point's mean gets a percentile-bootstrap 95 % interval (its rows resampled with
    replacement, ``n_boot`` replicates from ``numpy.random.default_rng([seed, K, n])``),
    and the knee and the best K are recomputed on every replicate of the whole curve:
    their 2.5th and 97.5th percentiles (as K values of the sweep) bound them. Fewer rows:
    NaN / None — an interval from two passes would be invented.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from engine.results.analysis import CI_PERCENTILES, MIN_BOOT_N, provenance_columns
from engine.results.derived import (  # noqa: F401 - gain_per_doubling, find_knee: re-exported
    DEFAULT_FRACTION,
    derived,
    find_knee,
    gain_per_doubling,
)

#: The fractions :attr:`Curve.knees` reports (how the knee moves with the rule).
FRACTIONS: tuple[float, ...] = (0.05, 0.10, 0.20, 0.30)
#: What identifies one strategy's curve within a provenance key (K varies along it).
CURVE_COLUMNS: tuple[str, ...] = ("exp_id", "executor", "compile_mode", "scheduler",
                                  "features", "rung", "mp_start", "tune_actors")


@dataclass(frozen=True)
class Point:
    """One K of a curve. Throughputs in samples/s, energy in J, memory in MiB."""

    K: int
    n: int
    throughput: float
    low: float = math.nan
    high: float = math.nan
    energy_per_model_j: float = math.nan
    energy_n: int = 0
    mem_peak_mb: float = math.nan
    T_group_mean: float = math.nan
    #: Distinct configurations (``config_key``) pooled at this K (1 for a plain sweep).
    configs: int = 1


@dataclass(frozen=True)
class Curve:
    """One strategy's throughput against K on one workload and machine (module doc)."""

    provenance: dict[str, Any]
    cell: dict[str, Any]
    metric: str
    mem_metric: str
    points: tuple[Point, ...]
    fraction: float
    gains: tuple[float, ...]
    knee: int | None
    best_k: int
    knees: dict[float, int | None] = field(default_factory=dict)
    #: Bootstrap bounds of the knee (None above: beyond the sweep) and of the best K;
    #: all None without enough passes.
    knee_low: int | None = None
    knee_high: int | None = None
    best_low: int | None = None
    best_high: int | None = None
    has_intervals: bool = False

    @property
    def exp_id(self) -> str:
        return str(self.cell["exp_id"])

    @property
    def executor(self) -> str:
        return str(self.cell["executor"])

    @property
    def label(self) -> str:
        """``unified_model`` or ``unified_model rung B compile=default``."""
        parts = [self.executor]
        for column in ("scheduler", "features", "mp_start", "tune_actors"):
            if self.cell.get(column):
                parts.append(str(self.cell[column]))
        if self.cell.get("rung"):
            parts.append(f"rung {self.cell['rung']}")
        if self.cell.get("compile_mode", "off") != "off":
            parts.append(f"compile={self.cell['compile_mode']}")
        return " ".join(parts)

    @property
    def ks(self) -> list[int]:
        return [p.K for p in self.points]

    def point(self, k: int) -> Point:
        return next(p for p in self.points if p.K == k)

    @property
    def knee_text(self) -> str:
        """``K = 8`` / ``K = 8 [4, 16]`` / ``not reached (still growing at K = 64)``."""
        if self.knee is None:
            return (f"not reached (still gaining >= {self.fraction:.0%} per doubling at "
                    f"K = {self.ks[-1]}: sweep further)")
        text = f"K = {self.knee}"
        if self.has_intervals:
            high = "beyond the sweep" if self.knee_high is None else str(self.knee_high)
            text += f" [{self.knee_low}, {high}]"
        return text


def per_doubling_gains(ks: Sequence[float], throughputs: Sequence[float]) -> list[float]:
    """The throughput gain of each step ``ks[i] -> ks[i+1]`` normalised to a doubling of K
    (module doc), as fractions (0.25 = +25 %; negative: throughput fell): the tables'
    "gain / doubling" column."""
    gain = derived("gain_per_doubling").compute
    return [gain(ks[i], throughputs[i], ks[i + 1], throughputs[i + 1])
            for i in range(len(ks) - 1)]


def _mean_intervals(values: list[np.ndarray], ks: list[int], n_boot: int, seed: int
                    ) -> np.ndarray:
    """Bootstrap replicate means (points × n_boot) of each point's values."""
    out = np.empty((len(values), n_boot))
    for i, (vals, k) in enumerate(zip(values, ks, strict=True)):
        rng = np.random.default_rng([seed, int(k), len(vals)])
        draws = rng.integers(0, len(vals), size=(n_boot, len(vals)))
        out[i] = vals[draws].mean(axis=1)
    return out


def _k_bounds(choices: np.ndarray, ks: list[int]) -> tuple[int | None, int | None]:
    """2.5th and 97.5th percentiles of replicate K choices (``-1`` = none in the sweep,
    ordered above every K), as K values of the sweep (None: beyond the sweep)."""
    order = np.where(choices < 0, max(ks) + 1, choices)
    low, high = np.percentile(order, CI_PERCENTILES, method="nearest")
    as_k = [None if v > max(ks) else int(v) for v in (low, high)]
    return as_k[0], as_k[1]


def build_curve(provenance: dict[str, Any], cell: dict[str, Any], rows: pd.DataFrame,
                fraction: float = DEFAULT_FRACTION, n_boot: int = 2000, seed: int = 0
                ) -> Curve | None:
    """The curve of one strategy's ok rows ``rows`` (columns ``K``, the throughput
    columns, ``energy_group``, ``vram_peak_mb``, ``rss_peak_mb``, ``T_group``,
    ``config_key``); None with fewer than two distinct K that have a throughput."""
    metric = "train_throughput_sps" if rows["train_throughput_sps"].notna().all() \
        else "throughput_group"
    rows = rows[rows[metric].notna() & rows["K"].notna()]
    mem_metric = "vram_peak_mb" if rows["vram_peak_mb"].notna().any() else "rss_peak_mb"
    by_k = sorted(rows.groupby("K"), key=lambda item: item[0])
    if len(by_k) < 2:
        return None
    ks = [int(k) for k, _ in by_k]
    samples = [group[metric].to_numpy(float) for _, group in by_k]
    means = [float(v.mean()) for v in samples]
    enough = n_boot > 0 and all(len(v) >= MIN_BOOT_N for v in samples)
    replicates = _mean_intervals(samples, ks, n_boot, seed) if enough else None
    points = []
    for i, (k, group) in enumerate(by_k):
        energy = derived("energy_per_model_j").compute(group["energy_group"],
                                                       group["K"]).dropna()
        low = high = math.nan
        if replicates is not None:
            low, high = (float(x) for x in np.percentile(replicates[i], CI_PERCENTILES))
        points.append(Point(
            K=int(k), n=len(group), throughput=means[i], low=low, high=high,
            energy_per_model_j=float(energy.mean()) if len(energy) else math.nan,
            energy_n=len(energy),
            mem_peak_mb=float(group[mem_metric].max()) if group[mem_metric].notna().any()
            else math.nan,
            T_group_mean=float(group["T_group"].mean()),
            configs=max(1, group["config_key"].replace("", np.nan).nunique())))
    knee_of = derived("knee").compute
    knee = knee_of(ks, means, fraction)
    best = derived("best_k").compute(ks, means)
    extra: dict[str, Any] = {}
    if replicates is not None:
        knees = np.array([knee_of(ks, replicates[:, b], fraction) or -1
                          for b in range(replicates.shape[1])])
        bests = np.array(ks)[np.argmax(replicates, axis=0)]
        extra = dict(zip(("knee_low", "knee_high"), _k_bounds(knees, ks), strict=True))
        extra.update(zip(("best_low", "best_high"), _k_bounds(bests, ks), strict=True))
        extra["has_intervals"] = True
    return Curve(provenance=provenance, cell=cell, metric=metric, mem_metric=mem_metric,
                 points=tuple(points), fraction=fraction,
                 gains=tuple(per_doubling_gains(ks, means)), knee=knee, best_k=best,
                 knees={f: knee_of(ks, means, f) for f in FRACTIONS}, **extra)


def curves(runs: Any, fraction: float = DEFAULT_FRACTION, by_campaign: bool = False,
           n_boot: int = 2000, seed: int = 0) -> list[Curve]:
    """Every curve in ``runs`` (a :class:`~engine.results.load.Runs` or its ``groups``
    frame): strategies with ok rows at two or more K, in load order (module doc)."""
    groups = runs.groups if hasattr(runs, "groups") else runs
    if not 0 < fraction < 1:
        raise ValueError(f"fraction must be in (0, 1), got {fraction}")
    prov = provenance_columns(by_campaign)
    keys = prov + list(CURVE_COLUMNS)
    wanted = ["K", "T_group", "throughput_group", "train_throughput_sps", "energy_group",
              "vram_peak_mb", "rss_peak_mb", "config_key", "row"]
    g = groups[(groups["status"] == "ok")]
    g = g.assign(**{c: (np.nan if c != "config_key" else "") for c in wanted
                    if c not in g.columns})
    out = []
    for key, rows in g.groupby(keys, sort=False, dropna=False):
        if rows["K"].nunique() < 2:
            continue
        values = dict(zip(keys, key, strict=True))
        curve = build_curve({c: values[c] for c in prov},
                            {c: values[c] for c in CURVE_COLUMNS}, rows, fraction, n_boot,
                            seed)
        if curve is not None:
            out.append(curve)
    return out


def curve_table(curve: Curve) -> pd.DataFrame:
    """One row per K: ``K``, ``n``, ``throughput`` (samples/s) with ``low``/``high``,
    ``gain_per_doubling`` (from the previous K; NaN at the first), energy per model (J),
    peak memory (MiB), ``T_group_mean`` (s), and ``mark`` (``knee``, ``best``)."""
    gains = [math.nan, *curve.gains]
    rows = []
    for point, gain in zip(curve.points, gains, strict=True):
        marks = [m for m, k in (("knee", curve.knee), ("best", curve.best_k)) if k == point.K]
        rows.append({"K": point.K, "n": point.n, "throughput": point.throughput,
                     "low": point.low, "high": point.high, "gain_per_doubling": gain,
                     "energy_per_model_j": point.energy_per_model_j,
                     "mem_peak_mb": point.mem_peak_mb, "T_group_mean": point.T_group_mean,
                     "mark": ", ".join(marks)})
    return pd.DataFrame(rows)
