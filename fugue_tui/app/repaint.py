"""A widget changed by another widget's key, drawn in the same frame as that key's own
change, not one frame (16-40 ms) later.

In Textual (8.2.8 today) a widget's ``refresh()`` only marks it: the widget's own message
loop, when it next runs idle, tells its screen (``Widget._check_refresh`` posts
``messages.Update``), and the screen draws what it has been told of when *it* goes idle.
A key that changes two widgets — a Tab: the field and its label's ``> `` mark; ``j`` in the
catalogue: the tree's cursor and the details under it — has the screen draw as soon as the
first change reaches it: the second one's loop had not run yet, and the screen's next frame
waits for its 60 Hz timer. A user saw the focus move and the mark follow 25-40 ms later
(``bench.dashboard_tab`` measures up to the frame that drew every part;
``tests/unit/fugue_tui/app/test_upstream_repaint_hop.py`` fails when upstream changes this).

:func:`repaint_now` tells the screen at once, from the code making the change: the screen
then holds the change with the key's own and draws them in one frame.
"""

from __future__ import annotations

from typing import Any

__all__ = ["repaint_now"]


def repaint_now(widget: Any) -> None:
    """Send ``widget``'s pending repaint (from ``refresh()``, ``update()`` or a reactive
    that repaints) to its screen now rather than from its own message loop; nothing when it
    has none, is not mounted or is not on a screen. Call it after the change."""
    if not getattr(widget, "is_mounted", False):
        return
    # The same call the widget's loop makes when idle (a layout or a style refresh pending
    # goes with it, as it would there); it clears the request, so the loop sends no second
    # Update and the screen does not draw the widget twice.
    widget._check_refresh()  # noqa: SLF001 (no public way to send a repaint now)
