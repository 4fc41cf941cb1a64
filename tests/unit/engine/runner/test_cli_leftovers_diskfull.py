"""A full disk in the middle of a run: the cell and the runner say which file could not be
written and why, in one line; the exit status is not 0; no CSV row is half-written; the
campaign stops (every later cell would fail the same way) and ``--resume`` continues it.

The disk is simulated: ``engine.results.store._write`` (the one ``os.write`` of every CSV
append) or an event writer raises ``OSError(ENOSPC)``. Cells are stand-ins (no torch)."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import engine.cell.main as cell_mod
import engine.results.store as results
import engine.runner.attempt as attempt_mod
import engine.runner.cli as runner_cli
import engine.runner.supervisor as runner_mod
from engine.cell.output import TolerantStream
from engine.cell.protocol import REASON_BYTES, read_reason
from engine.define.campaign import load_campaign
from engine.errors import OutputError
from engine.events import EventWriter, read_events
from engine.results.columns import GROUPS_FILE, INDIVIDUAL_FILE
from engine.results.read import read_rows
from engine.runner.supervisor import Runner
from tests.unit.engine.cell.cell_specs import real_cell_spec

REPO = Path(__file__).resolve().parents[4]
NOSPACE = os.strerror(errno.ENOSPC)


def _full(*_args, **_kwargs):
    raise OSError(errno.ENOSPC, NOSPACE)


@pytest.fixture(autouse=True)
def _no_stack_dump_handler(monkeypatch):
    """engine.cell.main.main registers a SIGUSR1 stack dump on stderr; pytest's stderr has no fd."""
    monkeypatch.setattr(cell_mod.faulthandler, "register", lambda *args, **kwargs: None)


# --------------------------------------------------------------------------- the cell

def _spec(tmp_path: Path) -> Path:
    spec = real_cell_spec(tmp_path)
    path = spec.attempt_dir / "spec.json"
    spec.write(path)
    return path


def _writes_rows(spec, events):
    """What a cell does at the end of its group: its job rows and group row, as one unit
    (``spec``: the typed CellRunSpec main passes)."""
    events.emit("job_progress", job_id="D_ens_m0", epoch=1)
    results.append_group(spec.runs_dir, {"group_id": "seq_00000001", "exp_id": "D_ens",
                                            "status": "ok", "cell_key": "aaaa"},
                         [{"job_id": "D_ens_m0", "exp_id": "D_ens"}])
    return "ok"


def test_a_cell_that_cannot_write_its_rows_exits_4_naming_the_file(tmp_path, monkeypatch,
                                                                    capsys):
    spec = _spec(tmp_path)
    runs = tmp_path / "runs"
    monkeypatch.setattr(cell_mod, "run_cell", _writes_rows)
    monkeypatch.setattr(results, "_write", _full)
    assert cell_mod.main([str(spec)]) == cell_mod.EXIT_OUTPUT
    err = capsys.readouterr().err
    expected = f"{runs / INDIVIDUAL_FILE}: {NOSPACE}"
    assert expected in err.splitlines() and "Traceback" not in err
    failed = [e for e in read_events(json.loads(spec.read_text())["events"])
              if e["type"] == "failed"]
    assert len(failed) == 1 and failed[0]["error"] == expected
    assert failed[0]["output_error"] is True and failed[0]["group_written"] is False
    # all or nothing: no file holds a row (nor a header without its rows)
    assert not (runs / INDIVIDUAL_FILE).exists() and not (runs / GROUPS_FILE).exists()


def test_a_cell_whose_events_file_fills_up_never_raises(tmp_path, monkeypatch, capsys):
    """Progress events are dropped (the job trains on); the rows then fail; the failed
    event and the failed row fail too: still one line and exit 4, not status 1."""
    spec = _spec(tmp_path)
    real_emit = EventWriter.emit

    def emit(self, type, **fields):
        if type != "started":
            raise OSError(errno.ENOSPC, NOSPACE)
        return real_emit(self, type, **fields)

    monkeypatch.setattr(EventWriter, "emit", emit)
    monkeypatch.setattr(cell_mod, "run_cell", _writes_rows)
    monkeypatch.setattr(results, "_write", _full)
    assert cell_mod.main([str(spec)]) == cell_mod.EXIT_OUTPUT
    err = capsys.readouterr().err
    assert f"{tmp_path / 'runs' / INDIVIDUAL_FILE}: {NOSPACE}" in err.splitlines()
    assert "Traceback" not in err


def test_lost_progress_events_do_not_fail_a_cell_whose_rows_were_written(tmp_path,
                                                                          monkeypatch, capsys):
    spec = _spec(tmp_path)
    real_emit = EventWriter.emit

    def emit(self, type, **fields):
        if type == "job_progress":
            raise OSError(errno.ENOSPC, NOSPACE)
        return real_emit(self, type, **fields)

    monkeypatch.setattr(EventWriter, "emit", emit)
    monkeypatch.setattr(cell_mod, "run_cell", _writes_rows)
    assert cell_mod.main([str(spec)]) == 0
    events = json.loads(spec.read_text())["events"]
    assert f"warning: events lost: {events}: {NOSPACE}" in capsys.readouterr().err
    assert [r["status"] for r in read_rows(tmp_path / "runs" / GROUPS_FILE)] == ["ok"]


def test_an_oserror_without_a_file_name_is_still_one_line():
    exc = OSError(errno.ENOSPC, NOSPACE)
    assert cell_mod.output_failure(exc) == NOSPACE
    named = OSError(errno.EDQUOT, os.strerror(errno.EDQUOT), "runs/x.csv")
    assert cell_mod.output_failure(named) == f"runs/x.csv: {os.strerror(errno.EDQUOT)}"
    assert cell_mod.output_failure(ValueError("bug")) is None


# --------------------------------------------------------------------------- the runner

CAMPAIGN = """
name = "c"
experiments = ["D_ens"]
executors = ["seq"]
passes = 2
device = "cpu"
runs_dir = "{runs}"
"""

FAKE_CELL = """
import sys
from engine.cell.protocol import CellRunSpec, write_reason
from engine.events import EventWriter
spec = CellRunSpec.read(sys.argv[1])
if sys.argv[3] == "event":
    EventWriter(spec.events).emit("failed", error=sys.argv[2], group_written=False,
                                     output_error=True)
elif sys.argv[3] == "reason":  # events and log unwritable: only the pre-allocated file
    write_reason(spec, sys.argv[2])
sys.exit(4)
"""


@pytest.fixture
def fake_cells(monkeypatch):
    """Cells that exit 4 (could not write their output) after saying ``message``."""
    started: list[Path] = []
    said = {"message": "", "how": "event"}
    monkeypatch.setenv("FUGUE_CELL_START", "spawn")  # a stand-in cell: no zygote to warm

    def start_cell(spec_path, log_path, env):
        started.append(spec_path)
        env = {**env, "PYTHONPATH": str(REPO)}
        with open(log_path, "ab") as out:
            return subprocess.Popen([sys.executable, "-c", FAKE_CELL, str(spec_path),
                                     said["message"], said["how"]], stdout=out,
                                    stderr=subprocess.STDOUT, env=env, start_new_session=True)

    monkeypatch.setattr(attempt_mod, "start_cell", start_cell)
    return started, said


def _campaign(tmp_path: Path) -> Path:
    path = tmp_path / "c.toml"
    path.write_text(CAMPAIGN.format(runs=tmp_path / "runs"))
    return path


def test_a_cell_that_could_not_write_stops_the_campaign_with_its_line(tmp_path, fake_cells):
    started, said = fake_cells
    line = f"{tmp_path / 'runs' / INDIVIDUAL_FILE}: {NOSPACE}"
    said["message"] = line
    runner = Runner(load_campaign(_campaign(tmp_path)))
    with pytest.raises(OutputError) as info:
        runner.run()
    message = str(info.value)
    assert message.startswith(line) and "--resume" in message and "\n" not in message
    assert len(started) == 1  # the second pass never started
    rows = read_rows(tmp_path / "runs" / GROUPS_FILE)
    assert [(r["status"], r["error"]) for r in rows] == [("failed", line)]
    done = read_events(tmp_path / "runs" / "c" / "runner.jsonl")[-1]
    assert done["type"] == "campaign_done" and done["exit_code"] == 2 and line in done["error"]
    assert not (tmp_path / "runs" / "c" / "runner.pid").exists()


def test_a_cell_that_could_only_leave_its_reason_file_is_still_named(tmp_path, fake_cells):
    started, said = fake_cells
    line = f"{tmp_path / 'runs' / GROUPS_FILE}: {NOSPACE}"
    said.update(message=line, how="reason")
    with pytest.raises(OutputError, match="^" + line.replace(".", r"\.")):
        Runner(load_campaign(_campaign(tmp_path))).run()
    (reason,) = (tmp_path / "runs" / "c" / "cells").glob("*/attempt-1/cell.reason")
    assert reason.stat().st_size == REASON_BYTES  # overwritten in place
    assert read_reason(reason) == line


def test_the_cell_log_on_a_full_disk_never_raises():
    class Full:
        def write(self, text):
            raise OSError(errno.ENOSPC, NOSPACE)

        def flush(self):
            raise OSError(errno.ENOSPC, NOSPACE)

    stream = TolerantStream(Full())
    print("warning: monitor did not start", file=stream, flush=True)  # no exception


def test_when_the_runner_cannot_write_either_it_exits_2_with_one_line(tmp_path, fake_cells,
                                                                       monkeypatch, capsys):
    """The cell could say nothing (its event and log on the full disk); the runner's own
    failed row cannot be written: one line naming master_groups.csv, exit 2."""
    monkeypatch.setattr(runner_mod, "preflight", lambda runs_dir: None)  # it fills up later
    monkeypatch.setattr(results, "_write", _full)
    assert runner_cli.main([str(_campaign(tmp_path))]) == 2
    err = capsys.readouterr().err
    (line,) = err.splitlines()
    assert line.startswith(f"fugue-tui: error: {tmp_path / 'runs' / GROUPS_FILE}: {NOSPACE} "
                           "(while cell 1 D_ens seq pass 1 attempt 1 ran; not recorded; "), err
    assert not (tmp_path / "runs" / GROUPS_FILE).exists()


def test_a_runner_events_file_on_a_full_disk_is_one_line_and_no_cell_stays(
        tmp_path, monkeypatch, capsys):
    """runner.jsonl cannot take the cell_started event: the running cell is stopped and
    the error names runner.jsonl (not a traceback)."""
    procs: list[subprocess.Popen] = []
    monkeypatch.setenv("FUGUE_CELL_START", "spawn")  # a stand-in cell: no zygote to warm

    def start_cell(spec_path, log_path, env):
        procs.append(subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"],
                                      start_new_session=True))
        return procs[-1]

    real_emit = EventWriter.emit

    def emit(self, type, **fields):
        if type == "cell_started":
            raise OSError(errno.ENOSPC, NOSPACE)
        return real_emit(self, type, **fields)

    monkeypatch.setattr(attempt_mod, "start_cell", start_cell)
    monkeypatch.setattr(EventWriter, "emit", emit)
    assert runner_cli.main([str(_campaign(tmp_path))]) == 2
    err = capsys.readouterr().err
    (line,) = err.splitlines()
    assert line.startswith(f"fugue-tui: error: {tmp_path / 'runs' / 'c' / 'runner.jsonl'}: "
                           f"{NOSPACE} (while cell 1 D_ens seq pass 1 attempt 1 ran; "), err
    assert len(procs) == 1 and procs[0].poll() is not None  # stopped, not left running


def test_batch_relays_the_runners_stderr_line_by_line(capsys):
    """--batch reads the runner's stderr through a pipe and prints each line on its own
    stderr (above the live view), so the runner's one-line error is seen."""
    from fugue_tui.console.batch import _relay

    read, write = os.pipe()
    with os.fdopen(read, "rb") as stream:
        thread = _relay(stream)
        os.write(write, f"fugue-tui: error: runs/master_groups.csv: {NOSPACE}\n".encode())
        os.close(write)
        thread.join(timeout=10)
    assert capsys.readouterr().err == f"fugue-tui: error: runs/master_groups.csv: {NOSPACE}\n"
