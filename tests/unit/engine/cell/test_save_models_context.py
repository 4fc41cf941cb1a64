"""The cell hands ``save_models`` to its executor (issue 50): the value on the cell's spec
(``CellSpec.save_models``, from the campaign or experiment key) is the
``CellContext.save_models`` the executor's hand-back phase reads. A real cell of the
smallest kind runs here (``engine.cell.main.run_cell``, from the runner's spec)."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from engine.cell.main import run_cell
from engine.cell.output import CellEvents
from engine.define.campaign import load_campaign
from engine.executors.seq import SeqExecutor
from engine.runner.supervisor import Runner

EXPERIMENTS = ('[experiments.T1]\ntype = "ensemble"\nmodel = "mlp"\ndataset = "wine"\n'
               'k = 1\nbatch_size = 128\nepochs = 1\nlr = 0.01\nmodel_kwargs = { hidden = 8 }\n')


@pytest.mark.parametrize("written, value", [("", "false"), ('save_models = "best"\n', "best")])
def test_the_context_carries_the_cells_value(tmp_path, monkeypatch, written, value):
    seen: list[str] = []
    setup = SeqExecutor.setup

    def spy(self, jobs, ctx):
        seen.append(ctx.save_models)
        return setup(self, jobs, ctx)

    monkeypatch.setattr(SeqExecutor, "setup", spy)
    (tmp_path / "exps.toml").write_text(EXPERIMENTS)
    (tmp_path / "c.toml").write_text(
        'name = "s"\nexperiments = "T1"\nexperiments_file = "exps.toml"\nexecutors = ["seq"]\n'
        f'device = "cpu"\nthreads = 1\nmonitor = false\nruns_dir = "{tmp_path / "runs"}"\n'
        + written)
    runner = Runner(load_campaign(tmp_path / "c.toml"))
    spec = replace(runner.cell_spec(runner.cells[0], 1), group_id="seq_0000000b")
    assert spec.cell.save_models == value
    threads = torch.get_num_threads()
    events = CellEvents(spec.events, cell=spec.cell.key, attempt=1)
    try:
        assert run_cell(spec, events) == "ok"
    finally:
        events.close()
        torch.set_num_threads(threads)
    assert seen == [value]
