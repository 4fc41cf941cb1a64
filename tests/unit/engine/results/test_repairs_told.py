"""Repairs of a results file are told, in one line naming the file, what was done and where
the backup is: an append that removes a torn last line or upgrades an old header (the
store returns the line; the cell and the runner send it as a ``warning`` event, which the
front ends show), and ``report``, which leaves a torn last line out (and changes nothing).
Cells are stand-ins here (no torch), except where the cell's own row writer runs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import engine.cell.main as cell_mod
import engine.runner.attempt as attempt_mod
from engine.cell.output import CellEvents
from engine.cell.protocol import CellRunSpec
from engine.define.campaign import load_campaign
from engine.errors import FugueError
from engine.events import read_events
from engine.results.columns import GROUP_COLUMNS, GROUPS_FILE, INDIVIDUAL_FILE
from engine.results.load import load_runs
from engine.results.read import read_rows
from engine.results.store import append_group, append_rows
from engine.runner.supervisor import Runner
from tests.unit.engine.cell.cell_specs import real_cell_spec

REPO = Path(__file__).resolve().parents[4]
HARNESS = REPO / "tests" / "fixtures" / "fugue-harness-cpu"


@pytest.fixture(autouse=True)
def _no_stack_dump_handler(monkeypatch):
    """engine.cell.main.main registers a SIGUSR1 stack dump on stderr; pytest's has no fd."""
    monkeypatch.setattr(cell_mod.faulthandler, "register", lambda *args, **kwargs: None)


def _torn(path: Path) -> bytes:
    """A groups file of one whole row and a torn one (a writer killed mid-row)."""
    append_rows(path, [{"group_id": "seq_1", "exp_id": "D_ens", "executor": "seq",
                        "T_group": 1.5, "status": "ok"}], GROUP_COLUMNS)
    with open(path, "ab") as f:
        f.write(b"seq_2,D_ens,se")
    return path.read_bytes()


def _backup_named_in(line: str, folder: Path) -> Path:
    (backup,) = folder.glob("*.bak-*")
    assert str(backup) in line, line
    return backup


# --------------------------------------------------------------------------- the store

def test_an_append_that_removes_a_torn_last_line_says_so_with_its_backup(tmp_path):
    path = tmp_path / GROUPS_FILE
    before = _torn(path)
    told = append_rows(path, [{"group_id": "seq_3", "status": "ok"}], GROUP_COLUMNS)
    assert len(told) == 1 and "\n" not in told[0]
    line = told[0]
    assert line.startswith(f"{path}: ") and "incomplete last line" in line and "removed" in line
    assert _backup_named_in(line, tmp_path).read_bytes() == before
    assert [r["group_id"] for r in read_rows(path)] == ["seq_1", "seq_3"]


def test_a_header_upgrade_says_which_columns_and_where_the_backup_is(tmp_path):
    path = tmp_path / GROUPS_FILE
    path.write_bytes((HARNESS / GROUPS_FILE).read_bytes())
    added = [c for c in GROUP_COLUMNS if c not in path.read_text().splitlines()[0].split(",")]
    (line,) = append_rows(path, [{"group_id": "seq_9", "status": "ok"}], GROUP_COLUMNS)
    assert line.startswith(f"{path}: ") and f"{len(added)} new columns" in line
    assert added[0] in line
    assert _backup_named_in(line, tmp_path).read_bytes() == (HARNESS / GROUPS_FILE).read_bytes()
    # the next append is a plain one: nothing to tell
    assert append_rows(path, [{"group_id": "seq_10"}], GROUP_COLUMNS) == []


def test_a_group_append_tells_what_it_did_to_either_file(tmp_path):
    _torn(tmp_path / GROUPS_FILE)
    told = append_group(tmp_path, {"group_id": "seq_3", "status": "ok"},
                        [{"group_id": "seq_3", "job_id": "j0"}])
    assert len(told) == 1 and told[0].startswith(f"{tmp_path / GROUPS_FILE}: ")
    assert append_group(tmp_path, {"group_id": "seq_4"}, [{"group_id": "seq_4"}]) == []


# --------------------------------------------------------------------------- the cell

def _spec(tmp_path: Path) -> CellRunSpec:
    return real_cell_spec(tmp_path, group_id="seq_0000beef")


def _warnings(events_file: Path) -> list[str]:
    return [e["message"] for e in read_events(events_file) if e["type"] == "warning"]


def test_the_cells_rows_writer_sends_a_repair_as_a_warning_event(tmp_path, capsys):
    from engine.define.workloads import JobSpec
    from engine.train.loop import JobResult

    spec = _spec(tmp_path)
    _torn(tmp_path / "runs" / GROUPS_FILE)
    job = JobSpec(job_id="D_ens_m0", exp_id="D_ens", index=0, seed=42, model="mlp",
                  dataset="wine", task=None, batch_size=16, epochs=1, lr=0.1, optimizer="sgd")
    events = CellEvents(spec.events, cell="aaaa", attempt=1)
    status = cell_mod.write_rows(spec, events, [JobResult(job, samples=96, epochs_run=1)],
                                 1.0, 0.1, 0.1, {}, None, {})
    events.close()
    assert status == "ok"
    (line,) = _warnings(Path(spec.events))
    assert "incomplete last line" in line
    _backup_named_in(line, tmp_path / "runs")
    assert f"warning: {line}" in capsys.readouterr().err  # and in the cell's log


def test_a_failed_cells_own_row_sends_a_repair_as_a_warning_event(tmp_path, monkeypatch):
    spec = _spec(tmp_path)
    path = Path(spec.events).with_name("spec.json")
    spec.write(path)
    _torn(tmp_path / "runs" / GROUPS_FILE)

    def bad_input(spec, events):
        raise FugueError("D_ens: no such dataset")

    monkeypatch.setattr(cell_mod, "run_cell", bad_input)
    assert cell_mod.main([str(path)]) == 2
    (line,) = _warnings(Path(spec.events))
    assert line.startswith(f"{tmp_path / 'runs' / GROUPS_FILE}: ")
    assert [r["status"] for r in read_rows(tmp_path / "runs" / GROUPS_FILE)] == ["ok", "failed"]


# --------------------------------------------------------------------------- the runner

def test_a_row_the_runner_writes_sends_its_repair_as_a_runner_warning(tmp_path, monkeypatch):
    monkeypatch.setenv("FUGUE_CELL_START", "spawn")  # a stand-in cell: no zygote to warm
    def start_cell(spec_path, log_path, env):  # a cell that dies without a row
        return subprocess.Popen([sys.executable, "-c", "raise SystemExit(1)"],
                                start_new_session=True)

    monkeypatch.setattr(attempt_mod, "start_cell", start_cell)
    runs = tmp_path / "runs"
    runs.mkdir()
    _torn(runs / GROUPS_FILE)
    campaign = tmp_path / "c.toml"
    campaign.write_text(f'name = "c"\nexperiments = ["D_ens"]\nexecutors = ["seq"]\n'
                        f'device = "cpu"\nruns_dir = "{runs}"\n')
    Runner(load_campaign(campaign)).run()
    warnings = [e for e in read_events(runs / "c" / "runner.jsonl") if e["type"] == "warning"]
    assert len(warnings) == 1
    assert warnings[0]["message"].startswith(f"{runs / GROUPS_FILE}: ")
    assert warnings[0]["cell"] and warnings[0]["attempt"] == 1
    _backup_named_in(warnings[0]["message"], runs)


# --------------------------------------------------------------------------- report

def test_report_says_it_left_a_torn_last_line_out(tmp_path, capsys):
    from fugue_tui.cli import main

    path = tmp_path / GROUPS_FILE
    before = _torn(path)
    (note,) = load_runs(tmp_path).notes
    assert note.startswith(f"{path}: ") and "left out" in note
    assert main(["report", str(tmp_path)]) == 0
    err = capsys.readouterr().err.splitlines()
    assert err == [f"fugue-tui: warning: {note}"]
    assert path.read_bytes() == before and not list(tmp_path.glob("*.bak-*"))


def test_report_on_a_whole_file_says_nothing_more(tmp_path, capsys):
    from fugue_tui.cli import main

    path = tmp_path / GROUPS_FILE
    append_rows(path, [{"group_id": "seq_1", "exp_id": "D_ens", "executor": "seq",
                        "T_group": 1.5, "status": "ok"}], GROUP_COLUMNS)
    assert load_runs(tmp_path).notes == []
    assert main(["report", str(tmp_path)]) == 0
    assert capsys.readouterr().err == ""
    assert not (tmp_path / INDIVIDUAL_FILE).exists()
