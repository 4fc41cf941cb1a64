"""``--resume --remeasure-holes`` (issue 43): an ok row whose monitor columns are missing
for a reason other than "no device" (a monitor killed mid-cell) is not reused; a CPU
cell's empty GPU columns, or a device that said why it reported nothing, are not holes."""

from __future__ import annotations

import signal

import pytest

from engine.define.campaign import load_campaign
from engine.results.columns import GROUPS_FILE, header
from engine.results.store import append_rows
from engine.runner import cli
from engine.runner.holes import is_hole
from engine.runner.supervisor import Runner

MEASURED = {"monitor_interval_s": "0.5", "monitor_samples": "12", "cpu_util_mean": "98.0"}


def test_what_a_hole_is():
    assert not is_hole(MEASURED)  # a CPU cell: its GPU columns empty for "no device"
    assert is_hole({**MEASURED, "monitor_samples": ""})  # the monitor killed mid-cell
    assert is_hole({**MEASURED, "monitor_samples": "0"})
    assert is_hole({**MEASURED, "cpu_util_mean": ""})
    gpu = {**MEASURED, "gpu_uuid": "GPU-1"}
    assert is_hole(gpu)  # a device, none of its metrics, no reason given
    assert not is_hole({**gpu, "gpu_metrics_missing": "utilization: NotSupported"})
    assert not is_hole({**gpu, "vram_peak_mb": "812"})


def _runner(tmp_path, holes: bool, monitor: bool = True) -> Runner:
    path = tmp_path / "c.toml"
    path.write_text(f'name = "c"\nexperiments = ["D_ens"]\nexecutors = ["seq"]\npasses = 2\n'
                    f'device = "cpu"\nmonitor = {str(monitor).lower()}\n'
                    f'runs_dir = "{tmp_path / "runs"}"\n')
    return Runner(load_campaign(path), resume=True, remeasure_holes=holes)


@pytest.fixture
def rows(tmp_path):
    """Two ok rows of the campaign: cell 1 measured, cell 2 with a monitor hole."""
    cells = _runner(tmp_path, False).cells
    base = {"campaign_id": "c", "status": "ok", "attempt": 1, "timestamp": "20260101_000000"}
    append_rows(tmp_path / "runs" / GROUPS_FILE,
                [{**base, **MEASURED, "cell_key": cells[0].key, "group_id": "seq_1"},
                 {**base, **MEASURED, "monitor_samples": "", "cpu_util_mean": "",
                  "cell_key": cells[1].key, "group_id": "seq_2"}], header(GROUPS_FILE))
    return cells


def _runs(runner: Runner) -> list[str]:
    return [p.cell.key for p in runner.plan() if not p.skip]


def test_resume_remeasures_only_the_cell_with_a_hole(tmp_path, rows):
    assert _runs(_runner(tmp_path, False)) == []  # plain --resume reuses both
    assert _runs(_runner(tmp_path, True)) == [rows[1].key]
    # a campaign without its monitor would leave the same hole: nothing to remeasure
    assert _runs(_runner(tmp_path, True, monitor=False)) == []


def test_remeasure_holes_only_applies_with_resume(tmp_path, capsys):
    path = tmp_path / "c.toml"
    path.write_text(f'name = "c"\nexperiments = ["D_ens"]\nexecutors = ["seq"]\n'
                    f'runs_dir = "{tmp_path / "runs"}"\n')
    saved = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    try:
        assert cli.main([str(path), "--remeasure-holes"]) == 2
    finally:  # main installs the runner's handlers
        for sig, handler in saved.items():
            signal.signal(sig, handler)
    assert "--remeasure-holes only applies with --resume" in capsys.readouterr().err
    assert cli.runner_argv(path, resume=True, remeasure_holes=True)[-2:] == [
        "--resume", "--remeasure-holes"]
