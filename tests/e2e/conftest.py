"""End-to-end fixtures: real ``fugue-tui --batch`` subprocesses, run once per session."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

PLUGINS = Path(__file__).resolve().parent.parent / "fixtures" / "plugins"

# Shorter versions of the offline family (a user's experiments file merges over the
# catalogue: the same mechanism users have), so the whole end-to-end run takes seconds.
EXPERIMENTS = """
[experiments.D_ens]
epochs = 2
[experiments.D_hpo]
epochs = 2
[experiments.D_mm]
members = [
  { model = "mlp_bn", dataset = "digits", batch_size = 64, epochs = 2, lr = 0.05, optimizer = "sgd", optimizer_kwargs = { momentum = 0.9 } },
  { model = "mlp", dataset = "wine", batch_size = 16, epochs = 3, lr = 0.003, optimizer = "adam" },
  { model = "mlp", dataset = "diabetes", task = "regression", batch_size = 32, epochs = 3, lr = 0.003, optimizer = "adam" },
]
[experiments.X_fail]
type = "ensemble"
model = "explode_on_step"
dataset = "digits"
k = 2
batch_size = 64
epochs = 1
lr = 0.1
optimizer = "sgd"
[experiments.X_crash]
type = "ensemble"
model = "hard_exit"
dataset = "wine"
k = 2
batch_size = 16
epochs = 1
lr = 0.1
optimizer = "sgd"
"""


@dataclass
class BatchRun:
    workdir: Path
    runs: Path
    proc: subprocess.CompletedProcess


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(PLUGINS), env.get("PYTHONPATH")) if p)
    env["FUGUE_PLUGINS"] = "fugue_test_plugin"
    env.pop("FUGUE_REGISTRY_DIR", None)
    return env


def run_batch(workdir: Path, campaign: str, timeout: float = 400) -> BatchRun:
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "no-data").mkdir(exist_ok=True)
    (workdir / "experiments.toml").write_text(EXPERIMENTS)
    (workdir / "campaign.toml").write_text(campaign)
    proc = subprocess.run([sys.executable, "-m", "fugue_tui", "--batch", "campaign.toml"],
                          cwd=workdir, env={**_env(), "FUGUE_DATA_DIR": str(workdir / "no-data")}, capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL)
    return BatchRun(workdir, workdir / "runs", proc)


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
