"""``--resume`` skips a cell only for an ok row of *this* campaign: an ok row with the same
cell key left by another campaign in the same runs folder is reused only when asked
(``--reuse-from-any-campaign``), and the plan says where each skipped row came from.

(A runner killed before its first row, resumed in a runs folder another campaign had
filled with the same cells, used to exit 0 with no row of its own.)"""

from __future__ import annotations

from pathlib import Path

import pytest
from rich.console import Console

from engine.define.campaign import load_campaign
from engine.results.columns import GROUPS_FILE, header
from engine.results.store import append_rows
from engine.runner import cli as runner_cli
from engine.runner.supervisor import Runner
from fugue_tui import cli as fugue_cli
from fugue_tui.console.dry_run import dry_run

CAMPAIGN = """
name = "{name}"
experiments = ["D_ens"]
executors = ["seq"]
passes = 2
device = "cpu"
runs_dir = "{runs}"
"""


def _campaign(tmp_path: Path, name: str) -> Path:
    path = tmp_path / f"{name}.toml"
    path.write_text(CAMPAIGN.format(name=name, runs=tmp_path / "runs"))
    return path


def _ok_row(tmp_path: Path, campaign_id: str, key: str, attempt: int = 1,
            timestamp: str = "20260101_120000") -> None:
    append_rows(tmp_path / "runs" / GROUPS_FILE,
                [{"campaign_id": campaign_id, "cell_key": key, "status": "ok",
                  "attempt": attempt, "timestamp": timestamp, "group_id": f"seq_{key[:8]}"}],
                header(GROUPS_FILE))


@pytest.fixture
def other_campaign_done(tmp_path) -> list[str]:
    """Campaign "a" ran both cells of D_ens × seq ok; campaign "b" has the same cells."""
    keys = [c.key for c in Runner(load_campaign(_campaign(tmp_path, "a"))).cells]
    assert keys == [c.key for c in Runner(load_campaign(_campaign(tmp_path, "b"))).cells]
    for key in keys:
        _ok_row(tmp_path, "a", key)
    return keys


def test_resume_skips_only_rows_of_its_own_campaign(tmp_path, other_campaign_done):
    runner = Runner(load_campaign(tmp_path / "b.toml"), resume=True)
    assert [p.skip for p in runner.plan()] == ["", ""]  # a's rows are not b's measurements
    _ok_row(tmp_path, "b", other_campaign_done[1], attempt=2, timestamp="20260102_080000")
    plan = runner.plan()
    assert plan[0].skip == ""
    assert plan[1].skip.startswith("already ok") and "campaign 'b'" in plan[1].skip
    assert plan[1].reused == {"campaign_id": "b", "attempt": "2",
                              "timestamp": "20260102_080000"}


def test_reusing_other_campaigns_rows_is_explicit_and_the_plan_names_them(
        tmp_path, other_campaign_done):
    runner = Runner(load_campaign(tmp_path / "b.toml"), resume=True, reuse_any=True)
    plan = runner.plan()
    assert all(p.skip.startswith("already ok") and "campaign 'a'" in p.skip for p in plan)
    assert all(p.reused and p.reused["campaign_id"] == "a" for p in plan)
    console = Console(width=120, record=True, color_system=None)
    assert dry_run(runner, console, "b.toml") == 0
    text = console.export_text()
    assert "skip cells 1-2: already ok in campaign 'a'" in text, text


def test_own_rows_win_over_other_campaigns_rows(tmp_path, other_campaign_done):
    _ok_row(tmp_path, "b", other_campaign_done[0], timestamp="20250101_000000")
    plan = Runner(load_campaign(tmp_path / "b.toml"), resume=True, reuse_any=True).plan()
    assert plan[0].reused["campaign_id"] == "b" and plan[1].reused["campaign_id"] == "a"


def test_the_runner_says_where_a_skipped_row_came_from(tmp_path, other_campaign_done):
    """The runner's skipped events carry the row's campaign; a resumed campaign whose
    cells all come from elsewhere says so instead of silently exiting 0 with nothing."""
    from engine.events import read_events

    runner = Runner(load_campaign(tmp_path / "b.toml"), resume=True, reuse_any=True)
    assert runner.run().exit_code == 0
    events = read_events(tmp_path / "runs" / "b" / "runner.jsonl")
    skipped = [e for e in events if e["type"] == "skipped"]
    assert [e["from_campaign"] for e in skipped] == ["a", "a"]
    started = next(e for e in events if e["type"] == "campaign_started")
    assert started["resume"] is True and started["reuse_any"] is True


def test_reuse_flag_needs_resume(tmp_path, capsys):
    path = _campaign(tmp_path, "b")
    assert runner_cli.main([str(path), "--reuse-from-any-campaign"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err == ["fugue-tui: error: --reuse-from-any-campaign only applies with --resume"]
    assert not (tmp_path / "runs").exists()
    assert fugue_cli.main(["--batch", str(path), "--reuse-from-any-campaign"]) == 2
    assert "--reuse-from-any-campaign only applies with --resume" in capsys.readouterr().err


def test_since_needs_resume_too(tmp_path, capsys):
    """--since without --resume ran every cell and said nothing (a user test)."""
    path = _campaign(tmp_path, "b")
    assert runner_cli.main([str(path), "--since", "20260101_000000"]) == 2
    assert capsys.readouterr().err.splitlines() == [
        "fugue-tui: error: --since only applies with --resume"]
    assert fugue_cli.main(["--batch", str(path), "--since", "20260101_000000"]) == 2
    assert "--since only applies with --resume" in capsys.readouterr().err
    assert not (tmp_path / "runs").exists()


def test_the_flag_reaches_the_runner_argv():
    argv = runner_cli.runner_argv("c.toml", resume=True, reuse_any=True)
    args = runner_cli.build_arg_parser().parse_args(argv[3:])
    assert args.resume and args.reuse_from_any_campaign


def test_batch_dry_run_reuses_only_when_asked(tmp_path, other_campaign_done, capsys):
    path = str(tmp_path / "b.toml")
    assert fugue_cli.main(["--batch", path, "--dry-run", "--resume"]) == 0
    assert "already ok" not in capsys.readouterr().out
    assert fugue_cli.main(["--batch", path, "--dry-run", "--resume",
                           "--reuse-from-any-campaign"]) == 0
    assert "already ok in campaign 'a'" in capsys.readouterr().out
