"""Alerts: a cell the watchdog calls suspect or hung rings the terminal bell and shows a
notification naming the cell, once per cell, attempt and state, whichever screen is on top
(the run screen takes its events while covered by the help, the Results screen or another
view, and a notification shows over any screen).

On by default; the keymap file turns either off (``$FUGUE_CONFIG_DIR/keymap.toml``)::

    [alerts]
    bell = false     # no terminal bell
    notify = true    # the notification

A replay raises none: what it shows happened long ago. Textual-free apart from the app
whose ``bell`` and ``notify`` it calls.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.define import tomlfile
from engine.errors import ConfigError, nearest
from engine.observe.state import CampaignState

#: The watchdog's states that raise an alert, with the notification's severity.
ALERT_STATES = {"suspect": "warning", "hung": "error"}


@dataclass(frozen=True)
class AlertSettings:
    """Whether an alert rings the bell and whether it shows a notification."""

    bell: bool = True
    notify: bool = True


def load_alerts(path: str | Path | None = None) -> AlertSettings:
    """The ``[alerts]`` table of the keymap file (:func:`fugue_tui.app.actions.keymap_path`
    when ``path`` is None); a missing file or table: the defaults (both on).

    Raises:
        ConfigError: one line naming the file and the key: malformed TOML, an unknown key
            (with the nearest one), a value that is not true or false.
    """
    from fugue_tui.app.actions import keymap_path

    path = Path(path) if path is not None else keymap_path()
    if not os.path.lexists(path):
        return AlertSettings()
    doc = tomlfile.load(path, kind="keymap file")
    table = doc.get("alerts", {})
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: alerts: expected a table ([alerts] with bell = true, "
                          f"notify = true), got {table!r}")
    names = [f.name for f in AlertSettings.__dataclass_fields__.values()]
    for key, value in table.items():
        if key not in names:
            raise ConfigError(f"{path}: alerts: unknown key '{key}'{nearest(key, names)}; "
                              f"known: {', '.join(names)}")
        if not isinstance(value, bool):
            raise ConfigError(f"{path}: alerts.{key}: expected true or false, got {value!r}")
    return AlertSettings(**table)


@dataclass
class CellAlerts:
    """The alerts of one run screen: :meth:`take` after each batch of events."""

    settings: AlertSettings = field(default_factory=AlertSettings)
    #: False for a replay: what it shows happened long ago, nothing is raised.
    live: bool = True
    #: ``(cell key, attempt, state)`` already alerted (each once).
    raised: set[tuple[str, int, str]] = field(default_factory=set)

    def due(self, state: CampaignState, events: Iterable[Any]) -> list[tuple[str, str]]:
        """The alerts the events bring, as ``(line, severity)``: each cell they are about
        that is now suspect or hung, and was not yet alerted for that attempt and state."""
        out = []
        for key in dict.fromkeys(e.get("cell") for e in events):
            cell = state.cells.get(key) if key else None
            if cell is None or cell.state not in ALERT_STATES:
                continue
            mark = (cell.key, cell.attempt, cell.state)
            if mark in self.raised:
                continue
            self.raised.add(mark)
            seen = f": {cell.watchdog}" if cell.watchdog else ""
            out.append((f"cell {cell.index} {cell.label} is {cell.state} (attempt "
                        f"{cell.attempt}){seen}", ALERT_STATES[cell.state]))
        return out

    def take(self, app: Any, state: CampaignState, events: Iterable[Any]) -> int:
        """Ring and notify on ``app`` for each alert due (:meth:`due`), as the settings
        say; returns how many were due (none in a replay)."""
        if not self.live:
            return 0
        due = self.due(state, events)
        for line, severity in due:
            if self.settings.bell:
                app.bell()
            if self.settings.notify:
                app.notify(line, title="watchdog", severity=severity, timeout=15,
                           markup=False)
        return len(due)
