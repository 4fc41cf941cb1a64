"""``fugue-tui report [RUNS_DIR]``: the tables and chart of a runs folder (or its cells as
JSON, its exports, the advice), drawn by :func:`fugue_tui.report.tables.run_report`."""

from __future__ import annotations

import argparse

from fugue_tui.commands.arguments import integer, precision_names

#: The baseline as the help names it. Deliberately not imported from
#: ``engine.results.derived.BASELINE_EXECUTOR``: that module loads pandas (0.3 s), and every
#: ``fugue-tui`` command builds this parser; tests/unit/test_cli_help_pinned.py checks the
#: two agree.
BASELINE_WORD = "seq"


def add_parser(sub) -> None:
    base = BASELINE_WORD
    report = sub.add_parser(
        "report", help="tables and chart of a runs folder: T_group, throughput, energy, "
                       f"speedup over {base} with its 95%% interval, accuracy parity")
    report.add_argument("report_dir", nargs="?", metavar="RUNS_DIR",
                        help="folder holding master_groups.csv (default: --runs-dir or runs)")
    # Also after the sub-command (`fugue-tui report --runs-dir X`, as users write it); its
    # own dest, so that a different value before the command is refused, not overwritten.
    report.add_argument("--runs-dir", dest="runs_dir_report", metavar="DIR",
                        help="the same as RUNS_DIR")
    report.add_argument("--campaign", metavar="ID", help="only the rows of this campaign id")
    report.add_argument("--by-campaign", action="store_true",
                        help="compare only rows of the same campaign file (campaign_hash)")
    report.add_argument("--baseline", metavar="PRECISION", choices=precision_names(),
                        help=f"speedups and accuracy parity of every precision against {base} "
                             f"in this one (e.g. fp32); default: {base} of each cell's own "
                             "precision")
    report.add_argument("--json", action="store_true", dest="json_sub",
                        help="the cells (figures, intervals, parity) as JSON on stdout "
                             "(schema fugue-tui/report, docs/json.md) instead of the tables")
    report.add_argument("--width", type=integer, metavar="N",
                        help="layout width in columns (default: the terminal's)")
    report.add_argument("--export", metavar="DIR",
                        help="also write the figures (PNG, SVG) and a LaTeX table there, "
                             "or the rows as data (--format)")
    report.add_argument("--overwrite", action="store_true",
                        help="with --export: replace the files an earlier export left in DIR "
                             "(without it, an export that would replace a file is refused)")
    report.add_argument("--format", metavar="LIST", default="png,svg,tex",
                        help="what --export writes, comma-separated: png, svg, tex (the "
                             "figures and table; the default), parquet, json (group and job "
                             "rows, typed), tensorboard (per-epoch curves and group figures), "
                             "mlflow (a run per job under a run per group, in DIR/mlflow.db; "
                             "the mlflow extra)")
    report.add_argument("--mlflow-uri", metavar="URI",
                        help="with --format mlflow: the MLflow tracking URI to write to "
                             "instead of sqlite:///DIR/mlflow.db (a server, another database)")
    report.add_argument("--advise", action="store_true",
                        help="per workload and machine: the recommended strategy and K / "
                             f"max_parallel, its speedup over {base} with interval, energy per "
                             "trained model, the evidence, and whether the two best are "
                             "distinguishable (uses the knee of a K sweep)")
    report.add_argument("--per-core", action="store_true",
                        help="with --advise: rank by speedup per CPU core (the T_group "
                             f"speedup over {base} ÷ the cell's mean cores_used); cells "
                             "without cores_used are n/a and ranked last")
    report.add_argument("--knee-fraction", metavar="F", default="0.1",
                        help="the knee rule: the smallest K beyond which doubling K gains "
                             "less than this fraction of throughput (default 0.1 = 10%%)")


def run(args: argparse.Namespace) -> int:
    """The report of RUNS_DIR, else ``--runs-dir`` (after or before ``report``), else
    ``runs``; "" is refused and "~" expanded (one rule, ``user_path``)."""
    from engine.define.paths import user_path
    from fugue_tui.report.tables import run_report

    given, what = ((args.report_dir, "argument RUNS_DIR") if args.report_dir is not None
                   else (args.runs_dir_report, "argument --runs-dir")
                   if args.runs_dir_report is not None
                   else (args.runs_dir, "argument --runs-dir"))
    return run_report(user_path(given, what) if given is not None else "runs",
                      campaign_id=args.campaign, by_campaign=args.by_campaign,
                      width=args.width, export_dir=args.export,
                      formats=args.format, overwrite=args.overwrite,
                      baseline=args.baseline, as_json=args.json_sub,
                      advise=args.advise, knee_fraction=args.knee_fraction,
                      per_core=args.per_core, mlflow_uri=args.mlflow_uri)
