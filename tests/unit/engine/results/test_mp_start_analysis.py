"""mp's two starts are two strategies in every reading of the results: the analysis never
pools a forkserver row with a spawn row (their config keys differ, and mp_start is a cell
column, so a cell's rows and label say which), and the report, export and charts name it.
The report shows each cell's set-up (``setup_s``, outside ``T_group``) beside ``T_group``."""

from __future__ import annotations

import pandas as pd

from engine.results.analysis import speedups
from engine.results.load import runs_from_frames
from fugue_tui.report.figures import cell_label


def _row(executor: str, t: float, start: str = "", key: str = "k", setup: str = "") -> dict:
    return {"exp_id": "D_ens", "executor": executor, "T_group": str(t), "status": "ok",
            "mp_start": start, "config_key": key, "compile_mode": "off", "machine": "m",
            "host": "m", "pass": "1", "setup_s": setup}


def test_each_start_is_its_own_cell_with_its_own_speedup():
    rows = [_row("seq", 1.0, key="s"), _row("mp", 0.5, "forkserver", "f", "2.5"),
            _row("mp", 10.0, "spawn", "x"), _row("mp", 12.0, "", "old")]  # an older row
    table = speedups(runs_from_frames(pd.DataFrame(rows)), n_boot=0)
    mp = table[table["executor"] == "mp"].set_index("mp_start")
    assert sorted(mp.index) == ["", "forkserver", "spawn"]
    assert mp.loc["forkserver", "speedup"] == 2.0 and mp.loc["spawn", "speedup"] == 0.1
    assert cell_label(mp.reset_index().iloc[0].to_dict()).startswith("D_ens mp")
    labels = {cell_label(r) for r in table.to_dict("records")}
    assert {"D_ens mp forkserver", "D_ens mp spawn", "D_ens mp", "D_ens seq"} == labels
    from fugue_tui.report.cell_tables import cell_values as _cell_values

    variants = {_cell_values(r)["variant"] for r in table.to_dict("records")
                if r["executor"] == "mp"}
    assert {"forkserver", "spawn"} <= variants
    # the window rule: the set-up outside T_group is shown beside it (missing: not 0)
    assert mp.loc["forkserver", "setup_s_mean"] == 2.5 and pd.isna(mp.loc["spawn", "setup_s_mean"])
    fork = next(r for r in table.to_dict("records") if r["mp_start"] == "forkserver")
    assert _cell_values(fork)["setup s"] == "2.50"
