"""Control files and campaign state bookkeeping."""

from __future__ import annotations

import time

import pytest

from engine.errors import ConfigError
from engine.events import EventWriter
from engine.observe.follow import CampaignFollower, last_session_offset
from engine.observe.state import CampaignState, rebuild
from engine.runner.control import Inbox, send


def _run_dir(tmp_path):
    (tmp_path / "runner.jsonl").write_text("")
    return tmp_path


def test_commands_arrive_once_in_order(tmp_path):
    run_dir = _run_dir(tmp_path)
    inbox = Inbox(run_dir, since=time.time() - 1)
    send(run_dir, "skip", "3")
    send(run_dir, "retry", "ab12")
    send(run_dir, "abort")
    assert [(c["cmd"], c["cell"]) for c in inbox.poll()] == [
        ("skip", "3"), ("retry", "ab12"), ("abort", None)]
    assert inbox.poll() == []


def test_commands_older_than_the_runner_are_dropped(tmp_path):
    run_dir = _run_dir(tmp_path)
    send(run_dir, "kill", "1")
    inbox = Inbox(run_dir, since=time.time() + 1)
    assert inbox.poll() == []
    assert list((run_dir / "control").iterdir()) == []


@pytest.mark.parametrize("args, message", [
    (("explode", "1"), "unknown control command 'explode'"),
    (("kill", None), "needs a cell"),
])
def test_bad_commands(tmp_path, args, message):
    with pytest.raises(ConfigError, match=message):
        send(_run_dir(tmp_path), *args)


def test_not_a_run_folder(tmp_path):
    with pytest.raises(ConfigError, match="not a campaign run folder"):
        send(tmp_path, "abort")


def _session(run_dir, cell_events_dir, session):
    runner = EventWriter(run_dir / "runner.jsonl", campaign="c")
    runner.emit("campaign_started", cells=1, run_dir=str(run_dir), device="cpu", session=session)
    runner.emit("queued", cell="k1", index=1, label="D_ens seq pass 1")
    events = cell_events_dir / f"{session}.jsonl"
    runner.emit("cell_started", cell="k1", index=1, label="D_ens seq pass 1", attempt=1,
                events=str(events), pid=123, log_path="x.log")
    cell = EventWriter(events, cell="k1", attempt=1)
    cell.emit("started", pid=123)
    cell.emit("job_started", job_id="j0")
    cell.emit("job_progress", job_id="j0", epoch=1, epochs=2, step=5, steps=5, samples=80,
              loss=0.5, elapsed=1.0, epoch_end=True, train_sps=80.0, val_acc=0.9, val_loss=0.3)
    cell.emit("summary", T_group=1.5)
    cell.close()
    runner.emit("done", cell="k1", attempt=1, exit_code=0, error="")
    runner.emit("campaign_done", ok=True, exit_code=0, failed=0)
    runner.close()


def test_state_from_events_and_sessions(tmp_path):
    run_dir, cells = tmp_path / "run", tmp_path / "cells"
    run_dir.mkdir()
    cells.mkdir()
    _session(run_dir, cells, "first")
    offset = last_session_offset(run_dir)
    _session(run_dir, cells, "second")
    assert last_session_offset(run_dir) > offset
    state = rebuild(run_dir)
    cell = state.cells["k1"]
    assert (state.state, state.exit_code, cell.state, cell.attempt) == ("done", 0, "done", 1)
    assert cell.T_group == 1.5
    job = cell.jobs["j0"]
    assert (job.epoch, job.samples, job.val_acc, job.train_sps) == (1, 80, 0.9, 80.0)
    # the cell's own events come before the runner's end event for it
    kinds = [e["type"] for e in CampaignFollower(run_dir, last_session_offset(run_dir)).poll()]
    assert kinds.index("summary") < kinds.index("done") < kinds.index("campaign_done")


def test_state_ignores_a_stale_attempts_lines():
    state = CampaignState()
    state.apply({"type": "queued", "campaign": "c", "cell": "k", "index": 1, "label": "x", "ts": 0})
    state.apply({"type": "cell_started", "campaign": "c", "cell": "k", "index": 1, "label": "x",
                 "attempt": 2, "events": "e", "ts": 1})
    state.apply({"type": "summary", "cell": "k", "attempt": 1, "T_group": 9.0, "ts": 2})
    assert state.cells["k"].T_group is None and state.cells["k"].state == "running"


# --------------------------------------------------------------------------- cell references

def _started_run_dir(tmp_path, keys=("aa11", "ab22", "c333"), sessions=1):
    """A run folder whose runner announced ``keys`` as cells 1..n (the last session counts)."""
    runner = EventWriter(tmp_path / "runner.jsonl", campaign="c")
    for session in range(sessions):
        current = keys if session == sessions - 1 else keys[:1]
        runner.emit("campaign_started", cells=len(current), run_dir=str(tmp_path),
                    device="cpu")
        for i, key in enumerate(current, start=1):
            runner.emit("queued" if i > 1 else "skipped", cell=key, index=i,
                        label=f"E{i} seq pass 1")
    runner.close()
    return tmp_path


@pytest.mark.parametrize("ref", ["0", "4", "99"])
def test_an_index_out_of_range_is_refused_naming_it_and_the_range(tmp_path, ref):
    run_dir = _started_run_dir(tmp_path)
    with pytest.raises(ConfigError) as info:
        send(run_dir, "kill", ref)
    message = str(info.value)
    assert f"'{ref}'" in message and "from 1 to 3" in message and "\n" not in message
    assert not (run_dir / "control").exists()  # nothing queued


def test_cell_refs_the_runner_resolves_are_accepted(tmp_path):
    run_dir = _started_run_dir(tmp_path, sessions=2)  # an earlier session had 1 cell
    for ref in ("1", "3", "aa", "ab22", "c"):
        send(run_dir, "kill", ref)
    assert len(list((run_dir / "control").glob("*.json"))) == 5


def test_unknown_and_ambiguous_key_prefixes_are_refused(tmp_path):
    run_dir = _started_run_dir(tmp_path)
    with pytest.raises(ConfigError, match="no cell 'zz'.*from 1 to 3"):
        send(run_dir, "retry", "zz")
    with pytest.raises(ConfigError, match="prefix 'a' matches 2 cells"):
        send(run_dir, "skip", "a")


def test_cli_control_kill_99_exits_2_with_one_line(tmp_path, capsys):
    from fugue_tui.cli import main

    run_dir = _started_run_dir(tmp_path)
    assert main(["control", str(run_dir), "kill", "99"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and len(err.splitlines()) == 1
    assert err.startswith("fugue-tui: error: control kill: no cell '99'") and "1 to 3" in err
