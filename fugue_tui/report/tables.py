"""The results report: Rich tables per machine (one row per experiment × executor cell) and
the speedup chart. Used at the end of ``--batch`` and by ``fugue-tui report``.

Numbers come from :mod:`engine.results.analysis` (ratio-of-means speedups over the seq baseline of
the same machine and stack, bootstrap intervals only with >= 5 passes on both sides);
this module only formats them. A value that was not measured is shown as "—", never 0.
"""

from __future__ import annotations

import math
import os
import shutil
import sys
from pathlib import Path
from typing import Any

import pandas as pd
from rich.console import Console
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

from engine.errors import FugueError, known, nearest
from fugue_tui.format import MISSING, fmt_number, fmt_text

#: The parity flags as shown (the note under the tables explains them).
_PARITY_SHORT = {"within seq spread": "within", "outside seq spread": "OUTSIDE", "n/a": "n/a"}


def _provenance_title(row: dict[str, Any], by_campaign: bool) -> str:
    gpu = row.get("gpu_name") or "no GPU"
    parts = [str(row.get("machine") or "unknown machine"), gpu,
             f"torch {row.get('torch_version') or '?'}"]
    if row.get("cuda_version"):
        parts.append(f"CUDA {row['cuda_version']}")
    if by_campaign:
        parts.append(f"campaign file {row.get('campaign_hash') or '?'}")
    return " · ".join(parts)


def _cell_values(row: dict[str, Any]) -> dict[str, str]:
    """Every column's text for one cell row."""
    n = row.get("n_strategy")
    n = 0 if n is None or (isinstance(n, float) and math.isnan(n)) else int(n)
    speedup = fmt_number(row.get("speedup"), ".3f")
    if speedup == MISSING and n:
        # a cell packed over several GPUs has a seq, but no single-GPU speedup (issue 27)
        packed = str(row.get("baseline") or "").startswith("none: packed")
        speedup = "n/a (packed)" if packed else "n/a (no seq)"
    ci = fmt_text(row.get("ci"))
    bad = row.get("not_ok")
    precision = fmt_text(row.get("precision"))
    variant = " ".join(v for v in (fmt_text(row.get("scheduler")),
                                   fmt_text(row.get("features")),
                                   fmt_text(row.get("mp_start")),
                                   fmt_text(row.get("tune_actors")),
                                   precision if precision != "fp32" else "") if v)
    seq_acc = MISSING
    if fmt_number(row.get("seq_acc_mean"), ".3f") != MISSING:
        seq_acc = (f"{fmt_number(row.get('seq_acc_mean'), '.3f')} "
                   f"[{fmt_number(row.get('seq_acc_min'), '.3f')}"
                   f", {fmt_number(row.get('seq_acc_max'), '.3f')}]")
    return {
        "experiment": str(row["exp_id"]), "executor": str(row["executor"]),
        "K": fmt_number(row.get("K"), ".0f"),
        "compile": str(row["compile_mode"]), "ok": str(n), "variant": variant or MISSING,
        "T_group s": fmt_number(row.get("T_group_mean"), ".2f"),
        "T_group sd": fmt_number(row.get("T_group_std"), ".2f"),
        "setup s": fmt_number(row.get("setup_s_mean"), ".2f"),
        "samples/s": fmt_number(row.get("throughput_group_mean"), ",.0f"),
        "train samples/s": fmt_number(row.get("train_throughput_mean"), ",.0f"),
        "J/model": fmt_number(row.get("energy_per_model_j"), ",.1f"),
        "VRAM MiB": fmt_number(row.get("vram_peak_mb_max"), ",.0f"),
        "speedup": speedup, "95% CI": ci if ci and n else MISSING,
        "baseline": fmt_text(row.get("baseline")) or MISSING,
        "val acc": fmt_number(row.get("acc_mean"), ".3f"), "seq acc [min, max]": seq_acc,
        "parity": _PARITY_SHORT.get(str(row.get("parity")), MISSING) if n else MISSING,
        "not ok": str(int(bad)) if bad is not None and bad == bad else "0",
    }


#: The columns every table starts with; K beside the executor when the rows form a K
#: sweep (issue 23: its cells share one experiment id), see :func:`_key_columns`.
_KEY = ("experiment", "executor", "compile", "ok")
_KEY_SWEPT = ("experiment", "executor", "K", "compile", "ok")
_RIGHT = {"ok", "K", "T_group s", "T_group sd", "setup s", "samples/s", "train samples/s",
          "J/model", "VRAM MiB", "speedup", "95% CI", "val acc"}
#: Every column after _KEY, in order: the speedup columns first, so that a narrow console
#: (several tables) still shows them together in the first one.
_COLUMNS = ("T_group s", "speedup", "95% CI", "baseline", "variant", "setup s", "T_group sd",
            "samples/s", "train samples/s", "J/model", "VRAM MiB", "val acc",
            "seq acc [min, max]", "parity", "not ok")
#: Headers on two lines, so that a column is no wider than its numbers.
_HEADERS = {"T_group s": "T_group\ns", "T_group sd": "T_group\nsd", "setup s": "setup\ns",
            "samples/s": "samples\n/s",
            "train samples/s": "train\nsamples/s", "J/model": "J/\nmodel",
            "VRAM MiB": "VRAM\nMiB", "val acc": "val\nacc", "seq acc [min, max]":
            "seq acc\n[min, max]", "not ok": "not\nok", "experiment": "exp"}


def _natural_width(table: Table) -> int:
    """The width ``table`` takes when nothing has to wrap."""
    console = Console(width=100_000, color_system=None)
    return Measurement.get(console, console.options, table).maximum


def build_tables(speedup_df, status_df=None, by_campaign: bool = False,
                 title_prefix: str = "", width: int | None = None) -> list[Table]:
    """Tables of ``speedup_df`` (:func:`engine.results.analysis.speedups`), per provenance key, rows
    in its order: one table with every column when it fits in ``width`` (None: always);
    else as many tables as needed, each starting with experiment, executor, compile and
    ok (and K, when the rows form a K sweep), the speedup columns in the first. ``status_df``
    (:func:`engine.results.analysis.cell_status`) adds the "not ok" counts and the cells without
    any ok row. Columns with nothing to show (no variant, no energy measured, ...) are left
    out, except T_group, speedup, interval and baseline.
    """
    from engine.results.analysis import cell_columns, provenance_columns

    prov = provenance_columns(by_campaign)
    keys = cell_columns(by_campaign)
    frame = speedup_df
    if status_df is not None and len(status_df):
        frame = frame.merge(status_df, on=keys, how="left", sort=False)
        extra = status_df.merge(speedup_df[keys], on=keys, how="left", indicator=True)
        extra = extra[extra["_merge"] == "left_only"].drop(columns="_merge")
        if len(extra):
            frame = extra if not len(frame) else pd.concat([frame, extra], ignore_index=True)
    rows = [(row, _cell_values(row)) for row in frame.to_dict("records")]
    swept = "K" in frame.columns and len(frame) and bool(
        (frame.groupby(prov + ["exp_id"], sort=False, dropna=False)["K"].nunique() > 1).any())
    key_columns = _KEY_SWEPT if swept else _KEY
    always = {"T_group s", "speedup", "95% CI", "baseline"}
    empty = {name for name in _COLUMNS
             if name not in always and all(v[name] in (MISSING, "n/a") for _, v in rows)}
    if all(v["not ok"] == "0" for _, v in rows):
        empty.add("not ok")
    shown = [c for c in _COLUMNS if c not in empty]
    tables = []
    order = list(dict.fromkeys(tuple(str(r.get(k, "")) for k in prov) for r, _ in rows))
    for key in order:
        part = [v for r, v in rows if tuple(str(r.get(k, "")) for k in prov) == key]
        first = next(r for r, _ in rows if tuple(str(r.get(k, "")) for k in prov) == key)
        title = title_prefix + _provenance_title(first, by_campaign)
        # Greedy: as many columns per table as fit in ``width`` (each table repeats _KEY).
        groups: list[list[str]] = [[]]
        for column in shown:
            trial = groups[-1] + [column]
            if width is None or not groups[-1] or _natural_width(
                    _table("", trial, part, key_columns)) <= width:
                groups[-1] = trial
            else:
                groups.append([column])
        for i, columns in enumerate(groups, start=1):
            suffix = f" ({i}/{len(groups)})" if len(groups) > 1 else ""
            tables.append(_table(title + suffix, columns, part, key_columns))
    return tables


def _table(title: str, columns: list[str], rows: list[dict[str, str]],
           key_columns: tuple[str, ...] = _KEY) -> Table:
    names = list(key_columns) + columns
    table = Table(title=title or None, title_justify="left")
    for name in names:
        table.add_column(Text(_HEADERS.get(name, name)),
                         justify="right" if name in _RIGHT else "left",
                         no_wrap=name != "variant" and name != "baseline", overflow="fold")
    for values in rows:
        table.add_row(*(Text(values[c]) for c in names))
    return table


class NoCampaignRows(FugueError):
    """No row of the campaign asked for (``campaign_id``) under the runs folder."""

    def __init__(self, message: str, campaign_id: str):
        super().__init__(message)
        self.campaign_id = campaign_id


def select_runs(runs_dir: str | os.PathLike[str], campaign_id: str | None = None):
    """The rows under ``runs_dir`` (a folder or results files), only campaign
    ``campaign_id``'s when given (an unknown id raises a one-line
    :class:`~engine.errors.FugueError`; no ``master_groups.csv``:
    :class:`engine.results.load.NoResultsError`)."""
    from engine.results.load import load_runs

    runs = load_runs(runs_dir)
    if campaign_id is not None:
        ids = runs.campaign_ids()
        if campaign_id not in ids:
            raise NoCampaignRows(f"no rows of campaign '{campaign_id}' in '{runs_dir}'"
                                 f"{nearest(campaign_id, ids)} "
                                 f"({known(ids) if ids else 'no row there names a campaign'})",
                                 campaign_id)
        runs = runs.select(campaign_id)
    return runs


def check_export(out_dir: str | os.PathLike[str], formats: Any = "png,svg,tex",
                 overwrite: bool = False, what: str = "export folder",
                 ) -> tuple[list[str], Path, list[Path]]:
    """The formats (a list or ``"png,svg"``), the export folder and the files in it an
    export would replace, checked writing nothing (:func:`fugue_tui.report.export.export_folder`).

    Raises:
        FugueError: an unknown format, or a folder :func:`~fugue_tui.report.export.export_folder`
            refuses.
    """
    from fugue_tui.report.export import FORMATS, export_folder, planned_files

    chosen = [f.strip() for f in formats.split(",")] if isinstance(formats, str) \
        else list(formats)
    bad = [f for f in chosen if f not in FORMATS]
    if bad or not chosen:
        raise FugueError(f"--format {','.join(chosen)}: choose among {', '.join(FORMATS)} "
                         "(comma-separated)")
    from fugue_tui.report.hpo import planned_files as hpo_files
    from fugue_tui.report.sweeps import planned_files as sweep_files

    out, present = export_folder(out_dir, planned_files(chosen) + sweep_files(chosen)
                                 + hpo_files(chosen), overwrite, what)
    return chosen, out, present


def export_results(runs, out_dir: str | os.PathLike[str], formats="png,svg,tex",
                   by_campaign: bool = False,
                   skipped: list[tuple[str, str]] | None = None, overwrite: bool = False,
                   what: str = "export folder", baseline: str | None = None,
                   knee_fraction: float = 0.10) -> list[Path]:
    """Write the figures (PNG/SVG) and the LaTeX table of ``runs`` to ``out_dir``, from the
    same analysis as the terminal (:func:`fugue_tui.report.figures.build`), and the rows as data
    (parquet, json, tensorboard: :mod:`fugue_tui.report.export_data`); the paths written.
    A figure with nothing measured is not written: ``skipped``, when given, receives
    ``(figure file names, why)`` for each (only when PNG or SVG was asked for).

    Nothing is written unless ``out_dir`` is (or can become) a folder that holds none of
    the files an export owns (:func:`check_export`); with
    ``overwrite`` they are replaced, and a skipped figure's file left by an earlier export
    is removed (it would no longer match the rest). ``what`` names ``out_dir`` in errors.
    ``baseline``: a precision every cell is compared with (``--baseline fp32``), as in the
    terminal report.
    The dashboard's Results screen calls this too. Rows that form a K sweep also give
    ``knee.png`` / ``knee.svg`` and ``knee.csv`` (:mod:`fugue_tui.report.sweeps`, the knee at
    ``knee_fraction``); hpo rows give ``best_so_far.png`` / ``.svg`` and ``best_so_far.csv``
    (:mod:`fugue_tui.report.hpo`).

    Raises:
        FugueError: an unknown format, a target that is not a folder, files already there
            (without ``overwrite``), or a write that failed (naming the file).
    """
    from engine.results.hpo_curves import hpo_cells
    from fugue_tui.report.export import export, skipped_figures
    from fugue_tui.report.export_data import DATA_FORMATS, export_data
    from fugue_tui.report.figures import build
    from fugue_tui.report.hpo import export_hpo
    from fugue_tui.report.sweeps import analyse, export_sweeps

    chosen, out, present = check_export(out_dir, formats, overwrite, what)
    results = build(runs, by_campaign=by_campaign, baseline_precision=baseline)
    sweeps = analyse(runs, fraction=knee_fraction, advise=False, by_campaign=by_campaign)
    try:
        # figures and the table: each file replaced in one rename (fugue_tui.report.export.replaced),
        # never written through a link; then the rest of an earlier export is removed (a
        # figure now skipped, and the knee files, data files and tensorboard/ folder, which
        # are written anew after, so never through a link either)
        written = export(results, out, [f for f in chosen if f not in DATA_FORMATS])
        for path in set(present) - set(written):
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)
            else:
                path.unlink(missing_ok=True)
        written += export_sweeps(sweeps, out, chosen)
        written += export_hpo(hpo_cells(runs, by_campaign), out, chosen)
        written += export_data(runs, out, [f for f in chosen if f in DATA_FORMATS])
    except OSError as exc:
        raise FugueError(f"{what} '{out_dir}': cannot write "
                         f"{exc.filename or out}: {exc.strerror or exc}") from None
    images = [f for f in chosen if f in ("png", "svg")]
    if skipped is not None and images:
        removed = {p.name for p in present} - {p.name for p in written}
        for key, why in skipped_figures(results):
            names = [f"{key}.{f}" for f in images]
            gone = [n for n in names if n in removed]
            note = f" (an earlier export's {', '.join(gone)} removed)" if gone else ""
            skipped.append((", ".join(names), why + note))
    return written


def print_report(runs_dir: str | os.PathLike[str], console: Console,
                 campaign_id: str | None = None, width: int | None = None,
                 by_campaign: bool = False, chart: bool = True,
                 baseline: str | None = None, advise: bool = False,
                 knee_fraction: float = 0.10) -> int:
    """Print the tables and the speedup chart of the results under ``runs_dir``; return the
    number of cells reported.

    ``campaign_id``: only that campaign's rows (an unknown id raises a one-line
    :class:`~engine.errors.FugueError`). ``width``: the chart's width (default: the
    console's). ``baseline``: a precision every cell's speedup and accuracy parity are
    against (``--baseline fp32``), instead of seq of the cell's own precision. Rows forming
    a K sweep add each workload's throughput-vs-K chart with the knee marked and a table
    per curve (at ``knee_fraction``); hpo rows a time-to-best table per workload and the
    best-so-far chart (:mod:`fugue_tui.report.hpo`); ``advise`` adds the advice
    (:mod:`fugue_tui.report.sweeps`). Raises
    :class:`engine.results.load.NoResultsError` without ``master_groups.csv``.
    """
    from engine.results.analysis import cell_status, speedups

    runs = select_runs(runs_dir, campaign_id)
    for note in runs.notes:  # what reading left out (a torn last line): never silent
        print(f"fugue-tui: warning: {note}", file=sys.stderr)
    if not len(runs.groups):
        console.print(f"no result rows in {runs_dir}")
        return 0
    table = speedups(runs, by_campaign=by_campaign, baseline_precision=baseline)
    status = cell_status(runs, by_campaign=by_campaign)
    prefix = f"campaign {campaign_id}: " if campaign_id else ""
    for t in build_tables(table, status, by_campaign, title_prefix=prefix,
                          width=width or console.width):
        console.print(t)
    notes = _notes(table, baseline)
    for line in notes:
        console.print(Text(line))
    if chart and len(table) and (table["executor"] != "seq").any():
        from fugue_tui.report.charts import speedup_chart
        from fugue_tui.report.speedup_bars import speedup_chart_width

        color = (console.is_terminal and not console.no_color
                 and "NO_COLOR" not in os.environ)
        chart_width = width or min(console.width, 120)
        needs = speedup_chart_width(table)
        if chart_width < needs:  # plotext would drop the title and the labels
            console.print(Text(f"speedup chart left out: {chart_width} columns are fewer "
                               f"than the {needs} its title and labels need (the table "
                               "above has every speedup)"))
        else:
            text = speedup_chart(table, width=chart_width, color=color)
            console.print(Text.from_ansi(text) if color else Text(text))
    from fugue_tui.report.sweeps import analyse, print_advice, print_sweeps

    view = analyse(runs, fraction=knee_fraction, advise=advise, by_campaign=by_campaign)
    color = console.is_terminal and not console.no_color and "NO_COLOR" not in os.environ
    if chart:
        print_sweeps(view, console, width=width or min(console.width, 120), color=color)
    from fugue_tui.report.hpo import analyse as hpo_analyse
    from fugue_tui.report.hpo import print_hpo

    hpo, ttb = hpo_analyse(runs, table, by_campaign)
    print_hpo(hpo, ttb, console, width=width or min(console.width, 120), color=color,
              chart=chart, by_campaign=by_campaign)
    if advise:
        print_advice(view, console)
    return len(table)


def _notes(table, baseline: str | None = None) -> list[str]:
    from engine.results.analysis import MIN_BOOT_N

    if not len(table):
        return []
    against = (f"seq in {baseline} for every precision" if baseline
               else "seq of the same precision")
    lines = ["speedup = mean seq T_group ÷ mean T_group over passes (ratio of means), against "
             f"{against} on the same machine and stack; 95% CI: percentile bootstrap, only "
             f"with >= {MIN_BOOT_N} passes on both sides (else n/a)."]
    if (table["parity"] != "n/a").any():
        lines.append("parity: within / OUTSIDE = the cell's mean validation accuracy lies "
                     "within / outside the [min, max] of its seq baseline's jobs over all "
                     "passes.")
    return lines


def run_report(runs_dir: str | os.PathLike[str], campaign_id: str | None = None,
               by_campaign: bool = False, width: int | None = None,
               export_dir: str | os.PathLike[str] | None = None,
               formats: str = "png,svg,tex", overwrite: bool = False,
               baseline: str | None = None, as_json: bool = False, advise: bool = False,
               knee_fraction: float | str = 0.10) -> int:
    """``fugue-tui report``: exit status 0; bad input (no ``master_groups.csv``, an unknown
    campaign id, an unknown export format) raises a one-line
    :class:`~engine.errors.FugueError` (exit 2). ``export_dir``: also write the figures
    and the LaTeX table there (:func:`export_results`; files already there are replaced
    only with ``overwrite``). ``advise``: also the advice per workload and machine;
    ``knee_fraction``: the knee rule (``--knee-fraction``, strictly between 0 and 1)."""
    fraction = _fraction(knee_fraction)
    if overwrite and export_dir is None:
        raise FugueError("--overwrite only applies with --export DIR")
    if width is not None and width < 40:
        raise FugueError(f"--width {width}: at least 40 columns")
    console = Console(width=width) if width else Console()
    skipped: list[tuple[str, str]] = []
    if export_dir is not None:
        # the formats and the folder first, before any result is read, printed or written
        check_export(export_dir, formats, overwrite, "--export")
        export_results(select_runs(Path(runs_dir), campaign_id), export_dir, formats,
                       by_campaign, skipped, overwrite=overwrite, what="--export",
                       baseline=baseline, knee_fraction=fraction)
    if as_json:  # the cells as a fugue-tui/report document; what else is said: stderr
        from fugue_tui.jsonout import document, dump, report_cells

        runs = select_runs(Path(runs_dir), campaign_id)
        for note in runs.notes:
            print(f"fugue-tui: warning: {note}", file=sys.stderr)
        from fugue_tui.report.sweeps_json import hpo_section, sweep_sections

        dump(document("report", runs_dir=str(runs_dir), campaign=campaign_id,
                      by_campaign=by_campaign,
                      cells=report_cells(runs, by_campaign, baseline=baseline),
                      **sweep_sections(runs, fraction, advise, by_campaign),
                      hpo=hpo_section(runs, by_campaign)))
        if export_dir is not None:
            print(f"exported to {export_dir}", file=sys.stderr)
            for names, why in skipped:
                print(f"skipped {names}: {why}", file=sys.stderr)
        return 0
    print_report(Path(runs_dir), console, campaign_id=campaign_id, width=width,
                 by_campaign=by_campaign, baseline=baseline, advise=advise,
                 knee_fraction=fraction)
    if export_dir is not None:
        console.print(Text(f"exported ({formats}) to {export_dir}"))
        for names, why in skipped:
            console.print(Text(f"skipped {names}: {why}"), soft_wrap=True)
    return 0


def _fraction(value: float | str) -> float:
    """``--knee-fraction``: a number strictly between 0 and 1.

    Raises:
        FugueError: one line naming the flag and the value.
    """
    try:
        fraction = float(value)
    except (TypeError, ValueError):
        fraction = math.nan
    if not 0 < fraction < 1:
        raise FugueError(f"--knee-fraction {value}: a fraction strictly between 0 and 1 "
                         f"(0.1 = the knee is where doubling K gains less than 10 %)")
    return fraction
