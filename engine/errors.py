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

    def __str__(self) -> str:
        # The contract is one line: a user's value with a newline (a quoted TOML key, a
        # name) that a message embeds as written would break it, so every control
        # character is shown escaped here, whichever message builder forgot to.
        return escape_controls(super().__str__())


class ConfigError(FugueError):
    """A campaign, catalogue or option that cannot be used as written."""


class ProblemList(ConfigError):
    """Every problem of one file, one per line (the dashboard's ``ctrl+o`` list): the one
    deliberate multi-line error. Each line is escaped on its own, so a newline inside a
    user's value still cannot add a line; the newlines between problems are kept."""

    def __init__(self, lines: list[str]):
        super().__init__("\n".join(lines))
        self.lines = list(lines)

    def __str__(self) -> str:
        return "\n".join(escape_controls(line) for line in self.lines)


class OutputError(FugueError):
    """A results path that cannot be written (not a directory, full disk, foreign file)."""


def shown(value: object) -> str:
    """``value`` as the user wrote it in TOML, for error lines: ``true`` (not Python's
    ``True``), ``inf``, ``nan``, strings quoted; anything else as ``repr``."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value != value:
        return "nan"
    if isinstance(value, float) and value in (float("inf"), float("-inf")):
        return "inf" if value > 0 else "-inf"
    return repr(value)


def escape_controls(text: str) -> str:
    """``text`` with each character that is not printable (a newline, a tab, ESC, U+2028,
    anything ``str.splitlines`` would break at) written as Python escapes it (``\\n``,
    ``\\x1b``, ``\\u2028``); other text unchanged, so that it stays on one line."""
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() else repr(ch)[1:-1] for ch in text)


def quoted(text: object) -> str:
    """A user's name or text for an error line: ``'D_ens'`` in single quotes, control
    characters escaped (``'ep\\nochs'``), so that the line stays one line."""
    return "'" + escape_controls(str(text)).replace("'", "\\'") + "'"


def nearest(name: str, choices: Iterable[str]) -> str:
    """Return ``" (did you mean 'x'?)"`` for the closest valid name, or ``""`` if none is close."""
    match = difflib.get_close_matches(name, list(choices), n=1, cutoff=0.6)
    return f" (did you mean '{match[0]}'?)" if match else ""


def known(choices: Iterable[str]) -> str:
    """Format the valid names for an error message: ``"known: a, b, c"``."""
    return "known: " + ", ".join(sorted(choices))


def one_line(exc: BaseException, limit: int = 300) -> str:
    """``exc``'s whole message on one line (runs of white space, newlines included, as one
    space; its type's name when it has none), cut to ``limit`` characters with ``...``."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= limit else text[:limit - 3] + "..."


def first_line(exc: BaseException, limit: int = 300) -> str:
    """The first non-empty line of ``exc``'s message (its type's name when it has none), at
    most ``limit`` characters: for messages whose first line says it all (Ray's)."""
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    return (lines[0] if lines else type(exc).__name__)[:limit]


def failure_line(exc: BaseException, limit: int | None = 500) -> str:
    """``Type: message`` up to its first line break, at most ``limit`` characters (None: no
    limit): how a failed job, cell or probe is recorded in rows, events and verdicts.

    An exception raised without a message is ``Type (no message)``, never ``Type: ``; a
    ``MemoryError`` (usually message-less) adds what was measured when it was recorded:
    this process's peak resident memory and the host's available memory."""
    name = type(exc).__name__
    text = str(exc).strip()
    if text:
        return f"{name}: {text}".splitlines()[0][:limit]
    line = f"{name} (no message)"
    if isinstance(exc, MemoryError):
        line += _memory_now()
    return line[:limit]


def _memory_now() -> str:
    """``; when recorded: peak RSS 812 MiB, host memory available 95 MiB`` (what can be
    read; nothing when neither can)."""
    facts = []
    try:
        import resource

        facts.append(f"peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f}"
                     " MiB")  # ru_maxrss is KiB on Linux
    except (ImportError, OSError):
        pass
    try:  # the host's figure, or the cgroup's where its limit leaves less (a container)
        from engine.cgroup_memory import available_mib

        facts.append(f"host memory available {available_mib():.0f} MiB")
    except (ImportError, OSError):  # a fact we could not read is left out, never invented
        pass
    return f"; when recorded: {', '.join(facts)}" if facts else ""
