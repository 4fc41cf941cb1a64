"""``cores_used`` (issue 46): the CPU cores a cell's processes used over its group window.

Real cells of the smallest kind run in a child of this process forked into a session of its
own (a cell is a session leader, as the runner starts it), with the monitor on. Each job's
model build keeps a core busy for a fixed wall time (the ``busy_probe`` plugin) and reports
the CPU seconds its process got for it; the row's figure must account for that work. The
shapes of the other executors' processes are in test_core_meter.py (no torch, faster); the
e2e monitor test checks the column filled by every executor's real cells.
"""

from __future__ import annotations

import json
import os
import traceback
from dataclasses import replace
from pathlib import Path

import pytest

from engine.cell.main import run_cell
from engine.cell.output import CellEvents
from engine.define.campaign import load_campaign
from engine.events import read_events
from engine.results.read import read_rows
from engine.runner.supervisor import Runner

TESTS = Path(__file__).resolve().parents[3]
PLUGINS = TESTS / "fixtures" / "plugins"
SPIN_S = 0.5  # per job; long against the monitor's marks and the workers' fork
EXPERIMENTS = """
[experiments.B2]
type = "ensemble"
model = "busy_probe"
dataset = "wine"
k = 2
batch_size = 128
epochs = 1
lr = 0.01
"""


@pytest.fixture
def busy(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(PLUGINS))
    monkeypatch.setenv("FUGUE_PLUGINS", "fugue_busy_probe")
    monkeypatch.setenv("FUGUE_BUSY_S", str(SPIN_S))
    import fugue_busy_probe  # noqa: F401  (registers busy_probe here, where the spec is checked)
    import torch

    # What a cell imports (torch._dynamo through torch.optim: seconds), done once here so
    # that the forked cells inherit it, as a zygote's cells do.
    torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.1)
    threads = torch.get_num_threads()

    yield tmp_path
    torch.set_num_threads(threads)


def _cell(tmp_path: Path, executor: str, options: str = "") -> tuple[dict, list, list]:
    """One cell in a forked child that is its own session's leader: its group row, its
    window's ends and the probes' records."""
    folder = tmp_path / executor
    folder.mkdir()
    os.environ["FUGUE_BUSY_DIR"] = str(folder / "busy")  # the fixture's monkeypatch undoes
    (folder / "exps.toml").write_text(EXPERIMENTS)
    (folder / "c.toml").write_text(
        f'name = "b"\nexperiments = "B2"\nexperiments_file = "exps.toml"\n'
        f'executors = ["{executor}"]\ndevice = "cpu"\nthreads = 1\n'
        f'runs_dir = "{folder / "runs"}"\n' + options)
    runner = Runner(load_campaign(folder / "c.toml"))
    spec = replace(runner.cell_spec(runner.cells[0], 1), group_id=f"{executor}_0000000b")
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        code = 3
        try:
            os.setsid()
            events = CellEvents(spec.events, cell=spec.cell.key, attempt=1)
            try:
                code = 0 if run_cell(spec, events) == "ok" else 1
            finally:
                events.close()
        except BaseException:
            traceback.print_exc()
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    window = next(e["window"] for e in read_events(spec.events) if e.get("phase") == "group_end")
    group, = read_rows(folder / "runs" / "master_groups.csv")
    spins = [json.loads(p.read_text()) for p in (folder / "busy").glob("*.json")]
    return group, window, spins


def _probe_cores(spins: list, window) -> float:
    """The cores the probes themselves say they got inside the window."""
    assert len(spins) == 2 and all(window[0] <= s["t0"] <= s["t1"] <= window[1] for s in spins)
    return sum(s["cpu_s"] for s in spins) / (window[1] - window[0])


def test_a_seq_cell_uses_about_one_core_at_most(busy):
    """seq trains in one thread of one process (threads = 1): one core at most (a margin
    for the cell's other threads), and at least what its jobs' spins got."""
    seq, window, spins = _cell(busy, "seq")
    cores = float(seq["cores_used"])
    assert 0.95 * _probe_cores(spins, window) <= cores <= 1.1
