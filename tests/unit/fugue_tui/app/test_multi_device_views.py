"""The front ends with several cells running at once (issue 27), driven by recorded
events: the batch live view shows every running cell with its device, the dashboard's run
screen names each device's running cell and ``f`` follows the running cell chosen."""

from __future__ import annotations

from types import SimpleNamespace

from engine.observe.state import CampaignState
from fugue_tui.app.screens.run import RunScreen, devices_line
from tests.unit.fugue_tui.console.test_live import (
    cell,
    render,
    runner,
    started,
    view_of,
)

D1, D2 = "device 1/2 cuda:0 GPU-aaaa", "device 2/2 cuda:1 GPU-bbbb"


def _events():
    return [runner("campaign_started", 1.0, cells=3, run_dir="r", device="cuda"),
            {**started("c1", 1, 1, 2.0), "device": D1},
            {**started("c2", 2, 1, 2.5), "device": D2}]


def test_the_state_keeps_each_running_cells_device():
    state = CampaignState()
    for event in _events():
        state.apply(event)
    assert {k: c.device for k, c in state.cells.items()} == {"c1": D1, "c2": D2}


def test_the_batch_view_shows_every_running_cell_with_its_device():
    text = render(view_of(_events(), now=5.0, total=3))
    assert "D_ens seq pass 1" in text and "D_cv seq pass 1" in text
    assert D1 in text and D2 in text
    # the newest cell ended: the other one is still shown as running, not "last cell"
    ended = _events() + [runner("done", 6.0, cell="c2", attempt=1, exit_code=0, error="")]
    text = render(view_of(ended, now=7.0, total=3))
    assert "[1/3] D_ens seq pass 1" in text and D1 in text and "last cell" not in text


def test_the_run_screen_names_each_devices_cell_and_f_follows_the_chosen_one():
    state = CampaignState()
    for event in _events():
        state.apply(event)
    running = [c for c in state.cells.values() if c.active]
    line = devices_line(running)
    assert line.startswith("running on 2 devices") and f"{D2}: D_cv seq pass 1" in line
    assert devices_line(running[:1]) == ""  # one device: nothing new on screen
    screen = SimpleNamespace(running_cells=lambda: running, follow_key=None)
    assert RunScreen.running_cell(screen).key == "c1"
    screen.follow_key = "c2"  # 'f' pressed on c2's row
    assert RunScreen.running_cell(screen).key == "c2"
    screen.running_cells = lambda: running[:1]  # c2 ended: back to whichever runs
    assert RunScreen.running_cell(screen).key == "c1"


def test_each_devices_line_shows_its_cells_latest_monitor_figures_and_leaves_out_the_missing():
    """The run screen's per-device pane: one line per device with what its cell's monitor
    last read; a CPU-only sample shows no GPU figures (never 0)."""
    state = CampaignState()
    for event in _events() + [
            cell("sample", 3.0, "c1", 1, gpu_util_pct=87.4, mem_used_mib=5120.0, cpu_pct=98.2,
                 rss_mib=900.0),
            cell("sample", 3.1, "c2", 1, gpu_util_pct=None, mem_used_mib=None, cpu_pct=41.0,
                 rss_mib=800.0)]:
        state.apply(event)
    lines = devices_line([c for c in state.cells.values() if c.active]).splitlines()
    assert lines[0] == "running on 2 devices:"
    assert lines[1] == f"  {D1}: D_ens seq pass 1 · GPU 87 % · VRAM 5,120 MiB · CPU 98 %"
    assert lines[2] == f"  {D2}: D_cv seq pass 1 · CPU 41 %"
