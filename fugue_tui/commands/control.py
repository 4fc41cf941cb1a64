"""``fugue-tui control RUN_DIR {kill,retry,skip,abort} [CELL]``: a command for the runner
of a running campaign (``engine.runner.control``'s inbox)."""

from __future__ import annotations

import argparse
import sys


def add_parser(sub) -> None:
    control = sub.add_parser(
        "control", help="send a command to the runner of a campaign",
        description="Send a command to the runner of a running campaign: kill CELL (stop "
                    "the running attempt, recorded killed), retry CELL (stop it if running, "
                    "then run it again now), skip CELL (do not run a queued cell; stop it if "
                    "running), abort (stop the running cell and end the campaign). CELL is "
                    "a cell key, a unique key prefix or the cell's index. Exit 0 when sent; "
                    "1 when no runner is running the campaign (nothing sent); 2 bad input.")
    from fugue_tui.commands.arguments import path_text

    control.add_argument("run_dir", type=path_text,
                         help="the campaign's run folder (runs/<name>)")
    control.add_argument("cmd", choices=["kill", "retry", "skip", "abort"])
    control.add_argument("cell", nargs="?", help="cell key, key prefix or index")


def run(args: argparse.Namespace) -> int:
    """Queue the command only for a runner that is running: one that starts later discards
    it (older than its start), so "sent" would be a lie. Exit 0 sent, 1 not sent (no
    runner, or a retry of a cell still waiting), 2 bad input (``ConfigError``)."""
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
