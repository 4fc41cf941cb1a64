"""``fugue-tui``'s command line pinned as the user sees it: every parser's ``--help`` (the
top level and each sub-command, at 100 columns) and the bash completion script, which
lists every option, its dest-derived completion and its choices. The parser is assembled
from ``fugue_tui.commands`` and the campaign keys' declarations
(``engine.define.campaign_schema``); moving a flag's declaration must not change a byte
of what ``--help`` prints.

Re-pin after a deliberate change to the command line with
``FUGUE_PIN_HELP=1 pytest tests/unit/test_cli_help_pinned.py`` and review the diff."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[4]
PINS = REPO / "tests" / "fixtures" / "cli_help" / "help.json"


_RENDER = """
import json
from engine.plugins import load_builtins
from fugue_tui.cli import build_parser
import shtab

load_builtins()
parser = build_parser()
helps = {"fugue-tui": parser.format_help()}
for action in parser._actions:
    for name, sub in (getattr(action, "choices", None) or {}).items():
        if hasattr(sub, "format_help"):
            helps[f"fugue-tui {name}"] = sub.format_help()
helps["completion bash"] = shtab.complete(parser, shell="bash")
print(json.dumps(helps))
"""


def _helps() -> dict[str, str]:
    """Every help text, rendered in a fresh process: ``run --help`` lists the registered
    executors and workload types, and other tests register plugins in this one."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("FUGUE_REGISTRY_DIR", "FUGUE_PLUGINS", "NO_COLOR")}
    env["COLUMNS"] = "100"  # argparse and the run epilog wrap to it
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p)
    out = subprocess.run([sys.executable, "-c", _RENDER], cwd=REPO, env=env, check=True,
                         capture_output=True, text=True)
    return json.loads(out.stdout)


def test_help_texts_are_pinned():
    helps = _helps()
    if os.environ.get("FUGUE_PIN_HELP"):
        PINS.write_text(json.dumps(helps, indent=1, ensure_ascii=False) + "\n",
                        encoding="utf-8")
        pytest.skip("re-pinned")
    pinned = json.loads(PINS.read_text(encoding="utf-8"))
    assert sorted(helps) == sorted(pinned)
    for name, text in helps.items():
        assert text == pinned[name], name


def test_every_sub_command_is_pinned():
    """The pin covers the commands main() dispatches (a new command gets pinned too)."""
    helps = _helps()
    assert {"fugue-tui run", "fugue-tui report", "fugue-tui profile", "fugue-tui simulate",
            "fugue-tui list", "fugue-tui validate", "fugue-tui prefetch", "fugue-tui control",
            "fugue-tui bench", "fugue-tui dashboard", "fugue-tui completion"} <= set(helps)


def test_report_help_names_the_engines_baseline():
    """``report --help`` says "speedup over seq" without loading pandas; the word it uses
    is the engine's baseline executor."""
    from engine.results.derived import BASELINE_EXECUTOR
    from fugue_tui.commands.report import BASELINE_WORD

    assert BASELINE_WORD == BASELINE_EXECUTOR
