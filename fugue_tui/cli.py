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
    fugue-tui profile [SELECTOR ...] [--list] [--ks 1,2,4,8] [--compile MODE] [--device D]
    fugue-tui simulate [SELECTOR ...] [--ram-budget SIZE] [--device-budget SIZE] [--cores N]
    fugue-tui report [RUNS_DIR] [--campaign ID] [--by-campaign] [--width N] [--export DIR]
    fugue-tui completion {bash,zsh,fish}        a shell completion script (shtab)

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
    _add_profile(sub)
    _add_bench(sub)
    _add_completion(sub)
    _mark_paths(parser)
    return parser


def _add_top_level(parser: argparse.ArgumentParser) -> None:
    """``--version``, ``--batch`` and the overrides it takes."""
    parser.add_argument("-V", "--version", action="version", version=f"fugue-tui {__version__}")
    parser.add_argument("--batch", metavar="CAMPAIGN", help="run a campaign TOML headless")
    parser.add_argument("--dry-run", action="store_true",
                        help="with --batch: print the cells and their keys, run nothing")
    parser.add_argument("--json", action="store_true",
                        help="with --batch: the run as JSON lines (with --dry-run: the plan "
                             "as JSON; docs/json.md)")
    parser.add_argument("--runs-dir", help="override the campaign's runs_dir")
    parser.add_argument("--passes", type=_at_least(1), help="override the campaign's passes")
    parser.add_argument("--seed", type=int, help="override the campaign's seed")
    parser.add_argument("--device", help="override the campaign's device (auto, cpu, cuda, cuda:N)")
    parser.add_argument("--devices", metavar="LIST",
                        help="override the campaign's devices: auto, cpu, or a comma list of "
                             "cuda:N / GPU-… / MIG-… (one cell per device at once)")
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
    from fugue_tui.app.models.replay import parse_speed

    dashboard.add_argument("--speed", type=parse_speed, default=1.0, metavar="X",
                           help="with --replay: campaign seconds per second, 0.1 to 1000 "
                                "(default 1; + and - step a 1-2-5 ladder)")


def _add_control(sub) -> None:
    control = sub.add_parser(
        "control", help="send a command to the runner of a campaign",
        description="Send a command to the runner of a running campaign: kill CELL (stop "
                    "the running attempt, recorded killed), retry CELL (stop it if running, "
                    "then run it again now), skip CELL (do not run a queued cell; stop it if "
                    "running), abort (stop the running cell and end the campaign). CELL is "
                    "a cell key, a unique key prefix or the cell's index. Exit 0 when sent; "
                    "1 when no runner is running the campaign (nothing sent); 2 bad input.")
    control.add_argument("run_dir", help="the campaign's run folder (runs/<name>)")
    control.add_argument("cmd", choices=["kill", "retry", "skip", "abort"])
    control.add_argument("cell", nargs="?", help="cell key, key prefix or index")


def _add_catalogue_commands(sub) -> None:
    """``list``, ``validate`` and ``prefetch``: the catalogue and this machine."""
    lister = sub.add_parser(
        "list", help="list the experiment catalogue and what can run here",
        description="The experiment catalogue (with a user experiments file merged over "
                    "it): per experiment its workload, jobs, model and dataset, and whether "
                    "it can run on this machine. Exit 0.")
    _experiments_file(lister, "experiments_file_list")
    lister.add_argument("--json", action="store_true", dest="json_sub",
                        help="the catalogue as JSON (schema fugue-tui/list, docs/json.md)")
    validate = sub.add_parser(
        "validate", help="which experiments can run here and why not; what is registered",
        description="Every catalogue experiment (or the selected ones) and whether it resolves "
                    "on this machine, with a one-line reason when not; then the registered "
                    "models, datasets, tasks, optimizers, executors and workload types. Exit 0 "
                    "when every experiment validated (all, or the selected ones) can run "
                    "here, 1 when one cannot, 2 for bad input.")
    validate.add_argument("selector", nargs="*", metavar="SELECTOR",
                          help="E01, 1, E08:E10, E08:, :E05, 1,4,5 or all")
    _experiments_file(validate, "experiments_file_sub")
    validate.add_argument("--json", action="store_true", dest="json_sub",
                          help="the answer as JSON (schema fugue-tui/validate, docs/json.md); "
                               "the same exit status")
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
                    "  fugue-tui run --model mlp --dataset digits \\\n"
                    "      --search-space lr=0.1,0.01 batch_size=32,64\n"
                    "  fugue-tui run --type multi_model --model mlp mlp_bn --dataset wine digits",
        epilog=executors_epilog, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_run_arguments(run, _at_least)


def _add_report(sub) -> None:
    report = sub.add_parser(
        "report", help="tables and chart of a runs folder: T_group, throughput, energy, "
                       "speedup over seq with its 95%% interval, accuracy parity")
    report.add_argument("report_dir", nargs="?", metavar="RUNS_DIR",
                        help="folder holding master_groups.csv (default: --runs-dir or runs)")
    # Also after the sub-command (`fugue-tui report --runs-dir X`, as users write it); its
    # own dest, so that a different value before the command is refused, not overwritten.
    report.add_argument("--runs-dir", dest="runs_dir_report", metavar="DIR",
                        help="the same as RUNS_DIR")
    report.add_argument("--campaign", metavar="ID", help="only the rows of this campaign id")
    report.add_argument("--by-campaign", action="store_true",
                        help="compare only rows of the same campaign file (campaign_hash)")
    report.add_argument("--baseline", metavar="PRECISION", choices=_precisions(),
                        help="speedups and accuracy parity of every precision against seq in "
                             "this one (e.g. fp32); default: seq of each cell's own precision")
    report.add_argument("--json", action="store_true", dest="json_sub",
                        help="the cells (figures, intervals, parity) as JSON on stdout "
                             "(schema fugue-tui/report, docs/json.md) instead of the tables")
    report.add_argument("--width", type=int, metavar="N",
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
                             "rows, typed), tensorboard (per-epoch curves and group figures)")
    report.add_argument("--advise", action="store_true",
                        help="per workload and machine: the recommended strategy and K / "
                             "max_parallel, its speedup over seq with interval, energy per "
                             "trained model, the evidence, and whether the two best are "
                             "distinguishable (uses the knee of a K sweep)")
    report.add_argument("--knee-fraction", metavar="F", default="0.1",
                        help="the knee rule: the smallest K beyond which doubling K gains "
                             "less than this fraction of throughput (default 0.1 = 10%%)")


def _profile_common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("selector", nargs="*", metavar="SELECTOR",
                        help="E01, 1, E08:E10, E08:, :E05, 1,4,5 or all (default all)")
    parser.add_argument("--runs-dir", dest="profile_runs_dir", metavar="DIR",
                        help="the runs folder holding profiles.csv (default runs)")
    parser.add_argument("--device", dest="profile_device", metavar="DEVICE",
                        help="auto (default), cpu, cuda or cuda:N")
    parser.add_argument("--compile", metavar="MODE",
                        help="off (default) or a torch.compile mode: profiles are per mode")
    parser.add_argument("--seed", dest="seed", type=int, help=argparse.SUPPRESS)
    _experiments_file(parser, "experiments_file_sub")


def _add_profile(sub) -> None:
    """``profile`` and ``simulate``: memory profiles and how many jobs fit at once."""
    profile = sub.add_parser(
        "profile", help="measure memory profiles: peak RSS of 1, 2, 4, 8 stacked jobs (--ks), device "
                        "memory, step time (per model, dataset, batch, precision, compile, "
                        "optimizer)",
        description="For each distinct (model, dataset, batch size, precision, compile, "
                    "optimizer) of the selected experiments, a brief run (one epoch) in a fresh "
                    "process measures peak RSS for K = 1, 2, 4, 8 stacked members (the increment "
                    "per member), on a GPU the CUDA context, one dataset copy and peak device "
                    "memory, and the median step time. Rows go to RUNS_DIR/profiles.csv, keyed "
                    "by this machine (host, GPU, torch, CUDA). max_parallel = \"auto\" and "
                    "fugue-tui simulate read them.")
    _profile_common(profile)
    profile.add_argument("--list", action="store_true",
                         help="list the profiles in the runs folder (measure nothing)")
    profile.add_argument("--ks", default="1,2,4,8", metavar="LIST",
                         help="stack sizes measured: 1 and at least two stacked sizes "
                              "(default 1,2,4,8)")
    profile.add_argument("--max-steps", type=_at_least(2), metavar="N",
                         help="stop each K after N training steps (default: one epoch, "
                              "validation included)")
    profile.add_argument("--threads", type=_at_least(0), metavar="N",
                         help="torch threads of the probe (default all cores)")
    simulate = sub.add_parser(
        "simulate", help="how many jobs fit at once per experiment and executor, from the "
                         "profiles and a budget",
        description="From this machine's profiles and the budget (measured here unless "
                    "given): per experiment and executor, how many jobs fit at once, the "
                    "limiting resource and the predicted memory at that number. The same "
                    "estimate as max_parallel = \"auto\". Writes nothing.")
    _profile_common(simulate)
    simulate.add_argument("--ram-budget", metavar="SIZE",
                          help="host RAM the jobs may use: 6GiB, 512MiB or MiB (default: "
                               "this machine's total)")
    simulate.add_argument("--device-budget", metavar="SIZE",
                          help="device memory (default: the GPU's total)")
    simulate.add_argument("--cores", metavar="N", help="cores (default: os.cpu_count)")
    simulate.add_argument("--executors", nargs="+", metavar="EXECUTOR",
                          help="default: seq mp ray unified_model")
    simulate.add_argument("--mp-start", default="forkserver", metavar="START[,START]",
                          help="mp's start method: forkserver (workers share the parent's "
                               "pages), spawn, or forkserver,spawn for an estimate of each")
    simulate.add_argument("--precision", choices=_precisions(),
                          help="the precision the cells would run (default: each "
                               "experiment's own; bf16 without a bf16 profile scales the "
                               "fp32 one, docs/profiles.md)")


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


def _precisions() -> tuple[str, ...]:
    from engine.precision import PRECISIONS

    return PRECISIONS


def _add_completion(sub) -> None:
    completion = sub.add_parser(
        "completion", help="print a shell completion script (bash, zsh, fish)",
        description="Print the completion script for SHELL, generated from this command "
                    "line's parser (shtab). Install it once, e.g. for bash: fugue-tui "
                    "completion bash > ~/.local/share/bash-completion/completions/fugue-tui; "
                    "zsh: fugue-tui completion zsh > \"${fpath[1]}/_fugue-tui\"; fish: "
                    "fugue-tui completion fish > ~/.config/fish/completions/fugue-tui.fish.")
    completion.add_argument("shell", choices=("bash", "zsh", "fish"), metavar="SHELL",
                            help="bash, zsh or fish")


#: Options and arguments whose values are files or folders, for the completion scripts.
_FILE_DESTS = {"batch", "campaign_file", "experiments_file", "experiments_file_list",
               "experiments_file_sub", "run_experiments_file", "replay"}
_DIR_DESTS = {"runs_dir", "runs_dir_report", "report_dir", "run_runs_dir", "attach",
              "results", "run_dir", "export", "data_dir"}


def _mark_paths(parser: argparse.ArgumentParser) -> None:
    """Tell shtab which values are paths (it completes files or folders there)."""
    import shtab

    for action in parser._actions:  # noqa: SLF001
        if isinstance(action, argparse._SubParsersAction):  # noqa: SLF001
            for sub in action.choices.values():
                _mark_paths(sub)
        elif action.dest in _FILE_DESTS:
            action.complete = shtab.FILE  # type: ignore[attr-defined]
        elif action.dest in _DIR_DESTS:
            action.complete = shtab.DIRECTORY  # type: ignore[attr-defined]


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
    from fugue_tui.commands.run_flags import timestamp

    return timestamp(text)


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

    def _print_message(self, message: str, file=None) -> None:
        # argparse swallows a failed write (a closed pipe after `--help | head -1`) and
        # exits 0 as if it had printed: let it reach main(), which ends quietly with 141.
        if message:
            (file or sys.stderr).write(message)

    def format_help(self) -> str:
        epilog = self.epilog
        if not callable(epilog):
            return super().format_help()
        try:
            self.epilog = epilog()
            return super().format_help()
        finally:
            self.epilog = epilog


#: Top-level overrides and the commands that honour them (None: the dashboard, the
#: default command). Any other command refuses them: `fugue-tui --passes 3 list` would
#: otherwise be accepted and do nothing.
_TOP_LEVEL_USERS: dict[str, tuple[str, tuple[str | None, ...]]] = {
    "runs_dir": ("--runs-dir", ("run", "report", "dashboard", None)),
    "passes": ("--passes", ("run",)),
    "seed": ("--seed", ("run",)),
    "device": ("--device", ("run",)),
    "devices": ("--devices", ("run",)),
    "retries": ("--retries", ("run",)),
    "experiments_file": ("--experiments-file", ("run", "list", "validate", "prefetch")),
}
#: A top-level override and the sub-command's own flag for the same thing: given both with
#: different values, which one wins would be a guess (refused, naming both).
_SAME_FLAG = {"run": {"runs_dir": "run_runs_dir", "passes": "run_passes", "seed": "run_seed",
                      "device": "run_device", "devices": "run_devices", "retries": "run_retries",
                      "experiments_file": "run_experiments_file"},
              "report": {"runs_dir": "runs_dir_report"},
              "list": {"experiments_file": "experiments_file_list"},
              "validate": {"experiments_file": "experiments_file_sub"},
              "prefetch": {"experiments_file": "experiments_file_sub"}}


def main(argv: list[str] | None = None) -> int:
    """The ``fugue-tui`` entry point; returns the exit status.

    Output into a closed pipe (``fugue-tui validate | head -1``) ends the command quietly,
    as Unix tools do (status 141 = 128 + SIGPIPE), in every command."""
    _rich_broken_pipe_raises()
    try:
        try:
            code = _main(sys.argv[1:] if argv is None else argv)
        except SystemExit as done:  # argparse's --help, --version and usage errors
            code = done.code if isinstance(done.code, int) else (0 if done.code is None else 2)
            if done.code is not None and not isinstance(done.code, int):
                print(done.code, file=sys.stderr)
        sys.stdout.flush()  # a closed pipe shows here when the output was still buffered
        return code
    except BrokenPipeError:
        return _pipe_closed()


def _rich_broken_pipe_raises() -> None:
    """Rich ends the process itself on a closed pipe (exit 1); raise instead, so that
    every command ends the same way (:func:`_pipe_closed`)."""
    from rich.console import Console

    def on_broken_pipe(console: Console) -> None:
        console.quiet = True
        raise BrokenPipeError

    Console.on_broken_pipe = on_broken_pipe  # type: ignore[method-assign]


def _pipe_closed() -> int:
    import os
    import signal

    # Python flushes stdout again at exit: point it at /dev/null so that flush cannot
    # print "Exception ignored ... BrokenPipeError" after the quiet exit.
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass
    return 128 + signal.SIGPIPE


#: Options whose value may look like an option (``--ram-budget -1GiB``): argparse would say
#: "expected one argument" instead of the value's own message ("must be > 0").
_VALUE_MAY_START_WITH_DASH = ("--ram-budget", "--device-budget", "--cores")


def _glue_values(argv: list[str]) -> list[str]:
    """``--ram-budget -1GiB`` as ``--ram-budget=-1GiB``, so the value reaches its check."""
    out: list[str] = []
    tokens = iter(argv)
    for token in tokens:
        if token == "--":
            out.append(token)
            out.extend(tokens)
            break
        if token in _VALUE_MAY_START_WITH_DASH:
            following = next(tokens, None)
            if following is not None and following.startswith("-") and not \
                    following.startswith("--"):
                out.append(f"{token}={following}")
                continue
            out.append(token)
            if following is not None:
                out.append(following)
            continue
        out.append(token)
    return out


def _main(argv: list[str]) -> int:
    from engine.plugins import load_builtins

    load_builtins()  # the process's entry: every registry lookup below sees the built-ins
    parser = build_parser()
    _check_top_level_tokens(parser, argv)
    args = parser.parse_args(_glue_values(argv))
    if args.command and args.batch:
        parser.error(f"--batch runs a campaign; it cannot be combined with '{args.command}'")
    if args.json and not args.batch:
        where = (f"; '{args.command}' takes its own: fugue-tui {args.command} --json"
                 if args.command in ("list", "validate", "report", "run") else "")
        parser.error(f"--json before the command applies with --batch CAMPAIGN{where}")
    if not args.batch:
        used = [flag for flag, value in (("--dry-run", args.dry_run), ("--resume", args.resume),
                                         ("--since", args.since),
                                         ("--reuse-from-any-campaign", args.reuse_any)) if value]
        if used:
            parser.error(f"{', '.join(used)} only applies with --batch CAMPAIGN")
        _check_top_level_users(parser, args)
    for flag, value in (("--since", args.since), ("--reuse-from-any-campaign", args.reuse_any)):
        if value and not args.resume:  # silently running everything would mislead
            parser.error(f"{flag} only applies with --resume")
    try:
        if args.command == "dashboard" or (args.command is None and not args.batch):
            return _dashboard(parser, args)
        if args.command == "list":
            from fugue_tui.commands.listing import print_catalogue

            return print_catalogue(args.experiments_file_list or args.experiments_file,
                                   as_json=args.json_sub)
        if args.command == "validate":
            from fugue_tui.commands.validate import validate

            return validate(args.selector, args.experiments_file_sub or args.experiments_file,
                            as_json=args.json_sub)
        if args.command == "prefetch":
            from fugue_tui.commands.prefetch import prefetch

            return prefetch(args.selector, args.data_dir,
                            args.experiments_file_sub or args.experiments_file)
        if args.command == "run":
            from fugue_tui.commands.run import run

            return run(args)
        if args.command == "report":
            from engine.define.paths import user_path
            from fugue_tui.report.tables import run_report

            # RUNS_DIR, else --runs-dir (after or before `report`), else runs; "" is
            # refused, "~" expanded (one rule)
            given, what = ((args.report_dir, "argument RUNS_DIR") if args.report_dir is not None
                           else (args.runs_dir_report, "argument --runs-dir")
                           if args.runs_dir_report is not None
                           else (args.runs_dir, "argument --runs-dir"))
            return run_report(user_path(given, what) if given is not None else "runs",
                              campaign_id=args.campaign, by_campaign=args.by_campaign,
                              width=args.width, export_dir=args.export,
                              formats=args.format, overwrite=args.overwrite,
                              baseline=args.baseline, as_json=args.json_sub,
                              advise=args.advise, knee_fraction=args.knee_fraction)
        if args.command == "profile":
            from fugue_tui.commands.profile import profile

            return profile(args)
        if args.command == "simulate":
            from fugue_tui.commands.profile import simulate

            return simulate(args)
        if args.command == "bench":
            return _bench(args)
        if args.command == "control":
            return _control(args)
        if args.command == "completion":
            import shtab

            print(shtab.complete(parser, shell=args.shell), end="")
            return 0
        if args.batch:
            from fugue_tui.console.batch import run_batch

            overrides = {"runs_dir": args.runs_dir, "passes": args.passes, "seed": args.seed,
                         "device": args.device, "devices": args.devices,
                         "experiments_file": args.experiments_file,
                         "retries": args.retries}
            return run_batch(args.batch, overrides, dry=args.dry_run, resume=args.resume,
                             since=args.since, reuse_any=args.reuse_any, as_json=args.json)
    except FugueError as exc:
        print(f"fugue-tui: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("fugue-tui: interrupted", file=sys.stderr)
        return 130
    return 0


def _check_top_level_tokens(parser: argparse.ArgumentParser, argv: list[str]) -> None:
    """Refuse an option before the command that the top level does not know.

    argparse would read ``--batch x.toml --option foo`` as the unknown ``--option`` and the
    command ``foo`` ("invalid choice: 'foo'"), naming neither the flag nor where it belongs.
    Here the first unknown option is named, with the command that has it."""
    from engine.errors import nearest

    commands = _commands(parser)
    known = {s: a for a in parser._actions for s in a.option_strings}  # noqa: SLF001
    i = 0
    while i < len(argv):
        token = argv[i]
        if token == "--" or not token.startswith("-") or token == "-":
            return  # the command (or a positional) starts here: its own parser decides
        name = token.split("=", 1)[0]
        matches = [s for s in known if s.startswith(name)] if name.startswith("--") else []
        action = known.get(name) or (known[matches[0]] if len(matches) == 1 else None)
        if action is None:
            owners = [c for c, sub in commands.items()
                      if any(name in a.option_strings for a in sub._actions)]  # noqa: SLF001
            where = (f"; it is an option of {' and '.join(f'fugue-tui {c}' for c in owners)}"
                     if owners else nearest(name, [s for s in known if s.startswith("--")]))
            if owners and "--batch" in argv:
                where += " (with --batch, the campaign file sets it)"
            parser.error(f"unrecognized option '{name}' before the command{where}")
        i += 1 if action.nargs == 0 or "=" in token else 2


def _commands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:  # noqa: SLF001 - argparse keeps sub-parsers here
        if isinstance(action, argparse._SubParsersAction):  # noqa: SLF001
            return dict(action.choices)
    return {}


def _check_top_level_users(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Top-level overrides given to a command that ignores them, and the same setting given
    before and after the command with different values: one line, exit 2."""
    for dest, (flag, users) in _TOP_LEVEL_USERS.items():
        value = getattr(args, dest, None)
        if value is None:
            continue
        if args.command not in users:
            names = ["--batch"] + [u for u in users if u]
            takers = ", ".join(names[:-1]) + f" and {names[-1]}"
            which = f"'{args.command}'" if args.command else "the dashboard"
            parser.error(f"{flag} does not apply to {which} (it is an option of {takers})")
        own = _SAME_FLAG.get(args.command or "", {}).get(dest)
        mine = getattr(args, own, None) if own else None
        if mine is not None and mine != value:
            parser.error(f"{flag} given twice with different values: {value} before "
                         f"'{args.command}' and {mine} after it; give it once")
    if args.command == "report" and args.report_dir is not None:
        other = args.runs_dir_report if args.runs_dir_report is not None else args.runs_dir
        if other is not None and other != args.report_dir:
            parser.error(f"report: RUNS_DIR {args.report_dir} and --runs-dir {other} name "
                         "different folders; give one")


def _control(args: argparse.Namespace) -> int:
    """``fugue-tui control``: queue the command only for a runner that is running: one
    that starts later discards it (older than its start), so "sent" would be a lie."""
    from engine.runner.control import check_command, runner_state, send, waiting_cell

    check_command(args.run_dir, args.cmd, args.cell)  # bad input first: exit 2
    state = runner_state(args.run_dir)
    what = f"{args.cmd} {args.cell}" if args.cell else args.cmd
    if state is False:
        print(f"fugue-tui: no runner is running the campaign of {args.run_dir}: '{what}' was "
              "not sent (a runner started later ignores older commands)", file=sys.stderr)
        return 1
    waiting = waiting_cell(args.run_dir, str(args.cell)) if args.cmd == "retry" else None
    if waiting is not None:  # a state, not bad input: exit 1 like "no runner"
        index, key = waiting
        print(f"fugue-tui: cell {index} ({key}) of {args.run_dir} has not started yet: "
              f"nothing to retry, it runs when its turn comes ('skip {args.cell}' takes it out "
              f"of the queue); '{what}' was not sent", file=sys.stderr)
        return 1
    path = send(args.run_dir, args.cmd, args.cell)
    print(f"sent {what} ({path.name})")
    return 0


def _dashboard(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    """The dashboard needs a terminal; without one, say so and show the usage."""
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        parser.print_help()
        print("\nThe dashboard needs a terminal; run a campaign headless with --batch.",
              file=sys.stderr)
        return 2
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
        from fugue_tui.format import wrap_line

        for name, what in PARTS.items():
            for line in wrap_line(f"  {name:<{width}}  {what}", hang=width + 2):
                print(line)
        return 0
    if args.part not in PARTS:
        raise ConfigError(f"unknown benchmark part {args.part!r}{nearest(args.part, PARTS)}; "
                          f"{known(PARTS)}")
    import os

    # the part's --help names the command the user typed, not `python -m bench.PART`
    env = {**os.environ, "FUGUE_BENCH_PROG": f"fugue-tui bench {args.part}"}
    return subprocess.call([sys.executable, "-m", f"bench.{args.part}", *args.part_args],
                           cwd=root, env=env)
