"""Read TOML files (``tomllib``) with errors that name the file, line and column, and
validate tables against a declared set of keys and types.

Every TOML input (campaign, experiments and keymap files) is read by :func:`load`, and only
from a regular file (symbolic links followed) of at most :data:`MAX_BYTES`: a link to
``/dev/zero`` was read until the kernel killed the process, a FIFO blocked for ever. A
UTF-8 byte-order mark at the start (some Windows editors write one) is skipped."""

from __future__ import annotations

import os
import re
import stat
import tomllib
from pathlib import Path
from typing import Any

from engine.errors import ConfigError, nearest, shown
from engine.results.paths import file_kind, path_text_problem, shown_path

_POSITION = re.compile(r"\(at line (\d+), column (\d+)\)")
_AT_END = "(at end of document)"
#: The most a TOML input may hold (the largest shipped campaign or experiments file is a
#: few KiB): a bound on what a mistaken path can make the process read and hold.
MAX_BYTES = 1 << 20
_BOM = "\ufeff"
_UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")


def load(path: str | Path, kind: str = "TOML file") -> dict[str, Any]:
    """Parse a TOML file; ``kind`` names it in errors (``"campaign file"``).

    Raises:
        ConfigError: ``"<file>:<line>:<col>: invalid TOML: <reason>"`` for a syntax error,
            or ``"<file>: cannot read: <reason>"`` when the file is missing, unreadable,
            not a regular file (``a FIFO``, ``a character device
            ('/dev/zero')``) or larger than :data:`MAX_BYTES` (:func:`read_input`).
    """
    path = Path(path)
    raw = read_input(path, kind)
    if raw.startswith(_UTF16_BOMS):
        raise ConfigError(f"{path}: not UTF-8 text (it starts with a UTF-16 byte-order mark): "
                          f"save the {kind} as UTF-8")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    # A byte-order mark is not TOML ("Invalid statement" at 1:1) but says only "UTF-8":
    # skipped, the line and column of a later error are those an editor shows.
    text = text.removeprefix(_BOM)
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        message = str(exc)
        found = _POSITION.search(message)
        reason = _POSITION.sub("", message).strip()
        if found:
            line, column = found.groups()
            raise ConfigError(f"{path}:{line}:{column}: invalid TOML: {reason}") from None
        if message.endswith(_AT_END):
            # tomllib gives no position for an error at the end of the document: the end is it.
            reason = message[: -len(_AT_END)].strip()
            line, column = text.count("\n") + 1, len(text) - text.rfind("\n")
            raise ConfigError(f"{path}:{line}:{column}: invalid TOML: {reason} "
                              f"(at end of file)") from None
        raise ConfigError(f"{path}: invalid TOML: {reason}") from None


def read_input(path: str | Path, kind: str = "TOML file", limit: int = MAX_BYTES) -> bytes:
    """The bytes of an input file that is a regular file (links followed) of at most
    ``limit`` bytes.

    The file is looked at before it is opened (``stat``: a FIFO's open would block until
    a writer came), opened with ``O_NONBLOCK`` and looked at again (what was opened, should
    the path have changed in between), and at most ``limit + 1`` bytes are read (a file
    that grows after the look cannot fill the memory).

    Raises:
        ConfigError: one line naming the file and what is wrong with it.
    """
    problem = path_text_problem(path)
    if problem is not None:
        raise ConfigError(f"{kind} {shown_path(os.fspath(path))} {problem}")
    try:
        _check_kind(path, os.stat(path), kind, limit)
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror or exc}") from None
    try:
        _check_kind(path, os.fstat(fd), kind, limit)
        chunks, left = [], limit + 1
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 16))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    data = b"".join(chunks)
    if len(data) > limit:
        raise ConfigError(f"{path}: {_size(len(data))} or more (it grew while read), more "
                          f"than the {_size(limit)} {_a(kind)} {kind} may be")
    return data


def _check_kind(path: str | Path, st: os.stat_result, kind: str, limit: int) -> None:
    if stat.S_ISDIR(st.st_mode):
        raise ConfigError(f"{path}: cannot read: Is a directory")
    if not stat.S_ISREG(st.st_mode):
        real = os.path.realpath(path)
        via = f" ({shown(real)})" if real != os.path.abspath(path) else ""
        raise ConfigError(f"{path}: cannot read: {file_kind(st.st_mode)}{via}, not a regular "
                          f"file ({_a(kind)} {kind} is read from a regular file)")
    if st.st_size > limit:
        raise ConfigError(f"{path}: {_size(st.st_size)}, more than the {_size(limit)} "
                          f"{_a(kind)} {kind} may be")


def _a(word: str) -> str:
    return "an" if word[:1].lower() in "aeiou" else "a"


def _size(n: int) -> str:
    """``2.3 MiB``; bytes where a rounded MiB would blur the difference (``1048577 bytes``)."""
    mib = n / (1 << 20)
    if n % (1 << 20) == 0:
        return f"{n >> 20} MiB"
    return f"{mib:.1f} MiB" if mib >= 1.1 else f"{n} bytes"


_TYPE_NAMES = {bool: "a boolean", int: "an integer", float: "a number", str: "a string",
               list: "a list", dict: "a table"}


def check_keys(table: dict[str, Any], allowed: dict[str, tuple[type, ...]], where: str,
               aliases: dict[str, str] | None = None) -> None:
    """Reject unknown keys (naming the nearest valid one) and values of the wrong type.

    ``allowed`` maps each key to the accepted Python types; ``int`` values are accepted
    where ``float`` is (TOML writes ``1`` and ``1.0`` differently), ``bool`` never counts
    as ``int``. ``aliases`` maps other spellings to a valid key (``learning_rate`` →
    ``lr``), suggested where string similarity finds nothing close.

    Raises:
        ConfigError: ``"<where>: unknown key 'x' (did you mean 'y'?)"`` or
            ``"<where>: key 'x' must be an integer, got 'abc'"``.
    """
    problems = key_problems(table, allowed, aliases)
    if problems:
        raise ConfigError(f"{where}: {problems[0][1]}")


def key_problems(table: dict[str, Any], allowed: dict[str, tuple[type, ...]],
                 aliases: dict[str, str] | None = None) -> list[tuple[str, str]]:
    """Every unknown key and every value of the wrong type in ``table``, in order, as
    ``(key, "unknown key 'x' (did you mean 'y'?)" | "key 'x' must be an integer, got
    'abc'")`` (:func:`check_keys` raises the first; the dashboard lists them all)."""
    out = []
    for key, value in table.items():
        if key not in allowed:
            out.append((key, f"unknown key '{key}'{suggest(key, allowed, aliases)}"))
            continue
        types = allowed[key]
        if not type_ok(value, types):
            wanted = " or ".join(_TYPE_NAMES.get(t, t.__name__) for t in types)
            out.append((key, f"key '{key}' must be {wanted}, got {shown(value)}"))
    return out


_HEADER = re.compile(r"^\s*\[\s*([^\[\]]+?)\s*\]\s*(#.*)?$")
_KEY = re.compile(r"""^\s*("?)([A-Za-z0-9_.-]+)\1\s*=""")


def key_lines(text: str) -> dict[tuple[str, str], int]:
    """Where each key is set in a TOML document: ``(table, key)`` → line (1-based), the
    table ``""`` for the top level, ``"watchdog"`` for ``[watchdog]``. Plain and quoted
    bare keys and ``[table]`` headers (what campaign files use); a key set in a
    multi-line value's continuation is not looked for."""
    lines: dict[tuple[str, str], int] = {}
    table = ""
    for number, line in enumerate(text.removeprefix(_BOM).splitlines(), start=1):
        header = _HEADER.match(line)
        if header:
            table = header.group(1).strip()
            continue
        key = _KEY.match(line)
        if key:
            lines.setdefault((table, key.group(2)), number)
    return lines


def suggest(name: str, valid: Any, aliases: dict[str, str] | None = None) -> str:
    """``nearest(name, valid)``, falling back to ``aliases`` (e.g. ``learning_rate`` → ``lr``)."""
    close = nearest(name, valid)
    alias = (aliases or {}).get(name.lower())
    if not close and alias in valid:
        return f" (did you mean '{alias}'?)"
    return close


def type_ok(value: Any, types: tuple[type, ...]) -> bool:
    """``isinstance`` with TOML's number rules: bool is not int, int is a float."""
    if isinstance(value, bool):
        return bool in types
    if isinstance(value, int) and float in types:
        return True
    return isinstance(value, types)
