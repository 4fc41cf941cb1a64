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
import html
import os
import re
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


async def await_snapshot(pilot, app, name: str, tmp_path: Path,
                         timeout: float = 15.0) -> None:
    """:func:`assert_snapshot` once the screen has become the pinned one, or after
    ``timeout`` seconds (then it fails with the rows that differ). A screen is drawn in
    several steps (workers, timers, a late repaint), and a loaded host (CI's parallel phase)
    can take the snapshot between two of them: the test waits on the exact screen it
    asserts instead of pausing for a guessed time. When writing snapshots, the screen is
    taken once it has stopped changing for 0.5 s."""
    import asyncio

    path = SNAPSHOTS / f"{name}.svg"
    writing = os.environ.get("FUGUE_SNAPSHOT_UPDATE") == "1" or not path.exists()
    expected = None if writing else _HASH.sub("terminal-X-", path.read_text())
    loop = asyncio.get_running_loop()
    deadline, last, still_since = loop.time() + timeout, None, loop.time()
    while loop.time() < deadline:
        pin(app)
        svg = _HASH.sub("terminal-X-", app.export_screenshot(title="fugue-tui"))
        if expected is not None and svg == expected:
            break
        if svg != last:
            last, still_since = svg, loop.time()
        elif writing and loop.time() - still_since >= 0.5:
            break
        await pilot.pause(0.1)
    assert_snapshot(app, name, tmp_path)


def assert_snapshot(app, name: str, tmp_path: Path) -> None:
    """The screen now against ``tests/snapshots/<name>.svg`` (prefer
    :func:`await_snapshot`, which waits for it)."""
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
        raise AssertionError(f"screen differs from snapshot {path}; new one: {actual}\n"
                             + snapshot_diff(expected, svg))


_HASH = re.compile(r"terminal-\d+-")
_TEXT = re.compile(r'<text [^>]*?x="([\d.]+)"[^>]*clip-path="url\(#terminal-X-line-(\d+)\)">'
                   r"([^<]*)</text>")


def screen_lines(svg: str) -> list[str]:
    """The screen's text rows read back from an exported SVG (styles dropped)."""
    rows: dict[int, str] = {}
    for x, line, text in _TEXT.findall(_HASH.sub("terminal-X-", svg)):
        # Rich writes runs of spaces as bare background: place each run at its column
        # (Rich's cell width is 12.2 px).
        row, col = rows.get(int(line), ""), round(float(x) / 12.2)
        text = html.unescape(text).replace("\xa0", " ").rstrip("\n")
        rows[int(line)] = row.ljust(col)[:col] + text + row[col + len(text):]
    return [rows[n].rstrip() for n in sorted(rows)]


def snapshot_diff(expected: str, actual: str, limit: int = 16) -> str:
    """What differs, for a failure message: the screen rows that differ when any do (CI
    logs keep no SVG), else the SVG's lines with Rich's per-render class hash ignored (a
    style change). Rich's hash changes with any change, so a raw diff shows only it."""
    old, new = screen_lines(expected), screen_lines(actual)
    if old != new:
        what = "screen text"
    else:
        what = "styles (screen text identical)"
        old = _HASH.sub("terminal-X-", expected).splitlines()
        new = _HASH.sub("terminal-X-", actual).splitlines()
    diff = list(difflib.unified_diff(old, new, lineterm="", n=0))[2:]
    return f"{what}:\n" + "\n".join(diff[:limit])
