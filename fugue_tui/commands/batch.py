"""``fugue-tui --batch CAMPAIGN.toml``: the top-level flags (``--batch``, ``--dry-run``,
``--json``, ``--resume`` ...), the campaign keys ``--batch`` overrides, the checks that
keep a top-level flag from being silently ignored, and the call into
:func:`fugue_tui.console.batch.run_batch`.

The overrides are campaign keys (:data:`engine.define.campaign_schema.KEYS`): their
spelling, their parsing (a count's low end) and the ``run`` flag that sets the same key
come from the key's declaration; only the help words are this parser's own (``override
the campaign's passes``), unchanged since the flags were written by hand."""

from __future__ import annotations

import argparse
from typing import Any

from fugue_tui.commands.arguments import (
    at_least,
    integer,
    path_text,
    regular_file,
    timestamp,
)

#: The campaign keys ``--batch`` overrides, in ``--help`` order, and what their help adds
#: after ``override the campaign's <key>`` (None: the key's own ``run`` flag help).
OVERRIDES: dict[str, str | None] = {
    "runs_dir": "",
    "passes": "",
    "seed": "",
    "device": " (auto, cpu, cuda, cuda:N)",
    "devices": ": auto, cpu, or a comma list of cuda:N / GPU-… / MIG-… (one cell per "
               "device at once)",
    "experiments_file": None,
    "retries": "",
}
#: Overrides that show their key's metavar (the others show argparse's, ``PASSES``).
_METAVARS = ("devices", "experiments_file")

#: The commands that honour each override (None: the dashboard, the default command); any
#: other command refuses it: `fugue-tui --passes 3 list` would otherwise do nothing.
_USERS: dict[str, tuple[str | None, ...]] = {
    "runs_dir": ("run", "report", "dashboard", None),
    "experiments_file": ("run", "list", "validate", "prefetch"),
}
#: A top-level override and the sub-command's own flag for the same key (beside ``run``'s,
#: which its declaration names): given both with different values, which one wins would be
#: a guess (refused, naming both).
_OWN_FLAG = {"report": {"runs_dir": "runs_dir_report"},
             "list": {"experiments_file": "experiments_file_list"},
             "validate": {"experiments_file": "experiments_file_sub"},
             "prefetch": {"experiments_file": "experiments_file_sub"}}


def _key(name: str) -> Any:
    from engine.define.campaign_schema import KEYS

    return KEYS[name]


def _spelling(name: str) -> str:
    return _key(name).flag.spelling


def _parse(name: str) -> Any:
    """The override's value type, from its key: a file that must exist, a count checked at
    its bound's low end (``--passes`` >= 1), an integer, else the text."""
    key = _key(name)
    if name == "experiments_file":
        return regular_file
    if name == "runs_dir":  # the text rule of every path (the dashboard reads it raw)
        return path_text
    if int in key.types and list not in key.types:
        low = key.bound.low if key.bound is not None else None
        return at_least(int(low)) if key.flag.checked and low is not None else integer
    return None


def add_top_level(parser: argparse.ArgumentParser) -> None:
    """``--version``, ``--batch`` and the overrides and modes it takes."""
    from engine import __version__

    parser.add_argument("-V", "--version", action="version", version=f"fugue-tui {__version__}")
    parser.add_argument("--batch", metavar="CAMPAIGN", help="run a campaign TOML headless")
    parser.add_argument("--dry-run", action="store_true",
                        help="with --batch: print the cells and their keys, run nothing")
    parser.add_argument("--json", action="store_true",
                        help="with --batch: the run as JSON lines (with --dry-run: the plan "
                             "as JSON; docs/json.md)")
    for name, more in OVERRIDES.items():
        key = _key(name)
        kwargs: dict[str, Any] = {
            "help": key.flag.help if more is None else f"override the campaign's {name}{more}"}
        if name in _METAVARS:
            kwargs["metavar"] = key.flag.metavar
        if (parse := _parse(name)) is not None:
            kwargs["type"] = parse
        parser.add_argument(key.flag.spelling, **kwargs)
    detail = parser.add_mutually_exclusive_group()
    detail.add_argument("-q", "--quiet", dest="detail", action="store_const", const="quiet",
                        help="with --batch: only each cell's lines and the report (no job "
                             "or epoch lines, no live view)")
    detail.add_argument("-v", "--verbose", dest="detail", action="store_const",
                        const="verbose",
                        help="with --batch: every job's every epoch when piped, the live "
                             "view on a terminal (the default)")
    parser.add_argument("--resume", action="store_true",
                        help="with --batch: skip cells whose key already has an ok row of "
                             "this campaign")
    parser.add_argument("--reuse-from-any-campaign", dest="reuse_any", action="store_true",
                        help="with --resume: an ok row of any campaign in the runs folder "
                             "counts too (the plan names the campaign it came from)")
    parser.add_argument("--remeasure-holes", dest="remeasure_holes", action="store_true",
                        help="with --resume: an ok row whose monitor columns are missing for "
                             "a reason other than no device (a monitor killed mid-cell) does "
                             "not count: its cell runs again")
    parser.add_argument("--since", metavar="TIME", type=timestamp,
                        help="with --resume: only ok rows written at or after this time count: "
                        "ISO 8601 with an offset (2026-11-30T14:00:00+09:00) or "
                        "YYYYmmdd_HHMMSS, read as this host's local time (rows are "
                        "compared as instants)")


def check_modes(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """``--batch`` with a command, ``--json``/``--dry-run``/``--resume`` ... without
    ``--batch``, an override a command ignores or contradicts: one line, exit 2."""
    if args.command and args.batch:
        parser.error(f"--batch runs a campaign; it cannot be combined with '{args.command}'")
    if args.json and not args.batch:
        where = (f"; '{args.command}' takes its own: fugue-tui {args.command} --json"
                 if args.command in ("list", "validate", "report", "run") else "")
        parser.error(f"--json before the command applies with --batch CAMPAIGN{where}")
    if not args.batch:
        used = [flag for flag, value in (("--dry-run", args.dry_run), ("--resume", args.resume),
                                         (f"--{args.detail}", args.detail),
                                         ("--since", args.since),
                                         ("--reuse-from-any-campaign", args.reuse_any),
                                         ("--remeasure-holes", args.remeasure_holes)) if value]
        if used:
            parser.error(f"{', '.join(used)} only applies with --batch CAMPAIGN")
        _check_users(parser, args)
    if args.detail and (args.json or args.dry_run):  # neither prints progress lines
        parser.error(f"--{args.detail} applies to --batch's progress lines; "
                     f"{'--json' if args.json else '--dry-run'} prints none")
    for flag, value in (("--since", args.since), ("--reuse-from-any-campaign", args.reuse_any),
                        ("--remeasure-holes", args.remeasure_holes)):
        if value and not args.resume:  # silently running everything would mislead
            parser.error(f"{flag} only applies with --resume")


def _check_users(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Top-level overrides given to a command that ignores them, and the same setting given
    before and after the command with different values: one line, exit 2."""
    for name in OVERRIDES:
        value = getattr(args, name, None)
        if value is None:
            continue
        flag = _spelling(name)
        users = _USERS.get(name, ("run",))
        if args.command not in users:
            names = ["--batch"] + [u for u in users if u]
            takers = ", ".join(names[:-1]) + f" and {names[-1]}"
            which = f"'{args.command}'" if args.command else "the dashboard"
            parser.error(f"{flag} does not apply to {which} (it is an option of {takers})")
        own = (_key(name).flag.dest if args.command == "run"
               else _OWN_FLAG.get(args.command or "", {}).get(name))
        mine = getattr(args, own, None) if own else None
        if mine is not None and mine != value:
            parser.error(f"{flag} given twice with different values: {value} before "
                         f"'{args.command}' and {mine} after it; give it once")
    if args.command == "report" and args.report_dir is not None:
        other = args.runs_dir_report if args.runs_dir_report is not None else args.runs_dir
        if other is not None and other != args.report_dir:
            parser.error(f"report: RUNS_DIR {args.report_dir} and --runs-dir {other} name "
                         "different folders; give one")


def check_tokens(parser: argparse.ArgumentParser, argv: list[str]) -> None:
    """Refuse an option before the command that the top level does not know.

    argparse would read ``--batch x.toml --option foo`` as the unknown ``--option`` and the
    command ``foo`` ("invalid choice: 'foo'"), naming neither the flag nor where it belongs.
    Here the first unknown option is named, with the command that has it."""
    from engine.errors import nearest

    commands = sub_parsers(parser)
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


def sub_parsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """The sub-command parsers by name ({} when the parser has none)."""
    for action in parser._actions:  # noqa: SLF001 - argparse keeps sub-parsers here
        if isinstance(action, argparse._SubParsersAction):  # noqa: SLF001
            return dict(action.choices)
    return {}


def run(args: argparse.Namespace) -> int:
    """Run (or with ``--dry-run`` plan) the campaign file with the overrides given."""
    from fugue_tui.console.batch import run_batch

    overrides = {name: getattr(args, name) for name in OVERRIDES}
    return run_batch(args.batch, overrides, dry=args.dry_run, resume=args.resume,
                     since=args.since, reuse_any=args.reuse_any, as_json=args.json,
                     remeasure_holes=args.remeasure_holes, quiet=args.detail == "quiet")
