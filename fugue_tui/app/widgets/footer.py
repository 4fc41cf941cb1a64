"""The key footer of every screen: Textual's ``Footer``, recomposed only when what it shows
changed.

Textual's footer removes and mounts all its keys again whenever its screen publishes a
bindings update — on every focus change, and on every suspend and resume of the screen
(``?`` opening the help and closing it, a dialog). That recomposition costs tens of
milliseconds of the UI thread (more on a busy machine) and ran while the help was
opening, and again, pointlessly, for the run screen hidden under it. This footer compares
what it would show (keys, their display, descriptions, enabled, tooltips) with what it shows,
and recomposes only on a difference, and never while its screen is hidden (the resume
publishes a bindings update of its own); when only some keys became enabled or disabled
(the run screen's retry/skip/kill at each cell end) it marks them in place; and when keys
only went away or came back (the plan form's Tab between a text field, where ``?`` and
``q`` type, and a checkbox, where they act: 6 of 20 Tabs over the form), it hides or shows
the keys it holds, in place: it recomposes only for a key it has never held.

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
    #: How many times only keys' enabled states changed, set in place (tests read it).
    restyles = 0
    #: How many times keys were hidden or shown again in place (tests read it).
    toggles = 0
    #: What the last recomposition mounted (:meth:`_content`); ``_absent``: the actions of
    #: its keys not offered now (hidden until offered again).
    _composed: Any = None
    _absent: frozenset[str] = frozenset()

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
        if self._shown is not None and _without_enabled(content) == _without_enabled(self._shown):
            # the same keys, only some enabled or not (retry/skip/kill at each cell end, twice:
            # the cell ended, the next started): their state in place, no recomposition
            # (all keys removed and mounted again: issue 47, item 2's CPU bound)
            self._shown = content
            self._set_enabled(content)
            self.restyles += 1
            return
        absent = _absent_from(self._composed, content)
        if absent is not None:
            # keys went away or came back, all of them mounted: hide or show them (a Tab
            # between a text field and a checkbox in the plan form)
            self._shown, self._absent = content, absent
            self._set_enabled(content)
            self.fit_keys()
            self.toggles += 1
            return
        self._shown = self._composed = content
        self._absent = frozenset()
        self.recomposes += 1
        await self.recompose()
        self.fit_keys()

    def _set_enabled(self, content: Any) -> None:
        """Each shown key enabled as ``content`` (:meth:`_content`) says: a key shows the
        first binding of its action (as :meth:`Footer.compose` chooses)."""
        keys, palette, _compact = content
        enabled: dict[str, bool] = {}
        for _key, _display, _description, action, on, _tooltip, _group in keys:
            enabled.setdefault(action, on)
        for key in self.query(FooterKey):
            on = palette[2] if key.has_class("-command-palette") and palette else \
                enabled.get(key.action)
            if on is not None and key._disabled == on:
                # as FooterKey's constructor marks it (its clicks read the flag)
                key._disabled = not on
                key.set_class(not on, "-disabled")

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
            if key.action in self._absent:
                fits = False  # not offered now (:meth:`_recompose_if_changed`)
            else:
                room -= _width(key)
                fits = room >= 0
            if key.display != fits:
                key.display = fits


def _without_enabled(content: Any) -> Any:
    """:meth:`KeyFooter._content` without the keys' enabled states."""
    keys, palette, compact = content
    return (tuple(k[:4] + k[5:] for k in keys),
            palette[:2] + palette[3:] if palette else palette, compact)


def _firsts(keys: Any) -> dict[str, tuple]:
    """Action → what its key shows (the action's first binding, as :meth:`Footer.compose`
    chooses), in the footer's order; enabled states left out."""
    out: dict[str, tuple] = {}
    for key, display, description, action, _enabled, tooltip, group in keys:
        out.setdefault(action, (key, display, description, tooltip, group))
    return out


def _absent_from(composed: Any, content: Any) -> frozenset[str] | None:
    """The mounted actions ``content`` does not offer, when ``content`` shows a subset of
    what ``composed`` mounted (the same keys, descriptions and order, the same palette key
    and compactness; no binding groups, which Textual mounts inside a ``KeyGroup``);
    ``None`` when it does not (a recomposition is needed)."""
    if composed is None:
        return None
    (old_keys, old_palette, old_compact), (keys, palette, compact) = composed, content
    strip = (lambda p: p[:2] + p[3:] if p else p)  # noqa: E731 - the palette sans enabled
    if compact != old_compact or strip(palette) != strip(old_palette):
        return None
    mounted, offered = _firsts(old_keys), _firsts(keys)
    if any(shown[4] is not None for shown in mounted.values()):
        return None
    if any(mounted.get(action) != shown for action, shown in offered.items()):
        return None
    if [a for a in mounted if a in offered] != list(offered):
        return None  # another order
    return frozenset(mounted) - frozenset(offered)


def _width(key: FooterKey) -> int:
    """The columns ``key`` takes: its label (its parts' paddings included), its own
    padding and its margins."""
    margin, padding = key.styles.margin, key.styles.padding
    return key.render().cell_len + margin.left + margin.right + padding.left + padding.right
