"""Paths through platformdirs (issue 29): the data root (an existing
~/.cache/fugue-tui/data kept), the config folder and the default user experiments file,
each with its environment override."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from engine.dirs import config_dir, data_dir, default_experiments_file

REPO = Path(__file__).resolve().parents[3]


def _home(monkeypatch, tmp_path: Path) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    for name in ("FUGUE_DATA_DIR", "FUGUE_CONFIG_DIR", "FUGUE_REGISTRY_DIR", "XDG_CACHE_HOME",
                 "XDG_CONFIG_HOME"):
        monkeypatch.delenv(name, raising=False)
    return home


def test_data_dir_follows_xdg_keeps_the_legacy_folder_and_obeys_fugue_data_dir(
        monkeypatch, tmp_path):
    home = _home(monkeypatch, tmp_path)
    if sys.platform.startswith("linux"):
        assert data_dir() == home / ".cache" / "fugue-tui" / "data"
        monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg-cache"))
        assert data_dir() == tmp_path / "xdg-cache" / "fugue-tui" / "data"
    legacy = home / ".cache" / "fugue-tui" / "data"
    legacy.mkdir(parents=True)  # datasets downloaded by an earlier version: still used
    assert data_dir() == legacy
    monkeypatch.setenv("FUGUE_DATA_DIR", str(tmp_path / "mine"))
    assert data_dir() == tmp_path / "mine"
    assert not (tmp_path / "mine").exists()  # choosing creates nothing


def test_config_dir_and_the_default_experiments_file(monkeypatch, tmp_path):
    home = _home(monkeypatch, tmp_path)
    if sys.platform.startswith("linux"):
        assert config_dir() == home / ".config" / "fugue-tui"
        monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg-config"))
        assert config_dir() == tmp_path / "xdg-config" / "fugue-tui"
    monkeypatch.setenv("FUGUE_CONFIG_DIR", str(tmp_path / "cfg"))
    assert default_experiments_file() == tmp_path / "cfg" / "experiments.toml"


def test_the_default_experiments_file_is_merged_and_hashed(tmp_path):
    cfg = tmp_path / "xdg-config" / "fugue-tui"
    cfg.mkdir(parents=True)
    (cfg / "experiments.toml").write_text(
        '[experiments.Z_mine]\ntype = "ensemble"\nmodel = "mlp"\ndataset = "wine"\nk = 2\n'
        'batch_size = 8\nepochs = 1\nlr = 0.01\n')
    env = {k: v for k, v in os.environ.items()
           if k not in ("FUGUE_CONFIG_DIR", "FUGUE_REGISTRY_DIR", "FUGUE_PLUGINS")}
    env.update(PYTHONPATH=str(REPO), HOME=str(tmp_path), XDG_CONFIG_HOME=str(tmp_path /
                                                                           "xdg-config"))
    proc = subprocess.run([sys.executable, "-m", "fugue_tui", "list", "--json"], env=env,
                          capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    ids = [e["id"] for e in json.loads(proc.stdout)["experiments"]]
    assert ids[-1] == "Z_mine" and "D_ens" in ids


def test_a_campaign_records_the_default_experiments_files_hash(monkeypatch, tmp_path):
    import hashlib

    from engine.define.campaign import load_campaign

    _home(monkeypatch, tmp_path)
    monkeypatch.setenv("FUGUE_CONFIG_DIR", str(tmp_path / "cfg"))
    (tmp_path / "cfg").mkdir()
    (tmp_path / "c.toml").write_text('experiments = "D_ens"\nexecutors = ["seq"]\n')
    assert load_campaign(tmp_path / "c.toml").experiments_file_hash == ""
    default = tmp_path / "cfg" / "experiments.toml"
    default.write_text('[experiments.D_ens]\nepochs = 2\n')
    campaign = load_campaign(tmp_path / "c.toml")
    assert campaign.experiments_file_hash == hashlib.sha256(
        default.read_bytes()).hexdigest()[:16]
    assert campaign.catalogue.get("D_ens").epochs == 2
