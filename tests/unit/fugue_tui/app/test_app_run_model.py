"""The run screen's model (issue 41, fugue_tui/app/models/run.py), without Textual: the one
consumer of the event stream for every pane takes each event once and feeds the live view,
the sample stores, the timeline, the curves and the host series from it."""

from __future__ import annotations

import subprocess
import sys

from engine.event_types import MonitorSample
from engine.events import parse_event
from fugue_tui.app.models.run import RunModel, devices_line
from fugue_tui.app.models.series import cell_sample
from fugue_tui.console.live import LiveView
from tests.unit.fugue_tui.console.test_live import cell, recorded, runner, started

D1, D2 = "device 1/2 cuda:0 GPU-aaaa", "device 2/2 cuda:1 GPU-bbbb"


def _samples(key: str, attempt: int, n: int) -> list[dict]:
    return [cell("sample", 1001.0 + i, key, attempt, t=float(i), time=1001.0 + i,
                 cpu_pct=50.0 + i, rss_mib=100.0, gpu_util_pct=None) for i in range(n)]


def _progress(key: str, loss: float, epoch: int = 1, **fields) -> dict:
    return cell("job_progress", 1002.0, key, 1, job_id="j0", epoch=epoch, epochs=2, step=5,
                steps=10, loss=loss, **fields)


def test_the_model_folds_the_stream_into_the_view_as_the_live_view_does():
    """The state and the recent lines are the batch view's, plus the lifecycle lines only
    the run screen shows (campaign started, cell started, done)."""
    events = recorded()
    model = RunModel(clock=lambda: 1100.0)
    model.apply(events)
    alone = LiveView(0, clock=lambda: 1100.0)
    for event in events:
        alone.apply(event)
    assert model.view.state == alone.state
    assert set(alone.recent) <= set(model.view.recent)
    added = [line for line in model.view.recent if line not in alone.recent]
    assert any("campaign started: 4 cells" in line for line in added)
    assert model.view.total == 4
    assert [c.key for c in model.running_cells()] == \
        [c.key for c in alone.state.cells.values() if c.active]


def test_each_event_is_taken_once_by_the_store_it_belongs_to():
    """A cell's monitor samples go to the cell charts and the timeline (once each), its
    progress to the curves; nothing is counted twice and samples never reach the curves."""
    model = RunModel()
    model.apply([runner("campaign_started", 1000.0, cells=1, run_dir="r", device="cpu"),
                 started("c1", 1, 1, 1000.5),
                 cell("started", 1000.6, "c1", 1, executor="seq"),
                 *_samples("c1", 1, 3), _progress("c1", 0.9)])
    series = model.samples.get("c1", 1)
    assert series is not None and list(series.t) == [0.0, 1.0, 2.0]
    assert series.values["cpu_pct"] == type(series.values["cpu_pct"])([50.0, 51.0, 52.0])
    assert model.timeline.version == 3 and list(model.timeline.tracks) == [("c1", 1)]
    assert model.curves.version == 2  # the executor, then one loss point
    assert model.curves.cells["c1"].jobs["j0"].loss == [(0.25, 0.9)]
    assert model.samples.get("c1", 2) is None


def test_samples_of_the_runner_or_of_no_cell_feed_no_store():
    model = RunModel()
    model.apply([runner("sample", 1.0, cell="c1", attempt=1, t=0.0, cpu_pct=1.0),
                 {"v": 1, "ts": 1.0, "type": "sample", "t": 0.0, "cpu_pct": 1.0}])
    assert model.samples.series == {} and model.timeline.version == 0
    assert model.curves.version == 0


def test_the_sample_guard_types_what_it_lets_through():
    sample = cell("sample", 5.0, "c1", 2, t=1.0, cpu_pct=3.0)
    typed = cell_sample(sample)
    assert isinstance(typed, MonitorSample) and typed.cell == "c1" and typed.attempt == 2
    assert cell_sample(parse_event(sample)) == sample
    assert cell_sample(cell("job_progress", 5.0, "c1", 2)) is None
    assert cell_sample({"type": "sample", "cell": None, "t": 1.0}) is None
    assert cell_sample(runner("sample", 5.0, cell="c1", attempt=1)) is None


def test_warnings_come_back_as_notices_in_order_with_the_cells_label():
    model = RunModel()
    notices = model.apply([
        runner("campaign_started", 1000.0, cells=1, run_dir="r", device="cpu"),
        started("c1", 1, 1, 1000.5),
        cell("warning", 1001.0, "c1", 1, message="busy host"),
        cell("job_progress", 1001.5, "c1", 1, job_id="j0", epoch=1, epochs=1),
        runner("warning", 1002.0, message="results file repaired")])
    label = model.view.state.cells["c1"].label
    assert notices == [f"{label}: busy host", "results file repaired"]
    assert model.apply([_progress("c1", 0.5)]) == []


def test_an_event_the_view_cannot_show_leaves_a_line_and_the_others_still_count():
    model = RunModel()
    shown = model.view.apply

    def fragile(event):
        if event.get("type") == "phase":
            raise KeyError("phase")
        shown(event)

    model.view.apply = fragile  # type: ignore[method-assign]
    model.apply([runner("campaign_started", 1000.0, cells=1, run_dir="r", device="cpu"),
                 started("c1", 1, 1, 1000.5), cell("phase", 1000.7, "c1", 1, phase="load"),
                 *_samples("c1", 1, 2)])
    assert "(event 'phase' not shown: 'phase')" in model.view.recent
    assert model.timeline.version == 2 and "c1" in model.view.state.cells


def test_the_host_sample_and_the_runners_liveness_of_a_message():
    model = RunModel(runner_alive=True)
    model.observe({"t": 1.0, "cpu_pct": 12.5, "rss_mib": 900.0}, None)
    assert model.runner_alive is True  # not read this time: unchanged
    assert list(model.host.t) == [1.0] and model.host.latest("rss_mib") == 900.0
    model.observe(None, False)
    assert model.runner_alive is False and len(model.host.t) == 1


def test_the_models_reading_helpers():
    model = RunModel()
    model.apply([runner("campaign_started", 1.0, cells=3, run_dir="r", device="cuda"),
                 {**started("c1", 1, 1, 2.0), "device": D1},
                 {**started("c2", 2, 1, 2.5), "device": D2},
                 cell("sample", 3.0, "c1", 1, t=0.0, gpu_util_pct=87.4, cpu_pct=98.2)])
    assert model.cell("c2") is model.view.state.cells["c2"]
    assert model.cell(None) is None and model.cell("nope") is None
    assert model.active_pids() == {101, 102}
    assert model.finished_count() == 0
    assert model.spans_signature() == (("running", 1), ("running", 1))
    assert model.label_of({"cell": "c1"}) == model.view.state.cells["c1"].label
    assert model.label_of({"cell": "nope"}) == "" and model.label_of({}) == ""
    line = devices_line(model.running_cells())
    assert f"{D1}: {model.view.state.cells['c1'].label} · GPU 87 % · CPU 98 %" in line


def test_the_run_model_loads_without_textual():
    """The model is the panes' data, not a pane: it imports no Textual (the unit tests
    above, and any front end, use it without an app)."""
    code = ("import sys; import fugue_tui.app.models.run; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] == 'textual'))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "[]"


def test_the_run_screens_event_consumers_take_typed_events():
    """The model and the stores it feeds take engine.event_types' events (a JSON document
    is parsed where it comes in), never an event annotated as a plain dict or mapping: the
    check tests/unit/test_types.py runs over the engine, over these modules."""
    from tests.unit.test_types import ROOT, plain_carriers

    found = []
    for name in ("run", "series", "timeline", "curves", "replay"):
        rel = f"fugue_tui/app/models/{name}.py"
        found += plain_carriers(ROOT / rel, rel)
    assert found == []


def test_which_cell_commands_apply():
    """retry, skip and kill only with a live runner that is not stopping; kill a running
    cell, skip a running or queued one, retry a running, failed or killed one."""
    from engine.observe.state import CellState
    from fugue_tui.app.models.run import command_applies, stacks_available

    def cell_in(state: str) -> CellState:
        return CellState(key="k", index=1, label="X seq pass 1", state=state)

    table = {"running": {"retry", "skip", "kill"}, "queued": {"skip"},
             "failed": {"retry"}, "killed": {"retry"}, "done": set()}
    for state, allowed in table.items():
        cell = cell_in(state)
        assert {c for c in ("retry", "skip", "kill")
                if command_applies(c, cell, True, False)} == allowed, state
        assert not any(command_applies(c, cell, False, False) for c in allowed)
        assert not any(command_applies(c, cell, True, True) for c in allowed)
        assert not any(command_applies(c, cell, None, False) for c in allowed)
    running = cell_in("running")
    assert not stacks_available(running)  # no pid, no attempt folder yet
    running.pid, running.log_path = 123, "runs/x/cells/c/attempt-1/cell.log"
    assert stacks_available(running)
    running.state = "done"
    assert not stacks_available(running)
