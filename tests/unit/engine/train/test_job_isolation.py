"""Jobs are independent (docs/measurement.md; engine.train.isolation): a plugin model whose
class counts its builds (``shared_counter`` in tests/fixtures/plugins/
fugue_shared_state_probe.py) is built by seq's later jobs — and unified_model's later
members — from state an earlier job changed, while mp's fresh worker per job starts every
job from what a fresh process has. Each job row says which (``job_isolation``), the cell
warns, and a clean model reads ``ok`` everywhere.

Real cells of the smallest kind (a linear model on wine, one epoch) run in this process
(``engine.cell.main.run_cell``, the cell's own code from spec to rows): a cell is a fresh
process of its own, so each test first forgets what earlier tests left in this one
(``isolation.forget``). Ray's Tune refusal is in tests/e2e/test_ray_reuse.py.
"""

from __future__ import annotations

import json
import sys
import types
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from engine.cell.main import run_cell
from engine.cell.output import CellEvents
from engine.define.campaign import load_campaign
from engine.events import read_events
from engine.registry import MODELS
from engine.results.read import read_rows
from engine.runner.supervisor import Runner
from engine.train import isolation
from fugue_tui.live.event_text import Form, event_text

TESTS = Path(__file__).resolve().parents[3]
PLUGINS = TESTS / "fixtures" / "plugins"
EXPERIMENTS = """
[experiments.S3]
type = "ensemble"
model = "shared_counter"
dataset = "wine"
k = 3
batch_size = 128
epochs = 1
lr = 0.01
[experiments.S2]
type = "ensemble"
model = "shared_counter"
dataset = "wine"
k = 2
batch_size = 128
epochs = 1
lr = 0.01
[experiments.C3]
type = "ensemble"
model = "shared_clean"
dataset = "wine"
k = 3
batch_size = 128
epochs = 1
lr = 0.01
"""
CHANGED = "shared state changed: Net.counter"


@pytest.fixture
def probe(monkeypatch):
    """The probe plugin here and in every process the cell starts; this process's
    baselines forgotten (as a fresh cell process has none)."""
    monkeypatch.syspath_prepend(str(PLUGINS))
    monkeypatch.setenv("FUGUE_PLUGINS", "fugue_shared_state_probe")
    import fugue_shared_state_probe  # noqa: F401 - registers the models here

    isolation.forget()
    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)  # the cell set one thread in this process
    isolation.forget()


def _run_cell(tmp_path: Path, exp: str, executor: str, options: str = ""):
    """One cell, run here: its events, group row and job rows."""
    folder = tmp_path / f"{exp}-{executor}"
    folder.mkdir()
    (folder / "exps.toml").write_text(EXPERIMENTS)
    (folder / "c.toml").write_text(
        f'name = "w"\nexperiments = "{exp}"\nexperiments_file = "exps.toml"\n'
        f'executors = ["{executor}"]\ndevice = "cpu"\nthreads = 1\nmonitor = false\n'
        f'runs_dir = "{folder / "runs"}"\n' + options)
    runner = Runner(load_campaign(folder / "c.toml"))
    spec = replace(runner.cell_spec(runner.cells[0], 1), group_id=f"{executor}_0000000c")
    events = CellEvents(spec.events, cell=spec.cell.key, attempt=1)
    try:
        assert run_cell(spec, events) == "ok"
    finally:
        events.close()
    group, = read_rows(folder / "runs" / "master_groups.csv")
    jobs = read_rows(folder / "runs" / "master_individual.csv")
    return read_events(spec.events), group, jobs


def _warnings(seen: list[dict]) -> list[str]:
    summary, = [e for e in seen if e["type"] == "summary"]
    return [w for w in summary.get("warnings") or [] if w.startswith("job isolation")]


def _builds(model: str, n: int) -> list[str]:
    """``n`` jobs of ``model`` in this process, as the training loop judges them."""
    out = []
    for _ in range(n):
        changed = isolation.job_start(model)
        out.append(isolation.job_built(model, MODELS.get(model).build((13,), 3), changed))
    return out


def test_a_class_counter_is_judged_at_each_later_build_a_clean_model_never(probe):
    """The first job in a process sets the baseline; every later build of the counting
    class starts from another count (the class is made by the first build: the after-build
    point catches it); the clean model, built in the same process after it, reads ok."""
    assert _builds("shared_counter", 3) == ["ok", CHANGED, CHANGED]
    assert _builds("shared_clean", 3) == ["ok", "ok", "ok"]
    assert _builds("mlp", 2) == ["ok", "ok"]  # the built-ins keep no state


def test_module_globals_are_watched_shallowly_and_named_in_the_verdict(probe, monkeypatch):
    """A module-level cache filled by the first build, a count, a tuple: changes named in
    order (the first three, then how many more); an object's insides are not looked at."""
    module = types.ModuleType("fugue_iso_globals")
    monkeypatch.setitem(sys.modules, module.__name__, module)
    exec("CACHE = []\nN = 0\nPAIR = (0, 'a')\nOBJ = type('O', (), {})()\nX = 1.5\n"
         "def build(in_shape, n_outputs):\n"
         "    global N, PAIR, X\n"
         "    CACHE.append(N); N += 1; PAIR = (N, 'a'); X += 1; OBJ.hidden = N\n"
         "    return object()\n", module.__dict__)
    real = MODELS.get
    monkeypatch.setattr(MODELS, "get", lambda name, where="": types.SimpleNamespace(
        build=module.build) if name == "iso_globals" else real(name, where))
    assert _builds("iso_globals", 2) == [
        "ok", "shared state changed: fugue_iso_globals.CACHE, fugue_iso_globals.N, "
              "fugue_iso_globals.PAIR and 1 more"]
    assert isolation.shallow(float("nan")) == isolation.shallow(float("nan"))
    assert isolation.shallow(object()) is None and isolation.shallow(len) is None
    assert isolation.shallow("x" * 500).startswith("str len=500 hash=")


def test_ray_tune_refuses_reuse_for_a_counter_but_not_for_a_one_time_cache(probe):
    """The driver's pre-flight (``reuse_refusal``): two builds; a second build that moves
    the state (a counter) refuses actor reuse; a clean model and the built-ins keep it."""
    def jobs(model):
        return [types.SimpleNamespace(model=model, dataset="wine", model_kwargs={},
                                      job_id=f"{model}-{i}") for i in range(3)]

    rng = torch.get_rng_state()
    assert isolation.reuse_refusal(jobs("shared_counter")) == f"shared_counter: {CHANGED}"
    assert torch.equal(torch.get_rng_state(), rng)  # the driver's generator put back
    assert isolation.reuse_refusal(jobs("shared_clean")) is None
    assert isolation.reuse_refusal(jobs("mlp")) is None


def test_seq_carries_the_counter_into_later_jobs_and_says_so(tmp_path, probe):
    """seq trains its jobs in one process: the second and third build from the count the
    first left (their rows say so, the cell's summary warns); the clean model's rows read
    ok without a warning. The column is in the job file, in the registry's order."""
    seen, group, jobs = _run_cell(tmp_path, "S3", "seq")
    assert [j["job_isolation"] for j in jobs] == ["ok", CHANGED, CHANGED]
    warning, = _warnings(seen)
    assert "2 of 3 jobs" in warning and "Net.counter" in warning
    summary, = [e for e in seen if e["type"] == "summary"]  # --batch prints it
    assert f"    warning: {warning}" in event_text(summary, Form.PLAIN)
    from engine.results.columns import INDIVIDUAL_COLUMNS

    assert list(jobs[0]) == list(INDIVIDUAL_COLUMNS)  # appended after it: weights_sha256
    seen, group, jobs = _run_cell(tmp_path, "C3", "seq")
    assert [j["job_isolation"] for j in jobs] == ["ok"] * 3 and not _warnings(seen)


def test_unified_members_built_after_the_first_read_changed(tmp_path, probe):
    """unified_model builds its K members one after another in one process: each member's
    build is judged as a job's, so the second member, built from the count the first left,
    reads changed (whatever route the bucket then takes)."""
    seen, group, jobs = _run_cell(tmp_path, "S2", "unified_model")
    assert [j["job_isolation"] for j in jobs] == ["ok", CHANGED]
    assert _warnings(seen)
    info = json.loads(group["executor_info"])
    assert info["plan"]


@pytest.mark.slow
def test_mp_starts_every_job_in_a_fresh_process(tmp_path, probe):
    """mp: one forked worker per job, each from the pre-warmed parent that never built a
    model: every job builds from a fresh process's count, and no warning."""
    seen, group, jobs = _run_cell(tmp_path, "S2", "mp", '[options.mp]\nstart = "forkserver"\n')
    assert len({j["worker_pid"] for j in jobs}) == 2
    assert [j["job_isolation"] for j in jobs] == ["ok", "ok"] and not _warnings(seen)
