"""Export the results figures and table to files: PNG/SVG (matplotlib) and a LaTeX table
(booktabs). The only module that imports matplotlib (Agg backend, no display needed).

Same analysis as the terminal charts: :func:`fugue_tui.report.figures.build`. A missing value is
not drawn (never a zero-length bar) and is named under the axes ("missing: ..."); in the
LaTeX table it is ``--``. Files are reproducible: SVG ids come from a fixed hash salt and
neither format records a creation date.

``export(results, out_dir, formats)`` writes ``<figure>.png`` / ``<figure>.svg`` for every
figure with at least one measured value, and ``results.tex``; it returns the paths written.
A figure with nothing to draw (no row, or no cell measured it: energy on a CPU run) is not
written as an empty chart; :func:`skipped_figures` says which and why.
"""

from __future__ import annotations

import os
import textwrap
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from engine.errors import FugueError
from engine.results.derived import BASELINE_EXECUTOR, PARITY_NA, parity_words
from engine.results.parity_contract import wording
from fugue_tui.format import fmt_number

#: What ``--format`` takes: the figures and the LaTeX table (this module), the rows as
#: data (:mod:`fugue_tui.report.export_data`).
FORMATS = ("png", "svg", "tex", "parquet", "json", "tensorboard", "mlflow")


def _pyplot():
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    plt.rcParams["svg.hashsalt"] = "fugue-tui"
    plt.rcParams["svg.fonttype"] = "none"  # text stays text (smaller, searchable)
    return plt


def figure_file(figure, path: Path, fmt: str) -> Path:
    """One figure as a horizontal bar chart (intervals as error bars, the reference line
    dashed, missing values listed under the axes) in ``path`` with format ``fmt``."""
    plt = _pyplot()
    drawn = figure.drawn
    labels = [b.label for b in drawn]
    height = max(2.2, 0.42 * len(drawn) + 1.6)
    fig, ax = plt.subplots(figsize=(8.0, height), layout="constrained")
    try:
        positions = list(range(len(drawn)))[::-1]  # the first bar on top
        values = [b.value for b in drawn]
        ax.barh(positions, values, height=0.6, color="#4c72b0")
        for pos, bar in zip(positions, drawn, strict=False):  # an interval need not contain the bar's end
            if bar.low is not None and bar.high is not None:  # (parity: the seq spread)
                ax.plot([bar.low, bar.high], [pos, pos], color="#222222", linewidth=1.2,
                        marker="|", markersize=8)
        for pos, bar in zip(positions, drawn, strict=False):
            ax.text(max(bar.value, bar.high if bar.high is not None else bar.value), pos,
                    f"  {bar.text}", va="center", ha="left", fontsize=8)
        ax.set_yticks(positions, labels, fontsize=8)
        if figure.reference is not None:
            ax.axvline(figure.reference, color="#c44e52", linestyle="--", linewidth=1)
        ax.set_xlabel(figure.unit)
        ax.set_title("\n".join(textwrap.wrap(figure.title, 80)), fontsize=10)
        right = max([v for v in values] + [b.high for b in drawn if b.high is not None]
                    + ([figure.reference] if figure.reference is not None else []) + [0.0])
        ax.set_xlim(min([0.0] + values), right * 1.25 or 1.0)
        notes = [figure.note] if figure.note else []
        if figure.missing:
            notes.append("missing (not measured, not drawn): " + ", ".join(figure.missing))
        if notes:
            fig.text(0.01, 0.0, "\n".join(textwrap.fill(n, 120) for n in notes),
                     fontsize=7, va="bottom", ha="left")
            fig.get_layout_engine().set(rect=(0, 0.06 * len(notes), 1, 1 - 0.06 * len(notes)))
        metadata = {"Date": None} if fmt == "svg" else {"Software": "fugue-tui"}
        fig.savefig(path, format=fmt, metadata=metadata, dpi=120)
    finally:
        plt.close(fig)
    return path


_LATEX_SPECIAL = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#",
                  "_": r"\_", "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}",
                  "^": r"\textasciicircum{}"}


def tex_escape(text: str) -> str:
    return "".join(_LATEX_SPECIAL.get(ch, ch) for ch in str(text))


def _num(value: Any, fmt: str) -> str:
    """A LaTeX cell: ``--`` (LaTeX's dash) for a value not measured."""
    return fmt_number(value, fmt, missing="--")


def latex_table(results, caption: str = f"Speedup over {BASELINE_EXECUTOR} per experiment and "
                                       "executor.",
                label: str = "tab:fugue-results") -> str:
    """The speedup table as a LaTeX ``table`` with booktabs rules (``\\usepackage{booktabs}``):
    one block per machine (a ``\\midrule`` and the machine's provenance between blocks),
    rows in the analysis' order; ``--`` for a value not measured. When rows form a K sweep
    (an experiment measured at several K on one machine, issue 23: its cells share the
    experiment id) a ``$K$`` column follows the executor, as in the terminal report."""
    from fugue_tui.report.figures import mark_sweeps

    table = results.table
    swept = bool(len(table)) and bool(mark_sweeps(table)["_swept"].any())
    head = ("Experiment", "Executor", *(("$K$",) if swept else ()), "Variant", "$n$",
            r"$T_\mathrm{group}$ (s)", "Speedup", r"95\,\% CI", "Samples/s", "J/model",
            "Val acc", "Parity", "Contract")
    spec = "ll" + ("r" if swept else "") + "lrrrlrrrll"
    lines = [r"\begin{table}[htbp]", r"\centering", r"\small",
             rf"\begin{{tabular}}{{{spec}}}", r"\toprule", " & ".join(head) + r" \\",
             r"\midrule"]
    prov = ["machine", "gpu_name", "torch_version", "cuda_version"]
    blocks = list(dict.fromkeys(tuple(str(r.get(k, "")) for k in prov)
                                for r in table.to_dict("records")))
    for i, key in enumerate(blocks):
        machine, gpu, torch, cuda = key
        where = ", ".join(p for p in (machine, gpu or "no GPU", f"torch {torch}" if torch
                                      else "", f"CUDA {cuda}" if cuda else "") if p)
        if len(blocks) > 1:
            if i:
                lines.append(r"\midrule")
            lines.append(rf"\multicolumn{{{len(head)}}}{{l}}{{\emph{{{tex_escape(where)}}}}} \\")
        for r in table.to_dict("records"):
            if tuple(str(r.get(k, "")) for k in prov) != key:
                continue
            variant = " ".join(str(v) for v in (
                "" if r.get("compile_mode") in ("off", "", None) else f"compile={r['compile_mode']}",
                r.get("scheduler") or "", r.get("features") or "",
                r.get("mp_start") or "", r.get("tune_actors") or "") if v and v == v)
            mean, sd = _num(r.get("T_group_mean"), ".2f"), _num(r.get("T_group_std"), ".2f")
            t = mean if sd == "--" else rf"{mean} $\pm$ {sd}"
            ci = r.get("ci") if r.get("ci") not in (None, "n/a") else "--"
            words = parity_words(r.get("parity"), r.get("parity_failed"), r.get("parity_on"))
            parity = "--" if words in ("", PARITY_NA) else words.replace("OUTSIDE", "outside")
            sps = _num(r.get("throughput_group_mean"), ",.0f")
            k = [_num(r.get("K"), ".0f")] if swept else []
            cells = [tex_escape(c) for c in (r["exp_id"], r["executor"], *k, variant or "--",
                                             str(int(r["n_strategy"])))]
            cells += [t, _num(r.get("speedup"), ".3f"), tex_escape(ci),
                      sps.replace(",", r"\,"), _num(r.get("energy_per_model_j"), ".1f"),
                      _num(r.get("acc_mean"), ".3f"), parity,
                      # "bit for bit" only where every row of the cell says exact
                      tex_escape(wording(r.get("parity_contract")) or "--")]
            lines.append(" & ".join(cells) + r" \\")
    lines += [r"\bottomrule", r"\end{tabular}",
              rf"\caption{{{tex_escape(caption)} Speedup: mean {BASELINE_EXECUTOR} "
              r"$T_\mathrm{group}$ "
              rf"divided by mean $T_\mathrm{{group}}$ over passes (ratio of means), against "
              rf"{BASELINE_EXECUTOR} "
              r"on the same machine and stack; interval: percentile bootstrap, only with "
              r"at least 5 passes on both sides.}",
              rf"\label{{{label}}}", r"\end{table}", ""]
    return "\n".join(lines)


#: Why a figure has no row at all, per figure (else :data:`_NO_ROWS`).
_NO_BARS = {
    "speedup": f"no cell other than {BASELINE_EXECUTOR} (a speedup compares a strategy with its "
               f"{BASELINE_EXECUTOR} baseline)",
    "ladder": "no ablation-ladder rows (unified_model with --sweep ablation)",
    "completion": "no stream campaign's rows (key 'arrivals')",
}
_NO_ROWS = "no ok row to draw"
#: Why every value of a figure is missing, per figure (else :data:`_NOTHING_MEASURED`).
_ALL_MISSING = {
    "energy": ("no cell measured energy (energy_method none: no GPU energy counter or power "
               "samples, as on a CPU-only run)"),
    "memory": "no cell recorded peak memory (neither VRAM nor the process tree's RSS)",
    "speedup": f"no strategy cell has a {BASELINE_EXECUTOR} baseline of the same machine and "
               "workload",
    "parity": "no cell recorded a validation accuracy",
}
_NOTHING_MEASURED = "no cell measured it"


def skipped_figures(results) -> list[tuple[str, str]]:
    """``(figure key, why)`` for every figure :func:`export` does not write: no row at all,
    or no measured value in any row (an all-"missing" chart says nothing)."""
    out = []
    for figure in results.figures:
        if not figure.bars and figure.key == "speedup" and "stream cells left out" in figure.note:
            out.append((figure.key, "stream cells only: a stream's T_group is its makespan; "
                                    "completion.png compares them"))
        elif not figure.bars:
            out.append((figure.key, _NO_BARS.get(figure.key, _NO_ROWS)))
        elif not figure.drawn:
            out.append((figure.key, _ALL_MISSING.get(figure.key, _NOTHING_MEASURED)))
    return out


def planned_files(formats: Iterable[str]) -> list[str]:
    """Every file name an export in ``formats`` owns: each figure's
    (:data:`fugue_tui.report.figures.FIGURE_KEYS`, drawn or skipped: a skipped figure's file from
    an earlier export would sit beside the new ones, out of step with them) and
    ``results.tex``, and the data formats' files (``groups.parquet``, ..., the
    ``tensorboard`` folder) and ``manifest.json``. Known before any result is read, so a bad target fails fast."""
    from fugue_tui.report.export_commit import MANIFEST
    from fugue_tui.report.export_data import DATA_FILES
    from fugue_tui.report.figures import FIGURE_KEYS

    formats = list(formats)
    names = [f"{key}.{fmt}" for key in FIGURE_KEYS for fmt in ("png", "svg") if fmt in formats]
    names += ["results.tex"] if "tex" in formats else []
    names += [name for fmt, owned in DATA_FILES.items() if fmt in formats for name in owned]
    return [*names, MANIFEST]


class ExportExists(FugueError):
    """The export folder already holds files an export would write (``present``); the
    command line says to add ``--overwrite``, the dashboard asks whether to replace them."""

    def __init__(self, message: str, present: list[Path]):
        super().__init__(message)
        self.present = present


def export_folder(out_dir: str | Path, names: list[str], overwrite: bool = False,
                  what: str = "export folder") -> tuple[Path, list[Path]]:
    """Check, writing nothing, that an export may write ``names`` under ``out_dir``: the
    folder is a folder or can become one, and none of the files is there already unless
    ``overwrite``. Returns the folder (a leading ``~`` expanded) and the files already
    there (to be replaced). ``what`` names the value in errors (``--export``).

    Raises:
        FugueError: empty text, a regular file (or anything but a folder) at the path or
            on the way to it, or (without ``overwrite``) files an export would replace.
    """
    from engine.define.paths import user_path
    from engine.results.paths import blocking_file

    out = user_path(out_dir, what)
    shown = f"{what} '{out_dir}'"
    if os.path.lexists(out) and not out.is_dir():
        raise FugueError(f"{shown} is a regular file, not a folder: give a folder (created "
                         f"if absent)" if out.is_file() else f"{shown} is not a folder")
    blocker = blocking_file(out)
    if blocker is not None:
        raise FugueError(f"{shown} is under a regular file '{blocker}': give a folder")
    present = [out / name for name in names if os.path.lexists(out / name)]
    if present and not overwrite:
        listed = ", ".join(p.name for p in present[:3])
        more = f" and {len(present) - 3} more" if len(present) > 3 else ""
        raise ExportExists(f"{shown} already holds {listed}{more} (an earlier export?): "
                           f"give another folder, or add --overwrite to replace them", present)
    return out, present


def export(results, out_dir: str | Path, formats: Iterable[str] = FORMATS) -> list[Path]:
    """Write the figures (PNG/SVG) and the LaTeX table of ``results`` under ``out_dir``;
    returns the files written. Figures with nothing drawn are skipped
    (:func:`skipped_figures`)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    formats = list(formats)
    unknown = [f for f in formats if f not in FORMATS]
    if unknown:
        raise ValueError(f"unknown export format(s) {', '.join(unknown)}: "
                         f"choose from {', '.join(FORMATS)}")
    written: list[Path] = []
    for figure in results.figures:
        if not figure.drawn:
            continue
        for fmt in ("png", "svg"):
            if fmt in formats:
                written.append(replaced(out / f"{figure.key}.{fmt}",
                                        lambda tmp, f=figure, fmt=fmt: figure_file(f, tmp, fmt)))
    if "tex" in formats:
        text = latex_table(results)
        written.append(replaced(out / "results.tex", lambda tmp: tmp.write_text(text)))
    return written


def replaced(path: Path, write) -> Path:
    """``write(tmp)`` into a hidden sibling of ``path``, then rename it over ``path``: an
    earlier export's file is replaced in one step (a reader never finds it missing or half
    written, and an export that fails midway leaves the earlier file whole); a link at
    ``path`` is replaced itself, never written through. Returns ``path``."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        write(tmp)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path
