"""``profile`` under load warns as ``--batch`` does and the row records the load (fresh-user
finding 4: a probe at load 12.9 stored ``step 234.7 ms`` for a model that trains at ~2 ms,
without a word). The probe itself is replaced by its output document (the load is the
host's, which a test cannot set); everything after it — the rule, the warning, the row in
``profiles.csv`` and ``profile --list`` — is the real code."""

from __future__ import annotations

import csv
import io

import pytest

import engine.profile.collect as collect_mod
from engine.profile.store import COLUMNS, identity

JOB = {"model": "mlp", "model_kwargs": {"hidden": 16}, "dataset": "wine", "batch_size": 16,
       "amp": False, "precision": None, "optimizer": "sgd", "optimizer_kwargs": {},
       "job_id": "P_ens_s0"}


def _doc(load, load_end, cores):
    return {"threads": 1, "ks": "1,2,4", "rss_mb": '{"1": 300.0}', "rss1_mb": 300.0,
            "rss_per_member_mb": 10.0, "step_time_ms": 234.7, "steps": 20,
            "load_avg": load, "load_avg_end": load_end, "cpu_cores": cores, "probe_s": 131.0,
            "errors": []}


@pytest.mark.parametrize("loads, busy", [((12.89, 9.5), True), ((0.4, 1.1), False)])
def test_a_busy_probe_warns_and_the_row_records_the_load(tmp_path, monkeypatch, loads, busy):
    monkeypatch.setattr(collect_mod, "run_probe", lambda *a, **k: _doc(*loads, 2))
    said: list[str] = []
    ident = identity("cpu", None)
    (row,) = collect_mod.collect({"P_ens": [JOB]}, runs_dir=tmp_path, device="cpu",
                                 ident=ident, gpu_uuid=None, say=said.append)
    with open(tmp_path / "profiles.csv", newline="") as f:
        (stored,) = list(csv.DictReader(f))
    cols = list(stored)
    assert (cols.index("load_avg_end") < cols.index("cpu_cores") < cols.index("load_warning")
            < cols.index("rss_setup_mb"))  # each session's columns after the last ones
    assert list(stored) == list(COLUMNS)  # new columns at the end, append-only
    assert stored["load_avg"] == str(loads[0]) and stored["load_avg_end"] == str(loads[1])
    assert stored["cpu_cores"] == "2"
    warnings = [line for line in said if "machine was busy" in line]
    if busy:
        assert stored["load_warning"] == "host load average 12.9 on 2 cores: the machine was busy"
        (line,) = warnings
        assert f"step times and CPU figures of {row['profile_id']} are inflated" in line
        assert "load 12.9 at the start, 9.5 at the end" in line
    else:
        assert stored["load_warning"] == "" and warnings == []
    from fugue_tui.commands.profile import list_profiles

    out = io.StringIO()
    list_profiles(tmp_path, ident, out)
    assert ("[measured busy: host load average 12.9" in out.getvalue()) is busy


def test_the_cell_and_the_profile_share_the_load_rule():
    import os

    from engine.cell.rows import load_warnings
    from engine.measure.host import busy_warning

    assert busy_warning((2.4, None), 2) is None  # within half a core of the cores
    assert busy_warning((None, 2.6), 2) == "host load average 2.6 on 2 cores: the machine was busy"
    cores = os.cpu_count() or 1
    line = busy_warning((None, cores + 1.0))
    assert line and load_warnings(10.0, None, 2, (None, cores + 1.0)) == [line]
    assert load_warnings(10.0, None, 2, (0.1, 0.2)) == []
