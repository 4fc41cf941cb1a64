"""The results report: Rich tables per machine (one row per experiment × executor cell) and
the speedup chart. Used at the end of ``--batch`` and by ``fugue-tui report``.

Numbers come from :mod:`engine.results.analysis` (ratio-of-means speedups over the seq baseline of
the same machine and stack, bootstrap intervals only with >= 5 passes on both sides);
this module only formats them. A value that was not measured is shown as "—", never 0.
"""

from __future__ import annotations

import math
import os
import sys
from pathlib import Path

from rich.console import Console
from rich.text import Text

from engine.errors import FugueError, known, nearest
from engine.results.conditions import notes as condition_notes
from engine.results.derived import BASELINE_EXECUTOR, PARITY_NA
from engine.results.eager_note import eager_notes
from fugue_tui.report.cell_tables import build_tables
from fugue_tui.report.export_all import check_export, export_results


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


def print_report(runs_dir: str | os.PathLike[str], console: Console,
                 campaign_id: str | None = None, width: int | None = None,
                 by_campaign: bool = False, chart: bool = True,
                 baseline: str | None = None, advise: bool = False,
                 knee_fraction: float = 0.10, per_core: bool = False) -> int:
    """Print the tables and the speedup chart of the results under ``runs_dir``; return the
    number of cells reported.

    ``campaign_id``: only that campaign's rows (an unknown id raises a one-line
    :class:`~engine.errors.FugueError`). ``width``: the chart's width (default: the
    console's). ``baseline``: a precision every cell's speedup and accuracy parity are
    against (``--baseline fp32``), instead of seq of the cell's own precision. Rows forming
    a K sweep add each workload's throughput-vs-K chart with the knee marked and a table
    per curve (at ``knee_fraction``); hpo rows a time-to-best table per workload and the
    best-so-far chart (:mod:`fugue_tui.report.hpo`); ``advise`` adds the advice
    (:mod:`fugue_tui.report.sweeps`), ranked by speedup per core with ``per_core``. Raises
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
    # issue 45: a cell whose buckets trained eagerly is not the stacked model's speedup
    notes = _notes(table, baseline) + eager_notes(runs.groups.to_dict("records"))
    notes += condition_notes(table)  # issue 46: busy host, short windows, with the figures
    for line in notes:
        console.print(Text(line))
    # A stream cell's T_group is its makespan, which its last arrival dominates: its ratio
    # stays in the table (a measured figure) but is not drawn as a speedup; the streams
    # table below compares stream cells on their jobs' completion times.
    from engine.define.matrix import STREAM_ID

    drawn = table[(table["exp_id"] != STREAM_ID).to_numpy()] if len(table) else table
    if chart and len(table) and len(drawn) < len(table) and \
            (table["executor"] != BASELINE_EXECUTOR).any():
        console.print(Text("speedup chart: stream cells left out (a stream's T_group is its "
                           "makespan, mostly its last arrival; the streams table below "
                           "compares them on job completion time)"))
    if chart and len(drawn) and (drawn["executor"] != BASELINE_EXECUTOR).any():
        from fugue_tui.report.charts import speedup_chart
        from fugue_tui.report.speedup_bars import speedup_chart_width

        color = (console.is_terminal and not console.no_color
                 and "NO_COLOR" not in os.environ)
        chart_width = width or min(console.width, 120)
        needs = speedup_chart_width(drawn)
        if chart_width < needs:  # plotext would drop the title and the labels
            console.print(Text(f"speedup chart left out: {chart_width} columns are fewer "
                               f"than the {needs} its title and labels need (the table "
                               "above has every speedup)"))
        else:
            text = speedup_chart(drawn, width=chart_width, color=color)
            console.print(Text.from_ansi(text) if color else Text(text))
    from fugue_tui.report.sweeps import analyse, print_advice, print_sweeps

    view = analyse(runs, fraction=knee_fraction, advise=advise, by_campaign=by_campaign,
                   per_core=per_core)
    color = console.is_terminal and not console.no_color and "NO_COLOR" not in os.environ
    if chart:
        print_sweeps(view, console, width=width or min(console.width, 120), color=color)
    from fugue_tui.report.hpo import analyse as hpo_analyse
    from fugue_tui.report.hpo import print_hpo

    hpo, ttb = hpo_analyse(runs, table, by_campaign)
    print_hpo(hpo, ttb, console, width=width or min(console.width, 120), color=color,
              chart=chart, by_campaign=by_campaign)
    # issue 51: strategies compared on one stream
    from engine.results.stream_report import stream_cells
    from fugue_tui.report.streams import print_streams

    print_streams(stream_cells(runs.groups, by_campaign), console)
    # issue 46: where executors' scheduler decisions first differ (decisions.json)
    from engine.results import decision_diff

    for line in decision_diff.lines(decision_diff.compare(runs.groups.to_dict("records"),
                                                          runs_dir, by_campaign)):
        console.print(Text(line))
    if advise:
        print_advice(view, console)
    return len(table)


def _notes(table, baseline: str | None = None) -> list[str]:
    from engine.results.analysis import MIN_BOOT_N

    if not len(table):
        return []
    base = BASELINE_EXECUTOR
    against = (f"{base} in {baseline} for every precision" if baseline
               else f"{base} of the same precision")
    lines = [f"speedup = mean {base} T_group ÷ mean T_group over passes (ratio of means), against "
             f"{against} on the same machine and stack; 95% CI: percentile bootstrap, only "
             f"with >= {MIN_BOOT_N} passes on both sides (else n/a)."]
    if (table["parity"] != PARITY_NA).any():
        lines.append("parity: within / OUTSIDE (what failed: acc, loss) = the cell's mean "
                     "validation accuracy and mean validation loss both lie within / not "
                     f"within the [min, max] of its {base} baseline's jobs over all passes, "
                     "widened by the precision's band (docs/fidelity.md, \"Precision\"); "
                     "acc only: no validation loss recorded on a side.")
    if "parity_contract" in table.columns and table["parity_contract"].notna().any():
        lines.append("parity contract: bit for bit = every row of the cell says exact (the "
                     "path is so by construction, or its float32 one-step probe found the "
                     "stack bit-identical to K solo steps on this machine); within <bound> = "
                     "not promised bit for bit, within that documented bound "
                     "(docs/fidelity.md, \"A row's parity_contract\").")
    return lines


def run_report(runs_dir: str | os.PathLike[str], campaign_id: str | None = None,
               by_campaign: bool = False, width: int | None = None,
               export_dir: str | os.PathLike[str] | None = None,
               formats: str = "png,svg,tex", overwrite: bool = False,
               baseline: str | None = None, as_json: bool = False, advise: bool = False,
               knee_fraction: float | str = 0.10, per_core: bool = False,
               mlflow_uri: str | None = None) -> int:
    """``fugue-tui report``: exit status 0; bad input (no ``master_groups.csv``, an unknown
    campaign id, an unknown export format) raises a one-line
    :class:`~engine.errors.FugueError` (exit 2). ``export_dir``: also write the figures
    and the LaTeX table there (:func:`export_results`; files already there are replaced
    only with ``overwrite``). ``advise``: also the advice per workload and machine;
    ``knee_fraction``: the knee rule (``--knee-fraction``, strictly between 0 and 1);
    ``per_core``: the advice ranks by speedup per core (``--per-core``, only with
    ``advise``); ``mlflow_uri``: where ``--format mlflow`` writes (``--mlflow-uri``)."""
    fraction = _fraction(knee_fraction)
    if per_core and not advise:
        raise FugueError("--per-core only applies with --advise (it ranks the advice by "
                         "speedup per core)")
    if overwrite and export_dir is None:
        raise FugueError("--overwrite only applies with --export DIR")
    if mlflow_uri is not None and export_dir is None:
        raise FugueError("--mlflow-uri only applies with --export DIR --format mlflow")
    if width is not None and width < 40:
        raise FugueError(f"--width {width}: at least 40 columns")
    console = Console(width=width) if width else Console()
    skipped: list[tuple[str, str]] = []
    notes: list[str] = []
    if export_dir is not None:
        # the formats and the folder first, before any result is read, printed or written
        check_export(export_dir, formats, overwrite, "--export", mlflow_uri)
        export_results(select_runs(Path(runs_dir), campaign_id), export_dir, formats,
                       by_campaign, skipped, overwrite=overwrite, what="--export",
                       baseline=baseline, knee_fraction=fraction, notes=notes,
                       mlflow_uri=mlflow_uri)
        for note in notes:
            print(f"fugue-tui: note: {note}", file=sys.stderr)
    if as_json:  # the cells as a fugue-tui/report document; what else is said: stderr
        from fugue_tui.jsonout import document, dump, report_cells

        runs = select_runs(Path(runs_dir), campaign_id)
        for note in runs.notes:
            print(f"fugue-tui: warning: {note}", file=sys.stderr)
        for note in eager_notes(runs.groups.to_dict("records")):  # issue 45
            print(f"fugue-tui: note: {note}", file=sys.stderr)
        from engine.results import decision_diff
        cells = report_cells(runs, by_campaign, baseline=baseline)
        # issue 46: the cells carry the figures (host_load_max, busy_n, ...); said here too
        import pandas as pd

        for note in condition_notes(pd.DataFrame(cells)):
            print(f"fugue-tui: note: {note}", file=sys.stderr)
        from engine.results.stream_report import stream_cells
        from fugue_tui.report.sweeps_json import hpo_section, sweep_sections

        sections = sweep_sections(runs, fraction, advise, by_campaign, per_core)
        streams_advice = sections.pop("stream_advice", None)  # placed after "streams"
        dump(document("report", runs_dir=str(runs_dir), campaign=campaign_id,
                      by_campaign=by_campaign,
                      cells=cells,
                      **sections,
                      hpo=hpo_section(runs, by_campaign),
                      decisions=decision_diff.compare(runs.groups.to_dict("records"),
                                                      runs_dir, by_campaign),
                      streams=stream_cells(runs.groups, by_campaign),
                      **({"stream_advice": streams_advice} if advise else {}),
                      warnings=list(runs.notes)))
        if export_dir is not None:
            print(f"exported to {export_dir}", file=sys.stderr)
            for names, why in skipped:
                print(f"skipped {names}: {why}", file=sys.stderr)
        return 0
    print_report(Path(runs_dir), console, campaign_id=campaign_id, width=width,
                 by_campaign=by_campaign, baseline=baseline, advise=advise,
                 knee_fraction=fraction, per_core=per_core)
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


#: ``export_results`` and ``check_export`` stay importable from here (the dashboard's
#: Results screen and the tests import them from the report's entry module).
__all__ = ["NoCampaignRows", "build_tables", "check_export", "export_results",
           "print_report", "run_report", "select_runs"]
