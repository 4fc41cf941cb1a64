"""Issue 50, a whole cell: a save that fails (the disk fills while writing) leaves the
cell ok and its measured rows written, with every digest, and says so in save_status."""

from __future__ import annotations

import errno

import pytest

torch = pytest.importorskip("torch")

import engine.cell.main as cell_main  # noqa: E402
from tests.unit.engine.cell.test_window_rule import _run_cell  # noqa: E402


def test_a_full_disk_while_saving_fails_the_save_not_the_cell(tmp_path, monkeypatch):
    import engine.models.save as save

    ask = cell_main.run_hand_back

    def saving(executor, jobs, results, ctx, name, emit):
        ctx.save_models = "true"  # as `run --save-models` sets it
        return ask(executor, jobs, results, ctx, name, emit)

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(cell_main, "run_hand_back", saving)
    monkeypatch.setattr(save, "write_member", full)
    import tests.unit.engine.cell.test_window_rule as rule

    monkeypatch.setattr(rule, "EXPERIMENTS", rule.EXPERIMENTS.replace('"window_probe"', '"mlp"'))
    threads = torch.get_num_threads()
    try:
        seen, window, group, jobs = _run_cell(tmp_path, "W2", "seq")  # asserts the cell ok
    finally:
        torch.set_num_threads(threads)
    assert group["status"] == "ok" and float(group["T_group"]) > 0
    assert group["save_status"] == "failed: OSError: [Errno 28] No space left on device"
    assert float(group["save_s"]) >= 0
    assert [j["status"] for j in jobs] == ["ok", "ok"]
    assert [len(j["weights_sha256"]) for j in jobs] == [64, 64]
