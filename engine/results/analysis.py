"""Analysis of the loaded results (:func:`engine.results.load.load_runs`): speedups with
confidence intervals, accuracy parity, rows per cell and status.

One module serves ``--batch``'s summary, ``fugue-tui report``, the dashboard and exports. It
imports pandas and numpy (the runner never imports it) but no UI library and no torch.

Only rows with ``status == "ok"`` enter any statistic.

Which rows are pooled and compared is decided here; the values formed from them (the
speedup ratio, energy per model, parity, the time-to-best ratio) are each computed by
their one function in the derived-metrics registry (:mod:`engine.results.derived`, which
also declares :data:`BASELINE_EXECUTOR`; re-exported here for the readers that import it
from this module).

Provenance
    A speedup divides two measurements, which only means something when both come from the
    same machine and software stack. The provenance key is ``machine`` (the ``host``
    column; for harness rows, which have none, ``"<cpu_model> (<cpu_cores> cores)"``),
    ``gpu_name``, ``torch_version``, ``cuda_version`` and, with ``by_campaign=True``,
    ``campaign_hash``. Speedups are computed only between rows sharing the whole key.

Speedup (:func:`speedups`)
    docs/fugue-compat.md, "Speedup": *speedup(strategy, experiment) = mean over passes of seq
    ``T_group`` ÷ mean over passes of the strategy's ``T_group`` (a ratio of means, not a
    mean of ratios) ... seq's own speedup is 1. For compiled cells the compiled seq baseline
    is used when one exists.* A cell is (provenance key, ``exp_id``, ``executor``,
    ``compile_mode``, ``scheduler``, ``features``). The baseline of a cell is the pooled seq
    rows of the same provenance key and experiment with the same ``compile_mode`` when the
    cell is compiled and such rows exist (``baseline = "seq compile=<mode>"``), else the
    uncompiled seq rows (``baseline = "seq"``); none: NaN and ``baseline = ""``. Like with
    like in precision too: the baseline has the cell's ``precision`` (what ran: a bf16
    unified cell divides bf16 seq rows, labelled ``seq bf16``), unless ``baseline_precision``
    names one precision for every cell (``fugue-tui report --baseline fp32``: each
    precision, seq's own included, against fp32 seq; labelled ``seq fp32``).
    The seq baseline is seq under ``fifo`` (an empty scheduler is fifo): a seq cell that
    early-stops trials (``scheduler`` sha/asha/...) is a strategy with its own speedup over
    seq fifo, never part of a baseline.

Time to best (hpo, issue 25)
    ``ttb_speedup`` = mean seq ``time_to_best_s`` under the *same* scheduler ÷ the cell's
    mean, only where every row on both sides made the same early-stopping decisions
    (:func:`decision_sets`; sha always does, asynchronous schedulers when they happen to);
    otherwise NaN with ``ttb_baseline = "seq <scheduler>: decisions differ"``. ``acc_mean``
    averages completed trials only (a trial stopped early says nothing about where its
    configuration ends), and ``best_val_metric_mean`` is the best trial's metric.

Confidence interval
    Percentile bootstrap (Efron & Tibshirani, *An Introduction to the Bootstrap*, 1993,
    ch. 13, the percentile interval): each side's ``T_group`` values are resampled with
    replacement, independently, ``n_boot`` times; each replicate gives a ratio of resampled
    means; the 2.5th and 97.5th percentiles of the replicates bound the 95 % interval. Only
    when both sides have at least :data:`MIN_BOOT_N` rows; otherwise ``ci_low``/``ci_high``
    are NaN and ``ci = "n/a"`` — an interval from two or three passes would be invented.

    Vectorised: a replicate mean of a sample of size n is ``values @ counts / n`` where
    ``counts`` (n_boot × n) holds how often each value was drawn. The count matrix for a
    sample size n and side (strategy or seq) comes from
    ``numpy.random.default_rng([seed, side, n])`` and is shared by every cell of that size,
    so one matrix product resamples all of them at once, and a cell's interval depends only
    on its own values and ``seed``, not on which other cells were loaded. Each cell's
    strategy and seq resamples are independent (different streams). Replicate means are
    computed in float32 (relative rounding ~1e-7, far below the interval's own Monte Carlo
    error of ~1e-2) and BLAS runs on one thread (see :func:`_one_blas_thread`).
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from engine.results import conditions
from engine.results.derived import (  # noqa: F401 - BASELINE_EXECUTOR, PARITY_*: re-exported
    BASELINE_EXECUTOR,
    FIFO,
    PARITY_NA,
    PARITY_OUTSIDE,
    PARITY_WITHIN,
    derived,
)
from engine.results.load import Runs
from engine.results.same_weights import same_weights

#: Fewest rows on each side (strategy and seq) for a bootstrap interval.
MIN_BOOT_N = 5
#: Percentiles of the bootstrap replicates bounding the interval (95 %).
CI_PERCENTILES = (2.5, 97.5)
#: The ``ci`` label when no interval is computed.
NO_CI = "n/a"

#: Provenance columns (see the module doc); ``campaign_hash`` is added with ``by_campaign``.
PROVENANCE_COLUMNS: tuple[str, ...] = ("machine", "gpu_name", "torch_version", "cuda_version")
#: What identifies a cell within a provenance key.
#: What makes two rows the same configuration. ``rung`` too: ablation rungs whose effective
#: features coincide on a device (B and C on CPU, where there are no streams) are still
#: different requests and are never pooled with each other or with plain cells.
#: ``K`` too (issue 23): the cells of a K sweep share ``exp_id`` and differ by K; our rows'
#: ``config_key`` already tells them apart, rows without one (the harness's) need K.
CELL_COLUMNS: tuple[str, ...] = ("exp_id", "executor", "compile_mode", "scheduler", "features",
                                 "rung", "config_key", "mp_start", "tune_actors", "precision",
                                 "K")
#: What pairs a cell with its seq baseline for time to best, within a provenance key: the
#: same experiment, workload, K, precision, compile mode and scheduler (``sched``; an empty
#: scheduler is fifo). The decisions comparison pairs by it too (engine.results.decision_diff).
TTB_BASELINE_COLUMNS: tuple[str, ...] = ("exp_id", "workload_key", "K", "precision",
                                         "compile_mode", "sched")


# --------------------------------------------------------------------------- speedups

def provenance_columns(by_campaign: bool = False) -> list[str]:
    return list(PROVENANCE_COLUMNS) + (["campaign_hash"] if by_campaign else [])


def cell_columns(by_campaign: bool = False) -> list[str]:
    """The columns identifying a cell: provenance key + :data:`CELL_COLUMNS`."""
    return provenance_columns(by_campaign) + list(CELL_COLUMNS)


def _codes(frame: pd.DataFrame, columns: Sequence[str]) -> np.ndarray:
    """One int64 code per distinct combination of ``columns`` (fast multi-key grouping)."""
    if not len(frame):
        return np.zeros(0, dtype=np.int64)
    combined = np.zeros(len(frame), dtype=np.int64)
    for column in columns:
        codes, uniques = pd.factorize(frame[column], sort=False)
        combined = combined * (len(uniques) + 1) + codes
        combined, _ = pd.factorize(combined, sort=False)  # keep the codes small
        combined = combined.astype(np.int64)
    return combined


def _count_matrix(n: int, n_boot: int, seed: int, side: int) -> np.ndarray:
    """Resampling weights for a sample of size ``n``: ``w[i, b]`` = how often value ``i``
    was drawn in replicate ``b``, divided by ``n`` (so ``values @ w`` are replicate means).

    Drawn from ``numpy.random.default_rng([seed, side, n])``: the same for every sample of
    size ``n`` on that side (0 strategy, 1 seq), whatever else was loaded."""
    rng = np.random.default_rng([seed, side, n])
    draws = rng.integers(0, n, size=(n, n_boot))  # column b: the n draws of replicate b
    draws *= n_boot
    draws += np.arange(n_boot)
    counts = np.bincount(draws.ravel(), minlength=n * n_boot).reshape(n, n_boot)
    return np.multiply(counts, 1.0 / n, dtype=np.float32)


def _replicate_means(values: np.ndarray, sizes: np.ndarray, n_boot: int, seed: int, side: int,
                     weights: dict) -> np.ndarray:
    """Bootstrap replicate means of consecutive samples: (len(sizes) × n_boot).

    ``values`` holds the samples one after the other (sample ``o`` has ``sizes[o]``
    values), with ``sizes`` in ascending order, so that the samples of each size form one
    (count × size) matrix and one matrix product resamples them all. ``weights`` caches
    the :func:`_count_matrix` of each size.
    """
    out = np.empty((len(sizes), n_boot), dtype=np.float32)
    at = 0
    for n in np.unique(sizes):
        members = np.flatnonzero(sizes == n)
        first, count = int(members[0]), len(members)
        key = (int(n), side)
        if key not in weights:
            weights[key] = _count_matrix(int(n), n_boot, seed, side)
        block = values[at:at + count * int(n)].reshape(count, int(n)).astype(np.float32)
        np.matmul(block, weights[key], out=out[first:first + count])
        at += count * int(n)
    return out


def _one_blas_thread():
    """A context running BLAS on one thread (threadpoolctl, a scikit-learn dependency).

    The bootstrap's matrix products are thin (n × n_boot with n the pass count); a
    multi-threaded BLAS gains nothing on them and, on a busy machine, its spinning worker
    threads made the whole call 2-3× slower (bench part results_scale). Without
    threadpoolctl: no change."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        return contextlib.nullcontext()
    return threadpool_limits(limits=1, user_api="blas")


def _percentiles(replicates: np.ndarray, percentiles: Sequence[float]) -> np.ndarray:
    """``np.percentile(replicates, percentiles, axis=1)`` (linear interpolation), computed
    with one in-place partition of ``replicates`` (which it reorders) instead of a copy."""
    n = replicates.shape[1]
    positions = [(n - 1) * q / 100.0 for q in percentiles]
    kth = sorted({min(int(math.floor(h)) + d, n - 1) for h in positions for d in (0, 1)})
    replicates.partition(kth, axis=1)
    out = np.empty((len(percentiles), replicates.shape[0]))
    for i, h in enumerate(positions):
        lo = int(math.floor(h))
        hi = min(lo + 1, n - 1)
        out[i] = replicates[:, lo] + (h - lo) * (replicates[:, hi] - replicates[:, lo])
    return out


def _samples(rows: pd.DataFrame, owner: str, owners: np.ndarray
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The ``T_group`` samples of ``owners`` (cell or base codes), ordered by size then
    owner, each in load order: (owners in that order, their sizes, the values)."""
    sub = rows[rows[owner].isin(owners)]
    sizes = sub.groupby(owner).size()
    sub = sub.assign(_n=sub[owner].map(sizes)).sort_values(["_n", owner, "row"], kind="stable")
    ordered = sub[owner].drop_duplicates().to_numpy(np.int64)
    return ordered, sizes.loc[ordered].to_numpy(), sub["T_group"].to_numpy(float)


def _bootstrap(strategy: pd.DataFrame, seq: pd.DataFrame, cells: np.ndarray, bases: np.ndarray,
               n_boot: int, seed: int, chunk: int = 1024) -> tuple[np.ndarray, np.ndarray]:
    """Percentile intervals of seq mean ÷ strategy mean for each (``cells[i]``,
    ``bases[i]``) pair (each cell once): arrays ``low``, ``high`` in the order given.

    ``strategy``: rows with ``cell``, ``T_group``, ``row``; ``seq``: rows with ``base``,
    ``T_group``, ``row``.
    """
    weights: dict = {}
    base_order, base_sizes, base_values = _samples(seq, "base", bases)
    seq_means = _replicate_means(base_values, base_sizes, n_boot, seed, 1, weights)
    base_at = pd.Index(base_order)
    base_of = dict(zip(cells.tolist(), bases.tolist(), strict=False))
    cell_order, cell_sizes, cell_values = _samples(strategy, "cell", cells)
    pair_base = base_at.get_indexer([base_of[c] for c in cell_order.tolist()])
    low = np.empty(len(cell_order))
    high = np.empty(len(cell_order))
    # Strategy cells in chunks: memory stays at a few chunk × n_boot arrays.
    starts = np.concatenate([[0], np.cumsum(cell_sizes)])
    for lo in range(0, len(cell_order), chunk):
        hi = min(lo + chunk, len(cell_order))
        means = _replicate_means(cell_values[starts[lo]:starts[hi]], cell_sizes[lo:hi],
                                 n_boot, seed, 0, weights)
        ratios = seq_means[pair_base[lo:hi]]
        with np.errstate(divide="ignore", invalid="ignore"):
            np.divide(ratios, means, out=ratios)
        low[lo:hi], high[lo:hi] = _percentiles(ratios, CI_PERCENTILES)
    position = pd.Index(cell_order).get_indexer(cells)
    return low[position], high[position]


def _ci_label(low: float, high: float) -> str:
    if not (math.isfinite(low) and math.isfinite(high)):
        return NO_CI
    return f"[{low:.3f}, {high:.3f}]"


SPEEDUP_COLUMNS: tuple[str, ...] = (
    "mode", "K", "n_strategy", "n_seq", "T_group_mean", "T_group_std",
    "throughput_group_mean", "train_throughput_mean", "energy_per_model_j", "energy_n",
    "vram_peak_mb_max",
    "speedup", "ci_low", "ci_high", "ci", "baseline", "acc_mean", "acc_n", "seq_acc_mean",
    "seq_acc_min", "seq_acc_max", "parity", "setup_s_mean",
    # hpo (issue 25): time to best, its speedup over seq under the same scheduler with the
    # same decisions, and the best trial's metric beside the mean over completed trials.
    "time_to_best_mean", "ttb_speedup", "ttb_baseline", "best_val_metric_mean",
    # issue 42: the weakest parity_contract of the cell's ok rows (None: none recorded)
    "parity_contract",
    # issue 45: parity judges the validation loss too (engine.results.derived.parity)
    "loss_mean", "seq_loss_mean", "seq_loss_min", "seq_loss_max", "parity_failed",
    "parity_on",
    # issue 46: the host's load over the cell's and its baseline's rows, busy and short
    # windows (engine.results.conditions)
    *conditions.COLUMNS,
    # issue 46: mean cores_used over the cell's ok rows that recorded one (NaN: none did),
    # printed beside each speedup: a speedup on a CPU campaign is partly cores
    "cores_used_mean",
    # issue 50: "n of K" jobs with the same weights_sha256 as seq's (engine.results.
    # same_weights), beside the parity verdict; "n/a" where it cannot be judged
    "same_weights",
)


def speedups(runs: Runs, by_campaign: bool = False, n_boot: int = 2000,
             seed: int = 0, baseline_precision: str | None = None) -> pd.DataFrame:
    """One row per cell (provenance key × ``exp_id`` × ``executor`` × ``compile_mode`` ×
    ``scheduler`` × ``features``) of the ok rows, with its speedup over seq.

    ``speedup`` = mean seq ``T_group`` ÷ mean strategy ``T_group`` over passes — a ratio of
    means (docs/fugue-compat.md, "Speedup"), never a mean of per-pass ratios; seq's own is 1.
    Baseline choice and labels, and the percentile bootstrap interval (Efron & Tibshirani
    1993; ``n_boot`` replicates from ``seed``, only with >= :data:`MIN_BOOT_N` rows on both
    sides, else ``ci = "n/a"``): see the module doc. ``n_boot=0`` skips the bootstrap.

    Columns: the provenance and cell columns, then :data:`SPEEDUP_COLUMNS`:
    ``n_strategy``/``n_seq`` rows on each side; ``T_group_mean``/``T_group_std`` (s);
    ``throughput_group_mean`` and ``train_throughput_mean`` (samples/s; the latter NaN in
    harness rows, which lack the column); ``energy_per_model_j`` = mean of
    ``energy_group / K`` over the rows that measured energy (``energy_n`` of them; NaN
    when none did); ``vram_peak_mb_max``; ``acc_mean`` = mean ``final_val_acc`` over the
    cell's ok jobs (``acc_n``), against the baseline's jobs' mean, min and max, and the
    same of ``final_val_loss`` (``loss_mean``, ``seq_loss_*``);
    ``parity`` = "within seq spread" when both lie in the baseline's [min, max] widened
    by the precision's band, "outside seq spread" otherwise (``parity_failed`` names
    which), "n/a" without job rows on either side (:func:`engine.results.derived.parity`;
    ``parity_on``: what was judged); ``setup_s_mean``
    (s) = mean ``setup_s``, the strategy's set-up outside ``T_group``, shown beside it (the
    window rule, docs/measurement.md; NaN where no row recorded it); ``cores_used_mean`` =
    mean ``cores_used`` (CPU cores the cell's processes used over the window) over the rows
    that recorded it (a value that is no positive number is not recorded), NaN where none
    did (never 0).
    """
    prov = provenance_columns(by_campaign)
    keys = cell_columns(by_campaign)
    g = runs.groups
    needed = list(dict.fromkeys(keys + ["mode", "workload_key", "group_id", "K", "T_group",
                                        "throughput_group",
                                        "train_throughput_sps", "energy_group", "vram_peak_mb",
                                        "setup_s", "row"]))
    extra = [c for c in ("time_to_best_s", "best_val_metric", "packed_devices",
                         "parity_contract", "host_load_start", "host_load_end", "cpu_cores",
                         "cores_used")
             if c in g.columns and c not in needed]
    ok = g.loc[((g["status"] == "ok") & g["T_group"].notna()).to_numpy(), needed + extra]
    if not len(ok):
        return pd.DataFrame(columns=keys + [c for c in SPEEDUP_COLUMNS if c not in keys])
    for column in ("time_to_best_s", "best_val_metric", "cores_used"):
        if column not in ok.columns:
            ok[column] = np.nan
    # a cores_used that is no positive number (a hand-edited 0) was not recorded: the
    # table shows it missing, as the advice's per-core ranking treats it (one rule)
    cores = pd.to_numeric(ok["cores_used"], errors="coerce")
    ok["cores_used"] = cores.where(cores > 0)
    sched = ok["scheduler"].fillna("").astype(str)
    ok = ok.assign(cell=_codes(ok, keys),
                   energy_per_model=derived("energy_per_model_j").compute(ok["energy_group"],
                                                                          ok["K"]),
                   sched=sched.where(sched != "", FIFO))
    cells = _cell_stats(ok, keys)
    # Seq baselines: pooled seq rows per provenance key × experiment × workload (same
    # experiment definition, jobs, seed and threads; empty in harness rows) × K (the
    # harness's rows have no workload_key, and a K sweep's cells share exp_id) × precision
    # (what ran) × compile mode × scheduler. T_group speedups divide by seq under fifo
    # (issue 25: a seq asha cell, whose trials stop early, never enters a fifo baseline); a
    # seq cell under another scheduler is a strategy like any other, with its speedup over
    # seq fifo.
    base_keys = prov + ["exp_id", "workload_key", "K", "precision", "compile_mode", "sched"]
    all_seq = ok[ok["executor"] == BASELINE_EXECUTOR]
    all_seq = all_seq.assign(base=_codes(all_seq, base_keys))
    seq_rows = all_seq[all_seq["sched"] == FIFO]
    cells, is_seq, has_base = _against_baselines(cells, seq_rows, prov, base_keys,
                                                 baseline_precision)
    has_base, packed = _unpack_baselines(cells, ok, has_base)
    _intervals(cells, ok, seq_rows, is_seq, has_base, n_boot, seed)
    _accuracy(cells, ok, seq_rows, runs.jobs)
    conditions.fill(cells, ok, seq_rows)  # issue 46: how busy the host was, short windows
    _time_to_best(cells, ok, all_seq, prov, runs.jobs)
    cells["parity_contract"] = _contracts(cells, ok)
    cells["same_weights"] = same_weights(cells, ok, seq_rows, all_seq,
                                         prov + list(TTB_BASELINE_COLUMNS), runs.jobs)
    if packed.any():  # nor a time-to-best speedup over a one-GPU seq
        cells.loc[packed, "ttb_speedup"] = np.nan
        cells.loc[packed, "ttb_baseline"] = PACKED_BASELINE
    # Order: provenance key, experiment (each by first appearance), seq first, then cells.
    first = cells.groupby(prov, sort=False)["first_row"].transform("min")
    exp_first = cells.groupby(prov + ["exp_id"], sort=False)["first_row"].transform("min")
    cells = cells.assign(_p=first, _e=exp_first, _s=(~is_seq).astype(int)) \
        .sort_values(["_p", "_e", "_s", "first_row"], kind="stable")
    return cells[keys + [c for c in SPEEDUP_COLUMNS if c not in keys]].reset_index(drop=True)


def _contracts(cells: pd.DataFrame, ok: pd.DataFrame) -> list[str | None]:
    """Each cell's ``parity_contract``: the weakest of its ok rows' values
    (:func:`engine.results.parity_contract.weakest`); None where no row recorded one or
    one holds a value outside the column's grammar (nothing is claimed from it)."""
    from engine.results.parity_contract import weakest

    if "parity_contract" not in ok.columns:
        return [None] * len(cells)
    by_cell: dict[Any, str | None] = {}
    for code, values in ok.groupby("cell", sort=False)["parity_contract"]:
        try:
            by_cell[code] = weakest(values.tolist())
        except ValueError:
            by_cell[code] = None
    return [by_cell.get(code) for code in cells["cell"]]


#: The ``baseline`` text of a cell packed over several GPUs (issue 27): no speedup.
PACKED_BASELINE = "none: packed over several GPUs (no single-GPU seq baseline)"


def _unpack_baselines(cells: pd.DataFrame, ok: pd.DataFrame, has_base: np.ndarray
                      ) -> tuple[np.ndarray, np.ndarray]:
    """Cells whose rows packed their jobs over several GPUs (``packed_devices``, mp's
    ``devices``) lose their speedup: seq ran on one GPU, so the ratio would credit the
    strategy with the extra devices. Their ``baseline`` says so; returns ``has_base``
    without them (no interval either) and which cells they are."""
    none = np.zeros(len(cells), dtype=bool)
    if "packed_devices" not in ok.columns:
        return has_base, none
    devices = ok["packed_devices"].fillna("").astype(str)
    packed_codes = set(ok.loc[(devices.str.count(",") >= 1).to_numpy(), "cell"])
    if not packed_codes:
        return has_base, none
    packed = cells["cell"].isin(packed_codes).to_numpy()
    cells.loc[packed, "speedup"] = np.nan
    cells.loc[packed, "baseline"] = PACKED_BASELINE
    return has_base & ~packed, packed


def _cell_stats(ok: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """Per cell (``ok["cell"]``): its key columns and the vectorised aggregates."""
    grouped = ok.groupby("cell", sort=False)
    cells = grouped[keys + ["mode", "workload_key", "sched"]].first()
    stats = grouped.agg(
        n_strategy=("T_group", "size"), T_group_mean=("T_group", "mean"),
        T_group_std=("T_group", "std"), throughput_group_mean=("throughput_group", "mean"),
        train_throughput_mean=("train_throughput_sps", "mean"),
        energy_per_model_j=("energy_per_model", "mean"), energy_n=("energy_per_model", "count"),
        vram_peak_mb_max=("vram_peak_mb", "max"), setup_s_mean=("setup_s", "mean"),
        time_to_best_mean=("time_to_best_s", "mean"),
        best_val_metric_mean=("best_val_metric", "mean"), first_row=("row", "min"),
        cores_used_mean=("cores_used", "mean"))
    return cells.join(stats)


def _against_baselines(cells: pd.DataFrame, seq_rows: pd.DataFrame, prov: list[str],
                       base_keys: list[str], baseline_precision: str | None = None
                       ) -> tuple[pd.DataFrame, np.ndarray, np.ndarray]:
    """Each cell's seq baseline (``base``, ``n_seq``, ``baseline``: the compiled baseline
    where it exists, else the uncompiled one; of the cell's precision, or of
    ``baseline_precision`` for every cell) and its ``speedup`` (seq's own: 1, when it is
    its own baseline). Returns the cells (index reset) and which are seq cells that are
    their own baseline and which have a baseline."""
    seq_grouped = seq_rows.groupby("base", sort=False)
    bases = seq_grouped[base_keys].first().join(
        seq_grouped.agg(n_seq=("T_group", "size"), seq_T=("T_group", "mean")))
    bases = bases.reset_index()
    cells = cells.reset_index()
    # Every cell looks up seq under fifo (``seq_rows`` holds only those), of its own
    # precision or of ``baseline_precision``.
    wanted = cells[base_keys].assign(sched=FIFO)
    if baseline_precision is not None:
        wanted["precision"] = baseline_precision
    same = wanted.merge(bases, on=base_keys, how="left")
    plain = prov + ["exp_id", "workload_key", "K", "precision", "sched"]
    uncompiled = wanted[plain].merge(
        bases[bases["compile_mode"] == "off"].drop(columns="compile_mode"),
        on=plain, how="left")
    use_same = (cells["compile_mode"].to_numpy() != "off") & same["base"].notna().to_numpy()
    cells["base"] = np.where(use_same, same["base"], uncompiled["base"])
    cells["n_seq"] = np.where(use_same, same["n_seq"], uncompiled["n_seq"])
    seq_T = np.where(use_same, same["seq_T"], uncompiled["seq_T"])
    has_base = ~np.isnan(cells["base"].to_numpy(float))
    base_precision = wanted["precision"].astype(str)
    # "seq", "seq compile=<mode>", with the baseline's precision unless it is fp32 (and
    # always under a --baseline: "seq fp32")
    shown = np.where((base_precision != "fp32") | (baseline_precision is not None),
                     " " + base_precision, "")
    cells["baseline"] = np.where(
        use_same, f"{BASELINE_EXECUTOR} compile=" + cells["compile_mode"].astype(str) + shown,
        np.where(has_base, BASELINE_EXECUTOR + pd.Series(shown, index=cells.index), ""))
    speedup = derived("speedup").compute(seq_T, cells["T_group_mean"].to_numpy(float))
    is_seq = ((cells["executor"] == BASELINE_EXECUTOR)
              & (cells["precision"].astype(str) == base_precision)
              & (cells["sched"] == FIFO)).to_numpy()
    cells["speedup"] = np.where(is_seq, 1.0, speedup)  # its own baseline: exactly 1
    cells["n_seq"] = np.nan_to_num(cells["n_seq"].to_numpy(float)).astype(int)  # a count: 0
    return cells, is_seq, has_base


def _intervals(cells: pd.DataFrame, ok: pd.DataFrame, seq_rows: pd.DataFrame,
               is_seq: np.ndarray, has_base: np.ndarray, n_boot: int, seed: int) -> None:
    """Fill ``ci_low``, ``ci_high`` and ``ci`` of ``cells`` (in place): bootstrap intervals
    where both sides have enough rows."""
    cells["ci_low"] = np.nan
    cells["ci_high"] = np.nan
    boot = (~is_seq) & has_base & (cells["n_strategy"].to_numpy() >= MIN_BOOT_N) \
        & (cells["n_seq"].to_numpy() >= MIN_BOOT_N)
    if n_boot > 0 and boot.any():
        with _one_blas_thread():
            low, high = _bootstrap(ok[["cell", "T_group", "row"]],
                                   seq_rows[["base", "T_group", "row"]],
                                   cells.loc[boot, "cell"].to_numpy(np.int64),
                                   cells.loc[boot, "base"].to_numpy(np.int64), n_boot, seed)
        cells.loc[boot, "ci_low"] = low
        cells.loc[boot, "ci_high"] = high
    cells["ci"] = [_ci_label(lo, hi) for lo, hi in
                   zip(cells["ci_low"].to_numpy(), cells["ci_high"].to_numpy(), strict=False)]


def decision_sets(jobs: pd.DataFrame) -> pd.Series:
    """Per group id, its early-stopping decisions as one text (``job:epochs`` of each
    stopped trial, sorted; "" when none stopped): two cells made the same decisions when
    their texts are equal."""
    if not len(jobs) or "early_stopped" not in jobs.columns:
        return pd.Series(dtype=object)
    stopped = jobs["early_stopped"].astype(str).str.lower() == "true"
    marks = jobs["job_id"].astype(str) + ":" + jobs["epochs_run"].astype(str)
    frame = pd.DataFrame({"group_id": jobs["group_id"], "mark": marks.where(stopped)})
    return frame.groupby("group_id")["mark"].agg(
        lambda m: ",".join(sorted(x for x in m if isinstance(x, str))))


def _time_to_best(cells: pd.DataFrame, ok: pd.DataFrame, all_seq: pd.DataFrame,
                  prov: list[str], jobs: pd.DataFrame) -> None:
    """Fill ``ttb_speedup`` and ``ttb_baseline`` (in place): mean seq ``time_to_best_s``
    under the **same** scheduler (same provenance, experiment, workload, uncompiled or the
    same compile mode as for T_group) ÷ the cell's mean — only where every row on both
    sides made the same decisions (sha always does; asynchronous schedulers when they
    happen to). Else NaN, with the reason in ``ttb_baseline``."""
    cells["ttb_speedup"] = np.nan
    cells["ttb_baseline"] = ""
    if not ok["time_to_best_s"].notna().any():
        return
    sets = decision_sets(jobs)
    # each group's stop decisions as one text ("" without any); its own column name, not
    # the group column `decisions` (the decisions.json path, issue 46). As object before
    # filling: a map that found nothing is float64, which pandas will refuse to fill with "".
    ok = ok.assign(decision_set=ok["group_id"].map(sets).astype(object).fillna(""))
    all_seq = all_seq.assign(
        decision_set=all_seq["group_id"].map(sets).astype(object).fillna(""))
    by_cell = ok.groupby("cell")["decision_set"].agg(lambda d: tuple(sorted(set(d))))
    seq_key = prov + list(TTB_BASELINE_COLUMNS)
    seq_groups = all_seq.groupby(seq_key, sort=False)
    seq_ttb = seq_groups["time_to_best_s"].mean()
    seq_dec = seq_groups["decision_set"].agg(lambda d: tuple(sorted(set(d))))
    for idx, cell in cells.iterrows():
        if np.isnan(cell["time_to_best_mean"]):
            continue
        key = tuple(cell[c] for c in seq_key)
        if key not in seq_ttb.index or np.isnan(seq_ttb.loc[key]):
            continue
        label = f"{BASELINE_EXECUTOR} {cell['sched']}"
        mine, theirs = by_cell.get(cell["cell"], ()), seq_dec.loc[key]
        if len(mine) != 1 or mine != theirs:
            cells.loc[idx, "ttb_baseline"] = f"{label}: decisions differ"
            continue
        cells.loc[idx, "ttb_baseline"] = label
        cells.loc[idx, "ttb_speedup"] = derived("ttb_speedup").compute(
            seq_ttb.loc[key], cell["time_to_best_mean"])


def _accuracy(cells: pd.DataFrame, ok: pd.DataFrame, seq_rows: pd.DataFrame,
              jobs: pd.DataFrame) -> None:
    """Fill the parity columns of ``cells`` (in place): the cell's mean validation accuracy
    and loss against its baseline jobs' mean, min and max, judged by the ``parity`` metric
    with the cell's precision's band (:mod:`engine.results.parity_band`)."""
    from engine.results.parity_band import band

    for column in ("acc_mean", "seq_acc_mean", "seq_acc_min", "seq_acc_max", "loss_mean",
                   "seq_loss_mean", "seq_loss_min", "seq_loss_max"):
        cells[column] = np.nan
    cells["acc_n"] = 0
    cells["parity"] = PARITY_NA
    cells["parity_failed"] = None
    cells["parity_on"] = None
    if not len(jobs) or "final_val_acc" not in jobs.columns:
        return
    # Completed trials only: a trial stopped early is no measurement of where its
    # configuration ends up (issue 25: hpo groups report best_val_metric_mean beside).
    stopped = (jobs["early_stopped"].astype(str).str.lower() == "true"
               if "early_stopped" in jobs.columns else False)
    done = jobs[(jobs["status"] == "ok") & ~stopped]
    for metric, prefix in (("final_val_acc", "acc"), ("final_val_loss", "loss")):
        if metric not in done.columns:
            continue  # rows written before the column: judged on accuracy alone
        j = done[done[metric].notna()][["group_id", metric]]
        by_cell = j.merge(ok[["group_id", "cell"]], on="group_id", how="inner") \
            .groupby("cell")[metric].agg(["mean", "size"])
        by_base = j.merge(seq_rows[["group_id", "base"]], on="group_id", how="inner") \
            .groupby("base")[metric].agg(["mean", "min", "max"])
        cells[f"{prefix}_mean"] = cells["cell"].map(by_cell["mean"])
        if prefix == "acc":
            cells["acc_n"] = cells["cell"].map(by_cell["size"]).fillna(0).astype(int)
        for stat in ("mean", "min", "max"):
            cells[f"seq_{prefix}_{stat}"] = cells["base"].map(by_base[stat])
    bands = [band(p) for p in cells["precision"]]
    judged = derived("parity").compute(
        cells["acc_mean"], cells["seq_acc_min"], cells["seq_acc_max"], cells["loss_mean"],
        cells["seq_loss_min"], cells["seq_loss_max"], [b.accuracy for b in bands],
        [b.loss for b in bands])
    cells["parity"] = judged["parity"].to_numpy()
    for column in ("parity_failed", "parity_on"):  # object: None stays None, never NaN
        cells[column] = pd.Series(judged[column].to_numpy(), index=cells.index, dtype=object)


def cell_status(runs: Runs, by_campaign: bool = False) -> pd.DataFrame:
    """Rows per cell and status: the cell columns, ``ok`` and ``not_ok`` counts (every
    attempt counts; a cell with only failed rows appears with ``ok = 0``)."""
    keys = cell_columns(by_campaign)
    g = runs.groups
    if not len(g):
        return pd.DataFrame(columns=keys + ["ok", "not_ok"])
    counts = g.assign(ok=(g["status"] == "ok").astype(int),
                      not_ok=(g["status"] != "ok").astype(int)) \
        .groupby(keys, sort=False)[["ok", "not_ok"]].sum().reset_index()
    return counts
