"""The advisor (``fugue-tui report --advise``, the Results screen's advice panel): from
measured rows to "run this workload this way on this machine" (issue 23). A pure function
of the loaded rows (:func:`advise`): pandas and numpy, no torch, no UI.

Per workload (``exp_id``) and machine (the provenance key of
:mod:`engine.results.analysis`) it recommends one strategy (executor and its variant) and
how many models at once, with the evidence.

What it ranks on: what the user waits for
    A strategy's set-up (``setup_s``: ray's cluster and actors, mp's worker pool) lies
    outside the group window, so the speedup columns (ratio of means of ``T_group``, the
    documented window) leave it out. The advice ranks on the **end-to-end speedup**: mean
    seq ``setup_s + T_group`` ÷ mean strategy ``setup_s + T_group`` (the same ratio of
    means, baseline and bootstrap as :func:`engine.results.analysis.speedups`, on rows
    whose ``T_group`` is replaced by ``setup_s + T_group``; a row without ``setup_s`` has
    no end-to-end time — missing, never 0). It prints both speedups, says which one it
    ranked on, and when ``T_group`` alone would pick another strategy it names it (a
    long-lived pool that pays its set-up once would see that one). Only when a candidate
    has no end-to-end time (rows without ``setup_s``: the harness's) does it rank on the
    ``T_group`` speedup, and says so; a recommendation slower end to end than seq then
    gets a note.

Without a K sweep (one K per workload)
    The candidates are the measured cells, ranked by end-to-end speedup over seq (seq's own
    is exactly 1), shown with its bootstrap interval, the ``T_group`` speedup, energy per
    trained model and, for mp and ray, the ``max_parallel`` the cell ran with.

The baseline is seq under fifo
    As in the speedup table (:func:`~engine.results.analysis.speedups`): seq under another
    scheduler (asha stops trials early) is a candidate like any other, ranked on its
    speedup over seq fifo. Where no candidate has a speedup (no seq fifo row at their K:
    the table's "n/a (no seq)") nothing is recommended: ``recommended`` is None and the
    verdict says there is no seq (fifo) baseline to rank by.

With a K sweep (:mod:`engine.results.knee`)
    Each strategy is taken at its knee — the smallest K beyond which doubling K gains less
    than the knee fraction of training throughput — or, where the sweep never reached one,
    at its best K (and the advice says to sweep further). Strategies are ranked there by
    the same measure as without a sweep, the end-to-end speedup over seq *at that K* (the
    K models trained one after another): the number printed as the evidence is the number
    ranked on (issue: a strategy that won on training samples/s, which leave out the rest
    of the group window, was recommended with a 0.62× speedup). Seq's own is 1 at every
    K. The throughput line stays as the curve's information, not the ranking.

Distinguishable?
    The best candidate is compared with the runner-up on the ranking measure's 95 %
    intervals. Overlapping intervals: "not
    distinguishable with N passes", and how many passes would separate them under this
    rule: an interval's half-width shrinks as 1/√n, so with ``m`` passes the half-widths
    ``w1``, ``w2`` measured at ``n`` passes become ``w·√(n/m)``, and the intervals part
    once ``(w1 + w2)·√(n/m) < |x1 − x2|``, i.e. ``m > n·((w1 + w2)/|x1 − x2|)²`` (``n``:
    the fewer passes of the two; the estimates assumed to stay where they are). Without
    intervals (fewer than :data:`~engine.results.analysis.MIN_BOOT_N` passes a side) the
    advice says how many more passes an interval needs. Seq's speedup (1 by definition)
    has no width.

Conditions (issue 46, :mod:`engine.results.conditions`)
    Where a row of the two compared cells, or of their seq baseline, was measured on a busy
    host (its load average above its cores + 0.5, the cell's own warning rule), the
    difference is never called resolved: ``distinguishable`` is None and the verdict says
    why, with the rows, load and cores. Windows under 1 s get a note.

Per core (``per_core=True``, :mod:`engine.results.per_core`)
    Ranks by the ``T_group`` speedup ÷ the cell's mean ``cores_used``; cells without it are
    n/a and ranked last, the note naming what each lacks (``cores_used``, or the speedup's
    seq baseline). Where no candidate has a speedup per core it ranks as without
    ``--per-core``, and the measure says it could not rank per core and why.

Rows produced by estimates rather than measurements do not exist yet (the profiling
issue); when they do, the advice must say so.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import numpy as np
import pandas as pd

from engine.results.advice_model import Advice, Option, compare_best, number_text
from engine.results.analysis import (
    cell_columns,
    provenance_columns,
    speedups,
)
from engine.results.conditions import (
    busy_verdict,
    condition_fields,
    host_line,
    short_notes,
)
from engine.results.derived import (
    BASELINE_EXECUTOR,
    DEFAULT_FRACTION,
    FIFO,
    end_to_end_s,
)
from engine.results.knee import CURVE_COLUMNS, Curve, curves
from engine.results.per_core import cores_fields, missing_verdict
from engine.results.per_core import rank as rank_per_core
from engine.results.per_core import unranked as per_core_unranked


def _label(row: dict[str, Any]) -> str:
    parts = [str(row["executor"])]
    for column in ("scheduler", "features", "mp_start", "tune_actors"):
        if row.get(column):
            parts.append(str(row[column]))
    if row.get("rung"):
        parts.append(f"rung {row['rung']}")
    if row.get("compile_mode", "off") != "off":
        parts.append(f"compile={row['compile_mode']}")
    return " ".join(parts)


def _is_baseline(row: dict[str, Any]) -> bool:
    """Whether ``row``'s cell is the speedup's baseline: seq under fifo (an empty
    scheduler is fifo). Seq under another scheduler, whose trials stop early, is a
    candidate like any other, with its speedup over seq fifo (issue 25's rule in
    :func:`engine.results.analysis.speedups`)."""
    sched = row.get("scheduler")
    sched = "" if sched is None or sched != sched else str(sched)
    return row.get("executor") == BASELINE_EXECUTOR and sched in ("", FIFO)


def _f(value: Any) -> float:
    try:
        out = float(value)
    except (TypeError, ValueError):
        return math.nan
    return out


def _parallel(groups: pd.DataFrame, row: dict[str, Any], keys: list[str]) -> float:
    """The most jobs at once recorded by ``row``'s cell (max over its ok rows)."""
    sel = groups
    for key in keys + ["K"]:
        sel = sel[sel[key] == row[key]]
    values = sel["max_parallel"].dropna() if "max_parallel" in sel.columns else []
    return float(values.max()) if len(values) else math.nan


def _end_to_end_runs(runs: Any) -> Any:
    """``runs`` with each group row's ``T_group`` replaced by ``setup_s + T_group`` (NaN
    where either is missing: that row has no end-to-end time)."""
    groups = runs.groups
    if "setup_s" not in groups.columns:
        total = pd.Series(np.nan, index=groups.index)
    else:
        total = end_to_end_s(groups["T_group"], groups["setup_s"])
    return replace(runs, groups=groups.assign(T_group=total))


def advise(runs: Any, fraction: float = DEFAULT_FRACTION, by_campaign: bool = False,
           n_boot: int = 2000, seed: int = 0, per_core: bool = False) -> list[Advice]:
    """The advice for every workload and machine in ``runs`` (a
    :class:`~engine.results.load.Runs`), in load order (module doc). Workloads without
    an ok row are left out. ``per_core``: rank by speedup per core
    (:mod:`engine.results.per_core`) instead of the end-to-end speedup."""
    table = speedups(runs, by_campaign=by_campaign, n_boot=n_boot, seed=seed)
    if not len(table):
        return []
    keys = cell_columns(by_campaign)
    e2e = speedups(_end_to_end_runs(runs), by_campaign=by_campaign, n_boot=n_boot, seed=seed)
    e2e = e2e[keys + ["speedup", "ci_low", "ci_high", "n_strategy"]].rename(columns={
        "speedup": "e2e_speedup", "ci_low": "e2e_low", "ci_high": "e2e_high",
        "n_strategy": "e2e_n"})
    table = table.merge(e2e, on=keys, how="left")
    # a cell of which only some rows recorded setup_s: its end-to-end mean would be over
    # other passes than its T_group's; leave it out rather than mix them
    partial = table["e2e_n"].fillna(0) < table["n_strategy"]
    table.loc[partial, ["e2e_speedup", "e2e_low", "e2e_high"]] = np.nan
    prov = provenance_columns(by_campaign)
    groups = runs.groups[runs.groups["status"] == "ok"]
    all_curves = curves(runs, fraction, by_campaign, n_boot, seed)
    out = []
    for key, cells in table.groupby(prov + ["exp_id"], sort=False, dropna=False):
        provenance = dict(zip(prov, key[:-1], strict=True))
        exp_id = str(key[-1])
        mine = [c for c in all_curves if c.exp_id == exp_id
                and all(str(c.provenance[p]) == str(provenance[p]) for p in prov)]
        records = cells.to_dict("records")
        swept = cells["K"].nunique() > 1 and bool(mine)
        notes: list[str] = []
        options = (_swept_options(records, mine, groups, prov, notes, per_core) if swept
                   else _plain_options(records, groups, prov, per_core))
        if not options:
            continue
        n_rows = int(cells["n_strategy"].sum())
        counts = cells["n_strategy"].astype(int)
        if not any(math.isfinite(o.speedup) for o in options):
            out.append(_unranked(options, provenance, exp_id, swept, notes, len(cells),
                                 n_rows, counts, fraction, per_core))
            continue
        unranked = per_core_unranked(options) if per_core else None
        if per_core and unranked is None:
            options, measure = rank_per_core(options, notes)
        else:
            options, measure = _rank(options, swept, notes)
            if unranked is not None:
                measure += f"; could not rank per core: {unranked}"
        by_core = per_core and unranked is None
        best = options[0]
        second = options[1] if len(options) > 1 else None
        distinct, verdict, more = compare_best(best, second, "per_core" if by_core else "speedup")
        lacking = missing_verdict(best, second) if by_core else None
        if lacking is not None:
            distinct, verdict, more = None, lacking, None
        busy, verdict = busy_verdict(best, second, distinct, verdict)
        if busy:
            distinct, more = None, None
        notes.extend(short_notes(best, second))
        out.append(Advice(provenance=provenance, exp_id=exp_id, swept=swept, measure=measure,
                          recommended=best, runner_up=second, distinguishable=distinct,
                          verdict=verdict, more_passes=more, cells=len(cells), rows=n_rows,
                          passes=(int(counts.min()), int(counts.max())), fraction=fraction,
                          notes=tuple(notes), host_busy=busy, host=host_line(best, second),
                          per_core=per_core))
    return out


def _unranked(options: list[Option], provenance: dict[str, Any], exp_id: str, swept: bool,
              notes: list[str], n_cells: int, n_rows: int, counts: pd.Series,
              fraction: float, per_core: bool) -> Advice:
    """The advice where no candidate has a speedup (no seq (fifo) baseline at any of their
    K, as the table's "n/a (no seq)" says): nothing recommended, and the verdict says why
    rather than naming a strategy."""
    ks = ", ".join(str(k) for k in sorted({o.K for o in options}))
    verdict = (f"no {BASELINE_EXECUTOR} ({FIFO}) baseline at K = {ks}: cannot rank by "
               f"speedup; measure {BASELINE_EXECUTOR} under {FIFO} at that K to compare "
               f"these cells")
    return Advice(provenance=provenance, exp_id=exp_id, swept=swept,
                  measure=f"not ranked: no {BASELINE_EXECUTOR} ({FIFO}) baseline",
                  recommended=None, runner_up=None, distinguishable=None, verdict=verdict,
                  more_passes=None, cells=n_cells, rows=n_rows,
                  passes=(int(counts.min()), int(counts.max())), fraction=fraction,
                  notes=tuple(notes), per_core=per_core)


def _order(options: list[Option]) -> list[Option]:
    return sorted(options, key=lambda o: -o.score if math.isfinite(o.score) else math.inf)


def _rank(options: list[Option], swept: bool, notes: list[str]) -> tuple[list[Option], str]:
    """Rank ``options`` on the end-to-end speedup where every candidate has one, else on
    the ``T_group`` speedup (module doc); fill each option's ``score`` with the measure
    ranked on; add the notes that keep the advice honest. Returns the options, best
    first, and the measure's name."""
    where = " at each strategy's knee" if swept else ""
    end_to_end = all(math.isfinite(o.e2e_speedup) for o in options)
    if end_to_end:
        measure = f"end-to-end speedup over seq (setup_s + T_group){where}"
        ranked = _order([replace(o, score=o.e2e_speedup, score_low=o.e2e_low,
                                 score_high=o.e2e_high) for o in options])
        by_window = _order(options)[0]  # options' score is the T_group speedup
        best = ranked[0]
        if by_window.label != best.label or by_window.K != best.K:
            notes.append(
                f"on T_group alone (set-up excluded) {by_window.label} (K = {by_window.K}) "
                f"would rank first ({by_window.speedup:.2f}× over seq), but its set-up "
                f"({number_text(by_window.setup_s, ',.1f', ' s')}) makes it "
                f"{by_window.e2e_speedup:.2f}× end to end; it pays only where that set-up "
                f"is paid once for many runs")
        return ranked, measure
    missing = sorted({o.label for o in options if not math.isfinite(o.e2e_speedup)})
    measure = (f"speedup over seq (T_group only){where}; end to end not ranked: no setup_s "
               f"(or no seq row) for {', '.join(missing)}")
    ranked = _order(options)
    best = ranked[0]
    if math.isfinite(best.e2e_speedup) and best.e2e_speedup < 1:
        notes.append(f"{best.label} is slower than seq end to end ({best.e2e_speedup:.2f}× "
                     f"with its set-up of {number_text(best.setup_s, ',.1f', ' s')}): it wins only "
                     f"inside the group window")
    elif not best.baseline and not math.isfinite(best.e2e_speedup):
        notes.append(f"{best.label}: its set-up time is not recorded, so whether it is "
                     f"faster than seq end to end is unknown")
    return ranked, measure


def _cores(groups: pd.DataFrame, row: dict[str, Any], keys: list[str],
           per_core: bool) -> dict[str, Any]:
    """The per-core fields of a candidate, looked up only for ``--per-core`` (a scan of the
    group rows per candidate, as for ``max_parallel``)."""
    return cores_fields(groups, row, keys) if per_core else {}


def _plain_options(records: list[dict[str, Any]], groups: pd.DataFrame,
                   prov: list[str], per_core: bool = False) -> list[Option]:
    keys = prov + list(CURVE_COLUMNS)
    out = []
    for row in records:
        is_seq = _is_baseline(row)
        speedup = 1.0 if is_seq else _f(row["speedup"])
        out.append(Option(
            label=_label(row), executor=str(row["executor"]), K=int(row["K"]),
            n=int(row["n_strategy"]), n_seq=int(row["n_seq"]), speedup=speedup,
            ci_low=_f(row["ci_low"]), ci_high=_f(row["ci_high"]), score=speedup,
            score_low=1.0 if is_seq else _f(row["ci_low"]),
            score_high=1.0 if is_seq else _f(row["ci_high"]),
            throughput=_f(row["train_throughput_mean"]),
            energy_per_model_j=_f(row["energy_per_model_j"]),
            max_parallel=_parallel(groups, row, keys), baseline=is_seq,
            **_e2e_fields(row, is_seq),
            **condition_fields(row), **_cores(groups, row, keys, per_core)))
    return out


def _e2e_fields(row: dict[str, Any], is_seq: bool) -> dict[str, float]:
    """The end-to-end fields of an :class:`Option` from a merged table row."""
    e2e = _f(row.get("e2e_speedup"))
    if is_seq and math.isfinite(e2e):  # its own baseline: exactly 1, no width
        return dict(e2e_speedup=1.0, e2e_low=1.0, e2e_high=1.0,
                    setup_s=_f(row.get("setup_s_mean")), T_group=_f(row.get("T_group_mean")),
                    cores_used=_f(row.get("cores_used_mean")))
    return dict(e2e_speedup=e2e, e2e_low=_f(row.get("e2e_low")),
                e2e_high=_f(row.get("e2e_high")),
                setup_s=_f(row.get("setup_s_mean")), T_group=_f(row.get("T_group_mean")),
                cores_used=_f(row.get("cores_used_mean")))


def _swept_options(records: list[dict[str, Any]], mine: list[Curve], groups: pd.DataFrame,
                   prov: list[str], notes: list[str],
                   per_core: bool = False) -> list[Option]:
    keys = prov + list(CURVE_COLUMNS)
    out = []
    for curve in mine:
        k = curve.knee if curve.knee is not None else curve.best_k
        if curve.knee is None:
            notes.append(f"{curve.label}: no knee inside the sweep (K up to {curve.ks[-1]}); "
                         f"taken at its best K = {k}: sweep larger K")
        match = [r for r in records if int(r["K"]) == k and all(
            str(r.get(c, "")) == str(curve.cell.get(c, "")) for c in CURVE_COLUMNS)]
        point = curve.point(k)
        if len(match) != 1:  # rows at that K in several configurations: no speedup
            row: dict[str, Any] = {**curve.cell, "K": k, "speedup": math.nan, "ci_low": math.nan,
                                   "ci_high": math.nan, "n_seq": 0, **curve.provenance}
            notes.append(f"{curve.label}: rows at K = {k} in several configurations: no "
                         f"speedup to rank it on")
        else:
            row = match[0]
        is_seq = _is_baseline(curve.cell)
        speedup = 1.0 if is_seq else _f(row.get("speedup"))
        out.append(Option(
            label=curve.label, executor=curve.executor, K=k, n=point.n,
            n_seq=int(row.get("n_seq") or 0), speedup=speedup,
            ci_low=_f(row.get("ci_low")), ci_high=_f(row.get("ci_high")),
            score=speedup, score_low=1.0 if is_seq else _f(row.get("ci_low")),
            score_high=1.0 if is_seq else _f(row.get("ci_high")),
            throughput=point.throughput, energy_per_model_j=point.energy_per_model_j,
            max_parallel=_parallel(groups, row, keys), curve=curve, baseline=is_seq,
            **_e2e_fields(row, is_seq), **condition_fields(row),
            **_cores(groups, row, keys, per_core)))
    return out
