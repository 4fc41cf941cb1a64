"""Strategies compared on one stream (issue 51): ``report``'s streams table and its
``--json`` section ``streams``. Torch-free.

A *stream cell* of the report pools the ok group rows of one configuration on one stream
and machine: the same ``stream_sha256``, ``config_key`` (executor, options, variant; the
pass left out) and provenance (``engine.results.analysis.provenance_columns``). Per
figure (:data:`FIGURES`: the per-stream columns of docs/measurement.md, "Streams") it
gives the mean over the passes that recorded it and, with at least
:data:`~engine.results.analysis.MIN_BOOT_N` of them, a 95 % percentile-bootstrap interval
of that mean (2,000 resamples of the passes, seeded: the same rows give the same
interval); fewer passes: no interval ("n/a"). Strategies on the same stream are listed
together, seq first.
"""

from __future__ import annotations

import math
from typing import Any

#: The per-stream figures compared, in the table's order.
FIGURES: tuple[str, ...] = ("jct_mean_s", "jct_p50_s", "jct_p95_s", "throughput_jps",
                            "offered_load", "makespan_s", "busy_s", "busy_cores_used",
                            "energy_per_job_j", "cpu_energy_per_job_j")
#: Bootstrap resamples of an interval, and the generator's seed.
N_BOOT = 2000
SEED = 0


def mean_interval(values: list[float], n_boot: int = N_BOOT, seed: int = SEED
                  ) -> tuple[float | None, float | None, float | None]:
    """``(mean, low, high)`` of ``values`` (NaN left out): the mean, and the 95 %
    percentile-bootstrap interval of the mean when at least ``MIN_BOOT_N`` values remain
    (else None, None); all None for no value."""
    import numpy as np

    from engine.results.analysis import CI_PERCENTILES, MIN_BOOT_N

    data = np.array([v for v in values if v is not None and not math.isnan(v)], dtype=float)
    if not len(data):
        return None, None, None
    mean = float(data.mean())
    if len(data) < MIN_BOOT_N:
        return mean, None, None
    rng = np.random.default_rng(seed)
    means = data[rng.integers(0, len(data), size=(n_boot, len(data)))].mean(axis=1)
    low, high = np.percentile(means, CI_PERCENTILES)
    return mean, float(low), float(high)


def stream_cells(groups: Any, by_campaign: bool = False) -> list[dict[str, Any]]:
    """The report's stream cells from a ``Runs.groups`` frame (``[]`` without stream
    rows), each a JSON-able dict: provenance, ``stream_sha256``, ``executor``,
    ``compile_mode``, ``max_parallel`` (the most that ran at once, its largest over the
    passes), ``config_key``, ``passes``, ``stream_jobs``, ``arrival_rate_jps`` and
    ``figures``: ``{name: {"mean", "ci_low", "ci_high", "n"}}`` (None where not known)."""
    from engine.results.analysis import provenance_columns

    if "stream_sha256" not in groups.columns or not len(groups):
        return []
    sha = groups["stream_sha256"].fillna("").astype(str)
    ok = groups.loc[((groups["status"] == "ok") & (sha != "")).to_numpy()]
    if not len(ok):
        return []
    prov = [c for c in provenance_columns(by_campaign) if c in ok.columns]
    keys = [*prov, "stream_sha256", "config_key"]
    out = []
    for _, rows in ok.groupby(keys, sort=False, dropna=False):
        first = rows.iloc[0]
        figures = {}
        for name in FIGURES:
            values = [float(v) for v in rows[name]] if name in rows.columns else []
            mean, low, high = mean_interval(values)
            figures[name] = {"mean": mean, "ci_low": low, "ci_high": high,
                             "n": sum(1 for v in values if not math.isnan(v))}
        out.append({
            **{c: _plain(first[c]) for c in prov},
            "stream_sha256": str(first["stream_sha256"]), "executor": str(first["executor"]),
            "compile_mode": str(first["compile_mode"]),
            "max_parallel": _count(rows["max_parallel"].max()),
            "config_key": str(first["config_key"]), "passes": len(rows),
            "stream_jobs": _count(first.get("stream_jobs")),
            "arrival_rate_jps": _plain(first.get("arrival_rate_jps")),
            "figures": figures})
    # the strategies on one stream together, seq first, then in the order they ran
    order = {sha: i for i, sha in enumerate(dict.fromkeys(c["stream_sha256"] for c in out))}
    return sorted(out, key=lambda c: (order[c["stream_sha256"]], c["executor"] != "seq"))


def _plain(value: Any) -> Any:
    """A JSON value: NaN and None as None, numbers as Python floats (a column's type does
    not change from one row to the next), anything else as its text ("" as None)."""
    if value is None:
        return None
    if isinstance(value, float | int) or hasattr(value, "item"):
        number = float(value)
        return None if math.isnan(number) else number
    return str(value) or None


def _count(value: Any) -> Any:
    """A count as a JSON integer (``2``, not the frame's ``2.0``); None when missing."""
    number = _plain(value)
    return int(number) if isinstance(number, float) and number.is_integer() else number


__all__ = ["FIGURES", "mean_interval", "stream_cells"]
