"""The lint is part of the suite (issue 41): ``ruff check`` over the repository passes with
the rules of ``[tool.ruff]`` (pyflakes, pycodestyle, bugbear, import sorting, and PGH004: every
``noqa`` names its rule), and the configuration keeps its promises: the rule families are
selected and no file is exempted wholesale."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _ruff() -> list[str]:
    exe = Path(sys.executable).with_name("ruff")
    if exe.exists():
        return [str(exe)]
    found = shutil.which("ruff")
    if found is None:
        pytest.skip("ruff is not installed (pip install -e '.[test]')")
    return [found]


def test_ruff_passes_on_the_repository():
    done = subprocess.run([*_ruff(), "check", "--no-cache", "--output-format", "concise", "."],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_lint_selects_the_promised_rules_and_exempts_no_file():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["ruff"]
    lint = config["lint"]
    assert {"E", "F", "W", "B", "I", "PGH004"} <= set(lint["select"])
    assert set(lint.get("ignore", [])) <= {"E501"}
    assert "per-file-ignores" not in lint and "exclude" not in config


def test_ruff_finds_what_it_is_configured_to_find(tmp_path):
    """The check can fail: an unsorted import, an unused name and a bare noqa are reported."""
    (tmp_path / "pyproject.toml").write_text((ROOT / "pyproject.toml").read_text())
    (tmp_path / "bad.py").write_text("import sys\nimport os\n\nx = 1  # noqa\n")
    done = subprocess.run([*_ruff(), "check", "--no-cache", "--output-format", "concise", "."],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1
    for rule in ("I001", "F401", "PGH004"):
        assert rule in done.stdout, done.stdout
