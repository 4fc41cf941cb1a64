"""Analysis of the results files: loading, speedups with confidence intervals, accuracy parity.

One module serves ``--batch``'s summary, ``fugue-tui report``, the dashboard and exports. It
imports pandas and numpy (the runner never imports it) but no UI library and no torch.

Loading (:func:`load_runs`)
    ``master_groups.csv`` (and ``master_individual.csv`` when present) are read with pandas'
    CSV parser (Arrow's, pandas' as a fallback) as strings (empty cells kept as ``""``;
    ``features`` contains commas, so only a real CSV parser reads it), then numeric columns
    are converted explicitly (Arrow's cast, ``pd.to_numeric(errors="coerce")`` for a column
    with any cell that is not a plain number): an empty or unreadable cell becomes NaN,
    never 0. Files written by the fugue harness itself lack our columns and are read too:

    - no ``status`` column (or an empty status on a row without ``cell_key``, i.e. a
      harness row inside one of our upgraded files): the row counts as ``ok``. The harness
      recorded no outcome; its rows are what it considered done;
    - no ``campaign_id`` / ``campaign_hash`` / ``host``: empty; the machine is then
      identified by ``cpu_model`` and ``cpu_cores`` (see *Provenance* below);
    - no ``compile_mode``: ``"off"`` when ``compile`` is False, else ``"on"`` (the harness's
      own word; it does not record which mode ran);
    - ``energy_group = 0`` (and ``energy_j = 0``) on a row with no ``energy_method`` and no
      ``gpu_name`` is NaN, not zero joules: the harness writes 0 on its seq rows when it had
      no NVML to read, while its other executors leave the cell empty
      (shared/fixtures/fugue-harness-cpu/README.md: "``seq`` rows carry ``energy_group = 0``
      on a machine without NVML (an artefact of the harness — it means 'not measured', not
      zero joules)"). Our own rows never need this: they write an empty cell and
      ``energy_method = none``.

Only rows with ``status == "ok"`` enter any statistic.

Provenance
    A speedup divides two measurements, which only means something when both come from the
    same machine and software stack. The provenance key is ``machine`` (the ``host``
    column; for harness rows, which have none, ``"<cpu_model> (<cpu_cores> cores)"``),
    ``gpu_name``, ``torch_version``, ``cuda_version`` and, with ``by_campaign=True``,
    ``campaign_hash``. Speedups are computed only between rows sharing the whole key.

Speedup (:func:`speedups`)
    fugue-compat.md, "Speedup": *speedup(strategy, experiment) = mean over passes of seq
    ``T_group`` ÷ mean over passes of the strategy's ``T_group`` (a ratio of means, not a
    mean of ratios) ... seq's own speedup is 1. For compiled cells the compiled seq baseline
    is used when one exists.* A cell is (provenance key, ``exp_id``, ``executor``,
    ``compile_mode``, ``scheduler``, ``features``). The baseline of a cell is the pooled seq
    rows of the same provenance key and experiment with the same ``compile_mode`` when the
    cell is compiled and such rows exist (``baseline = "seq compile=<mode>"``), else the
    uncompiled seq rows (``baseline = "seq"``); none: NaN and ``baseline = ""``.

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
import csv
import io
import math
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from engine.errors import FugueError
from engine.results.columns import GROUPS_FILE, INDIVIDUAL_FILE
from engine.results.read import read_rows

#: Fewest rows on each side (strategy and seq) for a bootstrap interval.
MIN_BOOT_N = 5
#: Percentiles of the bootstrap replicates bounding the interval (95 %).
CI_PERCENTILES = (2.5, 97.5)
#: The ``ci`` label when no interval is computed.
NO_CI = "n/a"

PARITY_WITHIN = "within seq spread"
PARITY_OUTSIDE = "outside seq spread"
PARITY_NA = "n/a"

#: Provenance columns (see the module doc); ``campaign_hash`` is added with ``by_campaign``.
PROVENANCE_COLUMNS: tuple[str, ...] = ("machine", "gpu_name", "torch_version", "cuda_version")
#: What identifies a cell within a provenance key.
#: What makes two rows the same configuration. ``rung`` too: ablation rungs whose effective
#: features coincide on a device (B and C on CPU, where there are no streams) are still
#: different requests and are never pooled with each other or with plain cells.
CELL_COLUMNS: tuple[str, ...] = ("exp_id", "executor", "compile_mode", "scheduler", "features",
                                 "rung", "config_key")

GROUP_NUMERIC: tuple[str, ...] = (
    "K", "max_parallel", "num_workers", "T_group", "total_samples", "throughput_group",
    "energy_group", "gpu_util_mean", "gpu_util_max", "vram_peak_mb", "gpu_vram_total_mb",
    "cpu_cores", "pass", "attempt", "setup_s", "data_load_s", "train_throughput_sps",
    "threads", "param_count", "seed", "passes",
)
JOB_NUMERIC: tuple[str, ...] = (
    "num_workers", "total_time_s", "total_samples", "throughput_sps", "gpu_util_mean",
    "gpu_util_max", "vram_peak_mb", "energy_j", "epochs_run", "final_train_loss",
    "final_train_acc", "final_val_loss", "final_val_acc", "seed", "batch_size", "epochs", "lr",
    "pass", "attempt", "train_time_s", "train_throughput_sps", "val_time_s", "threads",
    "param_count", "samples_dropped",
)
#: String columns every loaded frame has (``""`` when the file lacks them).
GROUP_TEXT: tuple[str, ...] = (
    "group_id", "exp_id", "executor", "compile", "mode", "size", "scheduler", "features",
    "timestamp", "gpu_name", "torch_version", "cuda_version", "cpu_model", "campaign_id",
    "cell_key", "status", "error", "compile_mode", "energy_method", "host", "campaign_hash",
    "rung", "config_key", "workload_key",
)
JOB_TEXT: tuple[str, ...] = (
    "group_id", "job_id", "exp_id", "executor", "compile", "gpu_name", "campaign_id",
    "cell_key", "status", "error", "energy_method",
)


class NoResultsError(FugueError):
    """A runs folder or file that holds no ``master_groups.csv`` (exit 2, one line)."""


@dataclass
class Runs:
    """The rows of one or more results folders, normalised (see the module doc).

    ``groups``: one row per group with the file's columns (strings), numeric columns as
    float (NaN = not measured), plus ``machine`` (provenance), ``compiled`` (bool), a
    normalised ``compile_mode`` and ``status``, ``row`` (position in load order) and
    ``source`` (the file). ``jobs``: the same for job rows (empty frame when no
    ``master_individual.csv`` was found).
    """

    groups: pd.DataFrame
    jobs: pd.DataFrame
    sources: list[Path] = field(default_factory=list)

    @property
    def ok_groups(self) -> pd.DataFrame:
        return self.groups[self.groups["status"] == "ok"]

    def campaign_ids(self) -> list[str]:
        """Campaign ids in order of first appearance (empty ids left out)."""
        ids = self.groups["campaign_id"]
        return [c for c in dict.fromkeys(ids.tolist()) if c]

    def select(self, campaign_id: str | None = None) -> Runs:
        """Only the rows of campaign ``campaign_id`` (``None``: all rows)."""
        if campaign_id is None:
            return self
        groups = self.groups[self.groups["campaign_id"] == campaign_id]
        jobs = self.jobs[self.jobs["group_id"].isin(set(groups["group_id"]))] \
            if len(self.jobs) else self.jobs
        return Runs(groups, jobs, list(self.sources))


# --------------------------------------------------------------------------- loading

def _read_csv(path: Path) -> pd.DataFrame:
    """A results CSV as a frame of strings (``""`` for empty cells).

    Complete files go through Arrow's multithreaded CSV reader (every column typed as a
    string, so nothing is guessed: ``features`` holds commas, ids look like numbers); it
    reads 100 000 rows in a fraction of the time pandas' C parser needs (bench part
    ``results_scale``). Anything Arrow refuses (invalid UTF-8, a duplicated header, a row
    longer than the header) and files whose last line is torn take the slower paths below,
    which read the same values.
    """
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise NoResultsError(f"results file '{path}' does not exist") from None
    except OSError as e:
        raise NoResultsError(f"results file '{path}': {e.strerror or e}") from None
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    if not data or data.isspace():
        return pd.DataFrame()
    complete = data.endswith((b"\n", b"\r")) and data.count(b'"') % 2 == 0
    if complete:
        frame = _read_csv_arrow(data)
        if frame is not None:
            return frame
        text = data.decode("utf-8", errors="replace")
        try:
            return pd.read_csv(io.StringIO(text), dtype=str, keep_default_na=False,
                               na_filter=False).fillna("")
        except pd.errors.ParserError:
            pass  # e.g. a row longer than the header: the csv module copes
    # A torn last line (a write in progress), or a malformed row: engine.results.read.read_rows
    # drops the torn tail exactly as the rest of fugue-tui does.
    rows = read_rows(path)
    if not rows:
        text = data.decode("utf-8", errors="replace")
        header = next(csv.reader(io.StringIO(text, newline="")), [])
        return pd.DataFrame(columns=header, dtype=str)
    frame = pd.DataFrame([{k: v for k, v in r.items() if k is not None} for r in rows], dtype=str)
    return frame.fillna("")


def _read_csv_arrow(data: bytes) -> pd.DataFrame | None:
    """``data`` parsed by ``pyarrow.csv`` with every column a string; None when Arrow is
    not installed or refuses the file (the caller then uses pandas' parser)."""
    try:
        import pyarrow as pa
        import pyarrow.csv as pcsv
    except ImportError:  # pragma: no cover - pyarrow is a declared dependency
        return None
    first = data.split(b"\n", 1)[0].decode("utf-8", errors="replace").rstrip("\r")
    header = next(csv.reader([first]), [])
    if not header or len(set(header)) != len(header):
        return None  # duplicated names: pandas' parser mangles them the way we always did
    convert = pcsv.ConvertOptions(column_types={name: pa.string() for name in header},
                                  strings_can_be_null=False, quoted_strings_can_be_null=False)
    # Quoted values may hold newlines (an error message), which Arrow's parallel block
    # reader cannot split around; allowing them costs ~25 % on 100 000 rows. So read fast
    # first and keep the result only when every newline ended a record (one row per line
    # after the header, no error): a quoted newline makes the counts differ or the column
    # counts mismatch, and the file is read again the careful way.
    lines = data.count(b"\n") - 1
    table = None
    for careful in (False, True):
        try:
            table = pcsv.read_csv(pa.py_buffer(data), convert_options=convert,
                                  parse_options=pcsv.ParseOptions(newlines_in_values=careful))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            table = None
            continue
        if careful or table.num_rows == lines:
            break
    if table is None or table.column_names != header:
        return None
    return table.to_pandas(types_mapper={pa.string(): pd.StringDtype("pyarrow", na_value=np.nan)}.get
                           if pd.__version__ >= "3" else None)


def _resolve(source) -> tuple[list[Path], list[Path]]:
    """Group files and job files named by ``source`` (a folder, a file, or several)."""
    if isinstance(source, (str, os.PathLike)):
        items: list = [source]
    else:
        items = list(source)
    groups: list[Path] = []
    jobs: list[Path] = []
    for item in items:
        path = Path(item).expanduser()
        if path.is_dir():
            if not (path / GROUPS_FILE).is_file():
                raise NoResultsError(f"runs folder '{path}' has no {GROUPS_FILE}")
            groups.append(path / GROUPS_FILE)
            if (path / INDIVIDUAL_FILE).is_file():
                jobs.append(path / INDIVIDUAL_FILE)
        elif path.is_file():
            (jobs if "individual" in path.name else groups).append(path)
        elif not path.exists():
            raise NoResultsError(f"runs folder '{path}' does not exist")
        else:
            raise NoResultsError(f"'{path}' is neither a runs folder nor a results file")
    if not groups:
        raise NoResultsError(f"no {GROUPS_FILE} among {', '.join(map(str, items)) or 'nothing'}")
    return groups, jobs


#: Columns without which a group file cannot be analysed (the harness's files have them).
REQUIRED_GROUP_COLUMNS = ("exp_id", "executor", "T_group")



def load_runs(runs_dir_or_files: str | os.PathLike[str] | Iterable[str | os.PathLike[str]]
              ) -> Runs:
    """Read a runs folder (``master_groups.csv`` and, if present, ``master_individual.csv``),
    a results file, or several of either, into a normalised :class:`Runs`.

    Raises :class:`NoResultsError` (a :class:`~engine.errors.FugueError`: one line, exit 2)
    when a folder has no ``master_groups.csv`` or a path does not exist.
    """
    group_files, job_files = _resolve(runs_dir_or_files)
    groups = [_read_csv(p).assign(source=str(p)) for p in group_files]
    for path, frame in zip(group_files, groups):
        missing = [c for c in REQUIRED_GROUP_COLUMNS if c not in frame.columns]
        if missing:  # someone else's CSV under our name: refuse it rather than show blanks
            raise NoResultsError(f"{path}: not a results file of fugue or fugue-tui "
                                 f"(missing columns: {', '.join(missing)})")
    jobs = [_read_csv(p).assign(source=str(p)) for p in job_files]
    return runs_from_frames(pd.concat(groups, ignore_index=True) if groups else None,
                            pd.concat(jobs, ignore_index=True) if jobs else None,
                            sources=group_files + job_files)


def _text(frame: pd.DataFrame, column: str) -> pd.Series:
    if column in frame.columns:
        return frame[column].fillna("").astype(str)
    return pd.Series("", index=frame.index, dtype=str)


def _numeric(frame: pd.DataFrame, columns: Sequence[str]) -> None:
    for column in columns:
        values = _arrow_float(frame[column]) if column in frame.columns else None
        if values is None:
            values = np.full(len(frame), np.nan)
            if column in frame.columns:
                text = frame[column].fillna("").astype(str)
                filled = (text != "").to_numpy(bool)
                if filled.any():  # empty cells stay NaN; unreadable ones become NaN, never 0
                    values[filled] = pd.to_numeric(text[filled], errors="coerce").to_numpy(float)
        frame[column] = values


def _arrow_float(column: pd.Series) -> np.ndarray | None:
    """A column of number strings as float64, ``""`` as NaN, parsed by Arrow (an order of
    magnitude faster than ``pd.to_numeric`` on 100 000 rows); None when a cell is not a
    plain number (then :func:`pd.to_numeric` decides, cell by cell, with NaN for the
    unreadable ones)."""
    try:
        import pyarrow as pa
        import pyarrow.compute as pc
    except ImportError:  # pragma: no cover - pyarrow is a declared dependency
        return None
    if column.dtype.kind == "f":
        return column.to_numpy(float)
    try:
        text = pa.array(column, type=pa.string(), from_pandas=True)
        text = pc.if_else(pc.equal(text, ""), pa.scalar(None, pa.string()), text)
        return pc.cast(text, pa.float64()).to_numpy(zero_copy_only=False)
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):
        return None


def _status(frame: pd.DataFrame, had_status: bool) -> pd.Series:
    if not had_status:
        return pd.Series("ok", index=frame.index, dtype=object)
    status = frame["status"]
    harness_row = (status == "") & (frame["cell_key"] == "")
    return status.where(~harness_row, "ok")


def _fill_stack_of_unfinished(g: pd.DataFrame) -> None:
    """Rows the runner wrote for a cell that never reported (killed, crashed, skipped) have
    no torch/CUDA/GPU columns: they ran on the stack of the same machine's other rows of that
    campaign, so take it from there rather than show them as a machine of their own."""
    if not len(g) or "campaign_id" not in g.columns:
        return
    missing = (g["status"] != "ok") & (g["torch_version"] == "")
    if not missing.any():
        return
    known = g[g["torch_version"] != ""]
    if not len(known):
        return
    stack = known.groupby(["machine", "campaign_id"], sort=False)[
        ["gpu_name", "torch_version", "cuda_version"]].first()
    keys = list(zip(g.loc[missing, "machine"], g.loc[missing, "campaign_id"]))
    for column in ("gpu_name", "torch_version", "cuda_version"):
        lookup = stack[column].to_dict()
        g.loc[missing, column] = [lookup.get(k, v) for k, v in zip(keys, g.loc[missing, column])]


def _unmeasured_zero(frame: pd.DataFrame, column: str) -> None:
    """The harness's ``0`` energy on a row with no energy method and no GPU: NaN."""
    quirk = (frame[column] == 0) & (frame["energy_method"] == "") & (frame["gpu_name"] == "")
    frame.loc[quirk, column] = np.nan


def runs_from_frames(groups: pd.DataFrame | None, jobs: pd.DataFrame | None = None,
                     sources: Sequence[Path] = ()) -> Runs:
    """Normalise frames of strings (as read from the CSV files) into :class:`Runs`."""
    g = pd.DataFrame() if groups is None else groups.copy()
    had_status = "status" in g.columns
    for column in GROUP_TEXT:
        g[column] = _text(g, column)
    g["status"] = _status(g, had_status)
    compiled = g["compile"].str.lower() == "true"
    g["compile_mode"] = g["compile_mode"].where(g["compile_mode"] != "",
                                                np.where(compiled, "on", "off"))
    g["compiled"] = g["compile_mode"] != "off"
    cores = _text(g, "cpu_cores")
    fallback = g["cpu_model"] + " (" + cores + " cores)"
    fallback = fallback.where((g["cpu_model"] != "") | (cores != ""), "unknown machine")
    g["machine"] = g["host"].where(g["host"] != "", fallback)
    _numeric(g, GROUP_NUMERIC)
    _unmeasured_zero(g, "energy_group")
    g["row"] = np.arange(len(g))
    if "source" not in g.columns:
        g["source"] = ""
    g = g.reset_index(drop=True)
    _fill_stack_of_unfinished(g)

    j = pd.DataFrame() if jobs is None else jobs.copy()
    had_status = "status" in j.columns
    for column in JOB_TEXT:
        j[column] = _text(j, column)
    j["status"] = _status(j, had_status)
    _numeric(j, JOB_NUMERIC)
    _unmeasured_zero(j, "energy_j")
    j = j.reset_index(drop=True)
    return Runs(g, j, [Path(s) for s in sources])


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
    base_of = dict(zip(cells.tolist(), bases.tolist()))
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
    "seq_acc_min", "seq_acc_max", "parity",
)


def speedups(runs: Runs, by_campaign: bool = False, n_boot: int = 2000,
             seed: int = 0) -> pd.DataFrame:
    """One row per cell (provenance key × ``exp_id`` × ``executor`` × ``compile_mode`` ×
    ``scheduler`` × ``features``) of the ok rows, with its speedup over seq.

    ``speedup`` = mean seq ``T_group`` ÷ mean strategy ``T_group`` over passes — a ratio of
    means (fugue-compat.md, "Speedup"), never a mean of per-pass ratios; seq's own is 1.
    Baseline choice and labels, and the percentile bootstrap interval (Efron & Tibshirani
    1993; ``n_boot`` replicates from ``seed``, only with >= :data:`MIN_BOOT_N` rows on both
    sides, else ``ci = "n/a"``): see the module doc. ``n_boot=0`` skips the bootstrap.

    Columns: the provenance and cell columns, then :data:`SPEEDUP_COLUMNS`:
    ``n_strategy``/``n_seq`` rows on each side; ``T_group_mean``/``T_group_std`` (s);
    ``throughput_group_mean`` and ``train_throughput_mean`` (samples/s; the latter NaN in
    harness rows, which lack the column); ``energy_per_model_j`` = mean of
    ``energy_group / K`` over the rows that measured energy (``energy_n`` of them; NaN
    when none did); ``vram_peak_mb_max``; ``acc_mean`` = mean ``final_val_acc`` over the
    cell's ok jobs (``acc_n``), against the baseline's jobs' mean, min and max;
    ``parity`` = "within seq spread" when ``seq_acc_min <= acc_mean <= seq_acc_max``,
    "outside seq spread" otherwise, "n/a" without job rows on either side.
    """
    prov = provenance_columns(by_campaign)
    keys = cell_columns(by_campaign)
    g = runs.groups
    needed = list(dict.fromkeys(keys + ["mode", "workload_key", "group_id", "K", "T_group",
                                        "throughput_group",
                                        "train_throughput_sps", "energy_group", "vram_peak_mb",
                                        "row"]))
    ok = g.loc[((g["status"] == "ok") & g["T_group"].notna()).to_numpy(), needed]
    if not len(ok):
        return pd.DataFrame(columns=keys + list(SPEEDUP_COLUMNS))
    ok = ok.assign(cell=_codes(ok, keys),
                   energy_per_model=ok["energy_group"] / ok["K"].where(ok["K"] > 0))

    # Per cell: the vectorised aggregates.
    grouped = ok.groupby("cell", sort=False)
    cells = grouped[keys + ["mode", "workload_key"]].first()
    stats = grouped.agg(
        K=("K", "first"), n_strategy=("T_group", "size"), T_group_mean=("T_group", "mean"),
        T_group_std=("T_group", "std"), throughput_group_mean=("throughput_group", "mean"),
        train_throughput_mean=("train_throughput_sps", "mean"),
        energy_per_model_j=("energy_per_model", "mean"), energy_n=("energy_per_model", "count"),
        vram_peak_mb_max=("vram_peak_mb", "max"), first_row=("row", "min"))
    cells = cells.join(stats)

    # Seq baselines: pooled seq rows per provenance key × experiment × workload (same
    # experiment definition, jobs, seed and threads; empty in harness rows) × compile mode.
    base_keys = prov + ["exp_id", "workload_key", "compile_mode"]
    seq_rows = ok[ok["executor"] == "seq"]
    seq_rows = seq_rows.assign(base=_codes(seq_rows, base_keys))
    seq_grouped = seq_rows.groupby("base", sort=False)
    bases = seq_grouped[base_keys].first().join(
        seq_grouped.agg(n_seq=("T_group", "size"), seq_T=("T_group", "mean")))
    bases = bases.reset_index()

    # Compiled baseline where it exists, else the uncompiled one.
    cells = cells.reset_index()
    same = cells[base_keys].merge(bases, on=base_keys, how="left")
    uncompiled = cells[prov + ["exp_id", "workload_key"]].merge(
        bases[bases["compile_mode"] == "off"].drop(columns="compile_mode"),
        on=prov + ["exp_id", "workload_key"], how="left")
    use_same = (cells["compile_mode"].to_numpy() != "off") & same["base"].notna().to_numpy()
    cells["base"] = np.where(use_same, same["base"], uncompiled["base"])
    cells["n_seq"] = np.where(use_same, same["n_seq"], uncompiled["n_seq"])
    seq_T = np.where(use_same, same["seq_T"], uncompiled["seq_T"])
    has_base = ~np.isnan(cells["base"].to_numpy(float))
    cells["baseline"] = np.where(
        use_same, "seq compile=" + cells["compile_mode"].astype(str),
        np.where(has_base, "seq", ""))
    with np.errstate(divide="ignore", invalid="ignore"):
        speedup = seq_T / cells["T_group_mean"].to_numpy(float)
    is_seq = (cells["executor"] == "seq").to_numpy()
    speedup = np.where(is_seq, 1.0, speedup)
    cells["speedup"] = np.where(np.isfinite(speedup), speedup, np.nan)
    cells["n_seq"] = np.nan_to_num(cells["n_seq"].to_numpy(float)).astype(int)  # a count: 0

    # Bootstrap intervals where both sides have enough rows.
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
                   zip(cells["ci_low"].to_numpy(), cells["ci_high"].to_numpy())]

    _accuracy(cells, ok, seq_rows, runs.jobs)

    # Order: provenance key, experiment (each by first appearance), seq first, then cells.
    first = cells.groupby(prov, sort=False)["first_row"].transform("min")
    exp_first = cells.groupby(prov + ["exp_id"], sort=False)["first_row"].transform("min")
    cells = cells.assign(_p=first, _e=exp_first, _s=(~is_seq).astype(int)) \
        .sort_values(["_p", "_e", "_s", "first_row"], kind="stable")
    return cells[keys + list(SPEEDUP_COLUMNS)].reset_index(drop=True)


def _accuracy(cells: pd.DataFrame, ok: pd.DataFrame, seq_rows: pd.DataFrame,
              jobs: pd.DataFrame) -> None:
    """Fill the accuracy parity columns of ``cells`` (in place)."""
    for column in ("acc_mean", "seq_acc_mean", "seq_acc_min", "seq_acc_max"):
        cells[column] = np.nan
    cells["acc_n"] = 0
    cells["parity"] = PARITY_NA
    if not len(jobs) or "final_val_acc" not in jobs.columns:
        return
    j = jobs[(jobs["status"] == "ok") & jobs["final_val_acc"].notna()][["group_id",
                                                                         "final_val_acc"]]
    if not len(j):
        return
    by_cell = j.merge(ok[["group_id", "cell"]], on="group_id", how="inner") \
        .groupby("cell")["final_val_acc"].agg(["mean", "size"])
    by_base = j.merge(seq_rows[["group_id", "base"]], on="group_id", how="inner") \
        .groupby("base")["final_val_acc"].agg(["mean", "min", "max"])
    cells["acc_mean"] = cells["cell"].map(by_cell["mean"])
    cells["acc_n"] = cells["cell"].map(by_cell["size"]).fillna(0).astype(int)
    base = cells["base"]
    cells["seq_acc_mean"] = base.map(by_base["mean"])
    cells["seq_acc_min"] = base.map(by_base["min"])
    cells["seq_acc_max"] = base.map(by_base["max"])
    known = cells["acc_mean"].notna() & cells["seq_acc_min"].notna()
    within = (cells["acc_mean"] >= cells["seq_acc_min"] - 1e-12) \
        & (cells["acc_mean"] <= cells["seq_acc_max"] + 1e-12)
    cells["parity"] = np.where(known, np.where(within, PARITY_WITHIN, PARITY_OUTSIDE),
                               PARITY_NA)


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
