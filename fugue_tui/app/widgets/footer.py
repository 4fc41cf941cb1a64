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
"""

from __future__ import annotations

from typing import Any

from textual.widgets import Footer


class KeyFooter(Footer):
    """A ``Footer`` that recomposes only when its content changes (see the module doc)."""

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
