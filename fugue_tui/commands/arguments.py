"""The parser class and the argument value types every sub-command shares: argparse with
the project's error convention (one line on stderr, exit 2), counts with a low end,
regular files, precision names and the ``--experiments-file`` flag. Torch-free and light:
``fugue-tui --version`` builds the whole parser."""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections.abc import Callable

from engine.errors import shown


class Parser(argparse.ArgumentParser):
    """argparse with the project's error convention: one line on stderr, exit 2.

    ``epilog`` may be a callable, evaluated only when help is shown (``run --help`` lists
    the executors that plugins register, without loading plugins for every command)."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {_did_you_mean(message)}\n")

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


#: argparse's words for a value outside ``choices`` (a mistyped sub-command too); the
#: choices quoted (3.11) or not (later Pythons).
_INVALID_CHOICE = re.compile(r"invalid choice: '(?P<value>[^']*)' \(choose from (?P<choices>.*)\)$")


def _did_you_mean(message: str) -> str:
    """argparse's invalid-choice message with the nearest choice named, as every other
    unknown name of the command line is (``fugue-tui reprot``: did you mean 'report'?)."""
    from engine.errors import nearest

    match = _INVALID_CHOICE.search(message)
    if match is None:
        return message
    choices = [c.strip().strip("'\"") for c in match["choices"].split(",")]
    hint = nearest(match["value"], choices)
    cut = match.end("value") + 1  # after the value's closing quote
    return message[:cut] + hint + message[cut:] if hint else message


#: An integer as a command line writes one: ASCII digits, an optional minus sign. Python's
#: ``int`` also takes other scripts' digits (``int('٣') == 3``), underscores and spaces, so
#: ``--passes ٣`` planned three passes while a campaign file refuses the same text.
INTEGER = re.compile(r"-?[0-9]+")


def integer(text: str) -> int:
    """An integer argument in ASCII digits (``not an integer: '٣'`` otherwise, exit 2)."""
    if not INTEGER.fullmatch(text):
        raise argparse.ArgumentTypeError(f"not an integer: {shown(text)}")
    return int(text)


def real(text: str) -> float:
    """A number argument (``0.001``, ``1e-3``) in ASCII (``not a number: '١.٥'`` otherwise;
    Python's ``float`` reads other scripts' digits and underscores too)."""
    try:
        if not text.isascii() or "_" in text:
            raise ValueError(text)
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {shown(text)}") from None


def at_least(low: int) -> Callable[[str], int]:
    """An integer argument ``>= low``; argparse reports ``must be >= 1, got 0`` (exit 2)."""
    def parse(text: str) -> int:
        value = integer(text)
        if value < low:
            raise argparse.ArgumentTypeError(f"must be >= {low}, got {value}")
        return value
    return parse


def regular_file(text: str) -> str:
    """A path that names an existing regular file (``no such file: X`` otherwise; ``not a
    regular file: X (a FIFO)``; text no path can be, as every path a user
    gives: :func:`engine.results.paths.path_text_problem`)."""
    import stat

    from engine.results.paths import file_kind, path_text_problem, shown_path

    problem = path_text_problem(text)
    if problem is not None:
        raise argparse.ArgumentTypeError(f"{shown_path(text)} {problem}")
    try:
        mode = os.stat(text).st_mode
    except FileNotFoundError:
        raise argparse.ArgumentTypeError(f"no such file: {text}") from None
    except OSError as exc:
        raise argparse.ArgumentTypeError(f"cannot read {text}: {exc.strerror or exc}") from None
    if not stat.S_ISREG(mode):
        raise argparse.ArgumentTypeError(f"not a regular file: {text} ({file_kind(mode)})")
    return text


def path_text(text: str) -> str:
    """A path argument whose text a system call takes (no NUL byte, no component longer
    than a file name may be: :func:`engine.results.paths.path_text_problem`), for paths
    that are not expanded (``control``'s RUN_DIR)."""
    from engine.results.paths import path_text_problem, shown_path

    problem = path_text_problem(text)
    if problem is not None:
        raise argparse.ArgumentTypeError(f"{shown_path(text)} {problem}")
    return text


def timestamp(text: str) -> str:
    """``--since``'s value (ISO 8601 with an offset, or ``YYYYmmdd_HHMMSS`` read as this
    host's local time) checked as argparse parses it (``--batch`` and ``run`` alike): a bad
    time is refused with its one line before anything runs."""
    from engine.results.values import check_timestamp

    try:
        return check_timestamp(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def precision_names() -> tuple[str, ...]:
    """The precision names a ``--precision``/``--baseline`` choice takes (fp32, tf32, ...)."""
    from engine.precision import PRECISIONS

    return PRECISIONS


def add_experiments_file(parser: argparse.ArgumentParser, dest: str) -> None:
    """A sub-command's ``--experiments-file FILE`` (alias ``--experiments``); ``dest`` is
    the command's own, kept apart from the top-level override of the same name."""
    parser.add_argument("--experiments-file", "--experiments", metavar="FILE", dest=dest,
                        type=regular_file,
                        help="a user experiments file merged over the catalogue")
