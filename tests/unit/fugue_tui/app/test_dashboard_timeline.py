"""The run screen's campaign timeline and per-job curves (issue 30): Textual-free checks of
the binning (cells running at once summed, gaps not drawn as 0, no GPU panel on a CPU run),
the cell boundaries and the legend, the curves' alignment and shared scale; then the
recorded campaign through the keyboard (``t`` cycles the monitor pane's views, live and in
replay) with snapshots at 80x24 and 100x30."""

from __future__ import annotations

import asyncio
import math
import time

import numpy as np
import pytest

from engine.events import read_events
from engine.observe.state import CampaignState
from fugue_tui.app.app import FugueApp
from fugue_tui.app.models.curves import CurveStore, curves_text, peers, sampled
from fugue_tui.app.models.timeline import CampaignTimeline, legend, marks, render, spans
from fugue_tui.app.screens.run import RunScreen
from fugue_tui.app.widgets.cell_table import CellTable
from fugue_tui.app.widgets.device_charts import DeviceCharts
from tests.app_screen import screen_text, until
from tests.snapshots.helpers import FIXTURES, await_snapshot, install

RUN = FIXTURES / "runs" / "speed"


def recorded() -> list[dict]:
    events = list(read_events(RUN / "runner.jsonl"))
    for path in sorted(RUN.glob("cells/*/*/events.jsonl")):
        events += list(read_events(path))
    return sorted(events, key=lambda e: e["ts"])


def sample(cell, t, **values):
    return {"v": 1, "ts": t, "type": "sample", "cell": cell, "attempt": 1, "time": t,
            **values}


def test_cells_at_once_are_summed_gpu_maxed_and_gaps_stay_missing():
    tl = CampaignTimeline()
    for t in (0.5, 1.5):
        tl.add(sample("a", 100 + t, cpu_pct=50.0, rss_mib=100.0, gpu_util_pct=30.0,
                      mem_used_mib=1000.0))
        tl.add(sample("b", 100 + t, cpu_pct=70.0, rss_mib=200.0, gpu_util_pct=60.0,
                      mem_used_mib=900.0))
    tl.add(sample("a", 103.5, cpu_pct=40.0, rss_mib=100.0, gpu_util_pct=None))
    assert not tl.add({"type": "job_progress", "cell": "a", "attempt": 1, "ts": 1.0})
    _, cpu = tl.binned("cpu_pct", 100.0, 4.0, 4, "sum")
    assert cpu[:2].tolist() == [120.0, 120.0] and math.isnan(cpu[2]) and cpu[3] == 40.0
    _, util = tl.binned("gpu_util_pct", 100.0, 4.0, 4, "max")
    assert util[:2].tolist() == [60.0, 60.0] and np.isnan(util[2:]).all()  # not 0
    _, vram = tl.binned("mem_used_mib", 100.0, 4.0, 4, "max")
    assert vram[0] == 1000.0


def test_recorded_cpu_campaign_timeline_has_every_cell_and_no_gpu_line_at_zero():
    state, tl = CampaignState(), CampaignTimeline()
    for event in recorded():
        state.apply(event)
        tl.add(event)
    assert not tl.measured("gpu_util_pct")
    start = state.started_ts
    cells = spans(state, start)
    assert [s.number for s in cells] == [str(i) for i in range(1, 21)]
    assert all(s.end is not None and s.end > s.start for s in cells)
    lines = marks(cells, cells[-1].end, 60)
    assert ("1" in [label for _, label in lines]) and len(lines) >= 20
    text = render(tl, state, state.ended_ts, 80, 20, color=False)
    assert "cells' CPU % of a core  last" in text
    assert "GPU util % and VRAM (no GPU sampled): not measured" in text
    # the recording's cells were warned that the host was busy (load 3.3 on 2 cores, before
    # competitors were recorded): marked "!", no line of their own
    assert "1! D_ens seq pass 1 0:00–0:11" in text and "more" in text
    assert "the machine was busy" not in text
    assert max(len(line) for line in text.splitlines()) <= 80
    assert len(text.splitlines()) <= 20
    wide = render(tl, state, state.ended_ts, 158, 44, color=False)
    assert "cells' RSS MiB  last" in wide and "20! D_cv unified_model" in wide
    # live: a cell still running reads "now" and its span ends "now"
    assert legend(spans(state, start)[:1], 80, 1)[0].endswith("0:11")


def test_curves_line_up_by_progress_and_compare_executors():
    state, store = CampaignState(), CurveStore()
    for event in recorded():
        state.apply(event)
        store.add(event)
    first = min(state.cells.values(), key=lambda c: c.index)
    assert [c.label for c in peers(state, first)] == ["D_ens seq pass 1",
                                                      "D_ens unified_model pass 1"]
    assert sampled([(0.5, 2.0), (1.0, 1.0)], 4) == [None, 2.0, 2.0, 1.0]
    # a trial stopped after its first of 12 epochs: nothing drawn past it
    assert sampled([(1 / 12, 0.5)], 6) == [0.5, None, None, None, None, None]
    text = curves_text(store, state, first, 80, 12).plain
    assert "D_ens_ens_s0" in text and "unified_model" in text
    assert "Δ+0.000" in text and "more jobs" in text
    assert max(len(line) for line in text.splitlines()) <= 80
    # a newer attempt replaces the curves of the older one
    store.add({"type": "started", "cell": first.key, "attempt": 9, "executor": "seq"})
    assert store.cells[first.key].jobs == {}


@pytest.fixture
def pinned(tmp_path, monkeypatch):
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("FUGUE_CONFIG_DIR", str(tmp_path / "config"))
    (tmp_path / "no-data").mkdir()
    monkeypatch.setenv("FUGUE_DATA_DIR", str(tmp_path / "no-data"))
    monkeypatch.chdir(tmp_path)
    yield
    monkeypatch.undo()
    time.tzset()


@pytest.mark.parametrize("size", [(80, 24), (100, 30)], ids=["80x24", "100x30"])
def test_t_cycles_timeline_and_curves_at_small_sizes(tmp_path, pinned, size):
    runs = install(tmp_path)
    run = runs / "speed"
    last = max(e["ts"] for e in read_events(run / "runner.jsonl"))

    async def scenario():
        app = FugueApp(attach=str(run), clock=lambda: last + 10)
        async with app.run_test(size=size) as pilot:
            screen = await until(pilot, lambda: isinstance(app.screen, RunScreen)
                                 and app.screen.query_one(CellTable).row_count == 20
                                 and app.screen, timeout=20, what="the 20 cells")
            await pilot.press("g")  # the first cell: D_ens seq pass 1
            await pilot.press("t")
            await until(pilot, lambda: "cells' CPU % of a core"
                        in screen_text(app), what="the timeline")
            assert screen.zoomed == "monitor"  # compact: the pane is zoomed to
            await pilot.pause(0.6)
            text = screen_text(app)
            assert "campaign timeline" in text and "not measured" in text
            assert "1! D_ens seq pass 1 0:00" in text
            await await_snapshot(pilot, app, f"run_timeline_{size[0]}x{size[1]}", tmp_path)
            await pilot.press("t")
            await until(pilot, lambda: "Δ+0.000" in screen_text(app), what="the curves")
            await pilot.pause(0.6)
            text = screen_text(app)
            assert "D_ens_ens_s0" in text and "unified_model" in text
            await await_snapshot(pilot, app, f"run_curves_{size[0]}x{size[1]}", tmp_path)
            await pilot.press("t")
            await until(pilot, lambda: "CPU % of one core (cell process tree, no GPU)"
                        in screen_text(app), what="the cell monitor again")
            assert screen.query_one(DeviceCharts).draws > 0

    asyncio.run(scenario())


def test_timeline_in_replay_grows_with_the_replay_clock(tmp_path, pinned):
    runs = install(tmp_path)

    async def scenario():
        app = FugueApp(replay=str(runs / "speed"), replay_speed=5.0)
        async with app.run_test(size=(120, 40)) as pilot:
            screen = await until(pilot, lambda: isinstance(app.screen, RunScreen)
                                 and app.screen, timeout=20, what="the replay")
            await pilot.press("t")
            await until(pilot, lambda: screen.timeline.version > 0
                        and "cells' CPU % of a core  now" in screen_text(app),
                        timeout=20, what="samples replayed, the replay running")
            seen = screen.timeline.version
            start = screen.view.state.started_ts
            assert len(spans(screen.view.state, start)) < 20  # not replayed yet
            await pilot.press("E")  # the rest at once
            await until(pilot, lambda: screen.timeline.version > seen
                        and "cells' CPU % of a core  last" in screen_text(app), timeout=20,
                        what="the whole campaign on the timeline")
            assert len(spans(screen.view.state, start)) == 20

    asyncio.run(scenario())


def test_legend_counts_what_it_left_out():
    from fugue_tui.app.models.timeline import Span

    cells = [Span(str(i), f"E{i} seq pass 1", 10.0 * i, 10.0 * i + 5) for i in range(1, 5)]
    lines = legend(cells, 40, 2)
    assert len(lines) == 2 and lines[-1].endswith("… +2 more")
    shown = sum(line.count(" seq pass 1") for line in lines)
    assert shown == 2  # 2 shown + 2 counted = the 4 cells
    assert legend(cells, 400, 1) == [" · ".join(
        f"{i} E{i} seq pass 1 0:{10 * i:02d}–0:{10 * i + 5:02d}" for i in range(1, 5))]


def test_equal_curves_under_two_executors_draw_alike():
    """Float noise between executors (1e-7) must not fill the shared scale: two equal
    validations read the same, not lowest and highest."""
    state, store = CampaignState(), CurveStore()
    for n, (key, executor, val) in enumerate((("a", "seq", 0.389), ("b", "mp", 0.3890001))):
        state.apply({"v": 1, "ts": 1.0 + n, "type": "cell_started", "campaign": "c",
                     "cell": key, "index": n + 1, "label": f"D_reg {executor} pass 1",
                     "attempt": 1, "events": "", "log_path": "", "pid": 1})
        store.add({"type": "started", "cell": key, "attempt": 1, "executor": executor})
        store.add({"type": "job_progress", "cell": key, "attempt": 1, "job_id": "j0",
                   "epoch": 1, "epochs": 1, "step": 4, "steps": 4, "loss": 0.5,
                   "epoch_end": True, "val_acc": val, "val_metric": "r2"})
    text = curves_text(store, state, state.cells["a"], 80, 10).plain
    seq, mp = (line for line in text.splitlines() if line.startswith("  seq")
               or line.startswith("  mp"))
    assert seq.split("val R²")[1][:12] == mp.split("val R²")[1][:12]
    assert "Δ+0.000" in mp and max(len(line) for line in text.splitlines()) <= 80


def test_gpu_panels_from_the_real_t4_trace():
    """With GPU samples (the committed Tesla T4 trace) the timeline draws utilisation and
    VRAM, device-wide readings, with their latest values."""
    import json

    state, tl = CampaignState(), CampaignTimeline()
    for line in (FIXTURES / "t4_stream.jsonl").read_text().splitlines():
        event = json.loads(line)
        state.apply(event)
        tl.add(event)
    assert tl.measured("gpu_util_pct") and tl.measured("mem_used_mib")
    last = [e for e in map(json.loads, (FIXTURES / "t4_stream.jsonl").read_text()
                           .splitlines()) if e.get("type") == "sample"][-1]
    text = render(tl, state, state.ended_ts or last["ts"], 100, 40, color=False)
    assert "GPU util %  last" in text and "VRAM used MiB  last" in text
    # the trace carries no process-tree CPU or RSS: said so, not drawn at 0
    assert "cells' CPU % of a core: not measured" in text
    vram = f"{last['mem_used_mib']:,.0f}" if last["mem_used_mib"] >= 1000 \
        else f"{last['mem_used_mib']:.3g}"
    assert f"VRAM used MiB  last {vram}" in text
