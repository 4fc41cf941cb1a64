"""The state reducer and the follower on typed events (issue 40): the reducer dispatches
on the generated event classes instead of type names, and gives the states it always gave.

``tests/fixtures/dashboard/states.json`` holds the states of the recorded campaigns as the
reducer computed them before it was typed (main at the start of issue 40, by string
comparisons): any change of a state after the typing fails here."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from engine.event_types import CellJobProgress, RunnerCampaignStarted, RunnerCellStarted
from engine.events import Event, EventTail, read_events
from engine.observe.follow import CampaignFollower, last_session_offset
from engine.observe.state import CampaignState, rebuild
from engine.runfolder import RunFolder

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures" / "dashboard"


#: Fields added to the states after they were pinned, left out of the comparison (and
#: checked on their own): a stream cell's arrivals, a job's start and end (issue 51).
ADDED_CELL_FIELDS = ("arrivals",)
ADDED_JOB_FIELDS = ("started_ts", "ended_ts")


def _pinned(state: CampaignState) -> dict:
    """``state`` as a document, without the fields added since the pin."""
    doc = dataclasses.asdict(state)
    for cell in doc["cells"].values():
        for name in ADDED_CELL_FIELDS:
            del cell[name]
        for job in cell["jobs"].values():
            for name in ADDED_JOB_FIELDS:
                del job[name]
    return doc


def _runner_only(run: Path, all_sessions: bool) -> CampaignState:
    """The state of the runner's events alone: what :func:`rebuild` gave when the states
    were pinned, as the recorded runs' ``events`` paths (``@RUNS@/...``) named no file
    then; the follower now finds the cells' files in the run folder (the cells' events:
    :func:`test_the_follower_finds_the_recorded_cells_files_in_the_run_folder`)."""
    offset = 0 if all_sessions else last_session_offset(run)
    state = CampaignState()
    for event in EventTail(RunFolder(run).runner_log, offset).read():
        state.apply(event)
    return state


def _states() -> dict[str, CampaignState]:
    out = {}
    for run in sorted(p for p in (FIXTURES / "runs").iterdir() if p.is_dir()):
        for all_sessions in (False, True):
            out[f"{run.name}:{all_sessions}"] = _runner_only(run, all_sessions)
    state = CampaignState()
    for event in read_events(FIXTURES / "t4_stream.jsonl"):
        state.apply(event)
    out["t4_stream"] = state
    return out


def test_recorded_campaigns_give_the_states_they_always_gave():
    expected = json.loads((FIXTURES / "states.json").read_text())
    states = _states()
    got = {name: _pinned(state) for name, state in states.items()}
    assert json.loads(json.dumps(got, sort_keys=True, default=str)) == expected
    # batch cells have no arrivals (the jobs' times: tests/unit/fugue_tui/app/
    # test_stream_timeline.py)
    cells = [c for state in states.values() for c in state.cells.values()]
    assert cells and all(c.arrivals == {} for c in cells)


def test_the_follower_finds_the_recorded_cells_files_in_the_run_folder():
    """A real recorded run whose ``cell_started`` events name its files where it was
    recorded (``@RUNS@/speed/cells/...``): the follower reads them in the run folder as it
    is now, so the rebuilt state has the cells' own events (their T_group)."""
    run = FIXTURES / "runs" / "speed"
    runner_only, rebuilt = _runner_only(run, False), rebuild(run)
    assert rebuilt.cells.keys() == runner_only.cells.keys()
    assert all(c.T_group is None for c in runner_only.cells.values())
    assert all(c.T_group and c.T_group > 0 for c in rebuilt.cells.values())


def test_typed_events_and_their_documents_give_the_same_state():
    events = read_events(FIXTURES / "t4_stream.jsonl")
    assert all(isinstance(e, Event) for e in events)
    typed, plain = CampaignState(), CampaignState()
    for event in events:
        typed.apply(event)
        plain.apply(event.to_dict())
    assert typed == plain and typed.cells


def test_the_follower_yields_typed_events_in_its_order(tmp_path):
    from engine.event_types import CellSummary, RunnerDone
    from engine.events import EventWriter
    from engine.runfolder import RunFolder

    runner = EventWriter(RunFolder(tmp_path).runner_log, campaign="c")
    cell = EventWriter(tmp_path / "events.jsonl", cell="k", attempt=1)
    runner.emit("campaign_started", cells=1, run_dir=str(tmp_path), device="cpu",
                runner_pid=1, resume=False)
    runner.emit("cell_started", cell="k", index=1, label="E seq", attempt=1,
                events=str(tmp_path / "events.jsonl"), log_path="", pid=2)
    cell.emit("job_progress", job_id="j", epoch=1)
    follower = CampaignFollower(tmp_path)
    first = follower.poll()
    assert [type(e) for e in first] == [RunnerCampaignStarted, RunnerCellStarted,
                                        CellJobProgress]
    runner.emit("done", cell="k", attempt=1, exit_code=0, error="")
    cell.write(CellSummary(group_id="g", status="ok", error="", T_group=1.0, total_samples=1,
                           throughput_group=1.0, setup_s=0.0, data_load_s=None,
                           warnings=[], jobs=[]))
    # the cell's last words come before the runner's end event
    assert [type(e) for e in follower.poll()] == [CellSummary, RunnerDone]
    for writer in (runner, cell):
        writer.close()
