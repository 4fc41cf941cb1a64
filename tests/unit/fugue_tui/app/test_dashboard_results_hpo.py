"""The Results screen's issue 23/25 parts, Textual-free: the K column and the ``k:`` filter,
the hpo time-to-best columns (time_to_best_s, the cell's ttb_speedup, best_trial) and the
best-so-far curve of an hpo row."""

from __future__ import annotations

import json

import pandas as pd

from engine.results.analysis import cell_columns
from engine.results.load import load_runs, runs_from_frames
from fugue_tui.app.models.hpo import (
    best_curve,
    curve_text,
    sparkline,
    step_values,
    ttb_by_row,
)
from fugue_tui.app.models.results import (
    COLUMNS,
    apply_filter,
    parse_filter,
    row_key,
    table_rows,
)
from fugue_tui.format import MISSING as DASH
from fugue_tui.report.figures import build
from tests.snapshots.helpers import FIXTURES

AT = {key: i for i, (key, _, _) in enumerate(COLUMNS)}


def hpo_runs():
    """Two passes of an hpo experiment under sha, seq and unified (same decisions: no job
    rows), plus a classification ensemble at K = 8 and 16."""
    curve = {"best_so_far": {"metric": "val_loss", "mode": "min", "epsilon": 0.01,
                             "curve": [[0.5, 0.9], [1.5, 0.6], [3.0, 0.41]]}}
    rows = []
    for executor, ttb in (("seq", "4.0"), ("unified_model", "1.0")):
        for p in ("1", "2"):
            rows.append({"exp_id": "D_hpo", "executor": executor, "scheduler": "sha",
                         "pass": p, "K": "8", "T_group": "5", "throughput_group": "100",
                         "status": "ok", "host": "m1", "cell_key": f"{executor}-hpo",
                         "time_to_best_s": ttb, "best_trial": "D_hpo_t3",
                         "best_val_metric": "0.41", "executor_info": json.dumps(curve)})
    for k in ("8", "16"):
        rows.append({"exp_id": "D_ens", "executor": "unified_model", "pass": "1", "K": k,
                     "T_group": "2", "throughput_group": "50", "status": "ok", "host": "m1",
                     "cell_key": f"ens-{k}"})
    return runs_from_frames(pd.DataFrame(rows))


def test_k_column_and_exact_k_filter():
    runs = hpo_runs()
    rows = table_rows(runs.groups)
    assert [r[AT["K"]] for r in rows.values()] == ["8"] * 5 + ["16"]
    assert len(apply_filter(runs, parse_filter("k:8")).groups) == 5
    assert len(apply_filter(runs, parse_filter("k:16")).groups) == 1  # not 16 ⊃ "1", "6"
    assert len(apply_filter(runs, parse_filter("k:1")).groups) == 0  # exact, not substring
    assert len(apply_filter(runs, parse_filter("k:8,16 exp:D_ens")).groups) == 2
    assert len(apply_filter(runs, parse_filter("K:none")).groups) == 0
    bad = parse_filter("k:eight")
    assert bad.terms == () and "k takes numbers" in bad.error
    # a bare word does not match K ("8" is not a free-text hit on every K = 8 row)
    assert len(apply_filter(runs, parse_filter("8")).groups) == 0


def test_harness_rows_have_no_k_filter_hits_for_none_and_no_ttb():
    runs = load_runs(FIXTURES / "harness")
    rows = list(table_rows(runs.groups).values())
    assert all(r[AT["ttb"]] == DASH and r[AT["ttb_speedup"]] == DASH
               and r[AT["best_trial"]] == DASH for r in rows)  # missing, never 0
    assert len(apply_filter(runs, parse_filter("k:none")).groups) == 0


def test_ttb_columns_show_the_cells_speedup_over_seq_under_the_same_scheduler():
    runs = hpo_runs()
    results = build(runs, n_boot=0)
    ttb = ttb_by_row(runs.groups, results.table, cell_columns(), row_key)
    rows = table_rows(runs.groups, ttb)
    hpo = [r for r in rows.values() if r[0] == "D_hpo"]
    assert [r[AT["ttb"]] for r in hpo] == ["4.00", "4.00", "1.00", "1.00"]
    # seq's own cell is its baseline (1×); unified reaches the best 4× sooner
    assert [r[AT["ttb_speedup"]] for r in hpo] == ["1.00×", "1.00×", "4.00×", "4.00×"]
    assert {r[AT["best_trial"]] for r in hpo} == {"D_hpo_t3"}
    ens = [r for r in rows.values() if r[0] == "D_ens"]
    assert all(r[AT["ttb"]] == DASH and r[AT["ttb_speedup"]] == DASH for r in ens)


def test_best_so_far_curve_of_an_hpo_row():
    row = hpo_runs().groups.to_dict("records")[2]
    best = best_curve(row)
    assert best["metric"] == "val_loss" and best["curve"][-1] == (3.0, 0.41)
    assert best_curve({"executor_info": "{}"}) is None
    assert best_curve({"executor_info": "not json"}) is None
    steps = step_values(best["curve"], 4.0, 8)
    assert steps == [0.9, 0.9, 0.6, 0.6, 0.6, 0.41, 0.41, 0.41]
    assert step_values(best["curve"], 4.0, 16)[0] is None  # before the first validation
    # a loss: lower is better and drawn up; nothing drawn where nothing was known
    assert sparkline(steps, higher_is_up=False) == "▁▁▅▅▅███"
    assert sparkline([None, 1.0, 2.0]) == " ▁█"
    text = curve_text(best, 1.0, 20).plain
    assert "best so far (val_loss, lower is better" in text
    assert "first 0.9 at 0.5 s → best 0.41 at 3.0 s" in text
    assert "time to best (within 1 %): 1.0 s" in text


def test_results_screen_k_filter_ttb_columns_and_best_so_far_curve(tmp_path, monkeypatch):
    """Through the keyboard: the K column, ``k:`` typed into the filter (a bad value says
    why), the hpo columns, and the selected hpo row's best-so-far curve in view."""
    import asyncio

    from textual.widgets import DataTable, Static

    from engine.results.columns import GROUPS_FILE
    from fugue_tui.app.app import FugueApp
    from fugue_tui.app.screens.results import ResultsScreen
    from tests.app_screen import screen_text, until

    monkeypatch.setenv("FUGUE_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.chdir(tmp_path)
    runs = tmp_path / "runs"
    runs.mkdir()
    frame = pd.DataFrame(hpo_runs().groups)
    keep = ["exp_id", "executor", "scheduler", "pass", "K", "T_group", "throughput_group",
            "status", "host", "cell_key", "time_to_best_s", "best_trial", "best_val_metric",
            "executor_info"]
    frame[keep].to_csv(runs / GROUPS_FILE, index=False)

    async def scenario():
        app = FugueApp(results=str(runs))
        async with app.run_test(size=(150, 40)) as pilot:
            screen = await until(pilot, lambda: isinstance(app.screen, ResultsScreen)
                                 and app.screen.results is not None and app.screen,
                                 timeout=20, what="the rows")
            table = screen.query_one("#groups", DataTable)
            await until(pilot, lambda: table.row_count == 6, what="6 rows")
            at = {key: i for i, (key, _, _) in enumerate(COLUMNS)}
            rows = [[str(c) for c in table.get_row_at(i)] for i in range(table.row_count)]
            assert [r[at["ttb_speedup"]] for r in rows[:4]] == ["1.00×"] * 2 + ["4.00×"] * 2
            # the first row is an hpo row: its curve is in the provenance pane, in view
            pane = screen.query_one("#provenance", Static)
            await until(pilot, lambda: "best so far (val_loss" in str(pane.render()),
                        what="the curve")
            assert "time to best (within 1 %): 4.0 s" in screen_text(app)
            await pilot.press("slash", *"k:16", "enter")
            await until(pilot, lambda: table.row_count == 1, what="k:16")
            assert str(table.get_row_at(0)[at["K"]]) == "16"
            table.move_cursor(row=0)
            await until(pilot, lambda: "best so far" not in str(pane.render()),
                        what="no curve for an ensemble row")
            await pilot.press("slash", "end", *"x", "enter")  # k:16x: numbers only
            await until(pilot, lambda: "k takes numbers" in screen_text(app),
                        what="the filter error")

    asyncio.run(scenario())
