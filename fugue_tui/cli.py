"""``fugue-tui`` command line (argparse).

    fugue-tui                                   the dashboard (plan, run, watch)
    fugue-tui dashboard [CAMPAIGN.toml] [--attach RUN_DIR] [--runs-dir DIR]
                        [--results RUNS_DIR] [--replay RUN_DIR|EVENTS.jsonl [--speed X]]
    fugue-tui --batch CAMPAIGN.toml [--dry-run] [--runs-dir DIR] [--passes N] ...
    fugue-tui list [--experiments FILE] [--all]
    fugue-tui validate [SELECTOR ...] [--experiments-file FILE]
    fugue-tui prefetch [SELECTOR ...] [--data-dir DIR]
    fugue-tui run --exp SELECTOR ... --exec EXECUTOR ... [--dry-run] ...
    fugue-tui run --model M --dataset D [--type cv --k 5 ...] [--exec ...]
    fugue-tui report [RUNS_DIR] [--campaign ID] [--by-campaign] [--width N] [--export DIR]

Bad input prints one line naming the file, key or value and exits with status 2.
"""

from __future__ import annotations

import argparse
import sys

from engine import __version__
from engine.errors import FugueError


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="fugue-tui",
        description="Measure what you gain by training many neural networks at once on one "
                    "GPU: seq, mp (CUDA MPS), ray and a stacked unified model, same data, "
                    "seeds and software stack.")
    _add_top_level(parser)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    _add_dashboard(sub)
    _add_control(sub)
    _add_catalogue_commands(sub)
    _add_run(sub)
    _add_report(sub)
    _add_bench(sub)
    return parser


def _add_top_level(parser: argparse.ArgumentParser) -> None:
    """``--version``, ``--batch`` and the overrides it takes."""
    parser.add_argument("--version", action="version", version=f"fugue-tui {__version__}")
    parser.add_argument("--batch", metavar="CAMPAIGN", help="run a campaign TOML headless")
    parser.add_argument("--dry-run", action="store_true",
                        help="with --batch: print the cells and their keys, run nothing")
    parser.add_argument("--runs-dir", help="override the campaign's runs_dir")
    parser.add_argument("--passes", type=_at_least(1), help="override the campaign's passes")
    parser.add_argument("--seed", type=int, help="override the campaign's seed")
    parser.add_argument("--device", help="override the campaign's device (auto, cpu, cuda, cuda:N)")
    parser.add_argument("--experiments-file", metavar="FILE", type=_regular_file,
                        help="a user experiments file merged over the catalogue")
    parser.add_argument("--retries", type=_at_least(0), help="override the campaign's retries")
    parser.add_argument("--resume", action="store_true",
                        help="with --batch: skip cells whose key already has an ok row of "
                             "this campaign")
    parser.add_argument("--reuse-from-any-campaign", dest="reuse_any", action="store_true",
                        help="with --resume: an ok row of any campaign in the runs folder "
                             "counts too (the plan names the campaign it came from)")
    parser.add_argument("--since", metavar="YYYYmmdd_HHMMSS", type=_timestamp,
                        help="with --resume: only ok rows at or after this time count")


def _add_dashboard(sub) -> None:
    dashboard = sub.add_parser(
        "dashboard", help="the dashboard (the default): plan, launch and watch a campaign",
        description="Plan a campaign (catalogue, executors, settings, live preview of the "
                    "cells), launch it and watch it live; handle hung cells from the keyboard. "
                    "Quitting while it runs asks: stop it or detach (it keeps running; "
                    "--attach finds it again).")
    dashboard.add_argument("campaign_file", nargs="?", metavar="CAMPAIGN",
                           type=_regular_file, help="a campaign TOML file to load into the plan")
    dashboard.add_argument("--attach", metavar="RUN_DIR",
                           help="open a campaign's run folder (runs/<name>): live while its "
                                "runner runs, else as it ended")
    dashboard.add_argument("--results", metavar="RUNS_DIR",
                           help="open the Results screen on a runs folder (ours or the fugue "
                                "harness's) or a master_groups.csv")
    dashboard.add_argument("--replay", metavar="PATH",
                           help="replay a finished campaign (its run folder, or an events "
                                "file) in the run screen, as it happened")
    from fugue_tui.app.replay import parse_speed

    dashboard.add_argument("--speed", type=parse_speed, default=1.0, metavar="X",
                           help="with --replay: campaign seconds per second, 0.1 to 1000 "
                                "(default 1; + and - step a 1-2-5 ladder)")


def _add_control(sub) -> None:
    control = sub.add_parser("control", help="send a command to the runner of a campaign")
    control.add_argument("run_dir", help="the campaign's run folder (runs/<name>)")
    control.add_argument("cmd", choices=["kill", "retry", "skip", "abort"])
    control.add_argument("cell", nargs="?", help="cell key, key prefix or index")


def _add_catalogue_commands(sub) -> None:
    """``list``, ``validate`` and ``prefetch``: the catalogue and this machine."""
    lister = sub.add_parser("list", help="list the experiment catalogue and what can run here")
    _experiments_file(lister, "experiments_file_list")
    validate = sub.add_parser(
        "validate", help="which experiments can run here and why not; what is registered",
        description="Every catalogue experiment (or the selected ones) and whether it resolves "
                    "on this machine, with a one-line reason when not; then the registered "
                    "models, datasets, tasks, optimizers, executors and workload types. Exit 0 "
                    "for the listing; with SELECTOR, 1 when a selected experiment cannot run.")
    validate.add_argument("selector", nargs="*", metavar="SELECTOR",
                          help="E01, 1, E08:E10, E08:, :E05, 1,4,5 or all")
    _experiments_file(validate, "experiments_file_sub")
    prefetch = sub.add_parser(
        "prefetch", help="download the datasets of the selected experiments (default all)",
        description="Download the datasets of the selected experiments (default all) into the "
                    "data root (FUGUE_DATA_DIR, or --data-dir). Present datasets are skipped; "
                    "scikit-learn's bundled ones need nothing. Each download goes to a "
                    "temporary folder inside the data root and is renamed into place only when "
                    "complete. Exit 2 when a dataset could not be fetched.")
    prefetch.add_argument("selector", nargs="*", metavar="SELECTOR",
                          help="E01, 1, E08:E10, E08:, :E05, 1,4,5 or all (default all)")
    prefetch.add_argument("--data-dir", metavar="DIR",
                          help="download here instead of FUGUE_DATA_DIR")
    _experiments_file(prefetch, "experiments_file_sub")


def _add_run(sub) -> None:
    from fugue_tui.commands.run_flags import add_run_arguments, executors_epilog

    run = sub.add_parser(
        "run", help="run experiments × executors now (a campaign built from the flags)",
        description="Build a campaign from the flags (catalogue experiments with --exp, and/or\n"
                    "an ad-hoc experiment described with --model/--dataset ...), validate it like\n"
                    "a campaign file, write it to RUNS_DIR/.adhoc/run-<selection>-<digest>.toml\n"
                    "(the digest hashes the definition: the same flags reuse the name, other\n"
                    "flags never overwrite an earlier run's files) and run it as --batch does.\n"
                    "Exit status as --batch: 0 every cell ok, 1 a cell was not, 2 bad input\n"
                    "(nothing written).\n\n"
                    "  fugue-tui run --exp D_ens,D_cv --exec seq --passes 3\n"
                    "  fugue-tui run --model mlp --dataset wine --type cv --k 5 --epochs 20\n"
                    "  fugue-tui run --model mlp --dataset digits --search-space lr=0.1,0.01 "
                    "batch_size=32,64\n"
                    "  fugue-tui run --type multi_model --model mlp mlp_bn --dataset wine digits",
        epilog=executors_epilog, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_run_arguments(run, _at_least)


def _add_report(sub) -> None:
    report = sub.add_parser(
        "report", help="tables and chart of a runs folder: T_group, throughput, energy, "
                       "speedup over seq with its 95%% interval, accuracy parity")
    report.add_argument("report_dir", nargs="?", metavar="RUNS_DIR",
                        help="folder holding master_groups.csv (default: --runs-dir or runs)")
    # Also after the sub-command (`fugue-tui report --runs-dir X`, as users write it);
    # SUPPRESS keeps the global flag's value when this one is not given.
    report.add_argument("--runs-dir", default=argparse.SUPPRESS, metavar="DIR",
                        help="the same as RUNS_DIR")
    report.add_argument("--campaign", metavar="ID", help="only the rows of this campaign id")
    report.add_argument("--by-campaign", action="store_true",
                        help="compare only rows of the same campaign file (campaign_hash)")
    report.add_argument("--width", type=int, metavar="N",
                        help="layout width in columns (default: the terminal's)")
    report.add_argument("--export", metavar="DIR",
                        help="also write the figures (PNG, SVG) and a LaTeX table there")
    report.add_argument("--overwrite", action="store_true",
                        help="with --export: replace the files an earlier export left in DIR "
                             "(without it, an export that would replace a file is refused)")
    report.add_argument("--format", metavar="LIST", default="png,svg,tex",
                        help="what --export writes: comma-separated png, svg, tex "
                             "(default: all three)")


def _add_bench(sub) -> None:
    bench = sub.add_parser(
        "bench", help="run a part of the benchmark suite (from a source checkout)",
        description="Run parts of the benchmark suite (bench/README.md). Each part appends "
                    "its raw rows to bench/results/<part>.csv and re-renders "
                    "bench/RESULTS.md. Without a part: list them.")
    bench.add_argument("part", nargs="?", metavar="PART", help="the part to run")
    bench.add_argument("part_args", nargs=argparse.REMAINDER, metavar="ARGS",
                       help="the part's own options (see fugue-tui bench PART --help)")
    bench.add_argument("--check", action="store_true",
                       help="verify that bench/RESULTS.md matches the committed CSV files")


def _at_least(low: int):
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"must be >= {low}, got {value}")
        return value
    return parse


def _experiments_file(parser: argparse.ArgumentParser, dest: str) -> None:
    parser.add_argument("--experiments-file", "--experiments", metavar="FILE", dest=dest,
                        type=_regular_file,
                        help="a user experiments file merged over the catalogue")


def _timestamp(text: str) -> str:
    from engine.results.values import check_timestamp

    try:
        return check_timestamp(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _regular_file(text: str) -> str:
    import os

    if not os.path.isfile(text):
        raise argparse.ArgumentTypeError(f"no such file: {text}" if not os.path.exists(text)
                                         else f"not a regular file: {text}")
    return text


class _Parser(argparse.ArgumentParser):
    """argparse with the project's error convention: one line on stderr, exit 2.

    ``epilog`` may be a callable, evaluated only when help is shown (``run --help`` lists
    the executors that plugins register, without loading plugins for every command)."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message}\n")

    def format_help(self) -> str:
        epilog = self.epilog
        if not callable(epilog):
            return super().format_help()
        try:
            self.epilog = epilog()
            return super().format_help()
        finally:
            self.epilog = epilog


def main(argv: list[str] | None = None) -> int:
    from engine.plugins import load_builtins

    load_builtins()  # the process's entry: every registry lookup below sees the built-ins
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command and args.batch:
        parser.error(f"--batch runs a campaign; it cannot be combined with '{args.command}'")
    if not args.batch:
        used = [flag for flag, value in (("--dry-run", args.dry_run), ("--resume", args.resume),
                                         ("--since", args.since),
                                         ("--reuse-from-any-campaign", args.reuse_any)) if value]
        if used:
            parser.error(f"{', '.join(used)} only applies with --batch CAMPAIGN")
    for flag, value in (("--since", args.since), ("--reuse-from-any-campaign", args.reuse_any)):
        if value and not args.resume:  # silently running everything would mislead
            parser.error(f"{flag} only applies with --resume")
    try:
        if args.command == "dashboard" or (args.command is None and not args.batch):
            return _dashboard(parser, args)
        if args.command == "list":
            from fugue_tui.listing import print_catalogue

            return print_catalogue(args.experiments_file_list or args.experiments_file)
        if args.command == "validate":
            from fugue_tui.commands.validate import validate

            return validate(args.selector, args.experiments_file_sub or args.experiments_file)
        if args.command == "prefetch":
            from fugue_tui.commands.prefetch import prefetch

            return prefetch(args.selector, args.data_dir,
                            args.experiments_file_sub or args.experiments_file)
        if args.command == "run":
            from fugue_tui.commands.run import run

            return run(args)
        if args.command == "report":
            from engine.define.paths import user_path
            from fugue_tui.report import run_report

            # RUNS_DIR, else --runs-dir, else runs; "" is refused, "~" expanded (one rule)
            given, what = ((args.report_dir, "argument RUNS_DIR") if args.report_dir is not None
                           else (args.runs_dir, "argument --runs-dir"))
            return run_report(user_path(given, what) if given is not None else "runs",
                              campaign_id=args.campaign, by_campaign=args.by_campaign,
                              width=args.width, export_dir=args.export,
                              formats=args.format, overwrite=args.overwrite)
        if args.command == "bench":
            return _bench(args)
        if args.command == "control":
            from engine.runner.control import send

            path = send(args.run_dir, args.cmd, args.cell)
            print(f"sent {args.cmd} {args.cell or ''} ({path.name})")
            return 0
        if args.batch:
            from fugue_tui.batch import run_batch

            overrides = {"runs_dir": args.runs_dir, "passes": args.passes, "seed": args.seed,
                         "device": args.device, "experiments_file": args.experiments_file,
                         "retries": args.retries}
            return run_batch(args.batch, overrides, dry=args.dry_run, resume=args.resume,
                             since=args.since, reuse_any=args.reuse_any)
    except FugueError as exc:
        print(f"fugue-tui: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("fugue-tui: interrupted", file=sys.stderr)
        return 130
    return 0


def _dashboard(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    """The dashboard needs a terminal; without one, say so and show the usage."""
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        parser.print_help()
        print("\nThe dashboard needs a terminal; run a campaign headless with --batch.",
              file=sys.stderr)
        return 0 if args.command is None else 2
    from fugue_tui.app import run_dashboard

    return run_dashboard(campaign=getattr(args, "campaign_file", None),
                         attach=getattr(args, "attach", None), runs_dir=args.runs_dir or "runs",
                         results=getattr(args, "results", None),
                         replay=getattr(args, "replay", None),
                         replay_speed=getattr(args, "speed", None) or 1.0)


def _bench(args: argparse.Namespace) -> int:
    """``fugue-tui bench [PART [ARGS...]]``: the suite lives in the source checkout (it is
    not installed with the package), next to the ``engine`` package."""
    import subprocess
    from pathlib import Path

    import engine
    from engine.errors import ConfigError, known, nearest

    root = Path(engine.__file__).resolve().parent.parent
    if not (root / "bench" / "__init__.py").is_file():
        raise ConfigError("the benchmark suite runs from a source checkout of fugue-tui "
                          f"(no bench/ next to {root / 'engine'})")
    sys.path.insert(0, str(root))
    from bench import PARTS

    if args.check:
        return subprocess.call([sys.executable, "-m", "bench.results", "--check"], cwd=root)
    if not args.part:
        width = max(map(len, PARTS))
        print("benchmark parts (fugue-tui bench PART [--help]):")
        for name, what in PARTS.items():
            print(f"  {name:<{width}}  {what}")
        return 0
    if args.part not in PARTS:
        raise ConfigError(f"unknown benchmark part {args.part!r}{nearest(args.part, PARTS)}; "
                          f"{known(PARTS)}")
    return subprocess.call([sys.executable, "-m", f"bench.{args.part}", *args.part_args],
                           cwd=root)
