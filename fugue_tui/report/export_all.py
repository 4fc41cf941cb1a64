"""One export of a runs folder, as ``report --export DIR`` and the dashboard's Results
screen write it: the formats and folder checked first (writing nothing), then the figures
and LaTeX table (:mod:`.export`), the K-sweep and hpo files (:mod:`.sweeps`, :mod:`.hpo`)
and the rows as data (:mod:`.export_data`), an earlier export's leftovers removed."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

from engine.errors import FugueError


def check_export(out_dir: str | os.PathLike[str], formats: Any = "png,svg,tex",
                 overwrite: bool = False, what: str = "export folder",
                 mlflow_uri: str | None = None,
                 ) -> tuple[list[str], Path, list[Path]]:
    """The formats (a list or ``"png,svg"``), the export folder and the files in it an
    export would replace, checked writing nothing (:func:`fugue_tui.report.export.export_folder`).
    ``mlflow_uri``: only with the ``mlflow`` format (then no ``mlflow.db`` in the folder).

    Raises:
        FugueError: an unknown format, a folder :func:`~fugue_tui.report.export.export_folder`
            refuses, ``--mlflow-uri`` without ``mlflow``, or ``mlflow`` without MLflow's
            client installed.
    """
    from fugue_tui.report.export import FORMATS, export_folder, planned_files

    chosen = [f.strip() for f in formats.split(",")] if isinstance(formats, str) \
        else list(formats)
    bad = [f for f in chosen if f not in FORMATS]
    if bad or not chosen:
        raise FugueError(f"--format {','.join(chosen)}: choose among {', '.join(FORMATS)} "
                         "(comma-separated)")
    if mlflow_uri is not None and "mlflow" not in chosen:
        raise FugueError(f"--mlflow-uri {mlflow_uri}: only applies with --format mlflow")
    if mlflow_uri is not None and not mlflow_uri.strip():
        raise FugueError("--mlflow-uri '': give a tracking URI (sqlite:///path/mlflow.db, "
                         "http://host:5000)")
    if "mlflow" in chosen:
        from fugue_tui.report.export_mlflow import check_mlflow

        check_mlflow()
    from fugue_tui.report.hpo import planned_files as hpo_files
    from fugue_tui.report.sweeps import planned_files as sweep_files

    names = [n for n in planned_files(chosen) if not (mlflow_uri and n == "mlflow.db")]
    out, present = export_folder(out_dir, names + sweep_files(chosen) + hpo_files(chosen),
                                 overwrite, what)
    return chosen, out, present


def export_results(runs, out_dir: str | os.PathLike[str], formats="png,svg,tex",
                   by_campaign: bool = False,
                   skipped: list[tuple[str, str]] | None = None, overwrite: bool = False,
                   what: str = "export folder", baseline: str | None = None,
                   knee_fraction: float = 0.10, notes: list[str] | None = None,
                   mlflow_uri: str | None = None) -> list[Path]:
    """Write the figures (PNG/SVG) and the LaTeX table of ``runs`` to ``out_dir``, from the
    same analysis as the terminal (:func:`fugue_tui.report.figures.build`), and the rows as data
    (parquet, json, tensorboard, mlflow: :mod:`fugue_tui.report.export_data`; ``mlflow_uri``:
    the MLflow tracking URI instead of ``out_dir/mlflow.db``); the paths written.
    A figure with nothing measured is not written: ``skipped``, when given, receives
    ``(figure file names, why)`` for each (only when PNG or SVG was asked for).

    Nothing is written unless ``out_dir`` is (or can become) a folder that holds none of
    the files an export owns (:func:`check_export`); with
    ``overwrite`` they are replaced, and a skipped figure's file left by an earlier export
    is removed (it would no longer match the rest). ``what`` names ``out_dir`` in errors.
    ``baseline``: a precision every cell is compared with (``--baseline fp32``), as in the
    terminal report.
    Crash-consistent (:mod:`fugue_tui.report.export_commit`): written into
    ``out_dir/.export-tmp-<pid>/``, each file then replaces its target in one rename and
    ``manifest.json`` (the files and their SHA-256) is replaced last; a staging folder an
    interrupted export left is removed, one line in ``notes`` (when given) saying so.
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
    from fugue_tui.report.export_commit import commit, remove_leftovers, staging_folder
    from fugue_tui.report.export_data import DATA_FORMATS, export_data
    from fugue_tui.report.figures import build
    from fugue_tui.report.hpo import export_hpo
    from fugue_tui.report.sweeps import analyse, export_sweeps

    chosen, out, present = check_export(out_dir, formats, overwrite, what, mlflow_uri)
    results = build(runs, by_campaign=by_campaign, baseline_precision=baseline)
    sweeps = analyse(runs, fraction=knee_fraction, advise=False, by_campaign=by_campaign)
    tmp, committing = None, False
    try:
        # everything is written into a staging folder first, then moved over its target
        # one rename each, the manifest last (fugue_tui.report.export_commit): a kill or a
        # full disk at any moment leaves each file the complete old or the complete new one
        leftovers = remove_leftovers(out)
        if notes is not None:
            notes.extend(leftovers)
        tmp = staging_folder(out)
        staged = export(results, tmp, [f for f in chosen if f not in DATA_FORMATS])
        staged += export_sweeps(sweeps, tmp, chosen)
        staged += export_hpo(hpo_cells(runs, by_campaign), tmp, chosen)
        staged += export_data(runs, tmp, [f for f in chosen if f in DATA_FORMATS])
        if "mlflow" in chosen:
            from fugue_tui.report.export_mlflow import (
                MLFLOW_DB,
                default_uri,
                write_mlflow,
            )

            if mlflow_uri:  # a server or another database: written there, not staged
                write_mlflow(runs, mlflow_uri)
            else:  # the experiments' artifacts would live beside the final database
                write_mlflow(runs, default_uri(tmp), out / "mlartifacts")
                staged.append(tmp / MLFLOW_DB)
        committing = True
        written = commit(tmp, out, staged, present)
    except OSError as exc:
        where = str(exc.filename or out)
        if tmp is not None:  # the file it was writing, named as its target
            where = where.replace(str(tmp), str(out))
        state = ("some files replaced: manifest.json still names the earlier export's"
                 if committing else "the earlier export's files are whole")
        raise FugueError(f"{what} '{out_dir}': cannot write {where}: "
                         f"{exc.strerror or exc} ({state})") from None
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
    images = [f for f in chosen if f in ("png", "svg")]
    if skipped is not None and images:
        removed = {p.name for p in present} - {p.name for p in written}
        for key, why in skipped_figures(results):
            names = [f"{key}.{f}" for f in images]
            gone = [n for n in names if n in removed]
            note = f" (an earlier export's {', '.join(gone)} removed)" if gone else ""
            skipped.append((", ".join(names), why + note))
    return written
