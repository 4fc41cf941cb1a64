"""A killed attempt counts with its own cell (fresh-user finding 6): after Ctrl-C during an
mp cell and ``--resume``, ``report`` showed ``my_ens mp ok 2 ... not ok 0`` and a second
line ``my_ens mp ok 0 ... variant — ... not ok 1``. The row the runner writes for a cell it
killed lacks the variant columns only the running cell records (``mp_start`` here), so the
grouping split it off. Synthetic rows as the runner and the cell write them."""

from __future__ import annotations

from engine.results.analysis import cell_status
from engine.results.load import load_runs
from tests.unit.engine.results.test_analysis import group, write
from tests.unit.fugue_tui.test_json_outputs import fugue


def _rows():
    """Pass 1: attempt 1 killed by the runner (no mp_start), attempt 2 ok after --resume;
    pass 2 ok. A ray cell killed in pass 1 of its own with no ok row at all; a bf16
    unified_model cell killed once."""
    common = dict(campaign="mine2", config_key="cfg-mp")
    rows = [group("my_ens", "seq", t=10.0, config_key="cfg-seq", cell_key="s1",
                  campaign="mine2"),
            group("my_ens", "mp", t=6.0, status="killed", mp_start="", cell_key="p1",
                  attempt=1, **common),
            group("my_ens", "mp", t=5.0, mp_start="forkserver", cell_key="p1", attempt=2,
                  **common),
            group("my_ens", "mp", t=5.1, mp_start="forkserver", cell_key="p2", **common),
            group("my_ens", "ray", t=None, status="killed", config_key="cfg-ray",
                  cell_key="r1"),
            group("my_ens", "unified_model", t=None, status="killed", precision="",
                  features="", config_key="cfg-u", cell_key="u1"),
            group("my_ens", "unified_model", t=2.0, precision="bf16", features="vf:1",
                  config_key="cfg-u", cell_key="u2")]
    return rows


def test_the_killed_attempt_keys_to_its_cell(tmp_path):
    runs = load_runs(write(tmp_path, _rows()))
    status = cell_status(runs)
    mp = status[status["executor"] == "mp"]
    assert len(mp) == 1, mp
    assert (int(mp["ok"].iloc[0]), int(mp["not_ok"].iloc[0])) == (2, 1)
    assert mp["mp_start"].iloc[0] == "forkserver"
    uni = status[status["executor"] == "unified_model"]
    assert len(uni) == 1 and uni["precision"].iloc[0] == "bf16"  # not split off as fp32
    assert (int(uni["ok"].iloc[0]), int(uni["not_ok"].iloc[0])) == (1, 1)
    # a cell that never ran ok stays a line of its own with ok = 0
    ray = status[status["executor"] == "ray"]
    assert len(ray) == 1 and int(ray["ok"].iloc[0]) == 0 and int(ray["not_ok"].iloc[0]) == 1
    # nothing on disk changes: the killed row keeps its empty mp_start there
    text = (tmp_path / "master_groups.csv").read_text()
    assert text.count("forkserver") == 2


def test_report_prints_one_line_per_cell(tmp_path):
    write(tmp_path, _rows())
    done = fugue("report", str(tmp_path), "--campaign", "mine2")
    assert done.returncode == 0, done.stderr
    lines = [line for line in done.stdout.splitlines()
             if line.replace(" ", "").startswith("│my_ens│mp│")]
    assert len(lines) == 1, done.stdout
    assert "forkserver" in lines[0] and lines[0].rstrip(" │").endswith("1")  # not ok 1
