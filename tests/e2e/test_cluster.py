"""Campaigns on a real multi-node Ray cluster on this host (issue 28).

One cluster for the module (``ray.cluster_utils.Cluster``): a head node with no CPUs (no
cell can land there) and two worker nodes of one CPU each, the first with an
``accelerator_type:L4`` resource standing in for a GPU model. The nodes are started with
the test plugin in their environment (a real cluster's nodes have fugue-tui installed).
Cells are tiny digits MLPs; every test ends with exactly one ok row per cell and nothing
of the campaign left on any node (no cell process, no agent actor, no staging folder).
"""

from __future__ import annotations

import contextlib
import glob
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil
import pytest

from engine.results.read import read_rows
from engine.runner.agent import node_name
from tests.e2e.conftest import X_BLOCK, _env, one_job, wait_for

pytestmark = pytest.mark.slow

EXPERIMENTS = (X_BLOCK + one_job("XA", "mlp", "digits", k=1, batch_size=64, epochs=1, lr=0.01)
               + one_job("XB", "mlp", "digits", k=1, batch_size=64, epochs=1, lr=0.01)
               # trains for several seconds: long enough to lose its node or its runner
               + one_job("XM", "mlp", "digits", k=1, batch_size=16, epochs=25, lr=0.01))


@contextlib.contextmanager
def _node_env():
    """The environment a node starts with: the test plugin importable and loaded (as a
    real node has fugue-tui and the campaign's plugins installed)."""
    saved = dict(os.environ)
    os.environ.update({k: v for k, v in _env().items() if k in ("PYTHONPATH", "FUGUE_PLUGINS")})
    os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


@pytest.fixture(scope="module")
def cluster():
    """The shared cluster: (Cluster, [worker nodes]), started once, shut down after."""
    cluster_utils = pytest.importorskip("ray.cluster_utils")
    with _node_env():
        c = cluster_utils.Cluster(initialize_head=True, head_node_args={
            "num_cpus": 0, "include_dashboard": False})
        workers = [c.add_node(num_cpus=1, resources={"accelerator_type:L4": 1}),
                   c.add_node(num_cpus=1)]
        c.wait_for_nodes()
    try:
        yield c, workers
    finally:
        c.shutdown()


def _name(node) -> str:
    return node_name(socket.gethostname(), f"{node.node_ip_address}/{node.node_id}")


def _setup(tmp: Path, address: str, experiments: list[str], executors=("seq",),
           extra: str = "") -> Path:
    (tmp / "experiments.toml").write_text(EXPERIMENTS)
    campaign = tmp / "c.toml"
    campaign.write_text(f'name = "cl"\nexperiments = {json.dumps(experiments)}\n'
                        f'executors = {json.dumps(list(executors))}\ndevice = "cpu"\n'
                        f'cluster = "{address}"\ncpus_per_cell = 1\nthreads = 1\n'
                        'experiments_file = "experiments.toml"\nruns_dir = "runs"\n'
                        'monitor_interval_s = 0.2\n' + extra)
    return campaign


def _runner(tmp: Path, campaign: Path, *extra: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "engine.runner", str(campaign), *extra],
                            cwd=tmp, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, stdin=subprocess.DEVNULL)


def _events(tmp: Path) -> list[dict]:
    path = tmp / "runs" / "cl" / "runner.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def _rows(tmp: Path) -> list[dict]:
    return read_rows(tmp / "runs" / "master_groups.csv")


def _nothing_left() -> None:
    """No cell process, no agent actor and no staging folder of any agent on any node."""
    def clean():
        procs = []
        for p in psutil.process_iter(["cmdline"]):
            line = " ".join(p.info["cmdline"] or [])
            if "CellAgent" in line or ("engine.cell" in line and "-node-" in line):
                procs.append(line)
        staging = glob.glob(os.path.join(tempfile.gettempdir(), "fugue-cell-*-node-*"))
        return (not procs and not staging) or None
    wait_for(clean, timeout=60, what="no cell, agent or staging folder left on the nodes")


def test_cells_run_on_worker_nodes_with_a_private_ray_runtime(cluster, tmp_path):
    """Two cells at once, one per worker node (the head has no CPU): each row names its
    node, the rows and samples land in the head's runs folder, and the ``ray`` cell ran
    its trials in a private runtime on its node, never as a job of the campaign's cluster."""
    c, workers = cluster
    campaign = _setup(tmp_path, c.address, ["XA"], executors=("seq", "ray"))
    runner = _runner(tmp_path, campaign)
    out, err = runner.communicate(timeout=240)
    assert runner.returncode == 0, err[-3000:]
    rows = _rows(tmp_path)
    assert sorted(r["executor"] for r in rows) == ["ray", "seq"]
    assert all(r["status"] == "ok" for r in rows), [r["error"] for r in rows]
    names = {_name(w) for w in workers}
    assert {r["node"] for r in rows} <= names and all(r["node"] for r in rows)
    for row in rows:  # the monitor's samples came back with the rows
        assert (tmp_path / "runs" / row["samples_file"]).is_file(), row["samples_file"]
    started = [e for e in _events(tmp_path) if e["type"] == "cell_started"]
    assert {e["node"] for e in started} == {r["node"] for r in rows}
    # The campaign's cluster saw one job: this campaign's runner (a driver); the ray
    # cell's ray.init() started its own runtime (RAY_* removed from its environment).
    import ray

    ray.init(address=c.address, log_to_driver=False, logging_level="ERROR")
    try:
        jobs = ray._private.state.state.job_table()
    finally:
        ray.shutdown()
    # (by entry point: any other Ray driver on this shared host may join it too)
    assert any(j["DriverPid"] == runner.pid for j in jobs), jobs
    assert not any("engine.cell" in str(j.get("Entrypoint")) for j in jobs), jobs
    _nothing_left()


def test_node_lost_mid_cell_is_retried_on_another_node(cluster, tmp_path):
    c, workers = cluster
    campaign = _setup(tmp_path, c.address, ["XM"])
    runner = _runner(tmp_path, campaign)
    try:
        started = wait_for(lambda: next((e for e in _events(tmp_path)
                                         if e["type"] == "cell_started"), None),
                           timeout=120, what="the cell to start")
        lost = next(w for w in workers if _name(w) == started["node"])
        time.sleep(1.0)
        c.remove_node(lost)  # the node's raylet and its workers (the agent) go
        workers.remove(lost)
        out, err = runner.communicate(timeout=240)
    finally:
        if runner.poll() is None:
            runner.kill()
        with _node_env():  # the fixture keeps two workers for the next tests
            workers.append(c.add_node(num_cpus=1, resources={"accelerator_type:L4": 1}))
    assert runner.returncode == 0, err[-3000:]
    rows = _rows(tmp_path)
    assert [r["status"] for r in rows] == ["killed", "ok"], [r["error"] for r in rows]
    assert "lost while the cell ran" in rows[0]["error"] and rows[0]["node"] == started["node"]
    assert rows[1]["node"] and rows[1]["node"] != started["node"]
    lost_events = [e for e in _events(tmp_path) if e["type"] == "retried" and e.get("node_lost")]
    # the node losses so far of those allowed: what the front ends' line reads
    assert [(e["attempt"], e.get("retry"), e.get("retries")) for e in lost_events] == [(2, 1, 2)]
    _nothing_left()


def test_sigkilled_runner_takes_its_cells_down_and_resume_finishes(cluster, tmp_path):
    c, _ = cluster
    campaign = _setup(tmp_path, c.address, ["XM", "XA"])
    runner = _runner(tmp_path, campaign)
    try:
        wait_for(lambda: len([e for e in _events(tmp_path) if e["type"] == "cell_started"]) == 2,
                 timeout=120, what="both cells to start")
        os.kill(runner.pid, signal.SIGKILL)
        runner.communicate(timeout=30)
    finally:
        if runner.poll() is None:
            runner.kill()
    _nothing_left()  # Ray ended the dead runner's agents; each cell died with its agent
    resumed = _runner(tmp_path, campaign, "--resume")
    out, err = resumed.communicate(timeout=240)
    assert resumed.returncode == 0, err[-3000:]
    rows = _rows(tmp_path)
    ok = [r for r in rows if r["status"] == "ok"]
    assert sorted(r["exp_id"] for r in ok) == ["XA", "XM"], rows
    killed = [r for r in rows if r["status"] == "killed"]
    assert killed and all("took the cell down" in r["error"] for r in killed)
    _nothing_left()


def test_a_stopped_campaign_leaves_nothing_on_the_nodes(cluster, tmp_path):
    """Ctrl-C on the runner: the running cell is stopped through its agent and recorded
    as killed with the reason; no cell, agent or staging folder stays on any node."""
    c, _ = cluster
    campaign = _setup(tmp_path, c.address, ["XM"])
    runner = _runner(tmp_path, campaign)
    try:
        wait_for(lambda: any(e["type"] == "cell_started" for e in _events(tmp_path)),
                 timeout=120, what="the cell to start")
        runner.send_signal(signal.SIGINT)
        out, err = runner.communicate(timeout=120)
    finally:
        if runner.poll() is None:
            runner.kill()
    assert runner.returncode == 130, err[-3000:]
    rows = _rows(tmp_path)
    assert [r["status"] for r in rows] == ["killed"] and "interrupted" in rows[0]["error"]
    assert rows[0]["node"]
    _nothing_left()


def test_a_hung_cell_on_a_node_is_killed_with_its_stacks_by_the_heads_watchdog(cluster,
                                                                             tmp_path):
    """The head's watchdog judges a cell on a node by the process-tree CPU its agent
    measures there: a cell blocked without progress or CPU is hung, dumped and killed
    through its agent; the dump lands in the head's attempt folder."""
    c, _ = cluster
    campaign = _setup(tmp_path, c.address, ["X_block"],
                      extra='[watchdog]\ninterval_s = 0.5\nsuspect_after = 1\nhung_after = 2\n')
    runner = _runner(tmp_path, campaign)
    out, err = runner.communicate(timeout=180)
    assert runner.returncode == 1, err[-3000:]
    rows = _rows(tmp_path)
    assert [r["status"] for r in rows] == ["killed"] and rows[0]["error"].startswith("hung")
    assert any(e["type"] == "hung" for e in _events(tmp_path))
    dumps = list((tmp_path / "runs" / "cl" / "cells").glob("*/attempt-1/stacks/*"))
    text = "".join(p.read_text(errors="replace") for p in dumps)
    assert "fugue_test_plugin.py" in text and "in forward" in text, text[:2000]
    _nothing_left()


@pytest.mark.parametrize("keys, needles", [
    ('gpu = "H100"\n', ("key 'gpu'", "GPU model 'H100'", "models there: L4")),
    ('device = "cpu"\ncpus_per_cell = 2\n', ("key 'cpus_per_cell'", "can ever hold")),
], ids=["gpu-model-on-no-node", "cell-no-node-can-hold"])
def test_what_no_node_offers_is_refused_while_planning(cluster, tmp_path, keys, needles):
    """Bad input against the real nodes: one line, exit 2, nothing written."""
    from tests.unit.fugue_tui.cli import test_bad_input_matrix as matrix

    c, _ = cluster
    body = f'experiments = "D_ens"\ncluster = "{c.address}"\n' + keys
    case = matrix.Case("cluster", {"c.toml": body}, ("--batch", "c.toml", "--dry-run"),
                       ("c.toml",) + needles)
    matrix.test_bad_input_exits_2_with_one_line_and_writes_nothing(tmp_path, case)


def test_a_local_cluster_goes_with_its_sigkilled_runner_and_resume_finishes(tmp_path):
    """``cluster = "local"``: the runner starts a Ray runtime on this host for the campaign.
    SIGKILLed mid-cell, its guard stops every process of that runtime (recorded by pid and
    start time while the raylet still named them) and the cell's node side; ``--resume``
    starts a new one and finishes with one ok row."""
    campaign = _setup(tmp_path, "local", ["XM"])
    runner = _runner(tmp_path, campaign)
    try:
        wait_for(lambda: any(e["type"] == "cell_started" for e in _events(tmp_path)),
                 timeout=120, what="the cell to start")
        record = next((tmp_path / "runs" / "cl").glob("cluster-local-*/cleanup/processes.json"))
        pids = [pid for pid, _ in json.loads(record.read_text())["info"]["processes"]]
        assert len(pids) >= 2  # gcs and raylet at least
        os.kill(runner.pid, signal.SIGKILL)
        runner.communicate(timeout=30)
    finally:
        if runner.poll() is None:
            runner.kill()
    wait_for(lambda: not any(psutil.pid_exists(p) and psutil.Process(p).status() != "zombie"
                             for p in pids), timeout=60, what="the local runtime to go")
    _nothing_left()
    resumed = _runner(tmp_path, campaign, "--resume")
    out, err = resumed.communicate(timeout=240)
    assert resumed.returncode == 0, err[-3000:]
    assert [r["status"] for r in _rows(tmp_path)] == ["killed", "ok"]
    assert not list((tmp_path / "runs" / "cl").glob("cluster-local-*/cleanup/*.json"))
    # neither the killed runner's runtime folder nor the resumed one's stays (issue 43)
    assert not list((tmp_path / "runs" / "cl").glob("cluster-local-*"))
    _nothing_left()
