"""When a screen is compact: the sizes below which the dashboard's screens switch to their
small-terminal layout (CSS class ``-compact``, rules in ``app.tcss``). Textual-free apart
from the screen it is given; shared by the plan, run and Results screens."""

from __future__ import annotations

from typing import Any

#: Below this many columns or rows a screen is compact (80x24 and 100x30 are; 150x48 not).
COMPACT_BELOW = (100, 32)


def set_compact(screen: Any) -> bool:
    """Set or clear ``screen``'s ``-compact`` class from its size; returns whether set."""
    width, height = screen.size
    compact = width < COMPACT_BELOW[0] or height < COMPACT_BELOW[1]
    screen.set_class(compact, "-compact")
    from textual.widgets import Footer

    for footer in screen.query(Footer):  # keys closer together: more of them fit
        footer.compact = compact
    return compact
