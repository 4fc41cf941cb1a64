"""The run screen's host bar (issue 48 item 1): the host's CPU and memory and each GPU's
utilisation and memory (the fake NVML), in one line at 80 columns as at 160; no GPU, no
GPU part (never 0); and ``P`` opens the process view, listed in the help and the palette."""

from __future__ import annotations

import asyncio
import sys

from engine.measure.nvml_procs import DeviceReading
from fugue_tui.app.actions import by_id
from fugue_tui.app.app import FugueApp
from fugue_tui.app.screens.processes import ProcessScreen
from fugue_tui.app.screens.run import RunScreen
from fugue_tui.app.widgets.host_bar import LEVELS, HostBar, host_line
from tests.app_screen import until
from tests.fixtures.fake_nvml import FakeDevice, FakeNVML
from tests.unit.fugue_tui.app.test_app_run_screen import T0, recorded_run
from tests.unit.fugue_tui.app.test_run_layout_small import AliveRunner

SAMPLE = {"t": 1.0, "cpu_pct": 340.0, "cores": 16, "rss_mib": 3276.8, "mem_total_mib": 16384.0,
          "devices": [DeviceReading(0, 87.0, 10444.8, 81920.0),
                      DeviceReading(1, None, 512.0, 81920.0)]}


def test_each_form_shorter_and_the_unmeasured_left_out():
    assert host_line(SAMPLE) == ("host CPU 21% · mem 3.2/16.0 GiB · GPU0 87% 10.2/80.0 GiB · "
                                 "GPU1 0.5/80.0 GiB")  # GPU1's utilisation unknown: no 0%
    lengths = [len(host_line(SAMPLE, level)) for level in range(LEVELS)]
    assert lengths == sorted(lengths, reverse=True) and lengths[-1] <= 40
    assert host_line(SAMPLE, LEVELS - 1) == "C21% M20% G0 87% m13% G1 m1%"
    no_gpu = {k: v for k, v in SAMPLE.items() if k != "devices"}
    assert "GPU" not in host_line(no_gpu) and host_line({}) == ""


def test_the_bar_shows_the_fake_gpus_in_one_line_and_p_opens_the_process_view(
        tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    fake = FakeNVML([FakeDevice("GPU-a", total_mib=15360), FakeDevice("GPU-b", offset=5.0)])
    monkeypatch.setitem(sys.modules, "pynvml", fake)  # what NvmlReader imports
    run = recorded_run(tmp_path)

    async def scenario():
        app = FugueApp(runs_dir=str(run.parent), clock=lambda: T0 + 40)
        async with app.run_test(size=(80, 24)) as pilot:
            app.open_run(run, AliveRunner(), 0, attached=True)  # a live runner: the bar
            screen = await until(pilot, lambda: isinstance(app.screen, RunScreen) and app.screen)
            bar = (await until(pilot, lambda: screen.query(HostBar), what="the bar")).first()
            await until(pilot, lambda: "GPU1" in bar._text, what="both GPUs in the bar")
            text = bar._text
            assert "CPU " in text and "GPU0 " in text and "/15.0" in text, text
            assert len(text) <= bar.content_size.width <= 78 and bar.size.height == 1
            # a narrower bar: a shorter form, still one line
            bar.styles.width = 40
            await until(pilot, lambda: bar._text.startswith("C") and "G1 " in bar._text,
                        what="the shortest form")
            assert len(bar._text) <= 38
            assert "processes" in {c.title for c in app.get_system_commands(app.screen)}
            await pilot.press(by_id("run.processes").key)
            await until(pilot, lambda: isinstance(app.screen, ProcessScreen), what="P")
            await pilot.press("escape")
            await until(pilot, lambda: isinstance(app.screen, RunScreen), what="back")
            screen.handle = None  # the runner gone: the host now is not the campaign's
            screen.model.runner_alive = False
            await until(pilot, lambda: not bar.display, what="no bar once the runner ended")

    asyncio.run(scenario())


def test_the_help_lists_the_process_view_keys():
    from fugue_tui.app.screens.modals import help_table

    ids = list(help_table({}, 146).columns[2].cells)
    assert {"run.processes", "procs.sort", "procs.reverse", "procs.kill",
            "procs.kill-pid", "procs.back"} <= set(ids)
