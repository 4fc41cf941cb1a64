"""Ray Tune's two actor modes are two strategies in every reading of the results: the
analysis never pools a reused-actor row with a fresh-process row (their config keys differ,
and tune_actors is a cell column, so a cell's rows and label say which), and the report,
export and charts name it."""

from __future__ import annotations

import pandas as pd

from engine.results.analysis import speedups
from engine.results.load import runs_from_frames
from fugue_tui.report.figures import cell_label


def _row(executor: str, t: float, actors: str = "", key: str = "k") -> dict:
    return {"exp_id": "D_hpo", "executor": executor, "T_group": str(t), "status": "ok",
            "scheduler": "fifo" if executor == "ray" else "", "tune_actors": actors,
            "config_key": key, "compile_mode": "off", "machine": "m", "host": "m",
            "pass": "1"}


def test_each_actor_mode_is_its_own_cell_with_its_own_speedup():
    rows = [_row("seq", 1.0, key="s"), _row("ray", 2.0, "reused", "r"),
            _row("ray", 20.0, "fresh", "f"), _row("ray", 25.0, "", "old")]  # an older row
    table = speedups(runs_from_frames(pd.DataFrame(rows)), n_boot=0)
    ray = table[table["executor"] == "ray"].set_index("tune_actors")
    assert sorted(ray.index) == ["", "fresh", "reused"]
    assert ray.loc["reused", "speedup"] == 0.5 and ray.loc["fresh", "speedup"] == 0.05
    labels = {cell_label(r) for r in table.to_dict("records")}
    assert {"D_hpo ray fifo reused", "D_hpo ray fifo fresh", "D_hpo ray fifo",
            "D_hpo seq"} == labels
    from fugue_tui.report.cell_tables import cell_values as _cell_values

    variants = {_cell_values(r)["variant"] for r in table.to_dict("records")
                if r["executor"] == "ray"}
    assert {"fifo reused", "fifo fresh", "fifo"} <= variants
