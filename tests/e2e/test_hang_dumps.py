"""A hung mp cell killed by the watchdog leaves a stack dump of each of its Python
processes in its attempt folder: the worker's shows the worker's own frame (where the job
is stuck), not only the cell waiting on it. The smallest hung mp cell: one job of the test
plugin's ``block_forever`` model, blocked in its first forward, on the CPU."""

from __future__ import annotations

import pytest

from engine.events import read_events
from engine.results.read import read_rows
from tests.e2e.conftest import X_BLOCK, _env, campaign_text, start, write_campaign

pytestmark = pytest.mark.slow

WATCHDOG = """
[watchdog]
interval_s = 0.5
suspect_after = 2
hung_after = 4
action = "kill"
"""


def test_hung_mp_cell_leaves_a_dump_per_process(tmp_path):
    write_campaign(tmp_path, campaign_text("dumps", "X_block", ["mp"], WATCHDOG), X_BLOCK)
    proc = start(tmp_path, "campaign.toml", module="engine.runner", env=_env())
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 1, err
    groups = read_rows(tmp_path / "runs" / "master_groups.csv")
    assert [g["status"] for g in groups] == ["killed"] and "hung" in groups[0]["error"]
    attempt = next((tmp_path / "runs" / "dumps" / "cells").glob("*/attempt-1"))
    events = read_events(attempt / "events.jsonl")
    cell = next(e["pid"] for e in events if e["type"] == "started")
    worker = next(e["worker_pid"] for e in events if e["type"] == "job_started")
    stacks = attempt / "stacks"
    names = sorted(p.name for p in stacks.iterdir())
    assert f"cell-{cell}.txt" in names and f"mp-worker-{worker}.txt" in names
    assert any(n.startswith("monitor-") for n in names)  # the sampler sidecar too
    dump = (stacks / f"mp-worker-{worker}.txt").read_text()
    # the worker's own frames: the model's forward that blocks, under the training loop
    assert "most recent call first" in dump
    assert "fugue_test_plugin.py" in dump and "in forward" in dump and "in train_job" in dump
    assert "in forward" not in (stacks / f"cell-{cell}.txt").read_text()  # the cell waits
    log = (attempt / "cell.log").read_text()
    note = next(line for line in log.splitlines() if line.startswith("fugue-tui runner: stack"))
    assert f"stacks/cell-{cell}.txt" in note and f"stacks/mp-worker-{worker}.txt" in note
