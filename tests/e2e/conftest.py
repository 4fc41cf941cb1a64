"""End-to-end fixtures and helpers: real ``fugue-tui --batch`` / runner subprocesses.

A cell costs seconds of fixed start-up (a fresh interpreter importing torch; a Ray cell
also starts a private Ray runtime, 20-30 s on a small shared CPU) and well under a second
of training at these sizes, so the suite's time is its number of cells: campaigns that
several test modules read are session fixtures here and run once.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import psutil
import pytest

PLUGINS = Path(__file__).resolve().parent.parent / "fixtures" / "plugins"

# ------------------------------------------------------------------ experiment snippets
#: The offline family's multi-model experiment, shortened: three datasets, one of them a
#: regression, so each executor trains more jobs than it runs at a time.
D_MM = """
[experiments.D_mm]
members = [
  { model = "mlp_bn", dataset = "digits", batch_size = 64, epochs = 2, lr = 0.05, optimizer = "sgd", optimizer_kwargs = { momentum = 0.9 } },
  { model = "mlp", dataset = "wine", batch_size = 16, epochs = 3, lr = 0.003, optimizer = "adam" },
  { model = "mlp", dataset = "diabetes", task = "regression", batch_size = 32, epochs = 3, lr = 0.003, optimizer = "adam" },
]
"""


def one_job(name: str, model: str, dataset: str = "wine", **fields) -> str:
    """An ensemble of one job of a test model (tests/fixtures/plugins), as TOML; ``fields``
    override or add keys (values written as TOML: strings quoted, numbers as they are)."""
    keys = {"type": "ensemble", "model": model, "dataset": dataset, "k": 1, "batch_size": 16,
            "epochs": 1, "lr": 0.1, "optimizer": "sgd", **fields}
    lines = [f"{k} = {v if isinstance(v, str) and v.startswith('{') else json.dumps(v)}"
             for k, v in keys.items()]
    return f"\n[experiments.{name}]\n" + "\n".join(lines) + "\n"


#: A job that blocks in its first forward pass, without progress or CPU, until killed.
X_BLOCK = one_job("X_block", "block_forever")
#: A real digits model with 300 epochs: trains (and reports progress) for minutes.
X_SLOW = one_job("X_slow", "mlp", "digits", epochs=300, lr=0.01, optimizer="adam")

# Shorter versions of the offline family (a user's experiments file merges over the
# catalogue: the same mechanism users have), so the whole end-to-end run takes seconds.
EXPERIMENTS = """
[experiments.D_ens]
epochs = 2
[experiments.D_hpo]
epochs = 2
""" + D_MM + one_job("X_fail", "explode_on_step", "digits", k=2, batch_size=64) \
    + one_job("X_crash", "hard_exit", k=2)


def campaign_text(name: str, experiments: str, executors=("seq",), extra: str = "",
                  experiments_file: str = "experiments.toml") -> str:
    """A small CPU campaign at one thread (``extra``: more TOML lines, tables last)."""
    return (f'name = "{name}"\nexperiments = "{experiments}"\n'
            f'executors = {json.dumps(list(executors))}\ndevice = "cpu"\nthreads = 1\n'
            f'experiments_file = "{experiments_file}"\n{extra}\n')


# ------------------------------------------------------------------ processes
@dataclass
class BatchRun:
    workdir: Path
    runs: Path
    proc: subprocess.CompletedProcess


def plugin_vars() -> dict[str, str]:
    """The variables that load the test plugin in a child process."""
    return {"PYTHONPATH": os.pathsep.join(p for p in (str(PLUGINS), os.environ.get("PYTHONPATH"))
                                          if p),
            "FUGUE_PLUGINS": "fugue_test_plugin"}


#: The session's data folder (``data_dir``).
_DATA_DIR: list[Path] = []


@pytest.fixture(scope="session", autouse=True)
def data_dir(tmp_path_factory) -> Path:
    """One data folder for the session's campaigns: no dataset that needs a download is
    there, and the copies of scikit-learn's bundled arrays (``engine.parts.dataset_files``, under
    ``.cache``) are written once, so only the first cell to load a dataset imports
    scikit-learn (about 2 s a process here)."""
    _DATA_DIR[:] = [tmp_path_factory.mktemp("no-data")]
    return _DATA_DIR[0]


def _env(no_data: bool = False) -> dict[str, str]:
    """This environment with the test plugin and no user registry; with ``no_data``, the
    session's data folder (``data_dir``) instead of the user's."""
    env = {**os.environ, **plugin_vars()}
    env.pop("FUGUE_REGISTRY_DIR", None)
    if no_data:
        env["FUGUE_DATA_DIR"] = str(_DATA_DIR[0])
    return env


def write_campaign(workdir: Path, campaign: str, experiments: str = EXPERIMENTS) -> Path:
    """``experiments.toml`` and ``campaign.toml`` in ``workdir``; returns the campaign."""
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "experiments.toml").write_text(experiments)
    (workdir / "campaign.toml").write_text(campaign)
    return workdir / "campaign.toml"


def _ctrl_c_as_in_a_terminal() -> None:
    """In the child before exec: SIGINT at its default, as for a command typed in a
    terminal. A test run started as a background job of a non-interactive shell (``pytest
    &`` in a script) inherits SIGINT ignored, and so would every process it starts: the
    Ctrl-C tests would then test that the shell's "ignore" is honoured, not Ctrl-C."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def start(workdir: Path, *args: str, module: str = "fugue_tui", env=None) -> subprocess.Popen:
    """``python -m MODULE ARGS`` in ``workdir``, output captured as text."""
    return subprocess.Popen([sys.executable, "-m", module, *args], cwd=workdir,
                            env=env or _env(no_data=True), stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=_ctrl_c_as_in_a_terminal)


def run_batch(workdir: Path, campaign: str, timeout: float = 400,
              experiments: str = EXPERIMENTS, runs_dir: str = "runs") -> BatchRun:
    """``fugue-tui --batch campaign.toml`` to its end, with the session's data folder."""
    write_campaign(workdir, campaign, experiments)
    proc = subprocess.run([sys.executable, "-m", "fugue_tui", "--batch", "campaign.toml"],
                          cwd=workdir, env=_env(no_data=True), capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL)
    return BatchRun(workdir, workdir / runs_dir, proc)


def gone(pid: int) -> bool:
    """The process has exited (a zombie counts: it runs nothing)."""
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def wait_for(predicate, timeout: float = 120.0, what: str = "condition", every: float = 0.2):
    """``predicate()``'s first true value, polled every ``every`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(every)
    raise AssertionError(f"timed out waiting for {what}")


# ------------------------------------------------------------------ shared campaigns
@pytest.fixture(scope="session")
def offline_run(tmp_path_factory) -> BatchRun:
    """D_ens, D_hpo and D_mm under seq, two passes: 6 cells."""
    return run_batch(tmp_path_factory.mktemp("offline"), """
name = "e2e"
experiments = ["D_ens", "D_hpo", "D_mm"]
executors = ["seq"]
passes = 2
seed = 42
runs_dir = "runs"
device = "cpu"
threads = 1
experiments_file = "experiments.toml"
""")


@pytest.fixture(scope="session")
def failing_run(tmp_path_factory) -> BatchRun:
    """A cell whose jobs raise, a cell whose process dies without a Python handler, and a
    cell whose dataset is not on this machine."""
    return run_batch(tmp_path_factory.mktemp("failing"), """
name = "e2e-fail"
experiments = "X_fail,X_crash,E01"
executors = ["seq"]
device = "cpu"
threads = 1
experiments_file = "experiments.toml"
""")


# The offline family for the executor comparisons (tests/e2e/test_mp.py, test_ray.py) and
# the monitor's per-executor check (test_monitor_cells.py): one campaign, so seq's
# reference cells run once for every executor compared with them. Shrunk so that the mp
# cells start few workers (each a fresh interpreter importing torch) while every kind of
# cell keeps its case: D_ens is a single job (one mp worker, one Ray actor), D_cv two jobs
# at a time, D_mm three jobs (datasets digits, wine and diabetes, one a regression) on two
# workers, so a Ray actor trains a second job; D_hpo is the smallest grid ASHA
# stops a trial of whatever the timing.
# (D_reg, a regression ensemble, adds no case: D_mm's diabetes member is one.)
FAMILY_EXPERIMENTS = """
[experiments.D_ens]
k = 1
epochs = 2
[experiments.D_cv]
k = 2
epochs = 2
[experiments.D_hpo]
epochs = 3
# Good learning rates first: with two trials at a time, the weak one (lr 1e-4) reaches
# ASHA's first rung only after a strong one has finished, below both strong results
# there, so it is stopped whatever the timing.
search_space = { lr = [3e-3, 1e-3, 1e-4], batch_size = [32] }
""" + D_MM

FAMILY = ["D_ens", "D_cv", "D_hpo", "D_mm"]
FAMILY_EXECUTORS = ["seq", "mp", "ray"]
#: Jobs per experiment in FAMILY_EXPERIMENTS.
FAMILY_K = {"D_ens": 1, "D_cv": 2, "D_hpo": 3, "D_mm": 3}
#: The family's monitor interval (test_monitor_cells.py reads its rows).
FAMILY_MONITOR_S = 0.2
#: A runs folder deeper than 100 characters: Ray's sockets must not live under it.
DEEP = "runs/" + "/".join(["a-rather-long-folder-name-for-ray"] * 4)


@pytest.fixture(scope="session")
def family_run(tmp_path_factory) -> BatchRun:
    """The offline family under seq, mp and ray (fifo and asha for the hpo grid), two at a
    time, in a run folder deeper than 100 characters: 4 + 4 + 5 cells."""
    workdir = tmp_path_factory.mktemp("family")
    run = run_batch(workdir, f"""
name = "e2e-family"
experiments = {json.dumps(FAMILY)}
executors = {json.dumps(FAMILY_EXECUTORS)}
seed = 42
runs_dir = "{DEEP}"
device = "cpu"
threads = 1
experiments_file = "experiments.toml"
monitor_interval_s = {FAMILY_MONITOR_S}
[options.mp]
max_parallel = 2
[options.ray]
scheduler = ["fifo", "asha"]
max_parallel = 2
""", timeout=900, experiments=FAMILY_EXPERIMENTS, runs_dir=DEEP)
    assert len(str(run.runs)) > 100
    return run
