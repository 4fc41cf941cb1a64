"""The one window rule (docs/measurement.md, "Which phases fall inside T_group"), executor by
executor: a job's model build falls inside the cell's group window, and the strategy's
job-independent runtime starts before it, in setup.

Real cells of the smallest kind (a linear model on wine, one step) run in this process
(``engine.cell.main.run_cell``, the cell's own code from spec to rows); the cell records its
window's ends on ``time.perf_counter`` in its ``group_end`` phase event, and the probe
plugin ``tests/fixtures/plugins/fugue_window_probe.py`` records the same clock (system-wide
and monotonic on Linux, so comparable across processes) where it is imported and where each
model is built — in the cell, in mp's workers, in mp's pre-warmed parent.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
import torch

from engine.cell.main import run_cell
from engine.cell.output import CellEvents
from engine.define.campaign import load_campaign
from engine.events import read_events
from engine.results.read import read_rows
from engine.runner.supervisor import Runner

TESTS = Path(__file__).resolve().parents[3]
PLUGINS = TESTS / "fixtures" / "plugins"
EXPERIMENTS = """
[experiments.W2]
type = "ensemble"
model = "window_probe"
dataset = "wine"
k = 2
batch_size = 128
epochs = 1
lr = 0.01
[experiments.W1]
type = "ensemble"
model = "window_probe"
dataset = "wine"
k = 1
batch_size = 128
epochs = 1
lr = 0.01
"""


@pytest.fixture
def probe(tmp_path, monkeypatch):
    """The probe plugin, here and in every process the cell starts; its records' folder."""
    monkeypatch.syspath_prepend(str(PLUGINS))
    monkeypatch.setenv("FUGUE_PLUGINS", "fugue_window_probe")
    folder = tmp_path / "window"
    monkeypatch.setenv("FUGUE_WINDOW_DIR", str(folder))
    import fugue_window_probe

    threads = torch.get_num_threads()
    yield folder, fugue_window_probe.records
    torch.set_num_threads(threads)  # the cell set one thread in this process


def _run_cell(tmp_path: Path, exp: str, executor: str, options: str = ""):
    """One cell, run here: its events, group row and job rows."""
    (tmp_path / "exps.toml").write_text(EXPERIMENTS)
    (tmp_path / "c.toml").write_text(
        f'name = "w"\nexperiments = "{exp}"\nexperiments_file = "exps.toml"\n'
        f'executors = ["{executor}"]\ndevice = "cpu"\nthreads = 1\nmonitor = false\n'
        f'runs_dir = "{tmp_path / "runs"}"\n' + options)
    runner = Runner(load_campaign(tmp_path / "c.toml"))
    spec = replace(runner.cell_spec(runner.cells[0], 1), group_id=f"{executor}_0000000a")
    events = CellEvents(spec.events, cell=spec.cell.key, attempt=1)
    try:
        assert run_cell(spec, events) == "ok"
    finally:
        events.close()
    seen = read_events(spec.events)
    window = next(e["window"] for e in seen if e.get("phase") == "group_end")
    group, = read_rows(tmp_path / "runs" / "master_groups.csv")
    jobs = read_rows(tmp_path / "runs" / "master_individual.csv")
    return seen, window, group, jobs


def _inside(records: list[dict], window) -> None:
    builds = [r for r in records if r["what"] == "build"]
    assert builds
    for r in builds:
        assert window[0] <= r["t"] <= window[1], (r, window)


@pytest.mark.parametrize("executor", ["seq", "unified_model"])
def test_in_process_executors_build_inside_and_load_before(tmp_path, probe, executor):
    """seq and unified_model have no runtime of their own: the cell's imports and its one
    host load of the data (``data_load_s``) come before the window, every model build
    inside it."""
    folder, records = probe
    seen, window, group, jobs = _run_cell(tmp_path, "W2", executor)
    _inside(records(folder), window)
    assert len([r for r in records(folder) if r["what"] == "build"]) == 2
    phases = [e["phase"] for e in seen if e["type"] == "phase"]
    assert phases.index("data_load") < phases.index("setup") < phases.index("group_start")
    assert group["window_rule"] == "2" and group["mp_start"] == ""
    # issue 50: the hand-back digests each job's weights after the window, before teardown
    assert phases.index("group_end") < phases.index("hand_back") < phases.index("teardown")
    assert [len(j["weights_sha256"]) for j in jobs] == [64, 64]
    assert float(group["digest_s"]) > 0 and group["save_s"] == group["save_status"] == ""
    assert all(j["worker_start_s"] == "" for j in jobs)  # no per-job worker
    if executor == "seq":
        assert group["parity_contract"] == "exact"  # the reference, by construction
        return
    # unified_model's float32 parity probe (issue 42) runs inside run(), at bucket build
    # time, and is kept out of T_group: the window's length less the probe's interval
    import json

    info = json.loads(group["executor_info"])
    bucket, = info["plan"]
    assert bucket["parity_probe_s"] > 0
    assert info["outside_window_s"] == pytest.approx(bucket["parity_probe_s"], abs=2e-4)
    span = window[1] - window[0]
    assert float(group["T_group"]) == pytest.approx(span - info["outside_window_s"], abs=2e-4)
    assert float(group["T_group"]) < span
    # and the row says what the probe found: exact iff bit-identical on this machine
    identical = bucket["parity_probe"]["outcome"] == "identical"
    assert (group["parity_contract"] == "exact") == identical
    assert group["parity_contract"] in ("exact", "bound:adam_bound(T,lr,betas)")  # adamw


def test_mp_spawn_pays_each_workers_start_inside(tmp_path, probe):
    """Spawned (the legacy form), a worker exists for its job only: its interpreter start
    and imports (the plugin's import record, in the worker) fall inside the window."""
    folder, records = probe
    _, window, group, jobs = _run_cell(tmp_path, "W1", "mp",
                                          '[options.mp]\nstart = "spawn"\n')
    found = records(folder)
    _inside(found, window)
    worker = int(jobs[0]["worker_pid"])
    imports = [r for r in found if r["what"] == "import" and r["pid"] == worker]
    assert len(imports) == 1 and window[0] <= imports[0]["t"] <= window[1]
    assert group["mp_start"] == "spawn" and group["window_rule"] == "2"
    assert group["parity_contract"] == "exact"  # seq's arithmetic by construction
    start = float(jobs[0]["worker_start_s"])
    assert 0 < start < float(group["T_group"])


def test_mp_forkserver_starts_the_warm_parent_in_setup(tmp_path, probe):
    """Forked from the pre-warmed parent: the parent's imports (the plugin's import record,
    in the parent) fall in setup, before the window; each worker imports nothing more and
    builds its model inside the window. The parent was checked: torch imported, CUDA
    never initialised, the forked children not in torch's bad-fork state."""
    folder, records = probe
    _, window, group, jobs = _run_cell(tmp_path, "W2", "mp",
                                          '[options.mp]\nstart = "forkserver"\n')
    found = records(folder)
    _inside(found, window)
    import json

    info = json.loads(group["executor_info"])
    parent = info["parent"]
    setup_s = float(group["setup_s"])
    imports = [r for r in found if r["what"] == "import" and r["pid"] == parent["pid"]]
    assert len(imports) == 1
    assert window[0] - setup_s - 1.0 < imports[0]["t"] < window[0]  # in setup
    workers = {int(j["worker_pid"]) for j in jobs}
    assert not [r for r in found if r["what"] == "import" and r["pid"] in workers]
    assert {r["ppid"] for r in found if r["what"] == "build"} == {parent["pid"]}
    assert parent["torch"] is True and parent["preload"]["cuda_initialized"] is False
    assert parent["bad_fork"] is False and parent["parent_cuda_driver"] is False
    assert parent["start_s"] <= setup_s and parent["stop"] == "exit status 0"
    assert all(w["prewarmed"] is True for w in info["workers"].values())
    assert group["mp_start"] == "forkserver" and group["window_rule"] == "2"
    for job in jobs:
        assert 0 < float(job["worker_start_s"]) < float(group["T_group"])
    # issue 50: each worker held its weights past the window and digested them there
    assert [len(j["weights_sha256"]) for j in jobs] == [64, 64]
    assert float(group["digest_s"]) > 0
    assert all(w["exit"] == 0 for w in info["workers"].values())
