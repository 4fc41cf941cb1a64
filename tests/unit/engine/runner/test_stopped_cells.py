"""A SIGSTOP'd cell (issue 43): the time its processes spent stopped is counted in T_group,
so the runner measures it (``stopped.json`` in the attempt folder, the group column
``stopped_s``) and the cell's rows warn, as the busy-host rule does.

Real processes and real signals: a torch-free stand-in cell is stopped until the runner's
record shows the stop, then continued; the cell's own rows writer is run on a record."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import engine.cell.main as cell_mod
import engine.runner.attempt as attempt_mod
from engine.cell.output import CellEvents
from engine.cell.protocol import STOPPED, read_stopped, write_stopped
from engine.define.campaign import load_campaign
from engine.events import read_events
from engine.results.columns import GROUP_COLUMNS, GROUPS_FILE
from engine.results.read import read_rows
from engine.runner.supervisor import Runner
from tests.unit.engine.cell.cell_specs import real_cell_spec

REPO = Path(__file__).resolve().parents[4]

#: Waits for a ``go`` file beside its spec, then fails (so the runner writes its row).
CELL = """
import os, sys, time
from pathlib import Path
go = Path(sys.argv[1]).with_name("go")
while not go.exists():
    time.sleep(0.02)
sys.exit(1)
"""


def test_the_runner_records_the_time_a_cell_was_stopped(tmp_path, monkeypatch):
    monkeypatch.setenv("FUGUE_CELL_START", "spawn")
    cells: list[tuple[subprocess.Popen, Path]] = []

    def start_cell(spec_path, log_path, env):
        proc = subprocess.Popen([sys.executable, "-c", CELL, str(spec_path)],
                                env={**env, "PYTHONPATH": str(REPO)}, start_new_session=True)
        cells.append((proc, Path(spec_path).parent))
        return proc

    monkeypatch.setattr(attempt_mod, "start_cell", start_cell)

    def stop_then_continue():
        deadline = time.monotonic() + 60
        while not cells and time.monotonic() < deadline:
            time.sleep(0.01)
        proc, folder = cells[0]
        os.kill(proc.pid, signal.SIGSTOP)
        while time.monotonic() < deadline and not (read_stopped(folder) or 0) > 0:
            time.sleep(0.02)  # until the runner has seen it stopped
        os.kill(proc.pid, signal.SIGCONT)
        (folder / "go").touch()

    runs = tmp_path / "runs"
    campaign = tmp_path / "c.toml"
    campaign.write_text(f'name = "c"\nexperiments = ["D_ens"]\nexecutors = ["seq"]\n'
                        f'passes = 1\ndevice = "cpu"\nruns_dir = "{runs}"\n')
    helper = threading.Thread(target=stop_then_continue, daemon=True)
    helper.start()
    Runner(load_campaign(campaign)).run()
    helper.join(5)
    (row,) = read_rows(runs / GROUPS_FILE)
    assert row["status"] == "failed"
    assert float(row["stopped_s"]) > 0
    assert float(row["stopped_s"]) == read_stopped(cells[0][1])


def test_a_cell_never_stopped_records_zero_and_no_record_is_empty(tmp_path):
    assert read_stopped(tmp_path) is None  # not tracked: the column stays empty
    write_stopped(tmp_path, 0.0)
    assert read_stopped(tmp_path) == 0.0
    (tmp_path / STOPPED).write_text("{not json")
    assert read_stopped(tmp_path) is None


@pytest.fixture(autouse=True)
def _no_stack_dump_handler(monkeypatch):
    """engine.cell.main registers a SIGUSR1 stack dump on stderr; pytest's has no fd."""
    monkeypatch.setattr(cell_mod.faulthandler, "register", lambda *args, **kwargs: None)


def test_the_cells_row_says_stopped_s_and_warns(tmp_path):
    from engine.define.workloads import JobSpec
    from engine.train.loop import JobResult

    spec = real_cell_spec(tmp_path, group_id="seq_0000beef")
    write_stopped(spec.attempt_dir, 7.5)
    job = JobSpec(job_id="D_ens_m0", exp_id="D_ens", index=0, seed=42, model="mlp",
                  dataset="wine", task=None, batch_size=16, epochs=1, lr=0.1, optimizer="sgd")
    events = CellEvents(spec.events, cell="aaaa", attempt=1)
    cell_mod.write_rows(spec, events, [JobResult(job, samples=96, epochs_run=1)],
                        10.0, 0.1, 0.1, {}, None, {})
    events.close()
    (row,) = read_rows(tmp_path / "runs" / GROUPS_FILE)
    assert row["stopped_s"] == "7.5"
    (summary,) = [e for e in read_events(spec.events) if e["type"] == "summary"]
    assert any("stopped (SIGSTOP" in w and "7.5 s" in w for w in summary["warnings"])


def test_stopped_s_follows_time_utc_in_the_group_order():
    """Added at the end when it landed (issue 43); later columns (eager_buckets, issue 45)
    follow it, and the golden header test pins the whole order."""
    assert GROUP_COLUMNS.index("stopped_s") == GROUP_COLUMNS.index("time_utc") + 1
    assert GROUP_COLUMNS.index("stopped_s") < GROUP_COLUMNS.index("eager_buckets")


def test_a_stopped_process_outside_the_session_that_registered_counts(tmp_path):
    """A Ray worker runs in the Ray runtime's session, not the cell's: it is found through
    its registration in the attempt's stacks/ folder (engine.stacks), as the stack dumps
    find it. A real process in a session of its own, registered there, then stopped."""
    from engine.runfolder import AttemptFolder
    from engine.runner.stopped import CHECK_S, StopClock

    folder = AttemptFolder(tmp_path).stacks
    folder.mkdir(parents=True)
    cell = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"],
                            start_new_session=True)
    worker = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; from engine import stacks; "
         "stacks.install('ray-worker'); print('ready', flush=True); time.sleep(60)"],
        env={**os.environ, "PYTHONPATH": str(REPO), "FUGUE_STACKS_DIR": str(folder)},
        start_new_session=True, stdout=subprocess.PIPE, text=True)
    try:
        assert worker.stdout.readline().strip() == "ready"
        clock = StopClock(tmp_path, cell.pid)
        assert worker.pid in {p.pid for p in clock._registered()}
        os.kill(worker.pid, signal.SIGSTOP)
        deadline = time.monotonic() + 10
        while clock.total == 0 and time.monotonic() < deadline:
            time.sleep(CHECK_S)
            clock.check()
        assert clock.total > 0 and read_stopped(tmp_path) == pytest.approx(clock.total, abs=1e-3)
    finally:
        for proc in (worker, cell):
            proc.kill()
            proc.wait()



def test_reading_rows_that_count_stopped_time_says_so(tmp_path):
    """The run warned; a report that averages such a row with others must say it too
    (a new user's finding: report averaged a 1.9 s stop into T_group without a word)."""
    from engine.results.load import load_runs
    from engine.results.store import append_rows

    path = tmp_path / GROUPS_FILE
    base = {c: "" for c in GROUP_COLUMNS}
    rows = [{**base, "group_id": f"seq_{i:08x}", "exp_id": "D_ens", "executor": "seq",
             "status": "ok", "T_group": "2.0", "stopped_s": s}
            for i, s in enumerate(("0.0", "1.851", ""))]
    append_rows(path, rows, GROUP_COLUMNS)
    (note,) = [n for n in load_runs(tmp_path).notes if "stopped" in n]
    assert note.startswith("1 row(s) count time their cell was stopped")
    assert "D_ens seq (1.9 s)" in note
    append_rows(path, [{**rows[0], "group_id": "seq_0000000f", "stopped_s": "0.0"}],
                GROUP_COLUMNS)
    assert sum("stopped" in n for n in load_runs(tmp_path).notes) == 1
