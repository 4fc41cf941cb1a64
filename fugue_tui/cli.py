"""``fugue-tui`` command line (argparse).

    fugue-tui --batch CAMPAIGN.toml [--dry-run] [--runs-dir DIR] [--passes N] ...
    fugue-tui list [--experiments FILE] [--all]

Bad input prints one line naming the file, key or value and exits with status 2.
"""

from __future__ import annotations

import argparse
import sys

from engine import __version__
from engine.errors import FugueError


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="fugue-tui",
        description="Measure what you gain by training many neural networks at once on one "
                    "GPU: seq, mp (CUDA MPS), ray and a stacked unified model, same data, "
                    "seeds and software stack.")
    parser.add_argument("--version", action="version", version=f"fugue-tui {__version__}")
    parser.add_argument("--batch", metavar="CAMPAIGN", help="run a campaign TOML headless")
    parser.add_argument("--dry-run", action="store_true",
                        help="with --batch: print the cells and their keys, run nothing")
    parser.add_argument("--runs-dir", help="override the campaign's runs_dir")
    parser.add_argument("--passes", type=int, help="override the campaign's passes")
    parser.add_argument("--seed", type=int, help="override the campaign's seed")
    parser.add_argument("--device", help="override the campaign's device (auto, cpu, cuda, cuda:N)")
    parser.add_argument("--experiments-file", metavar="FILE",
                        help="a user experiments file merged over the catalogue")
    parser.add_argument("--retries", type=int, help="override the campaign's retries")
    parser.add_argument("--resume", action="store_true",
                        help="with --batch: skip cells whose key already has an ok row")
    parser.add_argument("--since", metavar="YYYYmmdd_HHMMSS",
                        help="with --resume: only ok rows at or after this time count")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    control = sub.add_parser("control", help="send a command to the runner of a campaign")
    control.add_argument("run_dir", help="the campaign's run folder (runs/<name>)")
    control.add_argument("cmd", choices=["kill", "retry", "skip", "abort"])
    control.add_argument("cell", nargs="?", help="cell key, key prefix or index")
    lister = sub.add_parser("list", help="list the experiment catalogue and what can run here")
    lister.add_argument("--experiments", metavar="FILE", dest="experiments_file_list",
                        help="a user experiments file merged over the catalogue")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        if args.command == "list":
            from fugue_tui.listing import print_catalogue

            return print_catalogue(args.experiments_file_list or args.experiments_file)
        if args.command == "control":
            from engine.control import send

            path = send(args.run_dir, args.cmd, args.cell)
            print(f"sent {args.cmd} {args.cell or ''} ({path.name})")
            return 0
        if args.batch:
            from fugue_tui.batch import run_batch

            overrides = {"runs_dir": args.runs_dir, "passes": args.passes, "seed": args.seed,
                         "device": args.device, "experiments_file": args.experiments_file,
                         "retries": args.retries}
            return run_batch(args.batch, overrides, dry=args.dry_run, resume=args.resume,
                             since=args.since)
    except FugueError as exc:
        print(f"fugue-tui: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("fugue-tui: interrupted", file=sys.stderr)
        return 130
    parser.print_help()
    print("\nThe dashboard is not built yet; run a campaign with --batch.", file=sys.stderr)
    return 0
