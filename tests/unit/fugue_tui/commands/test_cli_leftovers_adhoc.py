"""``fugue-tui run`` names each generated campaign after its definition: a second ad-hoc run
with other flags never overwrites the first one's campaign and experiments files (the
provenance of its rows), and the same flags again reuse the folder (so --resume continues
it). The campaign itself is not run here (``run_batch`` is replaced)."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

import fugue_tui.console.batch
from fugue_tui.cli import build_parser
from fugue_tui.commands.run import run


@pytest.fixture
def started(monkeypatch, tmp_path):
    """The campaign files run_batch was given, in order (nothing runs)."""
    calls: list[Path] = []

    def fake_run_batch(path, overrides, dry=False, resume=False, since=None, shown=None,
                       reuse_any=False, words=None, as_json=False, remeasure_holes=False):
        calls.append(Path(path))
        return 0

    monkeypatch.setattr(fugue_tui.console.batch, "run_batch", fake_run_batch)
    monkeypatch.chdir(tmp_path)
    return calls


def _run(*flags: str) -> int:
    return run(build_parser().parse_args(["run", *flags, "--runs-dir", "runs"]))


def _experiment(campaign: Path) -> dict:
    doc = tomllib.loads(campaign.read_text())
    experiments = tomllib.loads((campaign.parent / doc["experiments_file"]).read_text())
    return doc, experiments["experiments"]["adhoc"]


def test_each_adhoc_definition_keeps_its_own_files(started, tmp_path):
    assert _run("--model", "mlp", "--dataset", "wine", "--epochs", "1") == 0
    assert _run("--model", "mlp", "--dataset", "digits", "--epochs", "2") == 0
    first, second = started
    assert first != second and first.parent == second.parent == Path("runs/.adhoc")
    doc1, exp1 = _experiment(first)
    doc2, exp2 = _experiment(second)
    # the first run's definition is still there, as it ran
    assert (exp1["dataset"], exp1["epochs"]) == ("wine", 1)
    assert (exp2["dataset"], exp2["epochs"]) == ("digits", 2)
    assert doc1["name"] != doc2["name"] and doc1["name"].startswith("run-adhoc-")
    assert first.name == f"{doc1['name']}.toml"
    assert doc1["experiments_file"] == f"{doc1['name']}.experiments.toml"
    assert len(list((tmp_path / "runs" / ".adhoc").glob("*.experiments.toml"))) == 2


def test_the_same_flags_reuse_the_name_and_the_files(started):
    flags = ("--model", "mlp", "--dataset", "wine", "--epochs", "1")
    _run(*flags)
    before = started[0].read_bytes()
    _run(*flags, "--resume")
    assert started[0] == started[1] and started[1].read_bytes() == before
    # a catalogue selection is named after its definition too
    _run("--exp", "D_ens", "--passes", "2")
    _run("--exp", "D_ens", "--passes", "3")
    assert started[2] != started[3] and started[2].name.startswith("run-D_ens-")
    assert tomllib.loads(started[2].read_text())["passes"] == 2


def test_another_definition_under_the_short_name_is_not_overwritten(started, tmp_path):
    _run("--model", "mlp", "--dataset", "wine", "--epochs", "1")
    (first,) = started
    first.write_text(first.read_text() + "# edited by hand\n")
    edited = first.read_bytes()
    _run("--model", "mlp", "--dataset", "wine", "--epochs", "1")
    assert started[1] != first and started[1].stem.startswith(first.stem)  # more digits
    assert first.read_bytes() == edited
