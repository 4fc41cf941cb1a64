"""Issue 47, item 8 — the clocks disagreed: the ETA froze between cell ends (``ETA 1:04`` at
0:33 and at 0:42) and underestimated early with nothing to say so; one screen showed three
elapsed times (0:21, 0:06, 0:15). One clock per thing, labelled, ticking every second; the
ETA counts down between cell ends with its uncertainty while it has little to go on."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from engine.observe.state import CampaignState
from fugue_tui.app.app import FugueApp
from fugue_tui.app.models.eta import Eta, campaign_eta
from fugue_tui.app.screens.run import RunScreen
from fugue_tui.app.widgets.cell_table import CellTable
from tests.app_screen import screen_text, until
from tests.unit.fugue_tui.app.test_app_run_screen import T0, _write

SIZE = (160, 48)
LABELS = ("D_ens seq pass 1", "D_ens seq pass 2", "D_ens seq pass 3", "D_ens seq pass 4")


def _runner(kind: str, dt: float, **fields) -> dict:
    return {"ts": T0 + dt, "type": kind, "campaign": "clocks", **fields}


def _start(run: Path, i: int, dt: float) -> dict:
    attempt = run / "cells" / f"c{i}" / "attempt-1"
    attempt.mkdir(parents=True, exist_ok=True)
    (attempt / "cell.log").write_text(f"cell {i}\n")
    return _runner("cell_started", dt, cell=f"{i}" * 16, index=i + 1, label=LABELS[i],
                   attempt=1, pid=100 + i, events=str(attempt / "events.jsonl"),
                   log_path=str(attempt / "cell.log"))


def _campaign(tmp_path: Path) -> Path:
    """Four seq cells: the first took 10 s (T0 to T0+10), the second runs since T0+10."""
    run = tmp_path / "runs" / "clocks"
    _write(run / "runner.jsonl", [
        _runner("campaign_started", 0, cells=4, device="cpu", run_dir=str(run), runner_pid=1,
                resume=False),
        *(_runner("queued", 0, cell=f"{i}" * 16, index=i + 1, label=label)
          for i, label in enumerate(LABELS)),
        _start(run, 0, 0),
        _runner("done", 10, cell="0" * 16, attempt=1, exit_code=0, error=""),
        _start(run, 1, 10)])
    return run


def _header(app) -> str:
    return "\n".join(screen_text(app).splitlines()[:3])


def test_the_eta_counts_down_between_cell_ends_with_its_uncertainty(tmp_path, monkeypatch):
    """The running cell overran its executor's mean (15 s against 10): the ETA read the same
    at T0+25 and T0+28 (``0:20``, the queued cells alone). It now counts down from the
    estimate made at the last cell end, and says it rests on one measured cell. A cell end
    recomputes it: two cells measured, a smaller spread."""
    monkeypatch.chdir(tmp_path)
    run = _campaign(tmp_path)
    now = [T0 + 25]

    async def scenario():
        app = FugueApp(attach=str(run), clock=lambda: now[0])
        async with app.run_test(size=SIZE) as pilot:
            # at the end of cell 1 (T0+10): cell 2 and the two queued at 10 s each, 30 s;
            # σ = half the mean (one cell measured), 3·5² + 3²·5²/1 = 300: ±17 s
            await until(pilot, lambda: "ETA ~0:15 (±0:17, 1 of 4 cells measured)"
                        in _header(app), what="the ETA at T0+25")
            now[0] = T0 + 28
            await until(pilot, lambda: "ETA ~0:12 (±0:17, 1 of 4 cells measured)"
                        in _header(app), what="the ETA moving at T0+28")
            # cell 2 ends at T0+30 after 20 s: mean 15, σ = stdev(10, 20) ≈ 7.1;
            # two cells left at 15 s: 30 s, 2·50 + 2²·50/2 = 200: ±14 s
            _write(run / "runner.jsonl", [
                _runner("done", 30, cell="1" * 16, attempt=1, exit_code=0, error=""),
                _start(run, 2, 30)])
            now[0] = T0 + 33
            await until(pilot, lambda: "ETA ~0:27 (±0:14, 2 of 4 cells measured)"
                        in _header(app), what="the ETA recomputed at the cell end")
            await pilot.press("q")

    asyncio.run(scenario())


def test_each_clock_is_labelled_and_ticks_every_second(tmp_path, monkeypatch):
    """The campaign's clock (header, ``elapsed``) and the running cell's (the job pane's
    ``cell``, and the cell table's row, which moved in 10 s steps and disagreed with it)
    tick every second and agree."""
    monkeypatch.chdir(tmp_path)
    run = _campaign(tmp_path)
    now = [T0 + 25]

    async def scenario():
        app = FugueApp(attach=str(run), clock=lambda: now[0])
        async with app.run_test(size=SIZE) as pilot:
            screen = await until(pilot, lambda: isinstance(app.screen, RunScreen)
                                 and app.screen)
            table = screen.query_one(CellTable)

            def row(second: int) -> bool:
                return (table.row_count == 4
                        and table.get_cell("1" * 16, "elapsed") == f"0:{second:02d}")

            for second in (25, 26, 27):
                now[0] = T0 + second
                cell = second - 10
                await until(pilot, lambda s=second, c=cell: f"· elapsed 0:{s} ·" in _header(app)
                            and f"[2/4] D_ens seq pass 2 · attempt 1 · cell 0:{c} ·"
                            in screen_text(app) and row(c), what=f"the clocks at T0+{second}")
            await pilot.press("q")

    asyncio.run(scenario())


def _state(*cells: tuple[str, str, float | None, float | None]) -> CampaignState:
    """A campaign of cells ``(label, state, start, end)`` (times in seconds)."""
    state = CampaignState()
    state.apply({"type": "campaign_started", "ts": 0.0, "campaign": "c", "cells": len(cells)})
    for i, (label, kind, start, end) in enumerate(cells):
        key = f"{i}" * 8
        state.apply({"type": "queued", "cell": key, "index": i + 1, "label": label,
                     "campaign": "c"})
        if start is not None:
            state.apply({"type": "cell_started", "cell": key, "attempt": 1, "ts": start,
                         "campaign": "c", "index": i + 1, "label": label})
        if end is not None:
            state.apply({"type": kind, "cell": key, "attempt": 1, "ts": end, "campaign": "c"})
    return state


def test_an_early_eta_says_how_unsure_it_is_and_a_settled_one_does_not():
    """One seq cell measured and a ray cell left that borrows its mean: the early estimate
    shows a wide spread and its basis; once every executor has several close measurements
    the plain countdown remains."""
    early = campaign_eta(_state(("D_ens seq pass 1", "done", 0.0, 10.0),
                                ("D_ens ray pass 1", "running", 10.0, None),
                                ("D_ens ray pass 2", "queued", None, None)), now=12.0)
    assert early is not None and early.left_s == pytest.approx(18.0)
    # σ = the whole borrowed mean: 2·10² + 2²·10²/1 = 600
    assert early.spread_s == pytest.approx(600 ** 0.5)
    assert early.text() == "ETA ~0:18 (±0:24, 1 of 3 cells measured)"
    assert early.text(long=False) == "ETA ~0:18 ±0:24"
    settled = campaign_eta(_state(*[(f"D_ens seq pass {i}", "done", 10.0 * i, 10.0 * i + 10
                                     + (i % 2) * 0.2) for i in range(8)],
                                  ("D_ens seq pass 8", "queued", None, None)), now=80.2)
    assert settled is not None and not settled.uncertain
    assert settled.text(long=False) == "ETA 0:10"
    assert settled.text() == "ETA 0:10 (8 of 9 cells measured)"
    assert campaign_eta(_state(("D_ens seq pass 1", "running", 0.0, None)), now=5.0) is None
    # the estimate used up before the campaign ended: it counts on, overdue
    late = Eta(left_s=-12.0, spread_s=0.0, measured=3, total=4)
    assert late.text(long=False) == "ETA overdue by 0:12"
