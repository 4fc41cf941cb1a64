"""The key footer of every screen: Textual's ``Footer``, recomposed only when what it shows
changed.

Textual's footer removes and mounts all its keys again whenever its screen publishes a
bindings update — on every focus change, and on every suspend and resume of the screen
(``?`` opening the help and closing it, a dialog). That recomposition costs tens of
milliseconds of the UI thread (more on a busy machine) and ran while the help was
opening, and again, pointlessly, for the run screen hidden under it. This footer compares
what it would show (keys, their display, descriptions, enabled, tooltips) with what it shows,
and recomposes only on a difference, and never while its screen is hidden (the resume
publishes a bindings update of its own).

It also ends cleanly on a narrow terminal (issue 47, item 5): the keys that do not fit
beside the palette key are hidden whole (Textual cut the last one mid-word under it,
``? hel▏^p palette``), and the palette key has no right margin (the compact footer gave every
key one, the docked palette's included: the key scrolled under it showed through that
column, ``^p palettei``).
"""

from __future__ import annotations

from typing import Any

from textual.widgets import Footer
from textual.widgets._footer import FooterKey


class KeyFooter(Footer):
    """A ``Footer`` that recomposes only when its content changes and shows only the keys
    that fit whole (see the module doc)."""

    DEFAULT_CSS = """
    KeyFooter.-compact FooterKey.-command-palette { margin-right: 0; }
    """

    _shown: Any = None
    #: How many times it recomposed (tests read it).
    recomposes = 0

    def _content(self) -> Any:
        """What :meth:`Footer.compose` would show now."""
        app = self.app
        active = self.screen.active_bindings
        keys = tuple((binding.key, app.get_key_display(binding), binding.description,
                      binding.action, enabled, tooltip, binding.group)
                     for _node, binding, enabled, tooltip in active.values() if binding.show)
        palette = None
        if self.show_command_palette and app.ENABLE_COMMAND_PALETTE:
            entry = active.get(app.COMMAND_PALETTE_BINDING)
            if entry is not None:
                _node, binding, enabled, tooltip = entry
                palette = (binding.key, app.get_key_display(binding), enabled, tooltip)
        return keys, palette, self.compact

    def bindings_changed(self, screen) -> None:
        self._bindings_ready = True
        if not screen.app.app_focus:
            return
        if self.is_attached and screen is self.screen:
            self.call_after_refresh(self._recompose_if_changed)

    async def _recompose_if_changed(self) -> None:
        if not self.is_attached or not self.screen.is_active:
            return  # hidden: its resume publishes the bindings again
        content = self._content()
        if content == self._shown:
            return
        self._shown = content
        self.recomposes += 1
        await self.recompose()
        self.fit_keys()

    def on_resize(self) -> None:
        self.fit_keys()

    def watch_compact(self) -> None:
        self.call_after_refresh(self.fit_keys)  # the keys' margins change with it

    def fit_keys(self) -> None:
        """Show the keys, in order, while they fit whole left of the palette key; hide
        the rest (their width is what they render plus their margins: no layout needed)."""
        if not self.size.width or not self.is_attached:
            return  # not laid out yet: the resize comes
        keys = list(self.query_children(FooterKey))
        palette = [k for k in keys if k.has_class("-command-palette")]
        room = self.size.width - sum(_width(k) + 1 for k in palette)  # 1: its left border
        for key in keys:
            if key in palette:
                continue
            room -= _width(key)
            fits = room >= 0
            if key.display != fits:
                key.display = fits


def _width(key: FooterKey) -> int:
    """The columns ``key`` takes: its label (its parts' paddings included), its own
    padding and its margins."""
    margin, padding = key.styles.margin, key.styles.padding
    return key.render().cell_len + margin.left + margin.right + padding.left + padding.right
