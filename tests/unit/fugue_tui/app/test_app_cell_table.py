"""Cell rows of the run screen, and the earlier attempts the state keeps for them."""

from __future__ import annotations

from engine.observe.state import CampaignState
from fugue_tui.app.models.cells import cell_row, history_rows, split_label


def _runner(kind, ts, **fields):
    return {"type": kind, "ts": ts, "campaign": "c", **fields}


def test_split_label():
    assert split_label("D_ens seq pass 2") == ("D_ens", "seq", "", "2")
    assert split_label("D_hpo ray compile=default asha pass 1") == (
        "D_hpo", "ray", "compile=default asha", "1")


def test_a_retried_cell_keeps_its_killed_attempt():
    state = CampaignState()
    for event in (
        _runner("campaign_started", 0.0, device="cpu", cells=1, runner_pid=5),
        _runner("queued", 0.0, cell="k1", index=1, label="X_block seq pass 1"),
        _runner("cell_started", 1.0, cell="k1", index=1, label="X_block seq pass 1",
                attempt=1, pid=11, events="e", log_path="l1"),
        {"type": "started", "ts": 1.5, "cell": "k1", "attempt": 1, "jobs": ["j0"]},
        {"type": "sample", "ts": 1.6, "cell": "k1", "attempt": 1, "t": 3.0, "cpu_pct": 99.5,
         "rss_mib": 300.0, "gpu_util_pct": None},
        _runner("hung", 5.0, cell="k1", attempt=1, seen="4 checks without progress"),
        _runner("killed", 6.0, cell="k1", attempt=1, reason="stopped for a retry"),
        _runner("retried", 6.0, cell="k1", attempt=2, manual=True),
        _runner("cell_started", 7.0, cell="k1", index=1, label="X_block seq pass 1",
                attempt=2, pid=12, events="e2", log_path="l2"),
    ):
        state.apply(event)
    cell = state.cells["k1"]
    assert state.runner_pid == 5
    assert (cell.state, cell.attempt, cell.log_path, cell.sample) == ("running", 2, "l2", None)
    assert [(h.attempt, h.state, h.error, h.started_ts, h.ended_ts) for h in cell.history] == [
        (1, "killed", "stopped for a retry", 1.0, 6.0)]
    row = cell_row(cell, now=10.0)
    assert [str(v) for v in row] == ["1", "X_block", "seq", "pass 1", "running", "2", "0:03",
                                     "–", ""]
    rows = history_rows(cell)
    assert [str(v) for v in rows["k1#1"]] == ["1·1", "", "", "↳ earlier attempt", "killed", "1",
                                              "0:05", "–", "stopped for a retry"]


def test_latest_sample_and_summary_are_kept():
    state = CampaignState()
    state.apply(_runner("queued", 0.0, cell="k", index=1, label="D_ens seq pass 1"))
    state.apply(_runner("cell_started", 1.0, cell="k", index=1, label="D_ens seq pass 1",
                        attempt=1, pid=3, events="e", log_path="l"))
    state.apply({"type": "sample", "cell": "k", "attempt": 1, "t": 1.0, "cpu_pct": 50.0,
                 "rss_mib": 200.0})
    state.apply({"type": "summary", "cell": "k", "attempt": 1, "T_group": 1.234,
                 "warnings": ["host busy"]})
    state.apply({"type": "phase", "cell": "k", "attempt": 1, "phase": "group_start"})
    cell = state.cells["k"]
    assert cell.sample["cpu_pct"] == 50.0 and cell.sample["gpu_util_pct"] is None
    assert (cell.T_group, cell.warnings, cell.phase) == (1.234, ["host busy"], "group_start")
    assert str(cell_row(cell, 2.0)[7]) == "1.23 s"
