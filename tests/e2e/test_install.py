"""A non-editable install ships the catalogue: ``fugue-tui list`` works from any folder."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


def test_wheel_ships_catalogue_and_lists_from_any_folder(tmp_path):
    wheels, target, elsewhere = tmp_path / "wheels", tmp_path / "site", tmp_path / "elsewhere"
    elsewhere.mkdir()
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(wheels),
                    str(ROOT)], check=True, capture_output=True, timeout=300)
    wheel = next(wheels.glob("fugue_tui-*.whl"))
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target",
                    str(target), str(wheel)], check=True, capture_output=True, timeout=300)
    assert (target / "engine" / "experiments.toml").is_file()
    env = {**os.environ, "PYTHONPATH": str(target)}
    env.pop("FUGUE_REGISTRY_DIR", None)
    out = subprocess.run([sys.executable, "-c",
                          "import engine, sys; from fugue_tui.cli import main; "
                          "print(engine.__file__); sys.exit(main(['list']))"],
                         cwd=elsewhere, env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[0].startswith(str(target))  # the installed copy, not the checkout
    assert "D_ens" in out.stdout and "E17" in out.stdout
