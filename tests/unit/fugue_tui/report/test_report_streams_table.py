"""``report``'s streams table and speedup chart on a stream campaign: at 80 columns the
table's eleven columns were cut to ``0.4…`` and ``exe…``; now the figures no strategy
recorded are left out (named in the note) and the rest go on as several tables when they do
not fit, each repeating the executor. A stream cell's T_group ratio (its makespan's) stays in
the cells table but is not drawn as a speedup."""

from __future__ import annotations

import io

from rich.console import Console

from engine.results.load import load_runs
from engine.results.stream_report import stream_cells
from fugue_tui.report.streams import stream_tables
from fugue_tui.report.tables import print_report
from tests.unit.fugue_tui.report.test_report_cli import HARNESS
from tests.unit.fugue_tui.report.test_report_stream_advice import STREAM_RUNS


def _text(path, width: int) -> str:
    out = io.StringIO()
    print_report(path, Console(file=out, width=width, color_system=None))
    return out.getvalue()


def test_at_80_columns_every_stream_value_is_whole():
    text = _text(STREAM_RUNS, 80)
    section = text[text.index("stream "):text.index("streams: JCT")]
    assert "…" not in section
    for seq_value in ("4.774", "seq", "JCT"):  # the fixture's seq p95, whole
        assert seq_value in section
    assert "not measured, left out: cores busy, GPU J/job, CPU J/job" in " ".join(text.split())
    assert "speedup over seq" not in text  # no makespan ratio drawn as a speedup
    assert "stream cells left out" in " ".join(text.split())


def test_figures_that_do_not_fit_go_on_in_a_second_table():
    cells = stream_cells(load_runs(STREAM_RUNS).groups)
    (wide,) = stream_tables(cells)  # no width: one table
    narrow = stream_tables(cells, width=50)
    assert len(narrow) >= 2 and narrow[0].title.endswith(f"(1/{len(narrow)})")
    for table in narrow:
        assert [str(c.header).replace("\n", " ") for c in table.columns][:3] == [
            "executor", "max par", "passes"]
    figures = lambda ts: [str(c.header) for t in ts for c in t.columns[3:]]  # noqa: E731
    assert figures(narrow) == figures([wide])  # the same figures, none lost
    out = io.StringIO()
    for table in narrow:
        Console(file=out, width=50, color_system=None).print(table)
    assert "…" not in out.getvalue()


def test_a_batch_keeps_its_speedup_chart():
    text = _text(HARNESS, 160)
    assert "speedup over seq" in text and "stream cells left out" not in text
