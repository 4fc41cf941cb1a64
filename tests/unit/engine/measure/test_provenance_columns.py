"""The rest of the measured stack in every group row (issue 29): numpy, scikit-learn,
cuDNN and Ray versions, each loaded plugin's version, the experiments file's hash in its
own column; rows the runner writes for a killed or failed cell carry torch's version, so
a report of a campaign whose rows all failed names its torch. Nothing trains here."""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import subprocess
import sys
from pathlib import Path

from engine.define.campaign import load_campaign
from engine.measure.provenance import cudnn_text, stack_versions
from engine.results.columns import GROUP_COLUMNS, INDIVIDUAL_COLUMNS
from engine.results.rows import failed_group_row
from engine.results.store import append_rows
from engine.runner.supervisor import Runner

REPO = Path(__file__).resolve().parents[4]
NEW = ("numpy_version", "sklearn_version", "cudnn_version", "ray_version", "plugin_versions",
       "experiments_file_hash")


def test_new_columns_are_appended_at_the_end_of_the_groups_file():
    """Together, in order, after every column of before issue 29 (later issues append
    theirs after them)."""
    at = GROUP_COLUMNS.index(NEW[0])
    assert tuple(GROUP_COLUMNS[at:at + len(NEW)]) == NEW
    assert at > GROUP_COLUMNS.index("tune_actors")  # the last column before issue 29
    # job rows repeat them (docs/results.md "Provenance in job rows"), appended to the job
    # file's order after every job column that existed before
    jobs_at = INDIVIDUAL_COLUMNS.index("torch_version")
    assert jobs_at > INDIVIDUAL_COLUMNS.index("trial_config")
    assert set(NEW) <= set(INDIVIDUAL_COLUMNS[jobs_at:])


def test_stack_versions_are_what_is_installed_and_torch_is_not_imported():
    probe = subprocess.run(
        [sys.executable, "-c", "import sys, json; from engine.measure.provenance import "
         "stack_versions; v = stack_versions(); print(json.dumps([v, 'torch' in sys.modules]))"],
        env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True, text=True,
        timeout=60)
    versions, torch_imported = json.loads(probe.stdout)
    assert not torch_imported  # the runner side reads torch's version without importing it
    assert versions == stack_versions()
    assert versions["torch_version"].startswith(importlib.metadata.version("torch"))
    import numpy

    assert versions["numpy_version"] == numpy.__version__
    assert versions["sklearn_version"] == importlib.metadata.version("scikit-learn")
    assert versions["ray_version"] == importlib.metadata.version("ray")
    assert versions["cuda_version"] is None or versions["cuda_version"][0].isdigit()
    if versions["cudnn_version"] is not None:  # the CUDA wheels are installed here
        assert versions["cudnn_version"].count(".") == 2


def test_cudnn_text():
    assert cudnn_text(92400) == "9.24.0"
    assert cudnn_text(90102) == "9.1.2"
    assert cudnn_text(8907) == "8.9.7"
    assert cudnn_text(None) is None and cudnn_text(0) is None


def _campaign(tmp_path: Path) -> Path:
    (tmp_path / "exp.toml").write_text('[experiments.Z1]\ntype = "ensemble"\nmodel = "mlp"\n'
                                       'dataset = "wine"\nk = 2\nbatch_size = 8\nepochs = 1\n'
                                       'lr = 0.01\n')
    path = tmp_path / "c.toml"
    path.write_text(f'name = "pz"\nexperiments = "Z1"\nexecutors = ["seq"]\nruns_dir = '
                    f'"{tmp_path / "runs"}"\nexperiments_file = "exp.toml"\n')
    return path


def test_a_killed_cells_row_carries_the_stack_and_the_experiments_file_hash(tmp_path):
    path = _campaign(tmp_path)
    runner = Runner(load_campaign(path))
    spec = runner.cell_spec(runner.cells[0], 1)
    row = failed_group_row(spec, "killed", "killed by the user")
    expected = hashlib.sha256((tmp_path / "exp.toml").read_bytes()).hexdigest()[:16]
    assert row["experiments_file_hash"] == expected
    # campaign_hash is the campaign file's alone (--by-campaign groups by it)
    assert row["campaign_hash"] == hashlib.sha256(path.read_bytes()).hexdigest()[:16]
    for column in ("torch_version", "numpy_version", "sklearn_version", "ray_version"):
        assert row[column], column
    assert row["torch_version"] == stack_versions()["torch_version"]
    # editing the experiments file changes its hash, never campaign_hash
    (tmp_path / "exp.toml").write_text((tmp_path / "exp.toml").read_text().replace(
        "epochs = 1", "epochs = 2"))
    again = Runner(load_campaign(path))
    spec2 = again.cell_spec(again.cells[0], 1)
    assert spec2.experiments_file_hash != expected
    assert spec2.campaign_hash == spec.campaign_hash


def test_plugin_versions_are_recorded(tmp_path):
    (tmp_path / "zz_versioned_plugin.py").write_text('__version__ = "3.1.4"\n')
    (tmp_path / "zz_plain_plugin.py").write_text("")
    probe = subprocess.run(
        [sys.executable, "-c", "import json; from engine.plugins import load_plugins, "
         "plugin_versions; load_plugins(); print(json.dumps(plugin_versions()))"],
        env={**os.environ, "PYTHONPATH": os.pathsep.join((str(REPO), str(tmp_path))),
             "FUGUE_PLUGINS": "zz_versioned_plugin,zz_plain_plugin"},
        capture_output=True, text=True, timeout=60)
    assert probe.returncode == 0, probe.stderr
    assert json.loads(probe.stdout) == {"zz_plain_plugin": None, "zz_versioned_plugin": "3.1.4"}


def test_report_of_a_campaign_whose_rows_all_failed_names_its_torch(tmp_path):
    path = _campaign(tmp_path)
    runner = Runner(load_campaign(path))
    spec = runner.cell_spec(runner.cells[0], 1)
    append_rows(tmp_path / "runs" / "master_groups.csv",
                [failed_group_row(spec, "killed", "killed by the user")], GROUP_COLUMNS)
    proc = subprocess.run([sys.executable, "-m", "fugue_tui", "report", str(tmp_path / "runs")],
                          env={**os.environ, "PYTHONPATH": str(REPO), "COLUMNS": "200"},
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert f"torch {stack_versions()['torch_version']}" in proc.stdout
    assert "torch ?" not in proc.stdout
