"""The speedups over seq of a plain campaign's cells, from its normalised rows in plain
Python and numpy: what :func:`engine.results.analysis.speedups` gives for them (the ratio of
means, the bootstrap interval, the pass counts, the cores used), without its pandas.

Why: the dashboard's "speedup so far" strip reruns the analysis at cell ends; on the
60-odd rows of a campaign :func:`~engine.results.analysis.speedups` costs ~40 ms of CPU a
call, nearly all of it pandas' fixed cost per operation (merges, group-bys, the host
conditions, accuracy and time to best the strip never shows), about a third of the
dashboard's CPU over a long campaign (issue 47, item 2's 5 % of a core). Here the same
numbers cost ~2 ms.

Only the plain case is answered (:func:`light_speedups` returns None otherwise, and the
caller runs the whole analysis): every row ``ok``, every cell uncompiled (``compile_mode``
``off``) under fifo (an empty scheduler is fifo), none packed over several devices, no
``baseline_precision``. Then, as in the analysis (its module doc has the rules): a cell is
the provenance key and :data:`~engine.results.analysis.CELL_COLUMNS`; its baseline the
seq rows of the same provenance key, experiment, workload, K and precision; ``speedup`` the
baseline's mean ``T_group`` ÷ the cell's (NaN where not finite); the interval the
analysis's own bootstrap (:func:`~engine.results.analysis._replicate_means` and
:func:`~engine.results.analysis._percentiles` on the same samples, in the same order and
blocks, from the same seed: the same bounds to the bit) where both sides have
:data:`~engine.results.analysis.MIN_BOOT_N` rows; the cells in the analysis's order.

The means are correctly rounded sums (:func:`math.fsum`) over the count; pandas'
group-by mean sums with compensation, so a mean may differ from the analysis's in its last
bit: the strip shows two decimals (the tests pin its text against the whole analysis).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from engine.results.analysis import (
    CI_PERCENTILES,
    MIN_BOOT_N,
    _one_blas_thread,
    _percentiles,
    _replicate_means,
    cell_columns,
    provenance_columns,
)
from engine.results.derived import BASELINE_EXECUTOR, FIFO

#: Strategy cells resampled per block (as :func:`engine.results.analysis._bootstrap`).
_CHUNK = 1024


def _same(value: Any) -> Any:
    """A key value that compares equal to another missing one (NaN != NaN in a tuple;
    pandas' factorize and merge treat missing values alike)."""
    return None if isinstance(value, float) and math.isnan(value) else value


def _mean(values: Sequence[float]) -> float:
    return math.fsum(values) / len(values) if values else math.nan


def plain(rows: Sequence[dict[str, Any]]) -> bool:
    """Whether :func:`light_speedups` answers for ``rows``: all ``ok``, uncompiled, fifo,
    not packed over several devices, with a K (the analysis's cell codes treat a missing
    one in its own way)."""
    return all(r.get("status") == "ok" and r.get("compile_mode") == "off"
               and math.isfinite(r.get("K", math.nan))
               and (r.get("scheduler") or FIFO) == FIFO
               and "," not in str(r.get("packed_devices") or "") for r in rows)


def light_speedups(rows: Sequence[dict[str, Any]], n_boot: int = 2000, seed: int = 0
                   ) -> list[dict[str, Any]] | None:
    """One dict per cell of ``rows`` (normalised group rows as
    :func:`engine.results.load.runs_from_frames` makes them: numbers as floats, NaN
    missing; in load order), in :func:`engine.results.analysis.speedups`' order, holding
    its cell columns and ``speedup``, ``ci_low``, ``ci_high`` (NaN: no interval),
    ``n_strategy``, ``n_seq`` (ints), ``T_group_mean`` (s) and ``cores_used_mean`` (NaN
    where no row recorded a positive one). None when the rows are not :func:`plain`."""
    if not plain(rows):
        return None
    keys = cell_columns()
    prov = provenance_columns()
    base_keys = [*prov, "exp_id", "workload_key", "K", "precision"]
    cells: dict[tuple[Any, ...], list[int]] = {}  # first appearance order: the codes'
    bases: dict[tuple[Any, ...], list[int]] = {}
    ok = [i for i, r in enumerate(rows) if not math.isnan(r["T_group"])]
    for i in ok:
        row = rows[i]
        cells.setdefault(tuple(_same(row.get(c)) for c in keys), []).append(i)
        if row["executor"] == BASELINE_EXECUTOR:
            bases.setdefault(tuple(_same(row.get(c)) for c in base_keys), []).append(i)
    base_code = {key: code for code, key in enumerate(bases)}
    out: list[dict[str, Any]] = []
    for members in cells.values():
        first = rows[members[0]]
        base = tuple(_same(first.get(c)) for c in base_keys)
        seq = bases.get(base, [])
        times = [rows[i]["T_group"] for i in members]
        cores = [c for i in members if (c := rows[i].get("cores_used", math.nan)) > 0]
        mean = _mean(times)
        ratio = _mean([rows[i]["T_group"] for i in seq]) / mean if seq and mean else math.nan
        is_seq = first["executor"] == BASELINE_EXECUTOR
        out.append({**{c: first.get(c) for c in keys},
                    "speedup": 1.0 if is_seq else (ratio if math.isfinite(ratio) else math.nan),
                    "ci_low": math.nan, "ci_high": math.nan, "n_strategy": len(members),
                    "n_seq": len(seq), "T_group_mean": mean,
                    "cores_used_mean": _mean(cores), "_rows": members, "_first": members[0],
                    "_base": base_code.get(base), "_seq": is_seq})
    boot = [c for c in out if not c["_seq"] and c["_base"] is not None
            and c["n_strategy"] >= MIN_BOOT_N and c["n_seq"] >= MIN_BOOT_N]
    if n_boot > 0 and boot:
        with _one_blas_thread():
            _bootstrap(rows, boot, list(bases.values()), n_boot, seed)
    # the analysis's order: provenance key, experiment (each by first appearance), seq first
    p_first: dict[tuple[Any, ...], int] = {}
    e_first: dict[tuple[Any, ...], int] = {}
    for c in out:
        p = tuple(_same(c[k]) for k in prov)
        p_first[p] = min(p_first.get(p, c["_first"]), c["_first"])
        e = (*p, _same(c["exp_id"]))
        e_first[e] = min(e_first.get(e, c["_first"]), c["_first"])

    def order(c: dict[str, Any]) -> tuple[int, int, int, int]:
        p = tuple(_same(c[k]) for k in prov)
        return p_first[p], e_first[(*p, _same(c["exp_id"]))], int(not c["_seq"]), c["_first"]

    out.sort(key=order)
    for c in out:
        for private in ("_rows", "_first", "_base", "_seq"):
            del c[private]
    return out


def _samples(rows: Sequence[dict[str, Any]], groups: list[list[int]]
             ) -> tuple[list[int], np.ndarray, np.ndarray]:
    """The ``T_group`` samples of ``groups`` (each a list of row positions, by owner
    code), ordered by size then code, each in load order: (the codes in that order, their
    sizes, the values), as :func:`engine.results.analysis._samples` orders them."""
    order = sorted(range(len(groups)), key=lambda o: (len(groups[o]), o))
    sizes = np.array([len(groups[o]) for o in order], dtype=np.int64)
    values = np.array([rows[i]["T_group"] for o in order for i in groups[o]], dtype=float)
    return order, sizes, values


def _bootstrap(rows: Sequence[dict[str, Any]], boot: list[dict[str, Any]],
               bases: list[list[int]], n_boot: int, seed: int) -> None:
    """Fill ``ci_low`` and ``ci_high`` of each of ``boot`` (cells in code order with a
    base code ``_base``): :func:`engine.results.analysis._bootstrap`'s steps on the same
    arrays."""
    weights: dict = {}
    wanted = sorted({c["_base"] for c in boot})
    base_order, base_sizes, base_values = _samples(rows, [bases[b] for b in wanted])
    seq_means = _replicate_means(base_values, base_sizes, n_boot, seed, 1, weights)
    base_at = {wanted[o]: position for position, o in enumerate(base_order)}
    cell_order, cell_sizes, cell_values = _samples(rows, [c["_rows"] for c in boot])
    pair_base = np.array([base_at[boot[o]["_base"]] for o in cell_order], dtype=np.int64)
    starts = np.concatenate([[0], np.cumsum(cell_sizes)])
    for lo in range(0, len(cell_order), _CHUNK):
        hi = min(lo + _CHUNK, len(cell_order))
        means = _replicate_means(cell_values[starts[lo]:starts[hi]], cell_sizes[lo:hi],
                                 n_boot, seed, 0, weights)
        ratios = seq_means[pair_base[lo:hi]]
        with np.errstate(divide="ignore", invalid="ignore"):
            np.divide(ratios, means, out=ratios)
        low, high = _percentiles(ratios, CI_PERCENTILES)
        for k, o in enumerate(cell_order[lo:hi]):
            boot[o]["ci_low"], boot[o]["ci_high"] = float(low[k]), float(high[k])
