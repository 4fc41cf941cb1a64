"""``report --advise`` knows how busy the host was (issue 46): a campaign measured at load
≈ 6 on 2 cores carried the busy-host warning on every row, yet the advice said the two
strategies were "distinguishable with 5 passes". The report, the advice and their JSON
carry the recorded host load; the advice refuses to call a difference resolved on busy
rows, with the figures; a group window under 1 s is warned about. Nothing trains."""

from __future__ import annotations

import io
import json

from rich.console import Console

from engine.results.advise import advise
from engine.results.analysis import speedups
from engine.results.load import load_runs
from fugue_tui.report.tables import print_report, run_report
from tests.unit.engine.results.test_analysis import group, write

SEQ = [10.0, 10.1, 9.9, 10.0, 10.05]
MP = [5.0, 5.1, 4.9, 5.0, 5.02]


def _campaign(tmp_path, load: float, cores: int = 2, seq=SEQ, mp=MP):
    conditions = dict(host_load_start=load - 0.2, host_load_end=load, cpu_cores=cores)
    rows = [group("W", "seq", t=t, k=4, **conditions) for t in seq]
    rows += [group("W", "mp", t=t, k=4, max_parallel=2, **conditions) for t in mp]
    return write(tmp_path, rows)


def test_busy_host_advice_is_not_distinguishable_and_gives_the_figures(tmp_path):
    (a,) = advise(load_runs(_campaign(tmp_path, load=6.2)))
    assert a.recommended.executor == "mp"  # still ranked, but not called resolved
    assert a.distinguishable is None and a.more_passes is None and a.host_busy
    assert "distinguishable with" not in a.verdict
    assert "not resolved: the host was busy" in a.verdict
    assert "5 of 5 rows at host load up to 6.2 on 2 cores" in a.verdict
    assert "their 95% intervals do not overlap" in a.verdict  # what they said is kept
    assert a.recommended.host_load_max == 6.2 and a.recommended.host_cores == 2
    assert a.recommended.busy_n == 5 and a.recommended.seq_busy_n == 5
    text = "\n".join(a.lines())
    assert "host load (1-minute average) while measuring: up to 6.2 on 2 cores" in text


def test_the_same_rows_on_a_quiet_host_are_distinguishable(tmp_path):
    # the control: only the load differs (1.0 on 2 cores is not busy)
    (a,) = advise(load_runs(_campaign(tmp_path, load=1.0)))
    assert a.distinguishable is True and not a.host_busy
    assert "distinguishable with 5 passes" in a.verdict


def test_report_table_and_json_carry_the_load(tmp_path, capsys):
    from tests.unit.fugue_tui.report.test_report_json_advice import _doc

    runs_dir = _campaign(tmp_path, load=6.2)
    table = speedups(load_runs(runs_dir), n_boot=0)
    mp = table[table["executor"] == "mp"].iloc[0]
    assert (mp["host_load_max"], mp["host_cores"], mp["busy_n"], mp["seq_busy_n"]) == \
        (6.2, 2, 5, 5)
    out = io.StringIO()
    print_report(runs_dir, Console(file=out, width=200, color_system=None), advise=True)
    assert "busy host" in out.getvalue() and "W mp: 5 of 5 rows at host load up to 6.2" \
        in out.getvalue()
    assert "not resolved: the host was busy" in out.getvalue()
    assert "6.2 / 2 cores, busy 5" in out.getvalue()  # the table's host load column
    doc = _doc(capsys, runs_dir, advise=True)  # schema-checked
    (cell,) = [c for c in doc["cells"] if c["executor"] == "mp"]
    assert cell["host_load_max"] == 6.2 and cell["busy_n"] == 5
    (advice,) = doc["advice"]
    assert advice["host_busy"] is True and advice["distinguishable"] is None
    assert advice["recommended"]["host_load_max"] == 6.2
    assert advice["recommended"]["host_cores"] == 2
    assert json.dumps(advice["verdict"]).count("6.2 on 2 cores") >= 1
    assert run_report(runs_dir, as_json=True) == 0
    assert "fugue-tui: note: busy host" in capsys.readouterr().err


def test_a_window_under_one_second_is_warned(tmp_path):
    runs_dir = _campaign(tmp_path, load=0.3, seq=[0.5, 0.52, 0.49, 0.5, 0.51],
                         mp=[0.25, 0.26, 0.24, 0.25, 0.25])
    (a,) = advise(load_runs(runs_dir))
    assert any("T_group under 1 s in 5 of 5 rows" in n for n in a.notes)
    out = io.StringIO()
    print_report(runs_dir, Console(file=out, width=200, color_system=None))
    assert "short window: T_group under 1 s in W seq: 5 of 5 rows" in out.getvalue()
