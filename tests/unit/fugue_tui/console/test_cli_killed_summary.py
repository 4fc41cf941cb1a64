"""After SIGTERM, ``--batch``'s closing problem lines name the cell this run killed, and
no row of an earlier run of the same campaign (issue 29): a real runner and cell, killed
in its first epoch."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from engine.define.campaign import load_campaign
from engine.results.columns import GROUP_COLUMNS
from engine.results.store import append_rows
from engine.runner.supervisor import Runner

REPO = Path(__file__).resolve().parents[4]

EXPERIMENTS = """
[experiments.Z_slow]
type = "ensemble"
model = "mlp"
dataset = "digits"
k = 1
batch_size = 8
epochs = 500
lr = 0.001
"""


def test_sigterm_summary_names_the_killed_cell_not_an_earlier_runs_rows(tmp_path):
    (tmp_path / "exp.toml").write_text(EXPERIMENTS)
    campaign = tmp_path / "c.toml"
    campaign.write_text('name = "cz"\nexperiments = "Z_slow"\nexecutors = ["seq"]\n'
                        f'runs_dir = "{tmp_path / "runs"}"\nthreads = 1\n'
                        f'experiments_file = "{tmp_path / "exp.toml"}"\n')
    key = Runner(load_campaign(campaign)).plan()[0].cell.key
    # an earlier run of the same campaign: this cell ok, another cell failed
    old = {"exp_id": "Z_slow", "executor": "seq", "campaign_id": "cz", "pass": 1,
           "attempt": 1, "compile_mode": "off", "timestamp": "20200101_000000"}
    append_rows(tmp_path / "runs" / "master_groups.csv", [
        {**old, "group_id": "seq_00000001", "cell_key": key, "status": "ok", "T_group": 1.0},
        {**old, "group_id": "seq_00000002", "exp_id": "Z_old", "cell_key": "0" * 16,
         "status": "failed", "error": "RuntimeError: an earlier run's failure"},
    ], GROUP_COLUMNS)
    env = {**os.environ, "FUGUE_PLAIN": "1", "COLUMNS": "200",
           "PYTHONPATH": os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH"))
                                         if p)}
    proc = subprocess.Popen([sys.executable, "-m", "fugue_tui", "--batch", str(campaign)],
                            cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
    try:
        deadline = time.monotonic() + 120
        for line in proc.stdout:  # the cell is training once its first epoch ends
            if " epoch " in line or time.monotonic() > deadline:
                break
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, err
    problems = [line for line in err.splitlines() if line.split(":")[0] in
                ("killed", "failed", "hung", "skipped")]
    assert len(problems) == 1 and problems[0].startswith("killed: Z_slow seq pass 1"), err
    assert "Z_old" not in err and "earlier run" not in err
