"""Which of the run screen's panes show: the zoom (``z``: one pane alone, in turn, then
every pane again) and whether the screen shows at all (covered by another screen, it draws
nothing: :func:`visible`, :class:`QuietWhenCovered`). The stylesheet does the layout; this
module only sets its classes."""

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


class QuietWhenCovered(Screen):
    """A screen that paints nothing while an opaque screen covers it (the run screen under
    the help, the Results screen or the process view; the process view under the help).

    Textual 8.2.8 counts the screen right under the top one as visible whatever the top
    one's opacity (``App._background_screens``): each of its updates repaints the whole
    screen on top and marks itself for a whole repaint again, which its next message (the
    follow worker's, several a second) carries out: a loop that repainted the help and the
    process view in full about 4 times a second (issue 48: the process view cost 5.2 % of
    a core over the long campaign). Covered (:func:`visible` False), what it would paint
    is dropped; Textual repaints a screen whole when it is back on top. A translucent
    dialog over it still shows it, painted as before.
    tests/unit/fugue_tui/app/test_upstream_covered_repaint.py says when upstream stops
    needing this."""

    def _compositor_refresh(self) -> None:
        if visible(self):
            super()._compositor_refresh()
            return
        self._compositor._dirty_regions.clear()
        self._dirty_widgets.clear()
        self._repaint_required = False
