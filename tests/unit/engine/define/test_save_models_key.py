"""``save_models`` (issue 50): a campaign key, an experiment key and ``fugue-tui run
--save-models [true|best]``; carried to each cell (``CellSpec.save_models``: the
experiment's own, else the campaign's), never hashed (the golden scenario
``save_models``), and a bad value is one line naming the file, the key and the value, exit
2, nothing written."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from engine.define.campaign import load_campaign
from engine.define.matrix import build_cells
from engine.errors import ConfigError
from engine.plugins import load_plugins

MACHINE = {"host": "h", "device": "cpu", "gpu_uuid": "", "gpu_name": "", "torch": "2"}
MINE = ('[experiments.U1]\ntype = "cv"\nmodel = "mlp"\ndataset = "wine"\nk = 3\n'
        'batch_size = 16\nepochs = 1\nlr = 0.01\n')


@pytest.fixture(autouse=True)
def _plugins():
    load_plugins()


def _campaign(tmp_path: Path, extra: str = "", experiment: str = "") -> Path:
    (tmp_path / "mine.toml").write_text(MINE + experiment)
    path = tmp_path / "c.toml"
    path.write_text('name = "c"\nexperiments = "D_ens,U1"\nexperiments_file = "mine.toml"\n'
                    f'executors = ["seq"]\nruns_dir = "{tmp_path / "runs"}"\n' + extra)
    return path


@pytest.mark.parametrize("written, value", [("", "false"), ("save_models = false\n", "false"),
                                            ("save_models = true\n", "true"),
                                            ('save_models = "best"\n', "best"),
                                            ('save_models = "true"\n', "true")])
def test_the_campaign_value_reaches_every_cell(tmp_path, written, value):
    campaign = load_campaign(_campaign(tmp_path, written))
    assert campaign.save_models == value
    assert [c.save_models for c in build_cells(campaign, MACHINE)] == [value, value]
    assert ("save_models" in campaign.resolved()) == (value != "false")


def test_an_experiment_decides_for_its_own_cells_and_no_key_moves(tmp_path):
    plain = build_cells(load_campaign(_campaign(tmp_path)), MACHINE)
    mixed = build_cells(load_campaign(_campaign(tmp_path, 'save_models = "best"\n',
                                                "save_models = true\n")), MACHINE)
    assert [(c.exp_id, c.save_models) for c in mixed] == [("D_ens", "best"), ("U1", "true")]
    assert ([(c.key, c.config_key, c.workload_key, c.slug) for c in mixed]
            == [(c.key, c.config_key, c.workload_key, c.slug) for c in plain])
    assert "save_models" not in mixed[1].experiment  # the hashed definition holds none


def test_a_bad_campaign_value_is_one_line(tmp_path):
    path = _campaign(tmp_path, 'save_models = "all"\n')
    with pytest.raises(ConfigError) as err:
        load_campaign(path)
    assert str(err.value) == f"{path}: key 'save_models' must be false, true or \"best\", got 'all'"
    with pytest.raises(ConfigError, match="key 'save_models'.*got 3"):
        load_campaign(_campaign(tmp_path, "save_models = 3\n"))


def test_a_bad_experiment_value_names_the_experiments_file(tmp_path):
    with pytest.raises(ConfigError) as err:
        load_campaign(_campaign(tmp_path, "", 'save_models = "all"\n'))
    assert "mine.toml" in str(err.value) and "U1" in str(err.value)
    assert "key 'save_models' must be false, true or \"best\", got 'all'" in str(err.value)


def test_batch_refuses_it_with_exit_2_and_writes_nothing(tmp_path, capsys):
    from fugue_tui.cli import main

    path = _campaign(tmp_path, 'save_models = "all"\n')
    assert main(["--batch", str(path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "c.toml: key 'save_models'" in err[0] and "'all'" in err[0]
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize("flag, value", [([], "false"), (["--save-models"], "true"),
                                         (["--save-models", "best"], "best"),
                                         (["--save-models", "false"], "false")])
def test_run_save_models_flag(tmp_path, monkeypatch, flag, value):
    import fugue_tui.console.batch
    from fugue_tui.cli import main

    seen: list[Any] = []

    def capture(path: str, overrides: dict[str, Any], **_: Any) -> int:
        seen.append(load_campaign(path, overrides))
        return 0

    monkeypatch.setattr(fugue_tui.console.batch, "run_batch", capture)
    monkeypatch.chdir(tmp_path)
    assert main(["run", "--exp", "D_ens", *flag, "--runs-dir", str(tmp_path / "runs"),
                 "--dry-run"]) == 0
    assert seen[0].save_models == value
    assert {c.save_models for c in build_cells(seen[0], MACHINE)} == {value}


def test_run_refuses_a_bad_value_in_one_line(tmp_path, monkeypatch, capsys):
    from fugue_tui.cli import main

    monkeypatch.chdir(tmp_path)
    assert main(["run", "--exp", "D_ens", "--save-models", "all", "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert "argument --save-models: must be false, true or \"best\", got 'all'" in err
    assert list(tmp_path.iterdir()) == []
