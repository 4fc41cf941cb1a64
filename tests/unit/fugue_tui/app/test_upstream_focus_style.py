"""Upstream behaviour that the plan form works around: in Textual (8.2.8 today) a focus
change restyles the widget — ``Widget.watch_has_focus`` → ``update_node_styles``, every CSS
rule re-matched for it, its children and its component classes — and a compact Input's or
Select's focus look is ``background-tint: $foreground 5%`` under ``:focus`` (issue 47,
item 7: the two restyles of a Tab made it about twice as slow as ``j`` in the tree).

The workaround: the form's :class:`~fugue_tui.app.widgets.campaign_form.FormInput` and
:class:`~fugue_tui.app.widgets.campaign_form.FormSelect` neutralise that ``:focus`` rule and
set the same tint in place. The first tests assert today's upstream behaviour (they fail when
upstream's focus look or its restyle changes: then the fields' look is to be brought in
line); the others, that the form's fields look the same as upstream's, focused or not (an
invalid value included), without the restyle.
"""

from __future__ import annotations

import asyncio
from typing import Any

from textual.app import App, ComposeResult
from textual.color import Color
from textual.widget import Widget
from textual.widgets import Input, Select
from textual.widgets._select import SelectCurrent

from fugue_tui.app.widgets.campaign_form import FormInput, FormSelect

CHOICES = [("a", "a"), ("b", "b")]


class _Host(App[None]):
    AUTO_FOCUS = None  # each field blurred to begin with

    def compose(self) -> ComposeResult:
        yield Input("x", id="up-input", compact=True)
        yield Input("x", id="up-int", type="integer", compact=True)
        yield Select(CHOICES, id="up-select", value="a", compact=True)
        yield FormInput("x", id="our-input", compact=True)
        yield FormInput("x", id="our-int", type="integer", compact=True)
        yield FormSelect(CHOICES, id="our-select", value="a", compact=True)


def _tint(widget: Widget) -> Color:
    """The tint of the part that shows ``widget``'s focus (a Select: its current value)."""
    part = widget.query_one(SelectCurrent) if isinstance(widget, Select) else widget
    return part.styles.background_tint


def _looks() -> dict[str, Any]:
    """Per field: its tint blurred and focused, whether focusing it restyled it, and (the
    integer inputs) the tint focused with an invalid value; the theme's focus tint."""

    async def scenario() -> dict[str, Any]:
        app = _Host()
        restyled: list[Widget] = []
        async with app.run_test(size=(40, 10)) as pilot:
            update_styles = app.update_styles

            def spy(node, animate: bool = True) -> None:  # this app's, not Textual's class
                restyled.append(node)
                update_styles(node, animate=animate)

            app.update_styles = spy  # type: ignore[method-assign]
            out: dict[str, Any] = {"focus": Color.parse(
                app.get_css_variables()["foreground"]).with_alpha(0.05)}
            for wid in ("up-input", "up-select", "our-input", "our-select"):
                widget = app.query_one(f"#{wid}")
                blurred = _tint(widget)
                restyled.clear()
                widget.focus()
                await pilot.pause()
                out[wid] = (blurred, _tint(widget), widget in restyled)
                app.set_focus(None)
                await pilot.pause()
                out[wid + " after"] = _tint(widget)
            for wid in ("up-int", "our-int"):
                box = app.query_one(f"#{wid}", Input)
                box.focus()
                await pilot.pause()
                box.value = "not a number"
                await pilot.pause()
                out[wid] = (box.has_class("-invalid"), _tint(box))
                app.set_focus(None)
                await pilot.pause()
        return out

    return asyncio.run(scenario())


def test_upstream_restyles_on_focus_and_tints_compact_fields() -> None:
    looks = _looks()
    for wid in ("up-input", "up-select"):
        blurred, focused, restyled = looks[wid]
        assert restyled, f"{wid}: upstream no longer restyles on focus (drop the workaround?)"
        assert blurred.a == 0 and looks[wid + " after"].a == 0
        assert focused == looks["focus"], f"{wid}: upstream's focus look changed: {focused}"
    invalid, tint = looks["up-int"]
    assert invalid and tint != looks["focus"] and tint.a > 0  # the error tint wins


def test_form_fields_look_as_upstream_without_the_restyle() -> None:
    looks = _looks()
    for up, ours in (("up-input", "our-input"), ("up-select", "our-select")):
        blurred, focused, restyled = looks[ours]
        assert not restyled, f"{ours} was restyled on focus"
        assert (blurred, focused) == looks[up][:2]
        assert looks[ours + " after"] == looks[up + " after"]
    assert looks["our-int"] == looks["up-int"]  # an invalid value: the error tint, focused
