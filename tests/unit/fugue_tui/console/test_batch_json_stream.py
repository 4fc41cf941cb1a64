"""``fugue-tui --batch CAMPAIGN --json`` (issue 29): a live run as JSON lines on stdout —
every line parsed strictly and validated against ``fugue-tui/batch`` (docs/json.md) —
with the events, this run's result rows (typed) and a closing summary; stdout holds
nothing else, the exit status is the text form's. A real runner and two tiny cells."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from fugue_tui.console.batch_json import typed_row
from fugue_tui.jsonout import schema

REPO = Path(__file__).resolve().parents[4]

EXPERIMENTS = """
[experiments.Z_tiny]
type = "ensemble"
model = "mlp"
dataset = "digits"
k = 2
batch_size = 128
epochs = 1
lr = 0.01
"""


def _fugue(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "FUGUE_PLAIN": "1", "COLUMNS": "200",
           "PYTHONPATH": os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH"))
                                         if p)}
    return subprocess.run([sys.executable, "-m", "fugue_tui", *args], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=240,
                          stdin=subprocess.DEVNULL)


def _refuse(constant: str):
    raise ValueError(f"not JSON: {constant}")


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    """One real two-cell campaign run with ``--json`` (shared: a run costs seconds)."""
    tmp_path = tmp_path_factory.mktemp("live")
    (tmp_path / "exp.toml").write_text(EXPERIMENTS)
    campaign = tmp_path / "c.toml"
    campaign.write_text('name = "cj"\nexperiments = "Z_tiny"\n'
                        'executors = ["seq", "unified_model"]\n'
                        f'runs_dir = "{tmp_path / "runs"}"\nthreads = 1\n'
                        f'experiments_file = "{tmp_path / "exp.toml"}"\n')
    return tmp_path, _fugue(tmp_path, "--batch", str(campaign), "--json")


def test_a_live_run_as_json_lines(live):
    _, proc = live
    assert proc.returncode == 0, proc.stderr
    validator = jsonschema.Draft202012Validator(schema("batch"))
    lines = [json.loads(line, parse_constant=_refuse) for line in proc.stdout.splitlines()]
    for doc in lines:  # every line of stdout is one valid document: nothing else is there
        validator.validate(doc)
    kinds = [d["kind"] for d in lines]
    assert kinds[-1] == "summary" and kinds.count("summary") == 1
    events = [d["event"] for d in lines if d["kind"] == "event"]
    types = [e["type"] for e in events]
    assert types[0] == "campaign_started" and "campaign_done" in types
    assert types.count("cell_started") == 2 and types.count("job_done") == 4
    assert any(e["type"] == "job_progress" and e.get("epoch_end") for e in events)
    rows = [d for d in lines if d["kind"] == "row"]
    groups = [d["row"] for d in rows if d["file"] == "master_groups.csv"]
    jobs = [d["row"] for d in rows if d["file"] == "master_individual.csv"]
    assert sorted(g["executor"] for g in groups) == ["seq", "unified_model"]
    assert len(jobs) == 4 and {j["group_id"] for j in jobs} == {g["group_id"] for g in groups}
    seq = next(g for g in groups if g["executor"] == "seq")
    assert seq["K"] == 2 and isinstance(seq["T_group"], float) and seq["status"] == "ok"
    assert seq["campaign_id"] == "cj" and seq["timestamp"][4] == "-"  # ISO 8601
    # a row comes after its cell's summary event, before the campaign ends
    first_row = kinds.index("row")
    first_summary = next(i for i, d in enumerate(lines)
                         if d["kind"] == "event" and d["event"]["type"] == "summary")
    assert first_summary < first_row < kinds.index("event", first_row)
    for i, d in enumerate(lines):  # each group row after its own cell's summary event
        if d["kind"] == "row" and d["file"] == "master_groups.csv":
            gid = d["row"]["group_id"]
            assert any(e["kind"] == "event" and e["event"]["type"] == "summary"
                       and e["event"].get("group_id") == gid for e in lines[:i]), gid
    summary = lines[-1]
    assert summary["exit_code"] == 0 and summary["campaign"] == "cj" and not summary["problems"]
    cells = {c["executor"]: c for c in summary["cells"]}
    assert set(cells) == {"seq", "unified_model"} and cells["seq"]["speedup"] == 1.0
    for cell in summary["cells"]:  # the report's cells, as report --json has them
        jsonschema.validate(cell, schema("report")["properties"]["cells"]["items"],
                            cls=jsonschema.Draft202012Validator)
    assert "{" not in proc.stderr.replace("{}", "")  # no JSON strayed to stderr


def test_bad_campaign_with_json_is_one_line_and_nothing_on_stdout(tmp_path):
    campaign = tmp_path / "c.toml"
    campaign.write_text('experiments = "D_ens"\nexecutors = ["seqq"]\n')
    proc = _fugue(tmp_path, "--batch", str(campaign), "--json")
    assert proc.returncode == 2 and proc.stdout == ""
    assert len(proc.stderr.splitlines()) == 1 and "seqq" in proc.stderr
    assert not (tmp_path / "runs").exists()


def test_typed_row_missing_is_null_never_zero():
    row = typed_row({"group_id": "seq_0000000a", "K": "4", "T_group": "1.5",
                     "energy_group": "", "compile": "False", "timestamp": "20260102_030405",
                     "cuda_version": "13.0"}, "master_groups.csv")
    assert row == {"group_id": "seq_0000000a", "K": 4, "T_group": 1.5, "energy_group": None,
                   "compile": False, "timestamp": "2026-01-02T03:04:05",
                   "cuda_version": "13.0"}


def test_job_rows_carry_their_groups_stack(live):
    """Provenance in job rows (issue 29, docs/results.md): the stack columns of each job
    row equal its group row's, as written to the files."""
    from engine.cell.rows import JOB_PROVENANCE
    from engine.results.read import read_rows

    tmp_path, proc = live
    assert proc.returncode == 0, proc.stderr
    groups = {g["group_id"]: g for g in read_rows(tmp_path / "runs" / "master_groups.csv")}
    jobs = read_rows(tmp_path / "runs" / "master_individual.csv")
    assert len(jobs) == 4
    for job in jobs:
        group = groups[job["group_id"]]
        for name in JOB_PROVENANCE:
            assert job[name] == group[name], name
        assert job["torch_version"] and job["numpy_version"] and job["sklearn_version"]
        assert len(job["experiments_file_hash"]) == 16  # the campaign names a user file


def test_a_group_row_waits_for_its_cells_summary_event(tmp_path):
    """A cell appends its rows just before its summary event: a poll in between must not
    put the row first (the order the stream promises: summary, then the cell's rows); at
    the end of the run a row whose summary never came is written all the same."""
    import io

    from fugue_tui.console.batch_json import JsonProgress

    runs = tmp_path / "runs"
    runs.mkdir()
    (runs / "master_groups.csv").write_text(
        "group_id,campaign_id,time_utc\n"
        "seq_00000001,cj,2026-12-05T10:00:01+00:00\n"
        "seq_00000002,cj,2026-12-05T10:00:02+00:00\n")
    (runs / "master_individual.csv").write_text(
        "group_id,job_id\nseq_00000001,j0\nseq_00000002,j0\n")
    out = io.StringIO()

    def lines():
        return [json.loads(x) for x in out.getvalue().splitlines()]

    with JsonProgress(runs, "cj", "2026-12-05T10:00:00+00:00", stream=out) as progress:
        progress.tick()
        assert [d["kind"] for d in lines()] == []  # rows on disk, no summary yet: held
        progress({"type": "summary", "group_id": "seq_00000001", "cell": "c1"})
        progress.tick()
        kinds = [(d["kind"], d.get("file")) for d in lines()]
        assert kinds == [("event", None), ("row", "master_groups.csv"),
                         ("row", "master_individual.csv")]
        assert lines()[1]["row"]["group_id"] == "seq_00000001"
    rows = [d["row"] for d in lines() if d["kind"] == "row"]  # the exit wrote the held one
    assert [r["group_id"] for r in rows] == ["seq_00000001", "seq_00000001",
                                             "seq_00000002", "seq_00000002"]
