"""A stream cell's figures (issue 51; docs/measurement.md, "Streams"). Torch-free, pure.

Times are seconds after the cell's group window opened (the stream's origin: job i arrives
``arrivals[i]`` seconds after it). Per job: ``arrival_s``, ``admitted_s`` (the scheduler
started it: seq trains it, mp starts its process), ``completed_s`` (it ended),
``queue_delay_s = admitted_s − arrival_s`` and ``jct_s = completed_s − arrival_s`` (job
completion time; empty for a failed job). Per stream, over the completed (ok) jobs:
``jct_mean_s``, ``jct_p50_s``, ``jct_p95_s`` (``numpy.percentile``, linear interpolation),
``makespan_s`` (last completion − first arrival), ``busy_s`` (the busy period: the length of
the union of every job's ``[arrival, completion]``, the time at least one job was in the
system), ``throughput_jps`` (completed jobs ÷ ``busy_s``), ``arrival_rate_jps`` (the
Poisson rate; a trace's ``(n − 1) ÷ (last − first arrival)``, empty for one arrival or a
zero span) and ``offered_load`` (``arrival_rate_jps`` × the mean service time
``completed_s − admitted_s`` of the completed jobs under this strategy; with
``max_parallel`` servers the load per server is this ÷ ``max_parallel``). A figure that
cannot be computed is None (an empty cell), never 0.

Measured over the stream (the cell's monitor, ``engine.cell.main``): ``busy_cores_used``
(mean CPU cores the cell's processes used over the busy period only, the idle gaps between
arrivals left out: :func:`busy_cores`; empty when a busy interval is shorter than the
monitor's sampling interval), ``energy_per_job_j`` and ``cpu_energy_per_job_j``
(the window's GPU and CPU-package energy, ``energy_group`` and ``cpu_energy_j``, ÷ the
completed jobs: what serving the stream cost per job, idle waits included). Empty when not
measured, never 0.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def busy_intervals(intervals: Sequence[tuple[float, float]]) -> list[tuple[float, float]]:
    """The union of ``[start, end]`` intervals as disjoint, sorted intervals."""
    merged: list[tuple[float, float]] = []
    for start, end in sorted(intervals):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def busy_period(intervals: Sequence[tuple[float, float]]) -> float:
    """The length of the union of ``[start, end]`` intervals, s (0.0 for none)."""
    return sum(end - start for start, end in busy_intervals(intervals))


def busy_cores(intervals: Sequence[tuple[float, float]], cores_over: Any,
               resolution_s: float = 0.0) -> float | None:
    """Mean CPU cores used over the busy period (the union of ``intervals``):
    ``cores_over(a, b)`` (mean cores over ``[a, b]``, None when unknown) weighted by each
    busy interval's length. None when the period is empty, any interval is unknown, or any
    is shorter than ``resolution_s`` (the sampling interval: a counter interpolated across
    a whole sample step cannot say what a shorter interval used)."""
    total = used = 0.0
    for start, end in busy_intervals(intervals):
        if end - start < resolution_s:
            return None
        if end <= start:
            continue
        cores = cores_over(start, end)
        if cores is None:
            return None
        used += cores * (end - start)
        total += end - start
    return used / total if total > 0 else None


def per_job(energy_j: Any, completed: int) -> float | None:
    """``energy_j`` ÷ ``completed`` jobs; None when not measured or none completed."""
    if energy_j is None or completed <= 0:
        return None
    try:
        value = float(energy_j)
    except (TypeError, ValueError):
        return None
    return value / completed if value == value else None  # NaN: not measured


def job_figures(arrival: float, admitted: float | None, completed: float | None,
                ok: bool) -> dict[str, Any]:
    """One job's columns (``arrival_s`` ... ``jct_s``), None where not known."""
    return {"arrival_s": arrival, "admitted_s": admitted, "completed_s": completed,
            "queue_delay_s": admitted - arrival if admitted is not None else None,
            "jct_s": completed - arrival if completed is not None and ok else None}


def stream_figures(arrivals: Sequence[float], admitted: Sequence[float | None],
                   completed: Sequence[float | None], ok: Sequence[bool],
                   rate: float | None = None) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The group row's stream columns and each job's (in ``arrivals`` order).

    ``arrivals``, ``admitted``, ``completed``, ``ok``: one per job, seconds after the
    window opened (None: not known, a job that never started); ``rate``: the Poisson
    process's rate, jobs/s (None: a trace, measured from ``arrivals``)."""
    import numpy as np

    jobs = [job_figures(a, s, e, o) for a, s, e, o in
            zip(arrivals, admitted, completed, ok, strict=True)]
    done = [j for j in jobs if j["jct_s"] is not None]
    jct = np.array([j["jct_s"] for j in done], dtype=float)
    service = [j["completed_s"] - j["admitted_s"] for j in done if j["admitted_s"] is not None]
    n = len(arrivals)
    if rate is None and n >= 2 and arrivals[-1] > arrivals[0]:
        rate = (n - 1) / (arrivals[-1] - arrivals[0])
    busy = busy_period([(j["arrival_s"], j["completed_s"]) for j in jobs
                        if j["completed_s"] is not None])
    group: dict[str, Any] = {
        "stream_jobs": n,
        "jct_mean_s": float(jct.mean()) if done else None,
        "jct_p50_s": float(np.percentile(jct, 50)) if done else None,
        "jct_p95_s": float(np.percentile(jct, 95)) if done else None,
        "makespan_s": (max(j["completed_s"] for j in done) - min(arrivals)) if done else None,
        "busy_s": busy if done else None,
        "throughput_jps": len(done) / busy if done and busy > 0 else None,
        "arrival_rate_jps": rate,
        "offered_load": (rate * sum(service) / len(service)
                         if rate is not None and service else None),
    }
    return group, jobs


__all__ = ["busy_cores", "busy_intervals", "busy_period", "job_figures", "per_job",
           "stream_figures"]
