"""A plugin written against the API as it stood before the package re-layout keeps loading
and running unchanged: ``tests/fixtures/plugins/fugue_compat_plugin.py`` registers a model,
dataset, task, optimizer, workload type and executor through the old import paths
(``engine.workloads``, ``engine.datasets``, ``engine.training``), declares its executor with
the old arguments (``color``, ``options``, ``option_help``) and sets group facts with
``ctx.group[...] = ...``. One real campaign runs every one of them in a cell."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pandas as pd
import pytest

from tests.e2e.conftest import PLUGINS, campaign_text, write_campaign

pytestmark = pytest.mark.slow

EXPERIMENT = """
[experiments.P_compat]
type = "zz_compat_pairs"
model = "zz_compat_mlp"
model_kwargs = { hidden = 8 }
dataset = "zz_compat_blobs"
optimizer = "zz_compat_sgd"
optimizer_kwargs = { momentum = 0.9 }
k = 2
batch_size = 16
epochs = 2
lr = 0.05
"""


def test_a_plugin_written_against_the_old_api_runs_unchanged(tmp_path):
    write_campaign(tmp_path, campaign_text("compat", "P_compat", ("zz_compat", "seq")), EXPERIMENT)
    env = {**os.environ, "FUGUE_PLUGINS": "fugue_compat_plugin",
           "PYTHONPATH": os.pathsep.join(p for p in (str(PLUGINS), os.environ.get("PYTHONPATH"))
                                         if p),
           "FUGUE_DATA_DIR": str(tmp_path / "data")}
    env.pop("FUGUE_REGISTRY_DIR", None)
    proc = subprocess.run([sys.executable, "-m", "fugue_tui", "--batch", "campaign.toml"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
                          stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    groups = pd.read_csv(tmp_path / "runs" / "master_groups.csv")
    assert list(groups["executor"]) == ["zz_compat", "seq"]
    assert list(groups["status"]) == ["ok", "ok"]
    info = json.loads(groups.loc[groups["executor"] == "zz_compat", "executor_info"].iloc[0])
    assert info == {"compat_plugin": True, "jobs": 2}  # set through ctx.group[...] = ...
    jobs = pd.read_csv(tmp_path / "runs" / "master_individual.csv")
    compat = jobs[jobs["executor"] == "zz_compat"]
    # the plugin's workload type expanded the jobs (ids and growing batch sizes)
    assert sorted(compat["job_id"]) == ["P_compat_p0", "P_compat_p1"]
    assert sorted(compat["batch_size"]) == [16, 32]
    # the same jobs under seq trained the same numbers: the plugin's parts were really used
    seq = jobs[jobs["executor"] == "seq"].set_index("job_id")
    for _, row in compat.iterrows():
        assert row["final_val_acc"] == pytest.approx(seq.loc[row["job_id"], "final_val_acc"])
        assert row["final_val_acc"] > 0.5  # three well-separated blobs: it learned
