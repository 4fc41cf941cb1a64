"""Loading the results files for analysis: both CSVs read through Arrow (pandas' parser as
a fallback) into normalised frames (:class:`Runs`). Speedups and the other statistics over
them: :mod:`engine.results.analysis`.

It imports pandas and numpy (the runner never imports it) but no UI library and no torch.

Loading (:func:`load_runs`)
    ``master_groups.csv`` (and ``master_individual.csv`` when present) are read with pandas'
    CSV parser (Arrow's, pandas' as a fallback) as strings (empty cells kept as ``""``;
    ``features`` contains commas, so only a real CSV parser reads it), then the columns the
    registry declares numbers (:func:`engine.results.columns.numeric_columns`) are converted
    explicitly (Arrow's cast, ``pd.to_numeric(errors="coerce")`` for a column with any cell
    that is not a plain number): an empty or unreadable cell becomes NaN, never 0. Files
    written by the fugue harness itself lack our columns and are read too:

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
      (tests/fixtures/fugue-harness-cpu/README.md: "``seq`` rows carry ``energy_group = 0``
      on a machine without NVML (an artefact of the harness — it means 'not measured', not
      zero joules)"). Our own rows never need this: they write an empty cell and
      ``energy_method = none``.

Only rows with ``status == "ok"`` enter any statistic. A torn last line (a write in
progress, or one cut off by a crash) is left out and said in :attr:`Runs.notes`, for the
front end to show; loading never changes a file.

Provenance
    A speedup divides two measurements, which only means something when both come from the
    same machine and software stack. The provenance key is ``machine`` (the ``host``
    column; for harness rows, which have none, ``"<cpu_model> (<cpu_cores> cores)"``),
    ``gpu_name``, ``torch_version``, ``cuda_version`` and, with ``by_campaign=True``,
    ``campaign_hash``. Speedups are computed only between rows sharing the whole key.
"""

from __future__ import annotations

import csv
import io
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from engine.errors import FugueError, shown
from engine.results.columns import (
    GROUPS_FILE,
    INDIVIDUAL_FILE,
    numeric_columns,
    text_columns,
)
from engine.results.commit import committed_jobs, uncommitted_note
from engine.results.read import read_rows_checked, row_lines, torn_note
from engine.results.values import NON_FINITE_OK, value_range


class NoResultsError(FugueError):
    """A runs folder or file that holds no ``master_groups.csv`` (exit 2, one line)."""


@dataclass
class Runs:
    """The rows of one or more results folders, normalised (see the module doc).

    ``groups``: one row per group with the file's columns (strings; every text column of
    the registry, ``""`` where the file lacks it), numeric columns as float (NaN = not
    measured), plus ``machine`` (provenance), ``compiled`` (bool), a normalised
    ``compile_mode`` and ``status``, ``row`` (position in load order) and ``source`` (the
    file). ``jobs``: the same for job rows (empty frame when no
    ``master_individual.csv`` was found).
    """

    groups: pd.DataFrame
    jobs: pd.DataFrame
    sources: list[Path] = field(default_factory=list)
    #: What reading left out, one line each for the user (a file's torn last line:
    #: :func:`engine.results.read.torn_note`); the files themselves are never changed.
    notes: list[str] = field(default_factory=list)

    @property
    def ok_groups(self) -> pd.DataFrame:
        return self.groups[self.groups["status"] == "ok"]

    def batch_only(self) -> Runs:
        """These rows without a stream campaign's (``stream_sha256`` set, issue 51): a
        stream cell's T_group is its makespan, mostly its last arrival, and its job count
        is no K — the batch analyses (K curves, knee, advice) leave them out; the stream's
        own (engine.results.stream_report, stream_advice) read them."""
        if "stream_sha256" not in self.groups.columns or not len(self.groups):
            return self
        keep = (self.groups["stream_sha256"].fillna("").astype(str) == "").to_numpy()
        if keep.all():
            return self
        groups = self.groups[keep]
        jobs = self.jobs
        if len(jobs) and "group_id" in jobs.columns:
            jobs = jobs[jobs["group_id"].isin(set(groups["group_id"]))]
        return Runs(groups, jobs, list(self.sources), list(self.notes))

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
        return Runs(groups, jobs, list(self.sources), list(self.notes))


# --------------------------------------------------------------------------- loading

def _read_csv(path: Path, notes: list[str] | None = None) -> pd.DataFrame:
    """A results CSV as a frame of strings (``""`` for empty cells); a torn last line left
    out is told in ``notes``.

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
    # Bare carriage returns (old Mac line ends, or one inside a value) are no record ends to
    # Arrow: such a file takes the csv module's path, which reads every line-end style.
    if complete and data.count(b"\r") == data.count(b"\r\n"):
        frame = _read_csv_arrow(data)
        if frame is not None:
            return frame
        text = data.decode("utf-8", errors="replace")
        header = next(csv.reader(io.StringIO(text, newline="")), [])
        if len(set(header)) != len(header):
            # Duplicated names: pandas' parser mangles them the way we always did.
            try:
                return pd.read_csv(io.StringIO(text), dtype=str, keep_default_na=False,
                                   na_filter=False).fillna("")
            except pd.errors.ParserError:
                pass
    # A torn last line (a write in progress) or a damaged row (a field count other than the
    # header's: pandas would pad a short one into a phantom row): engine.results.read leaves
    # them out exactly as the rest of fugue-tui does, and says which.
    rows, torn, damaged = read_rows_checked(path)
    if notes is not None:
        notes.extend(damaged)
        if torn:
            notes.append(torn_note(path))
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
    failed = (*_THREAD_ERRORS, pa.ArrowException)
    try:
        return _arrow_frame(pa, pcsv, data, header, convert, threads=True)
    except failed:
        # Arrow could not start its reader threads (``ulimit -u``, a host out of
        # processes): the same read on this thread, and the slow path if that fails too
        # (issue 43: the closing report once crashed here).
        try:
            return _arrow_frame(pa, pcsv, data, header, convert, threads=False)
        except failed:
            return None


#: What Arrow raises when it cannot start a thread (C++'s ``std::system_error``: a
#: ``RuntimeError`` or an ``OSError`` from ``pyarrow``, or its own ``ArrowException``).
_THREAD_ERRORS = (RuntimeError, OSError)


def _arrow_frame(pa, pcsv, data: bytes, header: list[str], convert,
                 threads: bool) -> pd.DataFrame | None:
    """:func:`_read_csv_arrow`'s read, with Arrow's thread pool or without."""
    lines = data.count(b"\n") - 1
    table = None
    read = pcsv.ReadOptions(use_threads=threads)
    for careful in (False, True):
        try:
            table = pcsv.read_csv(pa.py_buffer(data), convert_options=convert,
                                  read_options=read,
                                  parse_options=pcsv.ParseOptions(newlines_in_values=careful))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            table = None
            continue
        if careful or table.num_rows == lines:
            break
    if table is None or table.column_names != header:
        return None
    return table.to_pandas(use_threads=threads,
                           types_mapper={pa.string(): pd.StringDtype("pyarrow", na_value=np.nan)}.get
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
                if (path / GROUPS_FILE).exists():  # a directory, a FIFO: say which
                    raise NoResultsError(f"results file '{path / GROUPS_FILE}': "
                                         f"{_not_a_file(path / GROUPS_FILE)}")
                if (path / "runner.jsonl").is_file() and (path.parent / GROUPS_FILE).is_file():
                    # a campaign's run folder (the path --batch prints): its rows are in the
                    # runs folder above it, with every other campaign's (a new user's trial)
                    raise NoResultsError(
                        f"'{path}' is a campaign's run folder; its rows are in "
                        f"'{path.parent / GROUPS_FILE}': fugue-tui report {path.parent} "
                        f"--campaign {path.name}")
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


def _not_a_file(path: Path) -> str:
    """Why ``path``, which exists, is no file to read: its kind."""
    return ("is a directory, not a file" if path.is_dir()
            else "is not a regular file (a FIFO, socket or device)")


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
    notes: list[str] = []
    groups = [_read_csv(p, notes).assign(source=str(p)) for p in group_files]
    for path, frame in zip(group_files, groups, strict=False):
        missing = [c for c in REQUIRED_GROUP_COLUMNS if c not in frame.columns]
        if missing:  # someone else's CSV under our name: refuse it rather than show blanks
            raise NoResultsError(f"{path}: not a results file of fugue or fugue-tui "
                                 f"(missing columns: {', '.join(missing)})")
    dropped_ids: set[str] = set()
    for i, path in enumerate(group_files):
        groups[i], ids = _drop_impossible(groups[i], path, GROUPS_FILE, notes)
        dropped_ids |= ids
    jobs = []
    for path in job_files:
        frame, _ = _drop_impossible(_read_csv(path, notes), path, INDIVIDUAL_FILE, notes)
        if dropped_ids and "group_id" in frame.columns:
            # the jobs of a group row left out go with it (not "uncommitted": it was written)
            orphan = frame["group_id"].isin(dropped_ids)
            if orphan.any():
                notes.append(f"{path}: {int(orphan.sum())} job row(s) of the group row(s) "
                             "left out above left out too")
                frame = frame[~orphan]
        jobs.append(frame.assign(source=str(path)))
    all_groups = pd.concat(groups, ignore_index=True) if groups else None
    all_jobs = pd.concat(jobs, ignore_index=True) if jobs else None
    if all_jobs is not None and all_groups is not None:
        # the group row commits its job rows: a cell killed between them left none
        all_jobs, dropped = committed_jobs(all_jobs, all_groups)
        if dropped:
            notes.append(uncommitted_note(dropped))
    if all_groups is not None:
        notes += stopped_notes(all_groups)
    runs = runs_from_frames(all_groups, all_jobs,
                            sources=group_files + job_files)
    runs.notes = notes
    return runs


#: How many damaged rows a file's warning names (the rest are counted).
SHOWN_DAMAGED = 3


def _drop_impossible(frame: pd.DataFrame, path: Path, file: str, notes: list[str]
                     ) -> tuple[pd.DataFrame, set[str]]:
    """``frame`` (strings, as read from ``path``, a ``file`` of the registry) without the
    rows holding an impossible value in a number column: text, NaN or ±inf, or a finite
    value outside :func:`engine.results.values.value_range` (a negative duration, memory,
    energy or count; an accuracy above 1). An empty cell is "not measured", never damage.
    Adds one line to ``notes`` naming the first few as ``file:line column=value (why)``;
    returns the rows kept and the ``group_id`` of those left out. The file is unchanged."""
    if not len(frame):
        return frame, set()
    bad = np.zeros(len(frame), bool)
    found: list[tuple[int, str, str, str]] = []  # (position, column, value, why)
    for column in numeric_columns(file):
        if column not in frame.columns:
            continue
        text = frame[column].fillna("").astype(str)
        values = _arrow_float(text)
        filled = (text != "").to_numpy(bool)
        if values is None:
            values = np.full(len(frame), np.nan)
            values[filled] = pd.to_numeric(text[filled], errors="coerce").to_numpy(float)
        low, high = value_range(column)
        with np.errstate(invalid="ignore"):
            wrong = filled & ~(np.isfinite(values) & (values >= low) & (values <= high))
        if column in NON_FINITE_OK:  # a diverged loss is a result; text is not
            written = np.char.lower(text.to_numpy(str)).astype(str)
            wrong &= ~(np.isin(np.char.strip(written), ["nan", "inf", "-inf", "+inf",
                                                         "infinity", "-infinity"]))
        if not wrong.any():
            continue
        bad |= wrong
        for at in np.flatnonzero(wrong)[:SHOWN_DAMAGED]:
            v = values[at]
            why = ("not a number" if not np.isfinite(v) else
                   "negative" if v < low else f"above {high:g}")
            found.append((int(at), column, str(text.iloc[at]), why))
    if not bad.any():
        return frame, set()
    lines = row_lines(path)
    if len(lines) != len(frame):  # read another way (a duplicated header): the row order
        lines = list(range(2, len(frame) + 2))
    found.sort()
    named = ", ".join(f"{path}:{lines[at]} {column}={shown(value)} ({why})"
                      for at, column, value, why in found[:SHOWN_DAMAGED])
    count = int(bad.sum())
    more = f" and {count - SHOWN_DAMAGED} more" if count > SHOWN_DAMAGED else ""
    notes.append(f"{path}: {count} row{'s' if count != 1 else ''} with an impossible value "
                 f"left out (the file is unchanged): {named}{more}")
    ids = set(frame.loc[bad, "group_id"]) if "group_id" in frame.columns else set()
    return frame[~bad].reset_index(drop=True), {str(i) for i in ids}


def stopped_notes(groups: pd.DataFrame) -> list[str]:
    """One note naming the rows whose T_group counts time their cell was stopped
    (``stopped_s`` > 0, issue 43): the run warned, and a report that averages such a row
    with others must say so too."""
    if "stopped_s" not in groups.columns:
        return []
    stopped = pd.to_numeric(groups["stopped_s"], errors="coerce")
    hit = groups[stopped > 0]
    if hit.empty:
        return []
    named = ", ".join(f"{r.get('exp_id')} {r.get('executor')} ({float(r['stopped_s']):.1f} s)"
                      for _, r in hit.head(3).iterrows())
    more = f" and {len(hit) - 3} more" if len(hit) > 3 else ""
    return [f"{len(hit)} row(s) count time their cell was stopped (SIGSTOP, a debugger) in "
            f"T_group (stopped_s): {named}{more}; their times and speedups include it"]


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
    """Rows the runner wrote for a cell that never reported (killed, crashed, skipped) lack
    the torch/CUDA/GPU columns only the cell reads (rows of versions before issue 29 lack
    all three; since then torch's and CUDA's versions are there, the GPU's name is not):
    they ran on the stack of the same machine's other rows of that campaign, so take each
    empty one from there rather than show them as a machine of their own."""
    if not len(g) or "campaign_id" not in g.columns:
        return
    columns = ("gpu_name", "torch_version", "cuda_version")
    unfinished = g["status"] != "ok"
    if not (unfinished & (g[list(columns)] == "").any(axis=1)).any():
        return
    known = g[(g["status"] == "ok") & (g["torch_version"] != "")]
    if not len(known):
        return
    stack = known.groupby(["machine", "campaign_id"], sort=False)[list(columns)].first()
    for column in columns:
        missing = unfinished & (g[column] == "")
        if not missing.any():
            continue
        keys = list(zip(g.loc[missing, "machine"], g.loc[missing, "campaign_id"], strict=True))
        lookup = stack[column].to_dict()
        g.loc[missing, column] = [lookup.get(k, v) for k, v in zip(keys, g.loc[missing, column], strict=True)]


#: The variant columns only a running cell records (its executor decides them in set-up:
#: mp's start method, ray's actor reuse, unified_model's features, the precision that ran).
VARIANT_COLUMNS = ("mp_start", "tune_actors", "features", "precision")


def _fill_variant_of_unfinished(g: pd.DataFrame) -> None:
    """A row the runner wrote for a cell it killed (Ctrl-C, a retry, the watchdog) lacks the
    variant columns the cell would have recorded, so the report counted that attempt as a
    cell of its own (``my_ens mp ok 0 ... variant — ... not ok 1`` beside the cell's
    ``ok 2``). Take each empty one from the ok rows of the same cell: the same attempt
    chain (machine, campaign, ``cell_key``: the same pass), else the same configuration
    (machine, experiment, executor, ``config_key``: any pass) — only where those ok rows
    agree on one value. Nothing on disk changes; a cell that never ran ok keeps its
    empty values (it is shown as a cell with ok = 0)."""
    if not len(g) or "config_key" not in g.columns:
        return
    unfinished = g["status"] != "ok"
    columns = [c for c in VARIANT_COLUMNS if c in g.columns]
    if not (unfinished & (g[columns] == "").any(axis=1)).any():
        return
    ok = g[g["status"] == "ok"]
    for keys in (["machine", "campaign_id", "cell_key"],
                 ["machine", "exp_id", "executor", "config_key"]):
        usable = ok[(ok[keys] != "").all(axis=1)]
        if not len(usable):
            continue
        grouped = usable.groupby(keys, sort=False)
        for column in columns:
            missing = unfinished & (g[column] == "") & (g[keys] != "").all(axis=1)
            if not missing.any():
                continue
            agreed = grouped[column].agg(lambda v: v.iloc[0] if v.nunique() == 1 else "")
            lookup = agreed.to_dict()
            wanted = [tuple(r) for r in g.loc[missing, keys].itertuples(index=False)]
            lookup = {(k if isinstance(k, tuple) else (k,)): v for k, v in lookup.items()}
            g.loc[missing, column] = [lookup.get(k, "") for k in wanted]


def _unmeasured_zero(frame: pd.DataFrame, column: str) -> None:
    """The harness's ``0`` energy on a row with no energy method and no GPU: NaN."""
    quirk = (frame[column] == 0) & (frame["energy_method"] == "") & (frame["gpu_name"] == "")
    frame.loc[quirk, column] = np.nan


def _precision(frame: pd.DataFrame) -> pd.Series:
    """The precision that ran, for every row: the ``precision`` column, else (rows of the
    fugue harness, which has only ``amp``) ``amp-fp16`` where ``amp`` is True, ``fp32``
    otherwise — so every row has one, and the analysis compares like with like."""
    amp = np.where(_text(frame, "amp").str.lower() == "true", "amp-fp16", "fp32")
    ran = _text(frame, "precision")
    return ran.where(ran != "", pd.Series(amp, index=frame.index))


def runs_from_frames(groups: pd.DataFrame | None, jobs: pd.DataFrame | None = None,
                     sources: Sequence[Path] = ()) -> Runs:
    """Normalise frames of strings (as read from the CSV files) into :class:`Runs`."""
    g = pd.DataFrame() if groups is None else groups.copy()
    had_status = "status" in g.columns
    for column in text_columns(GROUPS_FILE):
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
    _fill_variant_of_unfinished(g)
    g["precision"] = _precision(g)
    _numeric(g, numeric_columns(GROUPS_FILE))
    _unmeasured_zero(g, "energy_group")
    g["row"] = np.arange(len(g))
    if "source" not in g.columns:
        g["source"] = ""
    g = g.reset_index(drop=True)
    _fill_stack_of_unfinished(g)

    j = pd.DataFrame() if jobs is None else jobs.copy()
    had_status = "status" in j.columns
    for column in text_columns(INDIVIDUAL_FILE):
        j[column] = _text(j, column)
    j["status"] = _status(j, had_status)
    _numeric(j, numeric_columns(INDIVIDUAL_FILE))
    _unmeasured_zero(j, "energy_j")
    j = j.reset_index(drop=True)
    return Runs(g, j, [Path(s) for s in sources])
