"""One key, one frame (issue 47, item 7): a Tab in the plan form draws the field's focus and
its label's ``> `` mark in the same frame; ``j`` in the catalogue, the tree's cursor and the
details under it. They came a frame (25-40 ms) apart: in Textual (8.2.8 today) a widget
changed by another's key tells the screen from its own message loop, after the screen drew
the key's first change (:mod:`fugue_tui.app.repaint`).

``test_..._upstream`` asserts today's upstream behaviour with :func:`repaint_now` switched
off (it fails when upstream draws both in one frame: then ``repaint_now`` may go); the
others, that the dashboard draws each key's changes in one frame. Frames are read where the
app hands them to the terminal driver (``App._display``), as ``bench.dashboard_tab`` does.
"""

from __future__ import annotations

import asyncio

from textual.geometry import Region

from fugue_tui.app.app import FugueApp
from fugue_tui.app.screens.plan import PlanScreen
from fugue_tui.app.widgets import campaign_form
from fugue_tui.app.widgets.campaign_form import FOCUS_MARK
from fugue_tui.app.widgets.catalogue_tree import CatalogueTree
from tests.app_screen import until

SIZE = (160, 48)


class _Frames:
    """The screen cells each frame wrote, per frame, while recording; and the terminal's
    text as the frames left it (``terminal``: what a user sees, frame after frame)."""

    def __init__(self, app) -> None:
        self.frames: list[dict[int, list[tuple[int, int]]]] = []
        self.recording = False
        self.app = app
        self.terminal: dict[int, list[str]] = {}
        display = app._display  # noqa: SLF001 (the one place a frame passes)

        def recorded(screen, renderable) -> None:
            from textual._compositor import ChopsUpdate, LayoutUpdate

            display(screen, renderable)
            if renderable is not None:
                self._write(renderable)
            if not self.recording:
                return
            rows: dict[int, list[tuple[int, int]]] = {}
            if isinstance(renderable, ChopsUpdate):
                for y, x1, x2 in renderable.spans:
                    rows.setdefault(y, []).append((x1, x2))
            elif isinstance(renderable, LayoutUpdate):
                box = renderable.region
                for y in range(box.y, box.bottom):
                    rows[y] = [(box.x, box.right)]
            self.frames.append(rows)

        app._display = recorded  # noqa: SLF001

    def _write(self, renderable) -> None:
        """Apply a frame's output (cursor moves and text) to :attr:`terminal`."""
        from rich.cells import cell_len
        from rich.segment import ControlType

        console = self.app.console
        x = y = 0
        width = self.app.size.width
        for segment in renderable.__rich_console__(console, console.options):
            if segment.control:
                for code in segment.control:
                    if code[0] == ControlType.CURSOR_MOVE_TO:
                        x, y = code[1], code[2]
                continue
            if segment.text == "\n":
                continue
            row = self.terminal.setdefault(y, [" "] * width)
            for char in segment.text:
                if 0 <= x < width:
                    row[x] = char
                x += cell_len(char)

    def row(self, y: int) -> str:
        """Row ``y`` of the terminal as the frames left it."""
        return "".join(self.terminal.get(y, [])).rstrip()

    @staticmethod
    def wrote(frame, region: Region) -> bool:
        """Whether ``frame`` wrote every cell of ``region``."""
        return all(any(x1 <= region.x and region.right <= x2 for x1, x2 in frame.get(y, ()))
                   for y in range(region.y, region.bottom))

    def first(self, region: Region) -> int | None:
        """The first recorded frame that wrote ``region``."""
        return next((i for i, f in enumerate(self.frames) if self.wrote(f, region)), None)


async def _key(pilot, frames: _Frames, key: str, regions) -> list[int | None]:
    """Press ``key`` and return, per region ``regions()`` names once the key has acted, the
    first frame after the key that wrote it (None: none in 2 s)."""
    frames.frames, frames.recording = [], True
    await pilot.press(key)
    await until(pilot, lambda: all(frames.first(r) is not None for r in regions()), timeout=2,
                what=f"the frames after {key}")
    frames.recording = False
    return [frames.first(r) for r in regions()]


def _label(form, field_id: str):
    return form._rows[field_id].label  # noqa: SLF001 (the label the mark is on)


def _run(tmp_path, monkeypatch, body, size=SIZE) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("FUGUE_CONFIG_DIR", str(tmp_path / "config"))

    async def scenario():
        app = FugueApp(runs_dir="runs")
        frames = _Frames(app)
        async with app.run_test(size=size) as pilot:
            plan = await until(pilot, lambda: isinstance(app.screen, PlanScreen)
                               and app.screen.query_one(CatalogueTree).experiments
                               and app.screen, timeout=20, what="the catalogue")
            await body(pilot, plan, frames)

    asyncio.run(scenario())


def test_tab_draws_the_field_and_its_mark_in_one_frame(tmp_path, monkeypatch):
    """name → passes: the first frame that draws ``passes`` draws its ``> `` too."""
    async def body(pilot, plan, frames):
        plan.set_focus(plan.query_one("#f-name"))
        await pilot.pause(0.3)
        field, label = plan.query_one("#f-passes"), _label(plan.form, "f-passes")
        at = await _key(pilot, frames, "tab", lambda: [field.region, label.region])
        assert str(label.content).startswith(FOCUS_MARK)
        assert at[0] == at[1], f"field drawn in frame {at[0]}, its mark in frame {at[1]}"

    _run(tmp_path, monkeypatch, body)


def test_without_repaint_now_the_mark_comes_a_frame_later_upstream(tmp_path, monkeypatch):
    """A race upstream, not a rule: the screen draws when it goes idle after the first
    change reached it, unless its 60 Hz timer's next tick is still ahead (then the late
    change makes it in). Of ten Tabs at least one draws the mark a frame after its field
    (on a quiet host every one did; under the parallel phase one Tab alone once did not)."""
    monkeypatch.setattr(campaign_form, "repaint_now", lambda widget: None)

    async def body(pilot, plan, frames):
        plan.set_focus(plan.query_one("#f-name"))
        await pilot.pause(0.3)
        split = []
        for field_id in ("f-passes", "f-seed", "f-retries", "f-max-parallel", "f-threads"):
            field, label = plan.query_one(f"#{field_id}"), _label(plan.form, field_id)
            at = await _key(pilot, frames, "tab", lambda f=field, lb=label: [f.region, lb.region])
            split.append(at[1] > at[0])
            await pilot.pause(0.1)
        for field_id in ("f-max-parallel", "f-retries", "f-seed", "f-passes", "f-name"):
            field, label = plan.query_one(f"#{field_id}"), _label(plan.form, field_id)
            at = await _key(pilot, frames, "shift+tab",
                            lambda f=field, lb=label: [f.region, lb.region])
            assert plan.focused is field
            split.append(at[1] > at[0])
            await pilot.pause(0.1)
        assert any(split), (
            "in ten Tabs Textual drew every label with its field's focus in one frame: "
            "repaint_now (fugue_tui/app/repaint.py) and its calls may go")

    _run(tmp_path, monkeypatch, body)


def test_j_draws_the_cursor_and_the_details_in_one_frame(tmp_path, monkeypatch):
    """From a group's line to its first experiment: the details change with the cursor."""
    async def body(pilot, plan, frames):
        tree = plan.query_one(CatalogueTree)
        details = plan.query_one("#exp-details")
        plan.set_focus(tree)
        tree.cursor_line = 1  # a group (offline › ensemble); line 2 is its first experiment
        await until(pilot, lambda: str(details.content).startswith("space selects"),
                    what="the group's hint")
        await pilot.pause(0.3)
        box = tree.content_region
        line = Region(box.x, box.y + 2 - round(tree.scroll_y), box.width, 1)
        at = await _key(pilot, frames, "j", lambda: [line, details.region])
        node = tree.get_node_at_line(2)
        assert tree.cursor_line == 2 and str(details.content).startswith(f"{node.data}:")
        assert at[0] == at[1], f"cursor drawn in frame {at[0]}, the details in frame {at[1]}"

    _run(tmp_path, monkeypatch, body)


def test_a_tab_that_scrolls_the_form_leaves_no_half_drawn_footer(tmp_path, monkeypatch):
    """80x24, alt+c then ten Tabs (the form scrolls; the footer's ``?`` goes as the focus
    enters a text field): the terminal's footer read ``? help f3 all rf4 replay`` — the
    scroll's refresh took in the footer's new layout without drawing it — while the app's
    screen said ``f3 all results f4 replay``. The terminal, as the frames left it, now
    shows what the app's screen shows."""
    from tests.app_screen import screen_text

    async def body(pilot, plan, frames):
        await pilot.press("alt+c")
        await until(pilot, lambda: plan.focused is plan.query_one("#f-name"), what="name")
        for _ in range(10):
            await pilot.press("tab")
            await pilot.pause(0.05)
        await until(pilot, lambda: plan.focused is plan.query_one("#f-precision"),
                    what="the focus on precision")
        bottom = pilot.app.size.height - 1

        def same() -> bool:
            return frames.row(bottom) == screen_text(pilot.app).splitlines()[bottom].rstrip()

        await until(pilot, same, timeout=3, what="the terminal's footer as the screen's")
        assert "? help" not in frames.row(bottom)  # a text field: ? types

    _run(tmp_path, monkeypatch, body, size=(80, 24))
