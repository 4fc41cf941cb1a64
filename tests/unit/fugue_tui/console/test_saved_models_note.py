"""``--resume`` and saving (issue 50): a done cell is skipped by ``--resume`` whether it ran
without ``save_models`` or its save failed — its measured rows stay valid, it is not trained
again silently — and the campaign's end names, in one line, each cell that asked for saved
models and has none, with why."""

from __future__ import annotations

import pytest

from engine.define.campaign import load_campaign
from engine.models.listing import missing_models_note
from engine.plugins import load_plugins
from engine.results.columns import GROUP_COLUMNS, GROUPS_FILE
from engine.results.store import append_rows
from engine.runner.supervisor import Runner
from fugue_tui.console.batch import _note_missing_models
from tests.unit.engine.models.run_folders import make_run

FAILED = "failed: runs/c/cells/x/attempt-1/models: No space left on device"


@pytest.fixture
def runner(tmp_path) -> Runner:
    load_plugins()
    (tmp_path / "c.toml").write_text(
        'name = "c"\nexperiments = "D_ens,D_cv"\nexecutors = ["seq"]\nthreads = 1\n'
        f'device = "cpu"\nsave_models = true\nruns_dir = "{tmp_path / "runs"}"\n')
    campaign = load_campaign(tmp_path / "c.toml")
    ens, cv = Runner(campaign).cells
    # D_ens ran before saving was asked; D_cv ran with it, and its save failed
    rows = [{"campaign_id": "c", "cell_key": ens.key, "exp_id": "D_ens", "executor": "seq",
             "pass": "1", "attempt": "1", "status": "ok", "timestamp": "20261205_010000"},
            {"campaign_id": "c", "cell_key": cv.key, "exp_id": "D_cv", "executor": "seq",
             "pass": "1", "attempt": "1", "status": "ok", "timestamp": "20261205_010100",
             **({"save_status": FAILED} if "save_status" in GROUP_COLUMNS else {})}]
    append_rows(tmp_path / "runs" / GROUPS_FILE, rows, GROUP_COLUMNS)
    return Runner(campaign, resume=True)


def test_resume_skips_both_done_cells(runner):
    plan = runner.plan()
    assert [(p.cell.exp_id, p.cell.save_models) for p in plan] == [("D_ens", "true"),
                                                                   ("D_cv", "true")]
    assert all(p.skip.startswith("already ok in campaign 'c' (resume)") for p in plan)


def test_the_note_names_each_cell_without_models_and_why(runner):
    ens, cv = runner.cells
    rows = [{"campaign_id": "c", "cell_key": ens.key, "status": "ok"},
            {"campaign_id": "c", "cell_key": cv.key, "status": "ok", "save_status": FAILED}]
    note = missing_models_note(runner.cells, rows, runner.runs_dir, "c")
    assert note == (
        "no saved models for 2 of the 2 cells that asked for them: D_ens seq pass 1 (it ran "
        "without saving; --resume keeps its rows and does not train it again); D_cv seq pass "
        f"1 (save {FAILED}; its measured rows stand, --resume does not train it again)")
    # D_ens's models on disk (a later run saved them): only D_cv is named
    make_run(runner.run_dir, [(f"{ens.slug}-{ens.key[:8]}", "true", ["D_ens_m0"])])
    note = missing_models_note(runner.cells, rows, runner.runs_dir, "c")
    assert note is not None and note.startswith("no saved models for 1 of the 2 cells")
    assert "D_ens" not in note and "D_cv seq pass 1 (save failed" in note
    make_run(runner.run_dir, [(f"{cv.slug}-{cv.key[:8]}", "true", ["D_cv_f0"])])
    assert missing_models_note(runner.cells, rows, runner.runs_dir, "c") is None
    # nothing asked: no note
    assert missing_models_note([], rows, runner.runs_dir, "c") is None


def test_the_campaigns_end_prints_it_in_one_line(runner, capsys):
    _note_missing_models(runner)
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith("fugue-tui: warning: no saved models for 2 of")
    assert "D_ens seq pass 1 (it ran without saving" in err[0]
