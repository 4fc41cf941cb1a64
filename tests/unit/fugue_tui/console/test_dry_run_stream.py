"""``--batch --dry-run`` of a stream campaign: no eager-bucket forecast for a stream's
unified_model cell (its buckets depend on when its jobs arrive: the forecast said 1 of 3
where 10 of 10 ran eager), still one for a batch cell."""

from __future__ import annotations

from engine.define.campaign import load_campaign
from engine.runner.supervisor import Runner
from fugue_tui.console.dry_run import eager_forecast


def _planned(tmp_path, body: str):
    path = tmp_path / "c.toml"
    path.write_text('name = "c"\nexecutors = ["unified_model"]\ndevice = "cpu"\n'
                    f'runs_dir = "{tmp_path / "runs"}"\n' + body)
    return Runner(load_campaign(path)).plan()


def test_a_stream_cell_has_no_eager_forecast_and_a_batch_cell_keeps_it(tmp_path):
    stream = _planned(tmp_path, 'arrivals = { process = "poisson", rate = 1.5, count = 10, '
                                'seed = 3, mix = { D_ens = 2, D_reg = 1, D_cv = 1 } }\n')
    assert stream and eager_forecast(stream) == []
    batch = _planned(tmp_path, 'experiments = "D_mm"\n')  # heterogeneous: some singles
    assert any("will run eager" in line for line in eager_forecast(batch))


def test_the_dry_run_prints_the_stream_line_the_preview_shows(tmp_path):
    import io

    from rich.console import Console

    from fugue_tui.app.models.plan import describe_stream
    from fugue_tui.console.dry_run import dry_run

    path = tmp_path / "c.toml"
    path.write_text('name = "c"\nexecutors = ["seq"]\ndevice = "cpu"\n'
                    f'runs_dir = "{tmp_path / "runs"}"\n'
                    'arrivals = { process = "poisson", rate = 1.5, count = 10, seed = 3, '
                    'mix = { D_ens = 2, D_reg = 1 } }\n')
    runner = Runner(load_campaign(path))
    out = io.StringIO()
    assert dry_run(runner, Console(file=out, width=200, color_system=None), str(path)) == 0
    line = describe_stream(runner.campaign)
    assert line == "stream: poisson, 1.5 jobs/s, 10 jobs, seed 3, mix D_ens 2, D_reg 1"
    assert line in out.getvalue()
