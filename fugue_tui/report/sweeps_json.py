"""The K sweeps and the advice in ``fugue-tui report --json`` (issues 23, 29): the knee data
of :mod:`engine.results.knee` and the advice of :mod:`engine.results.advise` as plain JSON
objects (``sweeps`` and ``advice`` of a ``fugue-tui/report`` document; docs/json.md).

Keys are added to the version-1 report document, not changed: a version-1 reader that does
not know them ignores them (docs/json.md, "Versions"). Missing values are ``null``
(:func:`fugue_tui.jsonout.clean` runs over the whole document); a knee bound beyond the
sweep is ``null`` with ``knee_high_beyond_sweep`` true, so that ``null`` keeps meaning "not
known". Torch-free.
"""

from __future__ import annotations

import math
from typing import Any

#: The curve identity columns other than ``exp_id`` and ``executor`` (knee.CURVE_COLUMNS).
_VARIANT = ("compile_mode", "scheduler", "features", "rung", "mp_start", "tune_actors")


def _k(value: Any) -> int | None:
    return None if value is None else int(value)


def _num(value: Any) -> float | None:
    try:
        out = float(value)
    except (TypeError, ValueError):
        return None
    return out if math.isfinite(out) else None


def curve_entry(curve: Any) -> dict[str, Any]:
    """One :class:`engine.results.knee.Curve`: its workload, strategy and machine, the
    rule, the knee and best K with their bootstrap bounds, the knee at every fraction of
    :data:`engine.results.knee.FRACTIONS`, and one point per K (throughput in samples/s
    with its 95 % interval, the gain per doubling from the previous K, energy per model in
    J, peak memory in MiB, mean ``T_group`` in s)."""
    from engine.results.knee import curve_table

    points = []
    for row in curve_table(curve).to_dict("records"):
        point = curve.point(int(row["K"]))
        points.append({"K": int(row["K"]), "n": int(row["n"]),
                       "throughput": _num(row["throughput"]), "low": _num(row["low"]),
                       "high": _num(row["high"]),
                       "gain_per_doubling": _num(row["gain_per_doubling"]),
                       "energy_per_model_j": _num(row["energy_per_model_j"]),
                       "energy_n": int(point.energy_n),
                       "mem_peak_mb": _num(row["mem_peak_mb"]),
                       "T_group_mean": _num(row["T_group_mean"]),
                       "configs": int(point.configs),
                       "marks": [m for m in str(row["mark"]).split(", ") if m]})
    beyond = curve.has_intervals and curve.knee is not None and curve.knee_high is None
    return {
        **{k: curve.provenance.get(k) for k in curve.provenance},
        "exp_id": curve.exp_id, "executor": curve.executor, "label": curve.label,
        **{k: curve.cell.get(k) for k in _VARIANT},
        "metric": curve.metric, "mem_metric": curve.mem_metric,
        "knee_fraction": float(curve.fraction), "knee": _k(curve.knee),
        "knee_low": _k(curve.knee_low), "knee_high": _k(curve.knee_high),
        "knee_high_beyond_sweep": bool(beyond),
        "best_k": int(curve.best_k), "best_low": _k(curve.best_low),
        "best_high": _k(curve.best_high), "has_intervals": bool(curve.has_intervals),
        "knees": [{"fraction": float(f), "K": _k(k)} for f, k in curve.knees.items()],
        "points": points,
    }


def option_entry(option: Any) -> dict[str, Any] | None:
    """One candidate of the advice (:class:`engine.results.advise.Option`)."""
    if option is None:
        return None
    return {"label": option.label, "executor": option.executor, "K": int(option.K),
            "n": int(option.n), "n_seq": int(option.n_seq), "speedup": _num(option.speedup),
            "ci_low": _num(option.ci_low), "ci_high": _num(option.ci_high),
            "score": _num(option.score), "score_low": _num(option.score_low),
            "score_high": _num(option.score_high), "throughput": _num(option.throughput),
            "energy_per_model_j": _num(option.energy_per_model_j),
            "max_parallel": None if _num(option.max_parallel) is None
            else int(option.max_parallel),
            "e2e_speedup": _num(option.e2e_speedup), "e2e_low": _num(option.e2e_low),
            "e2e_high": _num(option.e2e_high), "setup_s": _num(option.setup_s),
            "T_group": _num(option.T_group), "cores_used": _num(option.cores_used),
            # issue 46: the conditions it was measured under
            "host_load_max": _num(option.host_load_max),
            "host_cores": _num(option.host_cores), "busy_n": int(option.busy_n),
            "short_n": int(option.short_n), "seq_busy_n": int(option.seq_busy_n),
            "seq_host_load_max": _num(option.seq_host_load_max),
            # --per-core (issue 46): what the speedup per core divides by, and the value
            "per_core_cores": _num(option.per_core_cores),
            "per_core_rows": int(option.per_core_rows), "per_core": _num(option.per_core),
            "per_core_low": _num(option.per_core_low),
            "per_core_high": _num(option.per_core_high)}


def advice_entry(advice: Any) -> dict[str, Any]:
    """One workload's :class:`engine.results.advise.Advice`: the recommendation and the
    runner-up, whether they are distinguishable (``null``: an interval is missing), the
    verdict, the passes that would separate them, the evidence, and the advice's text
    lines exactly as ``report --advise`` prints them."""
    return {
        **{k: advice.provenance.get(k) for k in advice.provenance},
        "exp_id": advice.exp_id, "swept": bool(advice.swept), "measure": advice.measure,
        "recommended": option_entry(advice.recommended),
        "runner_up": option_entry(advice.runner_up),
        "distinguishable": advice.distinguishable, "verdict": advice.verdict,
        "more_passes": _k(advice.more_passes), "cells": int(advice.cells),
        "rows": int(advice.rows), "passes": [int(p) for p in advice.passes],
        "knee_fraction": float(advice.fraction), "notes": list(advice.notes),
        "host_busy": bool(advice.host_busy), "host": advice.host or None,
        "per_core": bool(advice.per_core),
        "lines": list(advice.lines()),
    }


def sweep_sections(runs: Any, fraction: float, advise: bool,
                   by_campaign: bool = False, per_core: bool = False) -> dict[str, Any]:
    """``sweeps`` (every curve of a K sweep; ``[]`` without one) and ``advice`` (a list
    with ``advise``; ``null`` when not asked for, as the text report prints it only with
    ``--advise``) of ``runs``; with ``advise`` also ``stream_advice`` (the analysis computes
    it with the batch advice: the caller places it, after ``streams``)."""
    from fugue_tui.report.sweeps import analyse

    view = analyse(runs, fraction=fraction, advise=advise, by_campaign=by_campaign,
                   per_core=per_core)
    return {"knee_fraction": float(fraction),
            "sweeps": [curve_entry(c) for c in view.curves],
            "advice": [advice_entry(a) for a in view.advice] if advise else None,
            **({"stream_advice": view.streams} if advise else {})}


def hpo_entry(cell: Any) -> dict[str, Any]:
    """One hpo cell (:class:`engine.results.hpo_curves.HpoCell`): its identity, the metric
    its trials were judged on, the aggregates the report's time-to-best table prints, the
    representative pass (median time to best) and every pass with its best-so-far curve
    (``[[seconds since the group window opened, best so far], ...]``)."""
    low, high = cell.ttb_range
    trial, count = cell.best_trial
    rep = cell.representative
    return {
        **{k: cell.provenance.get(k) for k in cell.provenance},
        **{k: cell.cell.get(k) for k in ("exp_id", "executor", *_VARIANT, "precision")},
        "K": None if _num(cell.cell.get("K")) is None else int(cell.cell["K"]),
        "label": cell.label, "metric": cell.metric, "mode": cell.mode, "n": cell.n,
        "time_to_best_mean": _num(cell.ttb_mean), "time_to_best_min": _num(low),
        "time_to_best_max": _num(high), "best_val_metric_mean": _num(cell.best_metric_mean),
        "best_trial": trial, "best_trial_passes": int(count),
        "trials_stopped_mean": _num(cell.trials_stopped_mean),
        "representative_group_id": rep.group_id if rep else None,
        "passes": [{"group_id": p.group_id, "pass": p.pass_index, "attempt": p.attempt,
                    "time_to_best_s": _num(p.time_to_best_s),
                    "best_val_metric": _num(p.best_val_metric), "best_trial": p.best_trial,
                    "trials_stopped": _num(p.trials_stopped), "T_group": _num(p.T_group),
                    "curve": [[float(t), float(v)] for t, v in p.curve]}
                   for p in cell.passes],
    }


def hpo_section(runs: Any, by_campaign: bool = False) -> list[dict[str, Any]]:
    """``hpo``: every hpo cell with a time to best or a curve (``[]`` without one)."""
    from engine.results.hpo_curves import hpo_cells

    return [hpo_entry(c) for c in hpo_cells(runs, by_campaign)]
