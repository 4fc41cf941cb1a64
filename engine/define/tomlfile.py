"""Read TOML files (``tomllib``) with errors that name the file, line and column, and
validate tables against a declared set of keys and types."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

from engine.errors import ConfigError, nearest, shown

_POSITION = re.compile(r"\(at line (\d+), column (\d+)\)")
_AT_END = "(at end of document)"


def load(path: str | Path) -> dict[str, Any]:
    """Parse a TOML file.

    Raises:
        ConfigError: ``"<file>:<line>:<col>: invalid TOML: <reason>"`` for a syntax error,
            or ``"<file>: cannot read: <reason>"`` when the file is missing or unreadable.
    """
    path = Path(path)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror or exc}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
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
    for number, line in enumerate(text.splitlines(), start=1):
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
