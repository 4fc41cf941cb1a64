"""The property-based fuzzer of campaign files (issue 44): generated campaign and
experiments files (:mod:`campaign_strategies`: keys known and unknown, types, ranges,
unicode, paths, sizes, damaged bytes) through the entry point of ``fugue-tui --batch FILE
--dry-run`` (:func:`fugue_tui.console.batch.run_batch`), in this process, so that a
thousand examples take seconds, not a process start each.

Properties, for every example:

- it ends as a plan (exit 0) or as one of the project's user errors
  (:class:`engine.errors.FugueError`: the CLI prints it as one line, exit 2) — any other
  exception fails the test with the example's files;
- a refusal's message is one line;
- nothing is written (the working folder's tree is the same after as before);
- a valid campaign plans at least one cell, and the same cell keys when loaded and
  planned again (the JSON plan and the runner's own plan agree).

At least a third of the examples must be valid campaigns that plan a cell (counted here
and as ``hypothesis.event``), or the fuzzer would test mostly its refusals.

The sequence is fixed (``derandomize=True``): the same examples on every run, no example
database. ``FUGUE_FUZZ_EXAMPLES=N`` runs N examples (default :data:`EXAMPLES`);
``FUGUE_FUZZ_SEED=S`` runs a random sequence from seed S instead, to look further by hand.
The example count and time are printed in pytest's summary (``fuzz:`` line, from
``tests/conftest.py``). :func:`test_the_cli_agrees_with_the_in_process_verdict` runs a
handful of examples through the real ``python -m fugue_tui``.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
import time
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest
from hypothesis import HealthCheck, event, given, seed, settings

from engine.errors import FugueError
from fugue_tui.commands.batch import OVERRIDES
from tests.unit.fugue_tui.cli.campaign_strategies import (
    CAMPAIGN,
    EXPERIMENTS,
    Example,
    examples,
)

pytestmark = pytest.mark.fuzz

REPO = Path(__file__).resolve().parents[4]
#: Examples per run: about 25 s on the 2-core CI host (measured: docs in the README).
EXAMPLES = 1200
_NONE = {name: None for name in OVERRIDES}


def _settings(n: int):
    """derandomized (a fixed sequence), no deadline, no example database (nothing written
    in the repository); ``FUGUE_FUZZ_SEED``: a seeded random sequence instead. The health
    checks are off: they would judge the deliberate mix (a filter of path values, large
    descriptions, a loaded CI host's speed), not the product."""
    return settings(max_examples=n, deadline=None, database=None,
                    derandomize="FUGUE_FUZZ_SEED" not in os.environ,
                    suppress_health_check=list(HealthCheck))


def _seeded(test):
    value = os.environ.get("FUGUE_FUZZ_SEED")
    return seed(int(value))(test) if value else test


def _isolate(monkeypatch, root: Path) -> None:
    """No user catalogue, plugin or data folder of this machine's reaches the examples."""
    for name in ("FUGUE_REGISTRY_DIR", "FUGUE_PLUGINS"):
        monkeypatch.delenv(name, raising=False)
    for name in ("FUGUE_CONFIG_DIR", "FUGUE_DATA_DIR"):
        (root / name).mkdir()
        monkeypatch.setenv(name, str(root / name))


def _write(work: Path, example: Example) -> None:
    """A fresh working folder holding the example's files (and nothing else)."""
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir()
    (work / CAMPAIGN).write_bytes(example.campaign)
    if example.experiments is not None:
        (work / EXPERIMENTS).write_bytes(example.experiments)


def _tree(root: Path) -> dict[str, str]:
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            st = path.lstat()
            out[str(path.relative_to(root))] = f"{st.st_mode}:{st.st_size}:{st.st_mtime_ns}"
    return out


def verdict(as_json: bool = False) -> tuple[int, str, str]:
    """``fugue-tui --batch c.toml --dry-run`` in this process, in the working folder:
    (exit status, stdout, the error line or ""). A FugueError is the CLI's one-line exit
    (``fugue_tui.cli``); any other exception propagates."""
    out, err = io.StringIO(), io.StringIO()
    from fugue_tui.console.batch import run_batch

    with redirect_stdout(out), redirect_stderr(err):
        try:
            code = run_batch(CAMPAIGN, dict(_NONE), dry=True, as_json=as_json)
        except FugueError as exc:
            return exc.exit_code, out.getvalue(), f"fugue-tui: error: {exc}"
    return code, out.getvalue(), ""


def _planned_keys() -> list[str]:
    """The cell keys of the runner's own plan (load and plan again)."""
    from engine.define.campaign import load_campaign
    from engine.runner.supervisor import Runner

    return [p.cell.key for p in Runner(load_campaign(CAMPAIGN, dict(_NONE))).plan()]


def _check(work: Path, example: Example, counts: dict[str, int]) -> None:
    _write(work, example)
    os.chdir(work)
    before = _tree(work)
    code, out, line = verdict()
    assert _tree(work) == before, "the dry run wrote files"
    counts["examples"] += 1
    if code == 0:
        _, plan, _ = verdict(as_json=True)
        keys = [cell["key"] for cell in json.loads(plan)["cells"]]
        assert keys, "a valid campaign planned no cell"
        assert keys == _planned_keys(), "the same campaign planned different cell keys"
        assert _tree(work) == before, "the dry run wrote files"
        counts["valid"] += 1
        event("valid campaign, planned")
    else:
        assert code == 2, (code, line)
        assert len(line.splitlines()) == 1, line  # what a terminal or a log shows
        event("refused")


def _run_fuzzer(tmp_path: Path, monkeypatch, n: int) -> dict[str, int]:
    _isolate(monkeypatch, tmp_path)
    monkeypatch.chdir(tmp_path)  # restored after; each example changes into its own folder
    counts = {"examples": 0, "valid": 0}

    @_settings(n)
    @given(examples())
    def fuzz(example: Example) -> None:
        _check(tmp_path / "work", example, counts)

    _seeded(fuzz)()
    return counts


def test_generated_campaigns_plan_or_refuse_in_one_line_and_write_nothing(
        tmp_path, monkeypatch, record_property):
    n = int(os.environ.get("FUGUE_FUZZ_EXAMPLES", EXAMPLES))
    start = time.perf_counter()
    counts = _run_fuzzer(tmp_path, monkeypatch, n)
    took = time.perf_counter() - start
    # hypothesis may stop early once it has tried every distinct example: rarely, not here
    assert counts["examples"] >= min(n, 1000) * 0.9, counts
    assert counts["valid"] >= counts["examples"] / 3, counts
    record_property("fuzz", f"{counts['examples']} examples ({counts['valid']} valid "
                            f"campaigns) in {took:.1f} s")


def test_the_cli_agrees_with_the_in_process_verdict(tmp_path, monkeypatch):
    """A handful of examples through the real ``python -m fugue_tui --batch c.toml
    --dry-run``: its exit status is the in-process one, and a refusal is that same single
    line on stderr, without a traceback."""
    _isolate(monkeypatch, tmp_path)
    monkeypatch.chdir(tmp_path)
    seen: dict = {"codes": set(), "runs": 0}

    @_settings(6)
    @given(examples())
    def agree(example: Example) -> None:
        work = tmp_path / "work"
        _write(work, example)
        os.chdir(work)
        code, _, line = verdict()
        env = {**os.environ, "COLUMNS": "1000",
               "PYTHONPATH": os.pathsep.join(p for p in (str(REPO), os.environ.get(
                   "PYTHONPATH")) if p)}
        result = subprocess.run([sys.executable, "-m", "fugue_tui", "--batch", CAMPAIGN,
                                 "--dry-run"], cwd=work, env=env, capture_output=True,
                                text=True, timeout=120, stdin=subprocess.DEVNULL)
        shown = f"{example!r}\nexit {result.returncode}\nstderr: {result.stderr!r}"
        assert "Traceback" not in result.stderr, shown
        assert result.returncode == code, shown
        if code == 2:
            assert result.stderr.splitlines() == [line], shown
        seen["codes"].add(code)
        seen["runs"] += 1

    _seeded(agree)()
    assert seen["codes"] == {0, 2}, "the handful should hold a plan and a refusal"
    assert seen["runs"] >= 6, seen
