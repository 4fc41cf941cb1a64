"""The Results screen's model: group rows as table rows, the filter, the sort, the
provenance of a row, and a cheap "did the files change" check. Textual-free.

Filter syntax (the filter box): space-separated terms, all of which must match (case
insensitive, substring). ``field:text`` matches one column — fields ``experiment`` (or
``exp``), ``executor`` (``exec``), ``scheduler``, ``features``, ``gpu``, ``host``,
``campaign``, ``status`` — and a bare word matches any of them. ``gpu:none`` matches rows
without a GPU. ``k:8`` matches the rows of K = 8 exactly (``k:8,16`` either; ``k:none``
rows without a K). Example: ``exec:unified host:epyc D_ens k:16``.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from fugue_tui.format import MISSING, finite, fmt_number, fmt_rate, fmt_text

if TYPE_CHECKING:  # the analysis and the report load in the screen's worker
    from rich.text import Text

    from engine.results.load import Runs
    from fugue_tui.report.figures import Results
    from fugue_tui.report.sweeps import SweepView

#: (column key, header, source column) of the group table, in order.
COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("experiment", "experiment", "exp_id"),
    ("executor", "executor", "executor"),
    ("scheduler", "scheduler", "scheduler"),
    ("features", "features", "features"),
    ("K", "K", "K"),
    ("compile", "compile", "compile_mode"),
    ("pass", "pass", "pass"),
    ("status", "status", "status"),
    ("T_group", "T_group s", "T_group"),
    # issue 47: the cell's T_group speedup over its seq cell, as `fugue-tui report` pairs
    # and prints it (engine.results.analysis.speedups; 3 decimals, beside T_group there too);
    # headed "cell ×": the cell's one figure, repeated on each of its pass rows (issue 48)
    ("speedup", "cell ×", "speedup"),
    ("throughput", "samples/s", "throughput_group"),
    # hpo groups (issue 25): time to best, its speedup over the baseline executor (the row's
    # cell's), which trial reached the best; empty outside hpo
    ("ttb", "ttb s", "time_to_best_s"),
    ("ttb_speedup", "ttb ×", "ttb_speedup"),
    ("best_trial", "best trial", "best_trial"),
    ("gpu", "GPU", "gpu_name"),
    ("host", "host", "machine"),
    ("campaign", "campaign", "campaign_id"),
    ("reason", "reason", "error"),
)
NUMERIC = {"pass", "T_group", "throughput", "K", "ttb", "ttb_speedup", "speedup"}
FILTER_FIELDS = {"experiment": "exp_id", "exp": "exp_id", "executor": "executor",
                 "exec": "executor", "scheduler": "scheduler", "features": "features",
                 "gpu": "gpu_name", "host": "machine", "campaign": "campaign_id",
                 "status": "status", "precision": "precision", "reason": "error",
                 "k": "K"}
#: Filter fields matched as numbers, exactly (``k:8`` must not match K = 18 or 128).
EXACT_FIELDS = {"K"}

#: The selected row's provenance, in order: (label, column).
PROVENANCE: tuple[tuple[str, str], ...] = (
    ("machine", "machine"), ("host", "host"), ("CPU", "cpu_model"), ("cores", "cpu_cores"),
    ("GPU", "gpu_name"), ("GPU uuid", "gpu_uuid"), ("driver", "nv_driver_version"),
    ("torch", "torch_version"), ("CUDA", "cuda_version"), ("python", "python_version"),
    ("fugue-tui", "fugue_tui_version"), ("commit", "fugue_tui_commit"),
    ("campaign", "campaign_id"), ("campaign file", "campaign_hash"), ("cell", "cell_key"),
    ("group", "group_id"), ("pass", "pass"), ("attempt", "attempt"), ("status", "status"),
    ("error", "error"), ("device", "device"), ("threads", "threads"), ("seed", "seed"),
    ("rung", "rung"), ("precision", "precision"), ("precision asked", "precision_requested"),
    ("precision note", "precision_reason"), ("energy method", "energy_method"), ("host load", "host_load_start"),
    ("timestamp", "timestamp"), ("file", "source"),
)


def cell_text(key: str, value: Any) -> str:
    """A table cell: numbers formatted, missing shown as :data:`~fugue_tui.format.MISSING`,
    never 0."""
    if key in NUMERIC:
        number = finite(value)
        if number is None:
            return MISSING
        if key in ("pass", "K"):
            return str(int(number))
        if key == "ttb_speedup":
            return fmt_number(number, ".2f") + "×"
        if key == "speedup":
            return fmt_number(number, ".3f") + "×"
        if key == "ttb":
            return fmt_number(number, ".2f")
        return fmt_number(number, ".3f") if key == "T_group" else fmt_rate(number)
    text = fmt_text(value)
    if key == "reason":  # why a row is killed or failed; an ok row has none to give
        return " ".join(text.split())[:80]
    if key == "gpu":
        return text or "no GPU"
    if key == "compile":
        return text or "off"
    return text or MISSING


def row_key(row: dict[str, Any]) -> str:
    """A stable key of a group row (its file and position)."""
    return f"{row.get('source', '')}#{row.get('row', '')}"


def table_rows(groups: pd.DataFrame, ttb: dict[str, float] | None = None,
               speedup: dict[str, float] | None = None) -> dict[str, tuple[str, ...]]:
    """Row key → the row's cells (:data:`COLUMNS`), in file order. ``ttb``: row key → its
    cell's ``ttb_speedup`` (:func:`fugue_tui.app.models.hpo.ttb_by_row`), ``speedup``: row key
    → its cell's T_group ``speedup`` (:func:`speedup_by_row`); the analysis computes both per
    cell, the group file has no such columns. A row missing from either shows it missing."""
    out = {}
    for row in groups.to_dict("records"):
        key = row_key(row)
        row = {**row, "ttb_speedup": (ttb or {}).get(key), "speedup": (speedup or {}).get(key)}
        out[key] = tuple(cell_text(k, row.get(src)) for k, _, src in COLUMNS)
    return out


def cell_figure_by_row(groups: pd.DataFrame, table: pd.DataFrame, keys: list[str],
                       column: str, key: Callable[[dict[str, Any]], str] = row_key
                       ) -> dict[str, float]:
    """Row key (``key(row)``, :func:`row_key`) → the finite ``column`` of the row's cell.

    ``table``: the analysis' cell table (:func:`engine.results.analysis.speedups`, one row
    per cell, ``keys`` its key columns: :func:`engine.results.analysis.cell_columns`); rows
    are matched on the key columns both frames carry. Rows whose cell has no finite value
    (NaN: no baseline to pair with) are left out, never 0."""
    if not len(groups) or not len(table) or column not in table.columns:
        return {}
    cols = [k for k in keys if k in groups.columns and k in table.columns]
    if not cols:
        return {}
    cells = table[cols + [column]].dropna(subset=[column])
    if not len(cells):
        return {}
    # Merge on text: the cell table's aggregation may change a key's dtype (int → float).
    as_text = lambda f: f[cols].astype(str)  # noqa: E731
    left = as_text(groups).assign(_key=[key(r) for r in groups.to_dict("records")])
    right = as_text(cells).assign(_value=cells[column].to_numpy())
    merged = left.merge(right.drop_duplicates(cols), on=cols, how="inner")
    return {k: float(v) for k, v in zip(merged["_key"], merged["_value"], strict=True)
            if math.isfinite(v)}


def speedup_by_row(groups: pd.DataFrame, table: pd.DataFrame, keys: list[str]
                   ) -> dict[str, float]:
    """Row key → its cell's T_group ``speedup`` over seq, for the ok rows: the very figure
    ``fugue-tui report`` prints for the cell (its ``table``: the analysis' cell table, which
    pools the ok rows only), so a killed or failed row, whose T_group is not in it, shows none.
    A seq row's is 1 (its own baseline); a cell without a seq cell to pair with (another
    machine, precision, workload; a filter that leaves seq out, as ``report --campaign``
    would) has none."""
    if not len(groups) or "status" not in groups.columns:
        return {}
    ok = groups[(groups["status"] == "ok").to_numpy()]
    return cell_figure_by_row(ok, table, keys, "speedup")


@dataclass(frozen=True)
class Filter:
    """A parsed filter: (column or None for any, lowercase text) terms; ``error`` names a
    bad field (the filter then matches everything and the screen says why)."""

    terms: tuple[tuple[str | None, str], ...] = ()
    error: str = ""

    def mask(self, groups: pd.DataFrame) -> pd.Series:
        keep = pd.Series(True, index=groups.index)
        for column, text in self.terms:
            if column in EXACT_FIELDS:
                keep &= _exact(groups, column, text)
                continue
            columns = [column] if column else sorted(set(FILTER_FIELDS.values()) - EXACT_FIELDS)
            hit = pd.Series(False, index=groups.index)
            for name in columns:
                values = groups[name].fillna("").astype(str).str.lower() \
                    if name in groups.columns else pd.Series("", index=groups.index)
                if name == "gpu_name" and text == "none":
                    hit |= values == ""
                else:
                    hit |= values.str.contains(text, regex=False)
            keep &= hit
        return keep


def _exact(groups: pd.DataFrame, column: str, text: str) -> pd.Series:
    """Rows whose number in ``column`` is one of ``text``'s comma-separated values (``none``:
    rows without one)."""
    values = pd.to_numeric(groups[column], errors="coerce") if column in groups.columns \
        else pd.Series(float("nan"), index=groups.index)
    hit = pd.Series(False, index=groups.index)
    for part in text.split(","):
        if part == "none":
            hit |= values.isna()
        elif part:
            hit |= values == float(part)
    return hit


def parse_filter(text: str) -> Filter:
    """See the module doc."""
    from engine.errors import nearest

    terms: list[tuple[str | None, str]] = []
    for word in text.split():
        field, sep, value = word.partition(":")
        if sep:
            if field.lower() not in FILTER_FIELDS:
                return Filter((), f"unknown filter field '{field}'"
                                  f"{nearest(field.lower(), list(FILTER_FIELDS))}; fields: "
                                  f"{', '.join(sorted(set(FILTER_FIELDS) - {'exp', 'exec'}))}")
            column = FILTER_FIELDS[field.lower()]
            if value and column in EXACT_FIELDS and not all(
                    p == "none" or _is_number(p) for p in value.lower().split(",") if p):
                return Filter((), f"filter {field}:{value}: {field} takes numbers "
                                  f"(k:8, k:8,16 or k:none)")
            if value:
                terms.append((column, value.lower()))
        else:
            terms.append((None, word.lower()))
    return Filter(tuple(terms))


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def apply_filter(runs: Runs, flt: Filter) -> Runs:
    """``runs`` (:class:`engine.results.load.Runs`) with only the group rows (and their jobs)
    that match ``flt``."""
    from engine.results.load import Runs

    if not flt.terms:
        return runs
    groups = runs.groups[flt.mask(runs.groups)]
    jobs = runs.jobs
    if len(jobs):
        jobs = jobs[jobs["group_id"].isin(set(groups["group_id"]))]
    return Runs(groups, jobs, list(runs.sources))


def provenance(row: dict[str, Any]) -> list[tuple[str, str]]:
    """The selected row's provenance: (label, value) for every recorded field."""
    out = []
    for label, column in PROVENANCE:
        text = fmt_text(row.get(column))
        if column in ("pass", "attempt", "cpu_cores", "threads", "seed") and text:
            try:
                text = str(int(float(text)))
            except ValueError:
                pass
        if text:
            out.append((label, text))
    return out


def sort_value(key: str, text: str) -> tuple[int, Any]:
    """Sort key of a displayed cell: numbers numerically, missing values last."""
    if text == MISSING:
        return (1, 0)
    if key in NUMERIC:
        try:
            # "34,475" and "1.035×" (the speedups) as numbers, not as missing
            return (0, float(text.replace(",", "").rstrip("×")))
        except ValueError:
            return (1, 0)
    return (0, text.lower())


#: What :func:`files_signature` returns: (path, size, mtime) per file.
Signature = tuple[tuple[str, int | None, int | None], ...]


def files_signature(paths: list[Path]) -> Signature:
    """(path, size in bytes, mtime in ns) of each results file, None for one that does not
    exist (yet): changes when rows land."""
    out: list[tuple[str, int | None, int | None]] = []
    for path in paths:
        try:
            st = os.stat(path)
            out.append((str(path), st.st_size, st.st_mtime_ns))
        except OSError:
            out.append((str(path), None, None))
    return tuple(out)


def result_files(source: str | Path) -> list[Path]:
    """The group and job files a runs folder (or file) names, whether or not they exist
    yet (a campaign that has not finished a cell has none)."""
    from engine.results.columns import GROUPS_FILE, INDIVIDUAL_FILE

    path = Path(source)
    if path.is_file():
        return [path]
    return [path / GROUPS_FILE, path / INDIVIDUAL_FILE]


@dataclass(frozen=True)
class Analysis:
    """What the Results screen shows of one load: the rows the filter keeps (``shown``),
    their table and figures (``results``), their K sweeps and advice (``sweep``), the
    time-to-best speedup of each hpo row (``ttb``: row key → speedup), the T_group speedup
    of each ok row's cell (``speedup``: row key → speedup) and why the filter was not
    understood (``filter_error``, ``""``: it was)."""

    shown: Runs
    results: Results
    sweep: SweepView
    ttb: dict[str, float]
    filter_error: str
    speedup: dict[str, float]


def analyse(runs: Runs, filter_text: str, n_boot: int) -> Analysis:
    """Filter ``runs`` with ``filter_text`` (see the module doc) and analyse what is left
    as ``fugue-tui report`` does (``n_boot`` bootstrap resamples per interval). Slow (the
    bootstrap): the screen calls it from its loading worker.

    Raises:
        FugueError: the rows cannot be analysed.
    """
    from engine.results.analysis import cell_columns
    from fugue_tui.report.figures import build
    from fugue_tui.report.sweeps import analyse as analyse_sweeps

    flt = parse_filter(filter_text)
    shown = apply_filter(runs, flt)
    results = build(shown, n_boot=n_boot)
    return Analysis(shown, results, analyse_sweeps(shown, n_boot=n_boot),
                    # hpo.ttb_by_row's figure (not imported: hpo imports this module)
                    cell_figure_by_row(shown.groups, results.table, cell_columns(),
                                       "ttb_speedup"),
                    flt.error, speedup_by_row(shown.groups, results.table, cell_columns()))


def header_text(source: Path, runs: Runs, shown: Runs, filter_text: str,
                filter_error: str) -> Text:
    """The Results screen's header: the source, the group rows shown of all, the machines
    they come from and the filter; under it why the filter was not understood and what
    the load left out (:attr:`engine.results.load.Runs.notes`: a file's torn last line)."""
    from rich.text import Text

    total, count = len(runs.groups), len(shown.groups)
    line = Text(f"results {source} · {count} of {total} group rows", style="bold")
    machines = shown.groups["machine"].nunique() if count else 0
    line.append(f" · {machines} machine{'s' if machines != 1 else ''}")
    if filter_text.strip():
        line.append(f" · filter: {filter_text.strip()}")
    if filter_error:
        line.append(f"\n{filter_error}", style="yellow")
    for note in runs.notes:
        line.append(f"\nwarning: {note}", style="yellow")
    from engine.results.eager_note import eager_notes

    for note in eager_notes(shown.groups.to_dict("records")) if count else []:
        line.append(f"\nnote: {note}", style="yellow")
    return line
