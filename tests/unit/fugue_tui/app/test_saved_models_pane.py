"""The Results screen's row pane says which of a group's trained models are on disk (issue
50): found from the row's own results file (its runs folder), campaign, cell key and
attempt, with a failed save's ``save_status``; nothing for a row that neither saved nor
asked to."""

from __future__ import annotations

import asyncio

from textual.app import App, ComposeResult

from fugue_tui.app.models.saved_models import models_line
from tests.unit.engine.models.run_folders import make_run

KEY = "abcdef0123456789"


def _row(tmp_path, **more):
    return {"source": str(tmp_path / "runs" / "master_groups.csv"), "campaign_id": "c",
            "cell_key": KEY, "attempt": 1.0, **more}


def test_the_line_counts_the_models_of_the_rows_attempt(tmp_path):
    make_run(tmp_path / "runs" / "c", [(f"001-D_ens-seq-p1-{KEY[:8]}", "true",
                                        ["D_ens_m0", "D_ens_m1"])])
    folder = tmp_path / "runs" / "c" / "cells" / f"001-D_ens-seq-p1-{KEY[:8]}" / "attempt-1"
    assert models_line(_row(tmp_path)) == f"2 on disk: {folder / 'models'}"
    assert models_line(_row(tmp_path, attempt=2)) is None  # another attempt: none there
    failed = _row(tmp_path, attempt=2, save_status="failed: No space left on device")
    assert models_line(failed) == "none on disk (save failed: No space left on device)"
    assert models_line({"exp_id": "D_ens"}) is None  # a harness row: no run folder


def test_the_pane_shows_it_above_the_provenance(tmp_path):
    from fugue_tui.app.widgets.provenance import ProvenancePane

    make_run(tmp_path / "runs" / "c", [(f"001-D_ens-seq-p1-{KEY[:8]}", "best", ["D_ens_m1"])])

    class PaneApp(App):
        def compose(self) -> ComposeResult:
            yield ProvenancePane()

    async def scenario():
        app = PaneApp()
        async with app.run_test():
            pane = app.query_one(ProvenancePane)
            pane.row = _row(tmp_path, host="box")
            text = str(pane.render())
            assert text.startswith("       models 1 on disk: ") and "\n\nprovenance\n" in text
            pane.row = {"host": "box"}
            assert str(pane.render()).startswith("provenance\n")

    asyncio.run(scenario())
