"""The import contracts in ``pyproject.toml`` (import-linter): the runner side never imports
torch nor the cell's machinery, the runner reaches a cell only through its protocol module,
only the protocol modules read and write JSON, the engine never imports the UI, the headless
front end, the live model and the report never import the dashboard (nor Textual), no import cycle between
sibling packages or modules.

The contracts are checked on the tree as it is, and each is shown to break on a copy of the
tree with one offending module added (a contract that cannot fail protects nothing).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LINT = Path(sys.executable).parent / "lint-imports"


def _lint(root: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(root)}  # the copy's packages, not the installed ones
    return subprocess.run([str(LINT), "--no-cache", "--config", str(root / "pyproject.toml")],
                          cwd=root, env=env, capture_output=True, text=True, timeout=120)


def test_the_tree_keeps_every_contract():
    out = _lint(ROOT)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    assert "Contracts: 7 kept, 0 broken." in out.stdout


@pytest.mark.parametrize("module, source, broken", [
    ("engine/define/zz_offender.py", "import torch\n", "the runner side never imports torch"),
    ("engine/results/zz_offender.py", "import rich\n", "the engine never imports the UI"),
    ("engine/observe/zz_offender.py", "import engine.cell.sidecar\n",
     "the runner side never imports the cell's machinery"),
    # control already imports observe: observe importing the runner closes a circle
    ("engine/observe/zz_offender.py", "import engine.runner.supervisor\n",
     "no import cycles between sibling packages or modules"),
    ("engine/runner/zz_offender.py", "from engine.cell.concurrency import concurrency_columns\n",
     "the runner reaches a cell only through its protocol module"),
    ("engine/runner/zz_offender.py", "import json\n",
     "only the protocol modules read and write JSON documents"),
    ("engine/observe/zz_offender.py", "def later():\n    import json\n",
     "only the protocol modules read and write JSON documents"),
    # (importing fugue_tui.app itself would also close a circle: app -> commands -> console)
    ("fugue_tui/console/zz_offender.py", "import textual.widget\n",
     "batch, live view and report never import the dashboard"),
    ("fugue_tui/live/zz_offender.py", "import textual\n",
     "batch, live view and report never import the dashboard"),
])
def test_each_contract_breaks_on_an_offending_module(tmp_path, module, source, broken):
    for part in ("engine", "fugue_tui"):
        shutil.copytree(ROOT / part, tmp_path / part,
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    (tmp_path / module).write_text(source)
    out = _lint(tmp_path)
    assert out.returncode != 0
    assert f"{broken} BROKEN" in out.stdout
    assert "Contracts: 6 kept, 1 broken." in out.stdout


def test_the_runner_contract_lists_every_cell_module_but_its_protocol():
    """The contract names what the runner may not import; a module added to engine.cell is
    forbidden to it until someone decides otherwise (here, by listing it)."""
    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    contract = next(c for c in contracts["contracts"]
                    if c["name"] == "the runner reaches a cell only through its protocol module")
    modules = {f"engine.cell.{p.stem}" for p in (ROOT / "engine/cell").glob("*.py")
               if p.stem != "__init__"}
    assert set(contract["forbidden_modules"]) == modules - {"engine.cell.protocol"}
