"""The derived metrics: every value the readers of results form from measured columns
(speedups, energy per model, time to best, the knee, ...) declared once, with its unit,
its baseline rule and one compute function (issue 40, item 4).

Why a registry: the same number was formed in several readers (``energy_group / K`` in the
analysis, the K-sweep curves and the tensorboard export), each with its own rule for a
missing value. Here each metric is a :class:`Derived` in :data:`DERIVED`; the analysis
(:mod:`engine.results.analysis`), the curves (:mod:`engine.results.knee`), the advice
(:mod:`engine.results.advise`) and the front end's exports and figures call its
``compute``, and docs/results.md's "Derived metrics" table is generated from it
(:mod:`engine.results.derived_doc`; a test fails when the two drift).

What a compute function is: the formula on already selected values — the *rows* it is
applied to (which seq rows form a baseline, which rows are pooled into a cell) are the
analysis's, stated in each metric's ``baseline`` (docs/measurement.md, "Cell keys").
Missing stays missing: every function returns NaN (never 0) where an input is missing or
the ratio is undefined, unless its doc says otherwise.

Torch-free: numpy and pandas only; imports nothing else of the engine but
:mod:`engine.results.hpo_best` (so that the analysis and the curves can import it without
a cycle).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from engine.results.hpo_best import best_so_far

#: The executor every speedup is over. Fixed on purpose, not read from the executor
#: registry (``ExecutorSpec.baseline`` is deprecated and ignored): the speedup's
#: denominator is part of the measurement contract (fugue-compat.md, "Speedup"), a report
#: reads results files without the plugins that wrote them, and a second baseline would
#: make speedups from different installs incomparable.
BASELINE_EXECUTOR = "seq"
#: The scheduler of a row for baselines: an empty one (seq before schedulers existed, every
#: non-hpo row) is fifo.
FIFO = "fifo"
#: Default knee rule: the smallest K beyond which a doubling gains < 10 % throughput.
DEFAULT_FRACTION = 0.10
#: The ablation rung every other rung's throughput is relative to (the ladder figure).
LADDER_BASE_RUNG = "A"

PARITY_WITHIN = "within seq spread"
PARITY_OUTSIDE = "outside seq spread"
PARITY_NA = "n/a"
#: What a parity verdict judged and which failed (``parity_on``, ``parity_failed``).
PARITY_ACCURACY = "accuracy"
PARITY_LOSS = "loss"
PARITY_BOTH = "accuracy, loss"
#: Slack of the parity bounds: an accuracy (a loss: relative to its magnitude, at least 1)
#: equal to seq's min or max up to float rounding is within.
PARITY_TOLERANCE = 1e-12


@dataclass(frozen=True)
class Derived:
    """One derived metric.

    ``name``: the column of the analysis's tables and the key of the JSON outputs it
    appears under; ``unit``: its unit (``×`` for a ratio, ``J``, ``s``, ``K``, ``text``);
    ``of``: the measured values it is formed from; ``baseline``: what it divides by and
    which rows are comparable ("none" when it divides by nothing); ``doc``: one line;
    ``compute``: the one function forming it (module doc)."""

    name: str
    unit: str
    of: str
    baseline: str
    doc: str
    compute: Callable[..., Any]


# --------------------------------------------------------------------------- formulas

def energy_per_model(energy_group: Any, K: Any) -> Any:
    """Energy per trained model (J) of a row: ``energy_group / K``; NaN where K is not
    positive or energy was not measured (never 0). ``energy_group`` and ``K``: two
    aligned pandas Series (returns a Series) or two scalars (returns a float; None, NaN
    and text that is no number count as missing)."""
    if isinstance(K, pd.Series):
        return energy_group / K.where(K > 0)
    energy, k = _number(energy_group), _number(K)
    if not (math.isfinite(energy) and math.isfinite(k) and k > 0):
        return math.nan
    return energy / k


def speedup(seq_mean: Any, mean: Any) -> Any:
    """A ratio of means over the baseline: ``seq_mean / mean`` (mean seq time ÷ the
    cell's), NaN where it is not finite (no baseline, a zero time). Arrays or scalars."""
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.divide(np.asarray(seq_mean, dtype=float), np.asarray(mean, dtype=float))
    out = np.where(np.isfinite(ratio), ratio, np.nan)
    return float(out) if out.ndim == 0 else out


def ttb_speedup(seq_mean: float, mean: float) -> float:
    """Time-to-best speedup: ``seq_mean / mean`` (both finite, s), as numpy divides them
    (the analysis calls it only where both means exist)."""
    return np.float64(seq_mean) / np.float64(mean)


def end_to_end_s(T_group: Any, setup_s: Any) -> Any:
    """What a user waits for, per row (s): ``setup_s + T_group``; NaN where either is
    missing (that row has no end-to-end time). Series or scalars."""
    return T_group + setup_s


def parity(acc_mean: Any, seq_min: Any, seq_max: Any, loss_mean: Any = None,
           seq_loss_min: Any = None, seq_loss_max: Any = None, acc_band: Any = 0.0,
           loss_band: Any = 0.0) -> pd.DataFrame:
    """Parity of cells with their baseline (issue 45): accuracy *and* loss.

    A cell is :data:`PARITY_WITHIN` when its mean validation accuracy lies in seq's
    ``[seq_min − acc_band, seq_max + acc_band]`` and its mean validation loss in
    ``[seq_loss_min − loss_band·|seq_loss_min|, seq_loss_max + loss_band·|seq_loss_max|]``
    (:mod:`engine.results.parity_band`: the precision's band, absolute for accuracy,
    relative for the loss; both up to :data:`PARITY_TOLERANCE` of float rounding), else
    :data:`PARITY_OUTSIDE`; :data:`PARITY_NA` where the cell's accuracy or the baseline's
    spread is missing. Where the loss is missing on either side (rows written before it,
    a task that reports none) the verdict is on accuracy alone, and says so.

    Arguments: aligned Series, arrays or scalars (the bands may be per cell). Returns a
    DataFrame (one row per cell) with ``parity`` (the verdict), ``parity_failed``
    (``accuracy``, ``loss`` or ``accuracy, loss`` where outside; None otherwise) and
    ``parity_on`` (``accuracy, loss`` or ``accuracy``: what was judged; None for n/a).
    """
    acc, low, high = (_floats(x) for x in (acc_mean, seq_min, seq_max))
    n = len(acc)
    loss, loss_low, loss_high = (_floats(x, n) for x in (loss_mean, seq_loss_min, seq_loss_max))
    acc_band, loss_band = _floats(acc_band, n), _floats(loss_band, n)
    known = acc.notna() & low.notna()
    slack = PARITY_TOLERANCE
    acc_ok = (acc >= low - acc_band - slack) & (acc <= high + acc_band + slack)
    loss_known = known & loss.notna() & loss_low.notna()
    loss_ok = ((loss >= loss_low - loss_band * loss_low.abs() - slack * loss_low.abs().clip(lower=1))
               & (loss <= loss_high + loss_band * loss_high.abs()
                  + slack * loss_high.abs().clip(lower=1)))
    acc_bad = known & ~acc_ok
    loss_bad = loss_known & ~loss_ok
    names = {(True, True): PARITY_BOTH, (True, False): PARITY_ACCURACY,
             (False, True): PARITY_LOSS, (False, False): None}
    failed = [names[a, b] for a, b in zip(acc_bad, loss_bad, strict=True)]
    verdict = np.where(known, np.where(acc_bad | loss_bad, PARITY_OUTSIDE, PARITY_WITHIN),
                       PARITY_NA)
    on = [(PARITY_BOTH if b else PARITY_ACCURACY) if k else None
          for k, b in zip(known, loss_known, strict=True)]
    return pd.DataFrame({"parity": verdict, "parity_failed": pd.Series(failed, dtype=object),
                         "parity_on": pd.Series(on, dtype=object)})


def _floats(values: Any, n: int | None = None) -> pd.Series:
    """``values`` as a float Series; a scalar or None (missing) repeated ``n`` times."""
    if values is None:
        values = np.nan
    array = np.asarray(values, dtype=float)
    if array.ndim == 0:
        array = np.full(n if n is not None else 1, float(array))
    return pd.Series(array)


def parity_words(verdict: Any, failed: Any = None, on: Any = None) -> str:
    """A parity verdict as the tables, figures and exports show it: ``within``,
    ``within (acc only)`` (no loss to judge), ``OUTSIDE (loss)``, ``OUTSIDE (acc)``,
    ``OUTSIDE (acc, loss)``, ``n/a``; "" for a value that is none of these."""
    if verdict == PARITY_WITHIN:
        return "within (acc only)" if on == PARITY_ACCURACY else "within"
    if verdict == PARITY_OUTSIDE:
        what = {PARITY_ACCURACY: "acc", PARITY_LOSS: "loss", PARITY_BOTH: "acc, loss"}.get(
            failed if isinstance(failed, str) else "")
        return f"OUTSIDE ({what})" if what else "OUTSIDE"
    return PARITY_NA if verdict == PARITY_NA else ""


def gain_per_doubling(k0: float, x0: float, k1: float, x1: float) -> float:
    """The throughput gain from (``k0``, ``x0``) to (``k1``, ``x1``) per doubling of K,
    ``(x1 / x0) ** (1 / log2(k1 / k0)) - 1`` as a fraction (0.25 = +25 %; negative:
    throughput fell); NaN when a throughput is not positive or ``k1 <= k0``."""
    if not (x0 > 0 and x1 > 0 and k1 > k0):
        return math.nan
    return (x1 / x0) ** (1.0 / math.log2(k1 / k0)) - 1.0


def find_knee(ks: Sequence[int], throughputs: Sequence[float],
              fraction: float = DEFAULT_FRACTION) -> int | None:
    """The smallest K of ``ks`` (increasing) from which the gain per doubling to every
    larger K is below ``fraction``; None when only the largest K would qualify (the sweep
    has not shown where growth stops) or there are fewer than two points. Points with no
    throughput (NaN, not positive) are ignored. Comparing with every larger K, not only
    the next, keeps a dip from faking a knee (:mod:`engine.results.knee`).

    >>> find_knee([1, 2, 4, 8, 16], [100, 190, 350, 370, 375], 0.10)
    4
    """
    points = [(k, x) for k, x in zip(ks, throughputs, strict=True)
              if x is not None and math.isfinite(x) and x > 0]
    for i, (k0, x0) in enumerate(points[:-1]):
        if all(gain_per_doubling(k0, x0, k1, x1) < fraction for k1, x1 in points[i + 1:]):
            return int(k0)
    return None


def best_k(ks: Sequence[int], throughputs: Sequence[float]) -> int:
    """The K of the highest mean throughput (the first on a tie)."""
    return ks[int(np.argmax(throughputs))]


def relative_to_base(mean: float, base_mean: float | None) -> float:
    """A rung's mean throughput ÷ rung A's (the ladder), NaN without rung A or when its
    mean is not positive."""
    if base_mean is None or not base_mean > 0:
        return math.nan
    return mean / float(base_mean)


def time_to_best(trials: Any, mode: str) -> float:
    """Seconds from the group window's start until some trial's validation metric first
    came within 1 % of the group's final best (:mod:`engine.results.hpo_best`); NaN when
    no trial validated. The cell stores it as ``time_to_best_s`` when it writes its row."""
    best = best_so_far(trials, mode)
    return math.nan if best is None else float(best["time_to_best_s"])


def _number(value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


# --------------------------------------------------------------------------- the registry

_SAME_CELL = ("same provenance key (machine, gpu_name, torch_version, cuda_version; "
              "campaign_hash with --by-campaign), exp_id, workload_key, K and precision")

DERIVED: tuple[Derived, ...] = (
    Derived("speedup", "×", "T_group",
            f"mean {BASELINE_EXECUTOR} T_group under {FIFO} of the {_SAME_CELL} (`--baseline P`: "
            f"precision P for every cell) and the cell's compile mode when such rows exist, "
            f"else uncompiled; a cell packed over several GPUs has none",
            f"ratio of means: mean baseline T_group ÷ the cell's mean T_group, never a mean "
            f"of ratios; {BASELINE_EXECUTOR}'s own is 1; 95 % percentile-bootstrap interval "
            f"`ci_low`/`ci_high` with >= 5 passes a side",
            speedup),
    Derived("e2e_speedup", "×", "setup_s + T_group",
            "as `speedup`, on rows whose T_group is replaced by setup_s + T_group; none for "
            "a cell of which some row lacks setup_s",
            "end-to-end speedup (what the user waits for, set-up included): the measure "
            "`--advise` ranks on",
            speedup),
    Derived("ttb_speedup", "×", "time_to_best_s",
            f"mean {BASELINE_EXECUTOR} time_to_best_s under the cell's own scheduler of the "
            f"{_SAME_CELL} and compile mode (no --baseline, no uncompiled fallback), only "
            f"where every row on both sides made the same early-stopping decisions "
            f"(`ttb_baseline` says why not); none for a cell packed over several GPUs",
            "hpo: mean baseline time to best ÷ the cell's mean",
            ttb_speedup),
    Derived("energy_per_model_j", "J", "energy_group, K", "none",
            "energy per trained model: energy_group ÷ K per row (K > 0), averaged over the "
            "rows that measured energy (`energy_n`); empty when none did",
            energy_per_model),
    Derived("parity", "text", "final_val_acc and final_val_loss of completed trials",
            "the jobs of the cell's `speedup` baseline (its [min, max] over all passes), "
            "widened by the cell's precision's band (docs/fidelity.md, \"Precision\")",
            "`within seq spread` / `outside seq spread`: whether the cell's mean accuracy "
            "and mean loss both lie in the baseline's widened [min, max]; `parity_failed` "
            "names which did not, `parity_on` what was judged (accuracy alone where a side "
            "has no loss); `n/a` without job rows on either side",
            parity),
    Derived("time_to_best_s", "s", "each trial's validations (executor_info.best_so_far)",
            "none",
            "hpo: seconds from the group window's start until a trial first came within "
            "1 % of the group's final best; stored in master_groups.csv by the cell",
            time_to_best),
    Derived("gain_per_doubling", "fraction", "mean training throughput at two K",
            "the curve's previous K (same provenance key, exp_id, strategy and variant)",
            "K sweep: (X(K2)/X(K1))^(1/log2(K2/K1)) − 1, the throughput gain normalised to "
            "a doubling of K",
            gain_per_doubling),
    Derived("knee", "K", "mean training throughput at each K of a curve",
            "every larger K of the same curve",
            "K sweep: the smallest K from which the gain per doubling to every larger K is "
            "below the fraction (default 0.1, `--knee-fraction`); empty when none inside "
            "the sweep",
            find_knee),
    Derived("best_k", "K", "mean training throughput at each K of a curve", "none",
            "K sweep: the K of the highest mean training throughput",
            best_k),
    Derived("relative", "×", "throughput_group",
            f"mean throughput_group of rung {LADDER_BASE_RUNG} of the same provenance key "
            f"and exp_id",
            "ablation ladder: a rung's mean throughput ÷ rung A's (ratio of means); empty "
            "without rung A",
            relative_to_base),
)

#: The registry by name.
BY_NAME: dict[str, Derived] = {d.name: d for d in DERIVED}


def derived(name: str) -> Derived:
    """The metric called ``name``.

    Raises:
        KeyError: no such metric (the message lists the known ones).
    """
    try:
        return BY_NAME[name]
    except KeyError:
        raise KeyError(f"no derived metric {name!r}; known: {', '.join(BY_NAME)}") from None
