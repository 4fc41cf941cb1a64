"""Part ``dashboard_tab``: how long a Tab between the plan form's fields takes to show, against
``j`` in the catalogue tree, in process (issue 47, item 7: a Tab took 250–560 ms on a quiet
host, 0.6–2.4 s at load 9, while ``j`` took 66–84 ms).

``python -m bench.dashboard_tab [--reps N] [--keys K]`` starts the dashboard in this
process (Textual's headless driver, 160×48, a fresh runs folder, the built-in catalogue) and,
per repetition, presses:

* ``tab``: ``--keys`` (default 20) Tabs over the settings form from its first field
  (``name`` → ``passes`` → … the campaign, watchdog and budget sections);
* ``j``: as many ``j`` in the catalogue tree from its first line;

the two in alternating order (repetition 1 Tabs first, repetition 2 ``j`` first, …), each key
after the screen has settled (0.15 s: a user's pace). One key's latency is the time from the
key event posted to the app (as the terminal driver posts it) until the screen update after
which its whole effect is *drawn* — set, and its cells written to the terminal since the
key: for Tab the focus on the next field and its ``> `` mark, the field left unmarked; for
``j`` the cursor on the next line and the details under the tree. (A state set is not yet
drawn: the mark and the details were set with the key but drawn a frame, 25-40 ms, later
until :mod:`fugue_tui.app.repaint`.) Every screen update is rendered to the terminal's
escape sequences on the way (the headless driver writes nothing; a terminal's driver would),
so the figure includes what a real terminal costs but the write itself; the probe's own
checks are not timed. One untimed pass of each first (imports, first-call costs).

Figures, per repetition:

* ``key_latency_p90_ms``, variants ``tab`` and ``j``: the 90th percentile of the
  repetition's keys. Target ≤ 100 ms;
* ``key_latency_ms``, variants ``tab`` and ``j`` (baseline): the median of the repetition's
  keys. Target ``<1`` worded as a race: Tab never slower than ``j`` (met when the
  per-repetition ratios are below 1, tied when their IQR includes 1);
* ``load_1min``: the machine's load average after each repetition.

The machine is shared: the figures are recorded with the load (no timing in the test suite).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

PART = "dashboard_tab"
SIZE = (160, 48)
#: Seconds between two keys: the screen settles (footer, cursor), as at a user's pace.
SETTLE_S = 0.15
#: Seconds one key may take before the run is abandoned (a key that never shows).
KEY_TIMEOUT_S = 30.0


def figures():
    from bench.results import Figure

    return {
        "p90": Figure("key_latency_p90_ms", "ms", target="<=100",
                      note="90th percentile over a repetition's keys: key event posted to the "
                           "app until the screen update after which it is drawn (Tab: the "
                           "next field focused and marked, the one left unmarked; j: the "
                           "tree's cursor a line down and the details), rendered to escape "
                           "sequences; in process, 160x48"),
        "median": Figure("key_latency_ms", "ms", baseline="j", target="<1",
                         note="median over a repetition's keys, as key_latency_p90_ms: Tab "
                              "between the plan form's fields against j in the catalogue tree"),
        "load": Figure("load_1min", "load", note="1-minute load average after each repetition"),
    }


class KeyProbe:
    """Times keys in a running app: :meth:`press` posts a key and waits for the first screen
    update after which ``shown()`` holds *and* every region ``painted()`` names has been
    written to the terminal since the key (a state set but not yet drawn is not shown: a
    label updated in one frame may reach the screen a frame, 16-40 ms, later), rendering
    every update as a terminal would."""

    def __init__(self, app) -> None:
        self.app = app
        self._waiting: tuple[Callable[[], bool], Callable[[], list], asyncio.Future] | None
        self._waiting = None
        #: Per screen line, the column ranges written since the key was posted.
        self._spans: dict[int, list[tuple[int, int]]] = {}
        self._display = app._display  # noqa: SLF001 (the one place a screen update passes)
        app._display = self._on_display  # noqa: SLF001

    def _on_display(self, screen, renderable) -> None:
        from textual._compositor import ChopsUpdate, CompositorUpdate, LayoutUpdate

        self._display(screen, renderable)
        if isinstance(renderable, CompositorUpdate):
            renderable.render_segments(self.app.console)  # what a terminal driver writes
        # The frame's time, before the probe's own checks (they are not the app's cost)
        now = time.perf_counter()
        if renderable is None or self._waiting is None:
            return
        if isinstance(renderable, ChopsUpdate):
            for y, x1, x2 in renderable.spans:
                self._spans.setdefault(y, []).append((x1, x2))
        elif isinstance(renderable, LayoutUpdate):
            region = renderable.region
            for y in range(region.y, region.y + region.height):
                self._spans.setdefault(y, []).append((region.x, region.x + region.width))
        shown, painted, future = self._waiting
        if not future.done() and shown() and all(self._written(r) for r in painted()):
            future.set_result(now)

    def _written(self, region) -> bool:
        """Whether every cell of ``region`` (screen coordinates) was written since the key."""
        for y in range(region.y, region.y + region.height):
            x, end = region.x, region.x + region.width
            for x1, x2 in sorted(self._spans.get(y, ())):
                if x1 <= x < x2:
                    x = x2
            if x < end:
                return False
        return True

    async def press(self, key: str, character: str | None, shown: Callable[[], bool],
                    painted: Callable[[], list]) -> float:
        """Milliseconds from posting ``key`` until an update shows it: ``shown()`` holds and
        the screen regions ``painted()`` lists (those the key changes) have been written."""
        from textual import events

        future: asyncio.Future = asyncio.get_running_loop().create_future()
        self._spans = {}
        self._waiting = (shown, painted, future)
        start = time.perf_counter()
        self.app.post_message(events.Key(key, character))
        try:
            end = await asyncio.wait_for(future, KEY_TIMEOUT_S)
        finally:
            self._waiting = None
        return (end - start) * 1000


def _mark_label(widget):
    """The widget that shows ``widget``'s focus mark: a checkbox itself, else its row's
    label."""
    from textual.widgets import Checkbox, Label

    if isinstance(widget, Checkbox) or widget.parent is None:
        return widget
    return next((lb for lb in widget.parent.query(".label") if isinstance(lb, Label)), widget)


def _marked(widget) -> bool:
    """Whether the form shows ``widget``'s focus mark (its label, or its row's label)."""
    from textual.widgets import Checkbox

    from fugue_tui.app.widgets.campaign_form import FOCUS_MARK

    label = _mark_label(widget)
    text = label.label if isinstance(label, Checkbox) else getattr(label, "content", "")
    return str(text).startswith(FOCUS_MARK)


def _regions(screen, widgets) -> list:
    """The parts of ``widgets`` on screen (screen coordinates; a widget scrolled out of view
    has none)."""
    from textual.errors import NoWidget

    out = []
    for widget in dict.fromkeys(widgets):
        try:
            region = screen.find_widget(widget).visible_region
        except NoWidget:
            continue
        if region:
            out.append(region)
    return out


def _tree_lines(tree, lines) -> list:
    """The screen rows of ``tree``'s ``lines`` that are in view."""
    from textual.geometry import Region

    box = tree.content_region
    out = []
    for line in lines:
        y = box.y + line - round(tree.scroll_y)
        if box.y <= y < box.bottom:
            out.append(Region(box.x, y, box.width, 1))
    return out


async def _tabs(probe: KeyProbe, screen, keys: int) -> list[float]:
    form_first = screen.query_one("#f-name")
    screen.set_focus(form_first)
    await asyncio.sleep(SETTLE_S * 2)
    out = []
    for _ in range(keys):
        chain = screen.focus_chain
        target = chain[(chain.index(screen.focused) + 1) % len(chain)]
        before = screen.focused
        # focused, its focus style applied (has_focus: set, and the widget restyled, when
        # it handled its Focus event) and its label marked; drawn: both fields (the focus
        # look that went and came) and both labels (the mark that went and came)
        changed = (before, _mark_label(before), target, _mark_label(target))
        out.append(await probe.press(
            "tab", None,
            lambda t=target: screen.focused is t and t.has_focus and _marked(t),
            lambda w=changed: _regions(screen, w)))
        await asyncio.sleep(SETTLE_S)
    return out


async def _js(probe: KeyProbe, screen, keys: int) -> list[float]:
    from fugue_tui.app.widgets.catalogue_pane import HINT
    from fugue_tui.app.widgets.catalogue_tree import CatalogueTree

    tree = screen.query_one(CatalogueTree)
    screen.set_focus(tree)
    tree.cursor_line = 0
    tree.scroll_home(animate=False)
    await asyncio.sleep(SETTLE_S * 2)
    details = screen.query_one("#exp-details")
    out = []
    for _ in range(keys):
        line = tree.cursor_line + 1
        node = tree.get_node_at_line(line)
        data = str(node.data) if node is not None else ""
        # the details under the tree name the experiment under the cursor (a group: how to
        # select), as the form's label names the field with the focus
        expect = HINT if data.startswith("group:") else f"{data}:"
        # drawn: the line the cursor left, the one it is on and the details when they
        # change (from a group to a group they do not)
        moved = () if str(details.content).startswith(expect) else (details,)
        out.append(await probe.press(
            "j", "j",
            lambda n=line, e=expect: tree.cursor_line == n and str(details.content).startswith(e),
            lambda n=line, d=moved: [*_tree_lines(tree, (n - 1, n)), *_regions(screen, d)]))
        await asyncio.sleep(SETTLE_S)
    return out


def p90(values: list[float]) -> float:
    """The 90th percentile (inclusive method: within the values measured)."""
    return statistics.quantiles(values, n=10, method="inclusive")[-1]


async def measure(reps: int, keys: int, tmp: Path) -> dict[str, Any]:
    """Run the dashboard in process and time ``reps`` repetitions of ``keys`` Tabs and
    ``keys`` j's; returns per variant the per-repetition medians and p90s, and the loads."""
    from fugue_tui.app.app import FugueApp
    from fugue_tui.app.screens.plan import PlanScreen
    from fugue_tui.app.widgets.catalogue_tree import CatalogueTree

    app = FugueApp(runs_dir=str(tmp / "runs"))
    medians: dict[str, list[float]] = {"tab": [], "j": []}
    p90s: dict[str, list[float]] = {"tab": [], "j": []}
    loads: list[float] = []
    async with app.run_test(size=SIZE) as pilot:
        deadline = time.monotonic() + 120
        while not (isinstance(app.screen, PlanScreen)
                   and app.screen.query_one(CatalogueTree).experiments
                   and app.screen.result is not None):
            if time.monotonic() > deadline:
                raise RuntimeError("the plan screen did not load its catalogue in 120 s")
            await pilot.pause(0.1)
        screen = app.screen
        probe = KeyProbe(app)
        runs = {"tab": lambda: _tabs(probe, screen, keys), "j": lambda: _js(probe, screen, keys)}
        for variant in runs:  # warm-up, untimed
            await runs[variant]()
        for rep in range(reps):
            order = ("tab", "j") if rep % 2 == 0 else ("j", "tab")
            got = {}
            for variant in order:
                got[variant] = await runs[variant]()
                medians[variant].append(statistics.median(got[variant]))
                p90s[variant].append(p90(got[variant]))
            loads.append(os.getloadavg()[0])
            print(f"rep {rep + 1}/{reps}: tab median {medians['tab'][-1]:.1f} ms, p90 "
                  f"{p90s['tab'][-1]:.1f} ms; j median {medians['j'][-1]:.1f} ms, p90 "
                  f"{p90s['j'][-1]:.1f} ms; load {loads[-1]:.2f}", flush=True)
    return {"median": medians, "p90": p90s, "load": loads}


def main(argv: list[str] | None = None) -> int:
    from bench import prog

    parser = argparse.ArgumentParser(prog=prog(PART), description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reps", type=int, default=10, help="repetitions (default 10)")
    parser.add_argument("--keys", type=int, default=20,
                        help="Tabs (and j's) per repetition (default 20)")
    parser.add_argument("--no-write", action="store_true", help="print only")
    parser.add_argument("--results-dir", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.reps < 1 or not 2 <= args.keys <= 20:
        parser.error("--reps must be >= 1 and --keys between 2 and 20 (the form's fields "
                     "before the executors)")
    load = os.getloadavg()[0]
    if load >= 2:
        print(f"warning: load average {load:.2f} (>= 2): others are using this machine; "
              "the figures are recorded with the load", file=sys.stderr)
    from bench import results as bench_results

    cwd = os.getcwd()
    with tempfile.TemporaryDirectory(prefix="bench-tab-") as tmp_name:
        tmp = Path(tmp_name)
        os.environ["FUGUE_CONFIG_DIR"] = str(tmp / "config")  # no user keymap
        os.chdir(tmp)
        try:
            out = asyncio.run(measure(args.reps, args.keys, tmp))
        finally:
            os.chdir(cwd)
    if args.no_write:
        return 0
    command = f"python -m bench.{PART} --reps {args.reps} --keys {args.keys}"
    figs = figures()
    run_id = bench_results.new_run_id()
    prov = bench_results.provenance(command)
    rows = (bench_results.figure_rows(PART, figs["p90"], out["p90"], run_id, prov)
            + bench_results.figure_rows(PART, figs["median"], out["median"], run_id, prov)
            + bench_results.figure_rows(PART, figs["load"], {"machine": out["load"]},
                                        run_id, prov))
    bench_results.publish(PART, rows, args.results_dir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
