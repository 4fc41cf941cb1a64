"""``fugue-tui report --advise --per-core`` (issue 46): on a CPU host mp and ray use several
cores where seq uses one, so "2.5× over seq" may be mostly cores. ``--per-core`` ranks by
the T_group speedup ÷ the cell's mean ``cores_used``; a cell without ``cores_used`` is
``n/a`` (never 0), ranked last, and the ranking says which. Nothing trains."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from engine.errors import FugueError
from engine.results.advise import advise
from engine.results.load import load_runs
from fugue_tui.cli import main
from tests.unit.engine.results.test_analysis import group

PASSES = (1.0, 1.01, 0.99, 1.0, 1.005)  # five passes: intervals exist


def _campaign(tmp_path, ray_cores=""):
    """seq 10 s on 1 core; mp 4 s (2.5×) on 4 cores; unified_model 5 s (2×) on 1 core; ray
    4.5 s with ``ray_cores`` (default: not recorded)."""
    rows = []
    for executor, t, cores in (("seq", 10.0, 1.0), ("mp", 4.0, 4.0),
                               ("unified_model", 5.0, 1.0), ("ray", 4.5, ray_cores)):
        rows += [dict(group("W", executor, t=t * f, k=4), cores_used=cores) for f in PASSES]
    pd.DataFrame(rows).to_csv(tmp_path / "master_groups.csv", index=False)
    return tmp_path


def test_per_core_ranks_by_speedup_per_core_and_lists_cells_without_it_last(tmp_path):
    runs = load_runs(_campaign(tmp_path))
    (plain,) = advise(runs, n_boot=500)
    assert plain.recommended.executor == "mp"  # 2.5×, on four cores
    (a,) = advise(runs, n_boot=500, per_core=True)
    assert a.per_core and a.measure.startswith("speedup per core")
    rec = a.recommended
    assert rec.executor == "unified_model" and rec.per_core_cores == 1.0
    assert rec.per_core == pytest.approx(2.0, rel=0.01) and rec.score == rec.per_core
    assert rec.per_core_low < rec.per_core < rec.per_core_high
    assert a.runner_up.executor == "seq" and a.runner_up.per_core == 1.0
    assert a.distinguishable is True
    lines = "\n".join(a.lines())
    assert "speedup per core at K = 4: 2.00×" in lines and "÷ 1.00 cores used" in lines
    # ray recorded no cores_used: n/a (never 0), ranked after mp's 0.625, and named
    assert any("no speedup per core" in n and "ray" in n for n in a.notes)
    ray = next(o for o in _options(a, runs) if o.executor == "ray")
    assert math.isnan(ray.per_core) and ray.per_core_rows == 0


def _options(a, runs):
    """Every candidate of the per-core ranking, in order (the advice keeps the two best)."""
    from engine.results.advise import _plain_options
    from engine.results.analysis import speedups
    from engine.results.per_core import rank

    table = speedups(runs, n_boot=0)
    prov = ["machine", "gpu_name", "torch_version", "cuda_version"]
    options = _plain_options(table.to_dict("records"), runs.groups, prov, per_core=True)
    ranked, _ = rank(options, [])
    assert [o.executor for o in ranked] == ["unified_model", "seq", "mp", "ray"]
    return ranked


def test_cli_flag_and_json(tmp_path, capsys):
    import json

    runs_dir = _campaign(tmp_path, ray_cores=2.0)
    assert main(["report", str(runs_dir), "--json", "--advise", "--per-core"]) == 0
    doc = json.loads(capsys.readouterr().out)
    (advice,) = doc["advice"]
    assert advice["per_core"] is True and advice["recommended"]["executor"] == "unified_model"
    assert advice["recommended"]["per_core_cores"] == 1.0
    assert advice["recommended"]["per_core"] == pytest.approx(2.0, rel=0.01)
    assert advice["recommended"]["per_core_rows"] == 5
    with pytest.raises(FugueError, match="--per-core only applies with --advise"):
        from fugue_tui.report.tables import run_report

        run_report(runs_dir, per_core=True)
