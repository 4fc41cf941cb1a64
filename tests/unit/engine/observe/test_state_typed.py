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
from engine.events import Event, read_events
from engine.observe.follow import CampaignFollower
from engine.observe.state import CampaignState, rebuild

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures" / "dashboard"


def _states() -> dict:
    out = {}
    for run in sorted(p for p in (FIXTURES / "runs").iterdir() if p.is_dir()):
        for all_sessions in (False, True):
            out[f"{run.name}:{all_sessions}"] = dataclasses.asdict(
                rebuild(run, all_sessions=all_sessions))
    state = CampaignState()
    for event in read_events(FIXTURES / "t4_stream.jsonl"):
        state.apply(event)
    out["t4_stream"] = dataclasses.asdict(state)
    return out


def test_recorded_campaigns_give_the_states_they_always_gave():
    expected = json.loads((FIXTURES / "states.json").read_text())
    assert json.loads(json.dumps(_states(), sort_keys=True, default=str)) == expected


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
