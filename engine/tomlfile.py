"""Read TOML files (``tomllib``) with errors that name the file, line and column, and
validate tables against a declared set of keys and types."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

from engine.errors import ConfigError, nearest

_POSITION = re.compile(r"\(at line (\d+), column (\d+)\)")


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
        return tomllib.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except tomllib.TOMLDecodeError as exc:
        message = str(exc)
        found = _POSITION.search(message)
        reason = _POSITION.sub("", message).strip()
        if found:
            line, column = found.groups()
            raise ConfigError(f"{path}:{line}:{column}: invalid TOML: {reason}") from None
        raise ConfigError(f"{path}: invalid TOML: {reason}") from None


_TYPE_NAMES = {bool: "a boolean", int: "an integer", float: "a number", str: "a string",
               list: "a list", dict: "a table"}


def check_keys(table: dict[str, Any], allowed: dict[str, tuple[type, ...]], where: str) -> None:
    """Reject unknown keys (naming the nearest valid one) and values of the wrong type.

    ``allowed`` maps each key to the accepted Python types; ``int`` values are accepted
    where ``float`` is (TOML writes ``1`` and ``1.0`` differently), ``bool`` never counts
    as ``int``.

    Raises:
        ConfigError: ``"<where>: unknown key 'x' (did you mean 'y'?)"`` or
            ``"<where>: key 'x' must be an integer, got 'abc'"``.
    """
    for key, value in table.items():
        if key not in allowed:
            raise ConfigError(f"{where}: unknown key '{key}'{nearest(key, allowed)}")
        types = allowed[key]
        if not type_ok(value, types):
            wanted = " or ".join(_TYPE_NAMES.get(t, t.__name__) for t in types)
            raise ConfigError(f"{where}: key '{key}' must be {wanted}, got {value!r}")


def type_ok(value: Any, types: tuple[type, ...]) -> bool:
    """``isinstance`` with TOML's number rules: bool is not int, int is a float."""
    if isinstance(value, bool):
        return bool in types
    if isinstance(value, int) and float in types:
        return True
    return isinstance(value, types)
