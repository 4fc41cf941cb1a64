"""The report reads the columns the engine's analysis produces, and says the baseline and
the parity flags as the engine declares them: a renamed column or flag fails here, not as
a silently empty column ("—") in every report."""

from __future__ import annotations

from pathlib import Path

from engine.results.analysis import cell_status, speedups
from engine.results.derived import BASELINE_EXECUTOR, PARITY_OUTSIDE, PARITY_WITHIN
from engine.results.load import load_runs

HARNESS = Path(__file__).resolve().parents[3] / "fixtures" / "fugue-harness-cpu"


class _Reads(dict):
    """A row that records every key read from it."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.read: set[str] = set()

    def __getitem__(self, key):
        self.read.add(key)
        return super().__getitem__(key)

    def get(self, key, default=None):
        self.read.add(key)
        return super().get(key, default)


def test_every_column_a_table_cell_reads_is_one_the_analysis_produces():
    from fugue_tui.report.cell_tables import cell_values

    runs = load_runs(HARNESS)
    table, status = speedups(runs), cell_status(runs)
    produced = set(table.columns) | set(status.columns)
    read: set[str] = set()
    for record in table.to_dict("records"):
        row = _Reads(record)
        cell_values(row)
        read |= row.read
    assert read and read <= produced, sorted(read - produced)


def test_parity_and_the_baseline_are_the_engines_words():
    from fugue_tui.report.cell_tables import cell_values

    base = {"exp_id": "E", "executor": BASELINE_EXECUTOR, "compile_mode": "off",
            "n_strategy": 3}
    assert cell_values({**base, "parity": PARITY_WITHIN})["parity"] == "within"
    assert cell_values({**base, "parity": PARITY_OUTSIDE})["parity"] == "OUTSIDE"
    assert cell_values(base)["speedup"] == f"n/a (no {BASELINE_EXECUTOR})"
