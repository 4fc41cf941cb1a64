"""Helpers for dashboard tests: wait for a condition under the pilot, read the screen as
plain text (what a user sees, modal dialogs included)."""

from __future__ import annotations

import time


async def until(pilot, predicate, timeout: float = 10.0, what: str = "condition"):
    """Let the app run until ``predicate()`` is truthy; return its value."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        await pilot.pause(0.05)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}\n"
                         f"{screen_text(pilot.app)}")


def screen_text(app) -> str:
    """The screen as plain text, one line per terminal row."""
    strips = app.screen._compositor.render_strips()  # noqa: SLF001 (no public text export)
    return "\n".join(strip.text.rstrip() for strip in strips)
