"""``fugue-tui report --advise --per-core`` (issue 46): rank strategies by speedup per CPU
core used, so that a strategy that wins on a CPU host only by using more cores (mp and ray
run several processes where seq runs one) does not read as a better strategy.

What it divides
    The candidate's ``T_group`` speedup over seq (the ratio of means of
    :func:`engine.results.analysis.speedups`) ÷ the cell's mean ``cores_used`` — the group
    column "mean CPU cores of the cell's processes over the group window" — so both sides
    of the ratio cover the same window (the end-to-end speedup's set-up has no core
    figure). Seq's own is ``1 ÷ its cores_used``. The interval is the speedup's interval
    divided by the same mean (the spread of ``cores_used`` over passes is not in it).

Missing stays missing
    A cell none of whose ok rows recorded ``cores_used`` (rows written before the column,
    a cluster cell, a value that is no positive number) has no speedup per core: ``n/a``,
    never 0, ranked after every candidate that has one, and the ranking's note names it.
    Nor has a cell without a ``T_group`` speedup (no seq (fifo) baseline at its K): its note
    names that input, not ``cores_used``. Where no candidate has a speedup per core,
    :func:`unranked` says why and the advice ranks on the speedup instead (and says so).
    Where only some rows recorded it, the mean is over those and the note says how many.

Reads the column defensively by name (:data:`COLUMN`): a results file without it gives
``n/a`` for every cell. Pandas and numpy only.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import pandas as pd

#: The group column the ranking divides by.
COLUMN = "cores_used"
#: The ranking measure's name (the advice's ``measure``).
MEASURE = ("speedup per core: T_group speedup over seq ÷ the cell's mean cores_used (CPU "
           "cores its processes used over the group window)")


def cores_fields(groups: pd.DataFrame, row: dict[str, Any], keys: list[str]) -> dict[str, Any]:
    """``per_core_cores`` (mean ``cores_used`` of the cell's ok rows with a positive value;
    NaN when none) and ``per_core_rows`` (how many had one, of ``per_core_of`` rows) of
    ``row``'s cell: the rows of ``groups`` (ok rows) equal to ``row`` on ``keys`` and K."""
    sel = groups
    for key in keys + ["K"]:
        if key in sel.columns and key in row:
            sel = sel[sel[key] == row[key]]
    if COLUMN not in sel.columns or not len(sel):
        return dict(per_core_cores=math.nan, per_core_rows=0, per_core_of=len(sel))
    values = pd.to_numeric(sel[COLUMN], errors="coerce")
    values = values[values > 0]  # empty, unreadable or not positive: not recorded
    mean = float(values.mean()) if len(values) else math.nan
    return dict(per_core_cores=mean, per_core_rows=int(len(values)), per_core_of=len(sel))


def _per_core(option: Any) -> Any:
    cores = option.per_core_cores
    if not (math.isfinite(cores) and cores > 0):
        return replace(option, per_core=math.nan, per_core_low=math.nan,
                       per_core_high=math.nan, score=math.nan, score_low=math.nan,
                       score_high=math.nan)
    value, low, high = option.speedup / cores, option.ci_low / cores, option.ci_high / cores
    if option.baseline:  # seq fifo, its own baseline: no width
        low = high = value
    return replace(option, per_core=value, per_core_low=low, per_core_high=high, score=value,
                   score_low=low, score_high=high)


def rank(options: list[Any], notes: list[str]) -> tuple[list[Any], str]:
    """``options`` (:class:`engine.results.advise.Option`) ranked by speedup per core,
    best first, those without one last (in their order); each option's ``score`` is its
    speedup per core. Appends to ``notes`` which candidates lack ``cores_used`` or have it
    for only some rows. Returns the options and the measure's name."""
    scored = [_per_core(o) for o in options]
    have = sorted((o for o in scored if math.isfinite(o.score)), key=lambda o: -o.score)
    lack = [o for o in scored if not math.isfinite(o.score)]
    for why in dict.fromkeys(_missing(o) for o in lack):  # one note per missing input
        notes.append(f"no speedup per core ({why}: n/a, ranked last) for "
                     + ", ".join(f"{o.label} (K = {o.K})" for o in lack if _missing(o) == why))
    partial = [o for o in have if o.per_core_rows < o.per_core_of]
    if partial:
        notes.append("cores_used recorded in only some rows (their mean is used) for "
                     + ", ".join(f"{o.label} (K = {o.K}): {o.per_core_rows} of "
                                 f"{o.per_core_of}" for o in partial))
    return have + lack, MEASURE


def _missing(option: Any) -> str:
    """What ``option`` lacks for a speedup per core: its ``cores_used``, or the T_group
    speedup it divides (no seq (fifo) baseline at its K)."""
    if not math.isfinite(option.per_core_cores):
        return NO_CORES
    return NO_SPEEDUP


#: Why a candidate has no speedup per core: the two inputs it divides.
NO_CORES = "no cores_used recorded"
NO_SPEEDUP = "no T_group speedup over seq: no seq (fifo) baseline at its K"


def unranked(options: list[Any]) -> str | None:
    """Why no candidate of ``options`` has a speedup per core (the advice then ranks on
    the speedup instead, and says so); None when one has."""
    if any(math.isfinite(o.per_core_cores) and math.isfinite(o.speedup) for o in options):
        return None
    if not any(math.isfinite(o.per_core_cores) for o in options):
        return "no candidate recorded cores_used"
    return "no candidate with cores_used recorded has a T_group speedup over seq"


def line(option: Any) -> str:
    """The recommendation's speedup per core as one advice line."""
    if not math.isfinite(option.per_core):
        return f"speedup per core at K = {option.K}: n/a ({_missing(option)})"
    interval = (f" [{option.per_core_low:.2f}, {option.per_core_high:.2f}]"
                if math.isfinite(option.per_core_low) and math.isfinite(option.per_core_high)
                and option.per_core_low != option.per_core_high else "")
    return (f"speedup per core at K = {option.K}: {option.per_core:.2f}×{interval} "
            f"({option.speedup:.2f}× over seq on T_group ÷ {option.per_core_cores:.2f} "
            f"cores used)")


def missing_verdict(best: Any, second: Any) -> str | None:
    """The verdict where a compared candidate has no speedup per core (nothing to compare
    on); None when both have one (the intervals decide, as for speedups)."""
    if not math.isfinite(best.score):
        return (f"{best.label} (K = {best.K}) has no speedup per core to rank on "
                f"({_missing(best)})")
    if second is not None and not math.isfinite(second.score):
        return (f"{best.label} (K = {best.K}) is the only candidate with a speedup per core: "
                f"{second.label} (K = {second.K}) has none ({_missing(second)}), so they are "
                f"not compared")
    return None
