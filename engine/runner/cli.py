"""``python -m engine.runner CAMPAIGN.toml [--resume] [--since TS] ...``: the runner
process's command line, its signals (SIGINT, SIGTERM and SIGHUP end the campaign as Ctrl-C
does) and its exit status (the campaign's, :attr:`CampaignOutcome.exit_code`; 2 bad input;
130 interrupted). Torch-free."""

from __future__ import annotations

import argparse
import dataclasses
import os
import signal
import sys
from pathlib import Path
from typing import Any

from engine.cell.protocol import output_failure
from engine.define.campaign import load_campaign
from engine.define.watchdog_settings import ACTIONS
from engine.errors import ConfigError, FugueError, OutputError
from engine.plugins import load_plugins
from engine.results.values import check_timestamp
from engine.runner.attempt import INTERRUPTED_BY
from engine.runner.supervisor import Runner


def _timestamp(text: str) -> str:
    try:
        return check_timestamp(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def build_arg_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m engine.runner",
                                     description="Run a campaign (the process front ends start).")
    parser.add_argument("campaign", help="campaign TOML file")
    parser.add_argument("--resume", action="store_true",
                        help="skip cells whose key already has an ok row of this campaign")
    parser.add_argument("--reuse-from-any-campaign", action="store_true",
                        help="with --resume: an ok row of any campaign in the runs folder "
                             "counts too (the plan names the campaign it came from)")
    parser.add_argument("--remeasure-holes", action="store_true",
                        help="with --resume: an ok row whose monitor columns are missing for "
                             "a reason other than no device does not count (its cell runs "
                             "again)")
    parser.add_argument("--since", metavar="TIME", type=_timestamp,
                        help="with --resume: only ok rows written at or after this time count: "
                        "ISO 8601 with an offset (2026-11-30T14:00:00+09:00) or "
                        "YYYYmmdd_HHMMSS, read as this host's local time (rows are "
                        "compared as instants)")
    for name in ("runs-dir", "device", "devices", "experiments-file"):
        parser.add_argument(f"--{name}")
    for name in ("passes", "seed", "retries"):
        parser.add_argument(f"--{name}", type=int)
    parser.add_argument("--watchdog-action", choices=ACTIONS,
                        help="override [watchdog] action: kill, or flag (the dashboard's default: "
                             "mark the cell hung and wait for a command)")
    return parser


def runner_argv(campaign_path: str | Path, *, resume: bool = False, since: str | None = None,
                watchdog_action: str | None = None,
                overrides: dict[str, Any] | None = None, reuse_any: bool = False,
                remeasure_holes: bool = False) -> list[str]:
    """The command line that starts this runner (what :func:`build_arg_parser` reads) for
    a campaign file and its overrides (:func:`overrides_from`'s keys; None values left out):
    the one way the front ends (``--batch``, the dashboard) start it."""
    # Each value glued to its flag, the path made to not start with '-': a value such as
    # '--runs-dir=-r' (a folder named '-r', which the front end accepted) was read by this
    # parser as a flag, and the run ended in its usage text after the folder was made.
    path = str(campaign_path)
    argv = [sys.executable, "-m", "engine.runner",
            os.path.join(".", path) if path.startswith("-") else path]
    for key, value in (overrides or {}).items():
        if value is not None:
            argv.append(f"--{key.replace('_', '-')}={value}")
    if resume:
        argv.append("--resume")
    if reuse_any:
        argv.append("--reuse-from-any-campaign")
    if remeasure_holes:
        argv.append("--remeasure-holes")
    if since:
        argv.append(f"--since={since}")
    if watchdog_action:
        argv.append(f"--watchdog-action={watchdog_action}")
    return argv


def overrides_from(args: argparse.Namespace) -> dict[str, Any]:
    return {"runs_dir": args.runs_dir, "passes": args.passes, "seed": args.seed,
            "device": args.device, "experiments_file": args.experiments_file,
            "retries": args.retries,
            # issue 27; absent when not given (the overrides older front ends pass)
            **({"devices": args.devices} if args.devices is not None else {})}


def _interrupt(signum, frame):
    """First SIGINT/SIGTERM/SIGHUP: stop the campaign (as KeyboardInterrupt). Later ones are
    ignored, so a second Ctrl-C (or a front end forwarding the first) cannot break the
    clean-up that records the cell and stops its session."""
    INTERRUPTED_BY[0] = "Ctrl-C" if signum == signal.SIGINT else signal.Signals(signum).name
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    args = build_arg_parser().parse_args(argv)
    # SIGTERM and SIGHUP (a closed ssh session) end the campaign exactly like Ctrl-C:
    # stop the cell, record it, exit 130.
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _interrupt)
    try:
        for flag, value in (("--since", args.since),
                            ("--reuse-from-any-campaign", args.reuse_from_any_campaign),
                            ("--remeasure-holes", args.remeasure_holes)):
            if value and not args.resume:
                raise ConfigError(f"{flag} only applies with --resume")
        load_plugins()  # this process's entry: built-ins and plugins, before any name is looked up
        campaign = load_campaign(args.campaign, overrides_from(args))
        if args.watchdog_action:  # one key of a table: replaced after the file is validated
            campaign = dataclasses.replace(campaign, watchdog=dataclasses.replace(
                campaign.watchdog, action=args.watchdog_action))
        outcome = Runner(campaign, resume=args.resume, since=args.since,
                         reuse_any=args.reuse_from_any_campaign,
                         remeasure_holes=args.remeasure_holes).run()
    except FugueError as exc:
        print(f"fugue-tui: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except OSError as exc:
        reason = output_failure(exc)  # a full disk that no narrower handler named
        if reason is None:
            raise
        print(f"fugue-tui: error: {reason}", file=sys.stderr)
        return OutputError.exit_code
    except KeyboardInterrupt:
        return 130
    return outcome.exit_code

