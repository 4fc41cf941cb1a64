"""Copying a text to the clipboard and showing it (the run screen's ``y``/``Y``, the Results
screen's ``y``).

The copy goes out as OSC 52 (Textual's ``App.copy_to_clipboard``), which a terminal that
does not support it ignores without a word: so the text copied is always shown too, in a
notification long enough to read and select by hand.
"""

from __future__ import annotations

from typing import Any

#: Seconds the copied text stays on the screen (to be selected by hand).
COPIED_S = 12.0


def copy_shown(node: Any, text: str, what: str) -> None:
    """Copy ``text`` (described as ``what``: "cell key") from ``node`` (a screen or
    widget) and show it."""
    node.app.copy_to_clipboard(text)
    node.notify(f"copied the {what} (OSC 52; where the terminal ignores it, select it "
                f"here):\n{text}", title="clipboard", timeout=COPIED_S, markup=False)
