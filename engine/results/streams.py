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
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def busy_period(intervals: Sequence[tuple[float, float]]) -> float:
    """The length of the union of ``[start, end]`` intervals, s (0.0 for none)."""
    total = 0.0
    cur_start = cur_end = None
    for start, end in sorted(intervals):
        if cur_end is None or start > cur_end:
            if cur_end is not None and cur_start is not None:
                total += cur_end - cur_start
            cur_start, cur_end = start, end
        else:
            cur_end = max(cur_end, end)
    if cur_end is not None and cur_start is not None:
        total += cur_end - cur_start
    return total


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


__all__ = ["busy_period", "job_figures", "stream_figures"]
