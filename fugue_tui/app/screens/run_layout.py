"""Which of the run screen's panes show: the zoom (``z``: one pane alone, in turn, then
every pane again) and whether the screen shows at all (covered by another screen, it draws
nothing). The stylesheet does the layout; this module only sets its classes."""

from __future__ import annotations

from textual.screen import Screen

from fugue_tui.app.widgets.campaign_form import FOCUS_MARK

#: The panes ``z`` zooms, in turn (then none: every pane again).
ZOOMS = ("cells", "jobs", "monitor", "log", "events")


#: The widget that takes the keys while a pane is zoomed to ("": every pane shows). The
#: monitor and the events panes take none: there the run screen's own j/k move the cell
#: table's cursor (the monitor shows the selected cell's). Without this the focus stayed
#: on the hidden cell table, which Textual then blurred: j/k did nothing until Tab.
ZOOM_FOCUS = {"": "#cells", "cells": "#cells", "jobs": "#jobs-pane", "log": "#log"}


def focus_zoomed(screen: Screen, pane: str) -> None:
    """Give the keys to what shows of ``pane`` zoomed to (see :data:`ZOOM_FOCUS`)."""
    target = ZOOM_FOCUS.get(pane)
    if target is None:
        screen.set_focus(None)
    else:
        screen.query_one(target).focus()


#: The panes that take keys, with their titles (the log's is its cell's, the cells' says
#: the filter: kept as they are).
TITLES = {"#cells": "", "#jobs-pane": "jobs", "#log": ""}
#: Panes titled only while they have the keys (the events pane: ``4``, Tab).
FOCUS_TITLES = {"#recent": "events"}


def mark_focus(screen: Screen) -> None:
    """The pane with the focus has :data:`FOCUS_MARK` before its title, the others none
    (issue 47, item 6: as on the Results screen, the keys' pane shows without colours)."""
    for selector, title in TITLES.items():
        pane = screen.query_one(selector)
        shown = str(pane.border_title or "")
        title = title or shown.removeprefix(FOCUS_MARK)
        wanted = f"{FOCUS_MARK}{title}" if pane.has_focus_within else title
        if wanted != shown:
            pane.border_title = wanted
    for selector, title in FOCUS_TITLES.items():
        pane = screen.query_one(selector)
        wanted = f"{FOCUS_MARK}{title}" if pane.has_focus else ""
        if wanted != str(pane.border_title or ""):
            pane.border_title = wanted


def zoomed(screen: Screen) -> str:
    """The pane ``screen`` shows alone ("" for all of them)."""
    return next((z for z in ZOOMS if screen.has_class(f"-zoom-{z}")), "")


def next_zoom(current: str) -> str:
    """The pane after ``current`` in :data:`ZOOMS`; after the last, "" (every pane); after
    "", the first."""
    if not current:
        return ZOOMS[0]
    return "" if current == ZOOMS[-1] else ZOOMS[ZOOMS.index(current) + 1]


def zoom_to(screen: Screen, pane: str) -> None:
    """Show ``pane`` alone ("": every pane), through the stylesheet's classes."""
    for name in ZOOMS:
        screen.set_class(name == pane, f"-zoom-{name}")
    screen.set_class(bool(pane), "-zoom")


def visible(screen: Screen) -> bool:
    """Shown: on top, or under a translucent dialog. Not under the help or the Results
    screen (Textual repaints the screen on top for every region a screen under it
    repaints, even an opaque one: the help repainted with every redraw there)."""
    stack = screen.app.screen_stack
    if stack and stack[-1] is screen:
        return True
    return len(stack) > 1 and stack[-2] is screen and stack[-1].styles.background.a < 1
