"""The Results screen's visible columns, chosen with ``c`` and saved per user. Textual-free.

File: ``<config dir>/results_columns.toml`` (beside the keymap,
:func:`fugue_tui.app.actions.keymap_path`; ``$FUGUE_CONFIG_DIR`` overrides the folder)::

    # the Results screen's columns (key c); written by the dashboard
    [results]
    hidden = ["scheduler", "host"]

The columns *hidden* are kept, not those shown: a column a later version adds shows until
the user hides it, and a column a later version removes (or a name misspelt by hand) is
simply ignored. The file is written whole, atomically (a temporary file renamed over it),
each time the picker's choice is applied.

:data:`KEY_COLUMNS` (experiment, executor) always show: they say which cell a row is,
and a row without them is a line of numbers nobody can place (a sort, a filter or the
provenance pane would name a row that the table no longer tells apart). They are listed in
the picker, checked and disabled, so that the user sees why they cannot be hidden.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable
from pathlib import Path

from engine.define import tomlfile
from engine.errors import ConfigError, OutputError
from fugue_tui.app.models.results import COLUMNS

#: The file's name in the config folder.
FILE = "results_columns.toml"
#: The columns that always show (the row's identity; see the module docstring).
KEY_COLUMNS: tuple[str, ...] = ("experiment", "executor")
#: The columns hidden by default: none (every column shows, as before the picker).
DEFAULT_HIDDEN: frozenset[str] = frozenset()
_HEADER = "# the Results screen's columns (key c); written by the dashboard\n"


def columns_path() -> Path:
    """Where the choice lives (the file need not exist)."""
    from engine.dirs import config_dir

    return config_dir() / FILE


def hideable() -> list[str]:
    """The :data:`~fugue_tui.app.models.results.COLUMNS` keys a user may hide, in order."""
    return [key for key, _, _ in COLUMNS if key not in KEY_COLUMNS]


def clean(hidden: Iterable[str]) -> frozenset[str]:
    """``hidden`` less any name that is not a hideable column (unknown, removed, a key
    column)."""
    allowed = set(hideable())
    return frozenset(h for h in hidden if h in allowed)


def load_hidden(path: str | Path | None = None) -> frozenset[str]:
    """The columns the user hid (:func:`columns_path` when ``path`` is None); a missing
    file: :data:`DEFAULT_HIDDEN`. Unknown or removed column names are ignored.

    Raises:
        ConfigError: one line naming the file: not a regular file, too large, not UTF-8,
            malformed TOML (line, column), ``results`` not a table, ``hidden`` not a list
            of strings.
    """
    path = Path(path) if path is not None else columns_path()
    if not os.path.lexists(path):
        return DEFAULT_HIDDEN
    doc = tomlfile.load(path, kind="Results columns file")
    table = doc.get("results", {})
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: results: expected a table ([results] with hidden = "
                          f"[\"host\", ...]), got {table!r}")
    hidden = table.get("hidden", [])
    if not isinstance(hidden, list) or not all(isinstance(h, str) for h in hidden):
        raise ConfigError(f"{path}: results.hidden: expected a list of column names such as "
                          f"[\"scheduler\", \"host\"], got {hidden!r}")
    return clean(hidden)


def save_hidden(hidden: Iterable[str], path: str | Path | None = None) -> Path:
    """Write the choice (the hideable columns of ``hidden``, in the table's order) to
    ``path`` (:func:`columns_path` when None), atomically, its folder created. Returns the
    path.

    Raises:
        OutputError: the file cannot be written (names the file and the reason).
    """
    import tomli_w

    path = Path(path) if path is not None else columns_path()
    keep = clean(hidden)
    text = _HEADER + tomli_w.dumps({"results": {"hidden": [k for k in hideable() if k in keep]}})
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise OutputError(f"{path}: cannot save the Results columns: "
                          f"{exc.strerror or exc}") from None
    return path
