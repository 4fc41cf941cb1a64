"""The Results screen's issue 47 item 10 parts over the committed recording: ``o`` picks the
sort column from a list and ``O`` reverses it (on main ``o`` stepped to the next column), a
speedup column with the very figure ``fugue-tui report`` prints for the row's cell (missing,
never 0, where no seq cell pairs with it), and the columns laid out to the table's width:
no value or header cut at the right edge (on main ``34,475`` read ``34,47`` at 100x30)."""

from __future__ import annotations

import asyncio
import re

from engine.results.analysis import speedups
from engine.results.load import load_runs
from fugue_tui.app.actions import by_id
from fugue_tui.app.app import FugueApp
from fugue_tui.app.models.results import COLUMNS
from fugue_tui.app.screens.results import ResultsScreen, SortPicker
from fugue_tui.app.widgets.fitted_table import ellipsize, fit_widths
from fugue_tui.format import MISSING
from tests.app_screen import screen_text, until
from tests.snapshots.helpers import install

SIZE = (160, 48)
ROWS = 32  # group rows in the recording
#: The fitted table's sizes, in the order tried (one app, resized).
SIZES = ((100, 30), (80, 24), SIZE)


def _cell(table, row: int, column: str) -> str | None:
    """The text of ``column`` in the table's ``row``-th row (None: no such column/row)."""
    try:
        return str(table.get_row_at(row)[[k for k, _, _ in COLUMNS].index(column)])
    except Exception:
        return None


def _expected_speedups(runs_dir) -> dict[tuple, str]:
    """The report's speedup of each cell, as the column prints it, by (experiment, executor,
    features, compile mode, rung): the recording's cells are told apart by those."""
    table = speedups(load_runs(runs_dir), n_boot=0)
    return {(r["exp_id"], r["executor"], r["features"], r["compile_mode"], r["rung"]):
            f"{r['speedup']:.3f}×" for r in table.to_dict("records")}


async def _results(app, pilot):
    return await until(pilot, lambda: isinstance(app.screen, ResultsScreen)
                       and app.screen.query_one("#groups").row_count == ROWS
                       and app.screen, timeout=20, what="the recording's 32 rows")


def test_speedup_column_and_o_picks_the_sort_column_from_a_list(tmp_path, monkeypatch):
    """The speedup column holds each row's cell's figure as the report prints it; ``o``
    opens the list of columns (a letter jumps), Enter sorts by the one picked, ``O``
    reverses, the picker marks the sort; a filter that leaves seq out leaves every speedup
    missing (as ``report --campaign`` of such rows), never 0."""
    monkeypatch.setenv("FUGUE_CONFIG_DIR", str(tmp_path / "config"))
    runs = install(tmp_path)
    expected = _expected_speedups(runs)
    groups = load_runs(runs).groups.to_dict("records")
    wanted = [expected[(g["exp_id"], g["executor"], g["features"], g["compile_mode"],
                        g["rung"])] for g in groups]
    assert "1.000×" in wanted and "1.035×" in wanted and "0.136×" in wanted
    figures = sorted(wanted)

    async def scenario():
        app = FugueApp(results=str(runs))
        async with app.run_test(size=SIZE) as pilot:
            screen = await _results(app, pilot)
            table = screen.query_one("#groups")
            await until(pilot, lambda: [_cell(table, i, "speedup") for i in range(ROWS)]
                        == wanted, what="each row's cell's speedup, as the report's")
            await until(pilot, lambda: "T_group s  cell ×" in screen_text(app)
                        and "o sort by" in screen_text(app).splitlines()[-1],
                        what="the speedup header beside T_group, the footer's 'o sort by'")
            await pilot.press("o")
            picker = await until(pilot, lambda: isinstance(app.screen, SortPicker)
                                 and "Sort the rows by" in screen_text(app) and app.screen,
                                 what="the sort picker")
            options = picker.query_one("#sort-columns")
            # c: compile, then the speedup, headed "cell ×" (a letter jumps to the next header)
            await pilot.press("c", "c")
            await until(pilot, lambda: options.highlighted is not None
                        and options.get_option_at_index(options.highlighted).id == "speedup",
                        what="speedup highlighted")
            await pilot.press("enter")
            await until(pilot, lambda: "> rows · sorted by speedup ↑" in screen_text(app),
                        what="the table sorted by speedup")
            assert _cell(table, 0, "speedup") == figures[0]
            await pilot.press("O")
            await until(pilot, lambda: "> rows · sorted by speedup ↓" in screen_text(app)
                        and _cell(table, 0, "speedup") == figures[-1],
                        what="the sort reversed")
            # the picker marks the sort; escape leaves it be
            await pilot.press("o")
            await until(pilot, lambda: isinstance(app.screen, SortPicker)
                        and "cell ×  (sorted ↓ descending)" in screen_text(app),
                        what="the picker marking the sort")
            await pilot.press("escape")
            await until(pilot, lambda: app.screen is screen, what="the picker closed")
            assert "sorted by speedup ↓" in str(table.border_title)
            # no seq among the rows analysed: no speedup (22 unified rows)
            screen.set_filter("exec:unified")
            await until(pilot, lambda: table.row_count == 22 and all(
                _cell(table, i, "speedup") == MISSING for i in range(22)),
                timeout=20, what="the unified rows, their speedup missing")

    asyncio.run(scenario())
    assert "pick the column to sort" in by_id("results.sort").help  # ? and the palette


def _visible(app, table) -> list[str]:
    """The table's header and rows as the screen shows them, inside its border and scroll
    bar."""
    region = table.scrollable_content_region
    lines = screen_text(app).splitlines()
    return [lines[y][region.x:region.x + region.width] if y < len(lines) else ""
            for y in range(region.y, region.y + region.height)]


def test_no_column_is_cut_at_the_right_edge(tmp_path, monkeypatch):
    """Every header and value shown is whole or ellipsized (``…``), never cut, at 100x30,
    then resized to 80x24 and 160x48: on main the edge cut ``samples/s`` to ``sampl`` and
    ``34,475`` to ``34,47`` at 100x30, ``T_group`` at 80x24. At 160x48 every number up to
    ``ttb ×`` shows, the speedup among them."""
    monkeypatch.setenv("FUGUE_CONFIG_DIR", str(tmp_path / "config"))
    runs = install(tmp_path)
    headers = [h for _, h, _ in COLUMNS]

    def whole(token: str, texts: list[str]) -> bool:
        return token in texts or (token.endswith("…") and any(
            t.startswith(token[:-1]) and len(t) > len(token) - 1 for t in texts))

    def tokens(line: str) -> list[str]:
        return [t for t in re.split(r"\s{2,}", line.strip()) if t]

    async def scenario():
        app = FugueApp(results=str(runs))
        async with app.run_test(size=SIZES[0]) as pilot:
            screen = await _results(app, pilot)
            table = screen.query_one("#groups")
            rows = table._rows  # noqa: SLF001 (the whole texts)

            def cut(size) -> list[str]:
                if app.size != size:
                    return ["(not yet resized)"]
                lines = _visible(app, table)
                if not lines or not lines[0].strip():
                    return ["(nothing drawn yet)"]
                bad = [f"header {t!r}" for t in tokens(lines[0]) if not whole(t, headers)]
                order = [str(table.coordinate_to_cell_key((i, 0)).row_key.value)
                         for i in range(min(table.row_count, len(lines) - 1))]
                for line, key in zip(lines[1:], order, strict=False):
                    texts = list(rows[key])
                    bad += [f"value {t!r}" for t in tokens(line) if not whole(t, texts)]
                return bad

            for size in SIZES:
                if size != SIZES[0]:
                    await pilot.resize_terminal(*size)
                await until(pilot, lambda s=size: not cut(s), what=f"every column whole at {size}")
                if size == SIZE:
                    shown = tokens(_visible(app, table)[0])
                    assert shown[-5:] == ["T_group s", "cell ×", "samples/s", "ttb s", "ttb ×"]

    asyncio.run(scenario())


def test_fit_widths_gives_way_in_the_widest_free_text_and_ends_between_columns():
    natural = [10, 13, 9, 13, 1, 9, 7, 10, 6]
    free = [True, True, True, True, False, False, False, True, True]
    headers = [10, 8, 9, 8, 1, 9, 7, 10, 6]
    assert fit_widths(natural, free, headers, 200) == natural  # room for all: unchanged
    widths = fit_widths(natural, free, headers, 70)
    # the numbers whole, the two widest free columns narrowed (not below their header)
    assert widths[4:7] == [1, 9, 7] and widths[1] == widths[3] == 10
    assert widths[0] == 10 and widths[2] == 9
    # the edge falls between two columns: the ones shown fill the width exactly
    spans = [w + 2 for w in widths]
    assert 70 in {sum(spans[:i + 1]) for i in range(len(spans))}
    assert ellipsize("unified_model", 9) == "unified_…" and ellipsize("seq", 9) == "seq"


def test_speedup_by_row_only_for_ok_rows_with_a_seq_cell():
    """A killed row of a paired cell shows none (its T_group is in no mean); a cell on a
    machine without seq shows none; both pass rows of a paired cell show the cell's."""
    import pandas as pd

    from engine.results.analysis import cell_columns
    from engine.results.load import runs_from_frames
    from fugue_tui.app.models.results import row_key, speedup_by_row

    def row(executor, p, t, host="m1", status="ok"):
        return {"exp_id": "D_ens", "executor": executor, "pass": p, "K": "4", "T_group": t,
                "throughput_group": "10", "status": status, "host": host,
                "cell_key": f"{executor}-{host}"}

    runs = runs_from_frames(pd.DataFrame([
        row("seq", "1", "4"), row("seq", "2", "4"), row("unified_model", "1", "1"),
        row("unified_model", "2", "3"), row("unified_model", "3", "", status="killed"),
        row("unified_model", "1", "2", host="m2")]))
    got = speedup_by_row(runs.groups, speedups(runs, n_boot=0), cell_columns())
    keys = [row_key(r) for r in runs.groups.to_dict("records")]
    assert got == {keys[0]: 1.0, keys[1]: 1.0, keys[2]: 2.0, keys[3]: 2.0}
