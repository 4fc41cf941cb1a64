"""User-facing errors: one line, naming the file, key or value, mapped to exit code 2."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


class FugueError(Exception):
    """An error caused by input (a file, a key, a value, the environment).

    Front ends print ``str(error)`` as a single line and exit with :attr:`exit_code`;
    no traceback, nothing written.
    """

    exit_code = 2


class ConfigError(FugueError):
    """A campaign, catalogue or option that cannot be used as written."""


class OutputError(FugueError):
    """A results path that cannot be written (not a directory, full disk, foreign file)."""


def nearest(name: str, choices: Iterable[str]) -> str:
    """Return ``" (did you mean 'x'?)"`` for the closest valid name, or ``""`` if none is close."""
    match = difflib.get_close_matches(name, list(choices), n=1, cutoff=0.6)
    return f" (did you mean '{match[0]}'?)" if match else ""


def known(choices: Iterable[str]) -> str:
    """Format the valid names for an error message: ``"known: a, b, c"``."""
    return "known: " + ", ".join(sorted(choices))
