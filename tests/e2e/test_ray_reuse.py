"""Ray at its best (issue 20): the window rule, reused Tune actors that reset every
trial, actor requests from the cluster's own nodes, and a lean local runtime.

One Ray start serves the cluster tests: a local cluster of two 1-CPU nodes
(``ray.cluster_utils.Cluster``, started once for this module), which the cells join through
``[options.ray] address``. The cells run in this process (``engine.cell.main.run_cell``, the
cell's own code from spec to rows), so the only other processes are Ray's. The probe
plugin ``tests/fixtures/plugins/fugue_reset_probe.py`` records ``time.perf_counter`` (a
system-wide monotonic clock on Linux) where it is imported and where each model is built,
with what the job found in its process; the cell records its window's ends on the same
clock (the ``group_end`` phase event's ``window``).

The lean local runtime is checked on the offline family's Ray cells (``family_run``, shared
with tests/e2e/test_ray.py: no extra Ray start).
"""

from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path

import pytest

from engine.cell.protocol import CellRunSpec
from engine.define.campaign import load_campaign
from engine.events import read_events
from engine.executors.ray.runtime import LEAN_SKIPS
from engine.results.read import read_rows
from engine.runner.supervisor import Runner

pytestmark = pytest.mark.slow

PLUGINS = Path(__file__).resolve().parents[1] / "fixtures" / "plugins"
REPO = Path(__file__).resolve().parents[2]
EXPERIMENTS = """
[experiments.R_pool]
type = "ensemble"
model = "reset_probe"
dataset = "wine"
k = 2
batch_size = 32
epochs = 1
lr = 0.01
[experiments.R_hpo]
type = "hpo"
model = "reset_probe"
dataset = "wine"
epochs = 2
optimizer = "adam"
search_space = { lr = [3e-3, 1e-3, 3e-4], batch_size = [32] }
[experiments.R_shared]
type = "hpo"
model = "shared_counter"
dataset = "wine"
epochs = 1
search_space = { lr = [3e-3], batch_size = [64] }
"""


@pytest.fixture(scope="module")
def cluster():
    """Two local Ray nodes of 1 CPU each (what a cluster of small nodes looks like), with the
    probe plugin importable here and in every Ray worker."""
    import ray
    import ray._common.utils
    import ray._private.utils
    from ray.cluster_utils import Cluster

    from engine.executors.ray.runtime import remove_temp_dir, short_temp_dir

    saved = {k: os.environ.get(k) for k in ("PYTHONPATH", "FUGUE_PLUGINS")}
    os.environ["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(PLUGINS), str(REPO), saved["PYTHONPATH"]) if p)
    os.environ["FUGUE_PLUGINS"] = "fugue_reset_probe,fugue_shared_state_probe"
    temp = short_temp_dir()  # Ray's sockets live under it: a short path
    lean = {"include_dashboard": False, "no_monitor": True, "include_log_monitor": False}
    # The test cluster is joined by address only: it must not become this machine's
    # "current" Ray (a file under /tmp/ray that `ray.init(address="auto")` would follow).
    patch = pytest.MonkeyPatch()
    patch.setattr(ray._private.utils, "write_ray_address", lambda *a, **k: None)
    patch.setattr(ray._common.utils, "reset_ray_address", lambda *a, **k: None)
    nodes = Cluster(initialize_head=True, head_node_args={
        "num_cpus": 1, "temp_dir": str(temp), **lean})
    try:
        nodes.add_node(num_cpus=1, temp_dir=str(temp))
        nodes.wait_for_nodes()
        yield nodes.address
    finally:
        if ray.is_initialized():
            ray.shutdown()
        nodes.shutdown()
        patch.undo()
        remove_temp_dir(temp)
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@pytest.fixture
def probe(tmp_path, monkeypatch, cluster):
    """The probe's records folder for one test, and its reader."""
    import torch

    monkeypatch.syspath_prepend(str(PLUGINS))
    folder = tmp_path / "window"
    monkeypatch.setenv("FUGUE_WINDOW_DIR", str(folder))
    import fugue_reset_probe
    import fugue_shared_state_probe  # noqa: F401 - registers its models here

    from engine.train.backend import apply_backend_flags

    threads = torch.get_num_threads()
    yield folder, fugue_reset_probe.records
    torch.set_num_threads(threads)  # the cells set one thread in this process
    apply_backend_flags()  # the probe flips two in the process that trains (seq: this one)


def _spec(tmp_path: Path, exp: str, executor: str,
          options: str = "") -> tuple[Path, CellRunSpec]:
    """A cell's spec (the first cell of a one-executor campaign) and its runs folder."""
    folder = tmp_path / executor
    folder.mkdir()
    (folder / "exps.toml").write_text(EXPERIMENTS)
    (folder / "c.toml").write_text(
        f'name = "w"\nexperiments = "{exp}"\nexperiments_file = "exps.toml"\n'
        f'executors = ["{executor}"]\ndevice = "cpu"\nthreads = 1\nmonitor = false\n'
        f'runs_dir = "{folder / "runs"}"\n' + options)
    runner = Runner(load_campaign(folder / "c.toml"))
    spec = replace(runner.cell_spec(runner.cells[0], 1), group_id=f"{executor}_0000000b")
    return folder, spec


def _run_cell(tmp_path: Path, exp: str, executor: str, options: str = ""):
    """One cell, run here: its events, window (perf_counter), group row and job rows."""
    from engine.cell.main import run_cell
    from engine.cell.output import CellEvents

    folder, spec = _spec(tmp_path, exp, executor, options)
    events = CellEvents(spec.events, cell=spec.cell.key, attempt=1)
    try:
        status = run_cell(spec, events)
    finally:
        events.close()
    seen = read_events(spec.events)
    window = next(e["window"] for e in seen if e.get("phase") == "group_end")
    group, = read_rows(folder / "runs" / "master_groups.csv")
    jobs = read_rows(folder / "runs" / "master_individual.csv")
    assert status == "ok", (group["error"], [j["error"] for j in jobs])
    return window, group, jobs


def test_a_pool_on_1_cpu_nodes_asks_each_node_for_what_it_has(tmp_path, probe, cluster):
    """The actor request comes from the nodes' resources, not from this host's cores: one
    actor on a cluster of 1-CPU nodes asks for 1 CPU (this host has more cores; a request
    for them could never be placed). Window rule: the actor starts in setup (the plugin's
    import, in the actor, before the window), both model builds fall inside."""
    folder, records = probe
    window, group, jobs = _run_cell(tmp_path, "R_pool", "ray",
                                    f'[options.ray]\naddress = "{cluster}"\nmax_parallel = 1\n')
    info = json.loads(group["executor_info"])
    assert info["ray_mode"] == "address" and info["resources"]["CPU"] == 2
    assert info["per_actor"] == {"CPU": 1.0, "GPU": 0.0} and group["max_parallel"] == "1"
    actor, = info["actor_pids"]
    found = records(folder)
    imports = [r for r in found if r["what"] == "import" and r["pid"] == actor]
    assert len(imports) == 1 and imports[0]["t"] < window[0]
    builds = [r for r in found if r["what"] == "build"]
    assert [r["pid"] for r in builds] == [actor, actor]
    assert all(window[0] <= r["t"] <= window[1] for r in builds)
    assert {int(j["worker_pid"]) for j in jobs} == {actor}
    assert group["window_rule"] == "2"
    # one actor, two jobs: the second builds from the class cache the first filled
    assert [j["job_isolation"] for j in jobs] == [
        "ok", "shared state changed: fugue_reset_probe._CLASS"]


def test_reused_tune_actors_start_in_setup_and_reset_every_trial(tmp_path, probe, cluster):
    """``reuse_actors = true``, one trial at a time: the three trials run in one process,
    started and prepared in setup (its import before the window); each trial builds its
    model inside the window and finds the state a fresh process (seq's, for the same job)
    would give it: its own seed and RNG state, its own data order, no model or optimizer of
    the trial before, the backend flags the previous trial flipped put back. Same training
    as seq, to the last bit of the final loss."""
    folder, records = probe
    _, _, seq_jobs = _run_cell(tmp_path, "R_hpo", "seq")
    seq_found = records(folder)
    for p in folder.glob("*.json"):
        p.unlink()
    window, group, jobs = _run_cell(
        tmp_path, "R_hpo", "ray",
        f'[options.ray]\naddress = "{cluster}"\nmax_parallel = 1\nreuse_actors = true\n')
    info = json.loads(group["executor_info"])
    assert info["reuse_actors"] is True and info["per_actor"] == {"CPU": 1.0, "GPU": 0.0}
    assert group["tune_actors"] == "reused"
    actor, = info["actor_pids"]
    assert [int(j["worker_pid"]) for j in jobs] == [actor] * 3  # one process, reused
    found = records(folder)
    imports = [r for r in found if r["what"] == "import" and r["pid"] == actor]
    assert len(imports) == 1 and imports[0]["t"] < window[0]  # started in setup, once
    # The cell's reuse check built the model twice in setup (engine.train.isolation); its
    # one-time class cache (_CLASS) keeps reuse, and the trials after the first say they
    # built from it.
    checks = [r for r in found if r["what"] == "build" and r["pid"] == os.getpid()]
    assert len(checks) == 2 and all(r["t"] < window[0] for r in checks)
    assert "reuse_refused" not in info
    assert [j["job_isolation"] for j in jobs] == [
        "ok", *["shared state changed: fugue_reset_probe._CLASS"] * 2]
    builds = [r for r in found if r["what"] == "build" and r["pid"] != os.getpid()]
    assert len(builds) == 3 and all(window[0] <= r["t"] <= window[1] for r in builds)
    seq_builds = {r["seed"]: r for r in seq_found if r["what"] == "build"}
    for r in builds:
        assert r["pid"] == actor and r["rng"] == seq_builds[r["seed"]]["rng"]
        assert r["live_models"] == 0 and r["live_optimizers"] == 0
        assert r["flags"] == {"cudnn_benchmark": False, "matmul_tf32": False}
        assert r["threads"] == 1
    batches = [r["batch"] for r in found if r["what"] == "batch"]
    assert batches == [r["batch"] for r in seq_found if r["what"] == "batch"]
    seq = {j["job_id"]: j for j in seq_jobs}
    for j in jobs:
        assert j["final_train_loss"] == seq[j["job_id"]]["final_train_loss"], j["job_id"]
        assert j["epochs_run"] == "2" and j["status"] == "ok"


def test_a_model_that_counts_its_builds_gets_fresh_tune_actors(tmp_path, probe, cluster):
    """Jobs are independent (docs/measurement.md): a model whose class counts its builds
    would hand each reused actor's next trial another count than a fresh process (trials
    after the first differ from seq's jobs). The cell's reuse check in setup sees the
    second build move ``Net.counter``, so the trials run in fresh actors, recorded and
    warned about; the trial then builds from a fresh process's state (one trial: a fresh
    trial's process start costs seconds, and the refusal is decided before any trial)."""
    _, group, jobs = _run_cell(
        tmp_path, "R_shared", "ray",
        f'[options.ray]\naddress = "{cluster}"\nmax_parallel = 1\nreuse_actors = true\n')
    info = json.loads(group["executor_info"])
    assert info["reuse_actors"] is False and group["tune_actors"] == "fresh"
    assert info["reuse_refused"] == "shared_counter: shared state changed: Net.counter"
    assert any("reuse_actors refused" in w for w in info["warnings"])
    assert "actor_pids" not in info  # no trial actor was started in setup to be reused
    assert [j["job_isolation"] for j in jobs] == ["ok"]


def test_prepared_trials_that_are_late_fail_setup_and_never_take_a_job(tmp_path, probe,
                                                                       cluster, monkeypatch):
    """Reused Tune actors that are not ready within ``FUGUE_RAY_START_TIMEOUT_S`` (here
    0.2 s: they cannot even import torch in that time) fail the cell in setup with one line;
    Tune is stopped before the runtime goes, so no trial takes its job and Tune's thread in
    the cell has ended."""
    import threading

    from engine.cell.main import run_cell
    from engine.cell.output import CellEvents
    from engine.errors import FugueError
    from engine.executors.ray import actors

    folder, records = probe
    monkeypatch.setattr(actors, "ACTOR_START_TIMEOUT_S", 0.2)
    _, spec = _spec(tmp_path, "R_hpo", "ray", f'[options.ray]\naddress = "{cluster}"\n'
                                              'max_parallel = 2\nreuse_actors = true\n')
    events = CellEvents(spec.events, cell=spec.cell.key, attempt=1)
    try:
        with pytest.raises(FugueError) as info:
            run_cell(spec, events)
    finally:
        events.close()
    assert str(info.value) == ("ray: 2 Tune trial actor(s) of {'CPU': 1.0, 'GPU': 0.0} were "
                               "not ready within 0.2 s (FUGUE_RAY_START_TIMEOUT_S)")
    assert not [t for t in threading.enumerate() if t.name == "fugue-tune"]
    assert not [e for e in read_events(spec.events) if e["type"] == "job_started"]
    assert not [r for r in records(folder) if r["what"] == "build" and r["pid"] != os.getpid()]


def test_a_local_runtime_starts_no_process_a_cell_never_uses(family_run):
    """The family's Ray cells (pools and Tune) ran on a runtime without Ray's API server,
    autoscaler monitor and log monitor (``engine.executors.ray.runtime.LEAN_SKIPS``): what
    ran beside the jobs is recorded per cell."""
    groups = [g for g in read_rows(family_run.runs / "master_groups.csv")
              if g["executor"] == "ray"]
    assert len(groups) == 5
    for g in groups:
        info = json.loads(g["executor_info"])
        kinds = info["runtime_processes"]
        assert info["ray_skipped"] == list(LEAN_SKIPS)
        assert not set(kinds) & {"api_server", "autoscaler_monitor", "log_monitor"}, kinds
        assert kinds["gcs_server"] == 1 and kinds["raylet"] == 1
