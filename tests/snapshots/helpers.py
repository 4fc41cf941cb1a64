"""Dashboard fixtures and SVG snapshots.

:func:`install` puts the committed recording (``tests/fixtures/dashboard/runs``) under a
temporary folder with its paths resolved. :func:`pin` makes a screen reproducible: no
cursor blink, a fixed theme. :func:`assert_snapshot` compares ``App.export_screenshot()``
(Textual's own SVG export) with ``tests/snapshots/<name>.svg``; set
``FUGUE_SNAPSHOT_UPDATE=1`` to write the files instead (review them, then commit). On a
mismatch the new SVG is written next to the test's temporary files and the first differing
line of the screen text is shown.
"""

from __future__ import annotations

import difflib
import os
import shutil
from pathlib import Path

from textual.widgets import Input

SNAPSHOTS = Path(__file__).resolve().parent
FIXTURES = SNAPSHOTS.parent / "fixtures" / "dashboard"
PLACEHOLDER = "@RUNS@"
#: Every snapshot is taken at this terminal size.
SIZE = (160, 48)
THEME = "textual-dark"


def install(dest: Path, recording: str = "runs") -> Path:
    """A copy of the recorded runs folder under ``dest`` (returned), paths resolved;
    ``recording``: which (``runs``, or ``stream_runs``: a stream campaign, issue 51)."""
    runs = dest / "runs"
    shutil.copytree(FIXTURES / recording, runs)
    for path in runs.rglob("*.jsonl"):
        text = path.read_text()
        if PLACEHOLDER in text:
            path.write_text(text.replace(PLACEHOLDER, str(runs)))
    return runs


def pin(app) -> None:
    """No blinking cursor anywhere, the default dark theme."""
    app.theme = THEME
    for box in app.screen.query(Input):
        box.cursor_blink = False


def assert_snapshot(app, name: str, tmp_path: Path) -> None:
    pin(app)
    svg = app.export_screenshot(title="fugue-tui")
    path = SNAPSHOTS / f"{name}.svg"
    if os.environ.get("FUGUE_SNAPSHOT_UPDATE") == "1" or not path.exists():
        if os.environ.get("CI") and not path.exists():
            raise AssertionError(f"snapshot {path} is missing (write it with "
                                 "FUGUE_SNAPSHOT_UPDATE=1 and commit it)")
        path.write_text(svg)
        return
    expected = path.read_text()
    if svg != expected:
        actual = tmp_path / f"{name}.actual.svg"
        actual.write_text(svg)
        diff = "\n".join(list(difflib.unified_diff(expected.splitlines(), svg.splitlines(),
                                                   lineterm="", n=0))[:12])
        raise AssertionError(f"screen differs from snapshot {path}; new one: {actual}\n{diff}")
