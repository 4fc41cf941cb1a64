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
    fugue-tui selfcheck [--device cpu|cuda] [--json] [--runs-dir DIR]
    fugue-tui report [RUNS_DIR] [--campaign ID] [--by-campaign] [--width N] [--export DIR]
    fugue-tui completion {bash,zsh,fish}        a shell completion script (shtab)
    fugue-tui models RUN_FOLDER [--json]        the trained models a run kept (save_models)

Bad input prints one line naming the file, key or value and exits with status 2.

This module assembles the parser and dispatches; each sub-command's arguments and handler
are in its module of :mod:`fugue_tui.commands` (the top-level ``--batch`` flags and their
checks in :mod:`fugue_tui.commands.batch`), except the dashboard's, here: its parser and
launch import ``fugue_tui.app``, and ``commands`` may not (``app`` imports
``commands.common``; the import contracts forbid the cycle).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

from engine.errors import FugueError
from fugue_tui.commands import (
    batch,
    bench,
    completion,
    control,
    listing,
    models,
    prefetch,
    profile,
    report,
    run,
    selfcheck,
    validate,
)
from fugue_tui.commands.arguments import Parser, path_text, regular_file


def build_parser() -> argparse.ArgumentParser:
    """The whole ``fugue-tui`` parser: the top-level flags and every sub-command, in the
    order ``--help`` lists them; path values marked for the completion scripts."""
    parser = Parser(
        prog="fugue-tui",
        description="Measure what you gain by training many neural networks at once on one "
                    "GPU: seq, mp (CUDA MPS), ray and a stacked unified model, same data, "
                    "seeds and software stack.")
    batch.add_top_level(parser)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    _add_dashboard(sub)
    for module in (control, listing, validate, prefetch, run, report, models):
        module.add_parser(sub)
    profile.add_parsers(sub)
    selfcheck.add_parser(sub)
    bench.add_parser(sub)
    completion.add_parser(sub)
    completion.mark_paths(parser)
    return parser


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
    batch.check_tokens(parser, argv)
    args = parser.parse_args(_glue_values(argv))
    batch.check_modes(parser, args)
    handlers: dict[str | None, Callable[[], int]] = {
        "dashboard": lambda: _dashboard(parser, args),
        "list": lambda: listing.run(args),
        "validate": lambda: validate.run(args),
        "prefetch": lambda: prefetch.run(args),
        "run": lambda: run.run(args),
        "report": lambda: report.run(args),
        "profile": lambda: profile.profile(args),
        "simulate": lambda: profile.simulate(args),
        "selfcheck": lambda: selfcheck.run(args),
        "bench": lambda: bench.run(args),
        "control": lambda: control.run(args),
        "models": lambda: models.run(args),
        "completion": lambda: completion.run(parser, args),
    }
    command = args.command or ("dashboard" if not args.batch else None)
    try:
        return handlers[command]() if command else batch.run(args)
    except FugueError as exc:
        print(f"fugue-tui: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("fugue-tui: interrupted", file=sys.stderr)
        return 130


def _add_dashboard(sub) -> None:
    dashboard = sub.add_parser(
        "dashboard", help="the dashboard (the default): plan, launch and watch a campaign",
        description="Plan a campaign (catalogue, executors, settings, live preview of the "
                    "cells), launch it and watch it live; handle hung cells from the keyboard. "
                    "Quitting while it runs asks: stop it or detach (it keeps running; "
                    "--attach finds it again).")
    dashboard.add_argument("campaign_file", nargs="?", metavar="CAMPAIGN",
                           type=regular_file, help="a campaign TOML file to load into the plan")
    dashboard.add_argument("--attach", metavar="RUN_DIR", type=path_text,
                           help="open a campaign's run folder (runs/<name>): live while its "
                                "runner runs, else as it ended")
    dashboard.add_argument("--results", metavar="RUNS_DIR", type=path_text,
                           help="open the Results screen on a runs folder (ours or the fugue "
                                "harness's) or a master_groups.csv")
    dashboard.add_argument("--replay", metavar="PATH", type=path_text,
                           help="replay a finished campaign (its run folder, or an events "
                                "file) in the run screen, as it happened")
    from fugue_tui.app.models.replay import parse_speed

    dashboard.add_argument("--speed", type=parse_speed, default=1.0, metavar="X",
                           help="with --replay: campaign seconds per second, 0.1 to 1000 "
                                "(default 1; + and - step a 1-2-5 ladder)")


def _dashboard(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    """The dashboard needs a terminal; without one, say so and show the usage (exit 2)."""
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
