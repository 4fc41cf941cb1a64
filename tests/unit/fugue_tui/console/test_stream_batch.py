"""A stream campaign end to end from ``--batch`` (issue 51): seq, mp and ray serve a trace of
the offline mix online — seq FIFO one job at a time, each job admitted at max(its arrival,
the previous job's end); mp FIFO with at most ``max_parallel`` processes, none before its
arrival; ray the same on its actor pool — with a ``waiting`` event while nothing runs and the next job has not arrived,
and write each job's arrival, admission, completion, queueing delay and completion time
and the stream's figures; the stream file in the run folder is the one the cells served,
and ``--resume`` finds the whole stream cells done."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from engine.results.read import read_rows
from tests.unit.fugue_tui.commands.test_commands import _env

pytestmark = pytest.mark.slow

EXPERIMENTS = """
[experiments.D_ens]
k = 2
epochs = 1
[experiments.D_reg]
k = 2
epochs = 1
"""
# three jobs at once (under seq the second and third queue; under mp at most two run),
# then a gap the cells wait through
TRACE = "time_s,experiment\n0,D_ens\n0,D_reg\n0,D_ens\n2.0,D_reg\n"
CAMPAIGN = """
name = "st"
executors = ["seq", "mp", "ray"]
experiments_file = "e.toml"
threads = 1
monitor = false
retries = 0
arrivals = { trace = "trace.csv" }
[options.mp]
max_parallel = 2
[options.ray]
max_parallel = 2
# a watchdog that kills a cell after two quiet checks (1.4 s): the 2 s wait for the last
# arrival passes only because the cell's `waiting` heartbeat (1 s) counts as progress
[watchdog]
interval_s = 0.7
suspect_after = 1
hung_after = 2
action = "kill"
"""


def _batch(work: Path, *args: str) -> subprocess.CompletedProcess:
    done = subprocess.run([sys.executable, "-m", "fugue_tui", "--batch", "c.toml", *args],
                          cwd=work, env=_env(), capture_output=True, text=True, timeout=300,
                          stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    work = tmp_path_factory.mktemp("stream_batch")
    (work / "e.toml").write_text(EXPERIMENTS)
    (work / "trace.csv").write_text(TRACE)
    (work / "c.toml").write_text(CAMPAIGN)
    _batch(work)
    return work


def _cell(run: Path, executor: str) -> tuple[dict[str, str], list[dict[str, str]]]:
    runs = run / "runs"
    [group] = [g for g in read_rows(runs / "master_groups.csv") if g["executor"] == executor]
    jobs = [j for j in read_rows(runs / "master_individual.csv")
            if j["group_id"] == group["group_id"]]
    return group, jobs


def _times(jobs: list[dict[str, str]]) -> dict[str, list[float]]:
    return {k: [float(j[k]) for j in jobs] for k in
            ("arrival_s", "admitted_s", "completed_s", "queue_delay_s", "jct_s")}


def test_seq_serves_the_stream_fifo_one_job_at_a_time(run):
    group, jobs = _cell(run, "seq")
    assert group["status"] == "ok" and group["exp_id"] == "stream" and group["mode"] == "stream"
    assert [j["exp_id"] for j in jobs] == ["D_ens", "D_reg", "D_ens", "D_reg"]
    assert [j["seed"] for j in jobs] == ["42", "42", "43", "43"]  # seed + m per template
    t = _times(jobs)
    assert t["arrival_s"] == [0.0, 0.0, 0.0, 2.0]
    previous_end = 0.0
    for i in range(4):
        assert t["admitted_s"][i] >= max(t["arrival_s"][i], previous_end) - 1e-9
        assert t["completed_s"][i] > t["admitted_s"][i]
        assert t["queue_delay_s"][i] == pytest.approx(t["admitted_s"][i] - t["arrival_s"][i])
        assert t["jct_s"][i] == pytest.approx(t["completed_s"][i] - t["arrival_s"][i])
        previous_end = t["completed_s"][i]
    # the second and third jobs waited; the last arrived after the others were done
    assert t["queue_delay_s"][1] >= t["completed_s"][0] - t["admitted_s"][0]
    assert t["queue_delay_s"][2] >= t["completed_s"][1] - t["admitted_s"][0]
    assert t["admitted_s"][3] - t["arrival_s"][3] < 0.5
    jct = sorted(t["jct_s"])
    assert float(group["jct_mean_s"]) == pytest.approx(sum(jct) / 4)
    assert float(group["jct_p50_s"]) == pytest.approx((jct[1] + jct[2]) / 2)
    assert float(group["makespan_s"]) == pytest.approx(t["completed_s"][3])
    assert float(group["stream_jobs"]) == 4
    assert 0 < float(group["busy_s"]) < float(group["makespan_s"])  # the wait is idle
    assert float(group["throughput_jps"]) == pytest.approx(4 / float(group["busy_s"]))
    assert float(group["arrival_rate_jps"]) == pytest.approx(3 / 2.0)
    assert float(group["T_group"]) >= 2.0


def test_mp_admits_at_most_max_parallel_fifo_and_never_before_arrival(run):
    group, jobs = _cell(run, "mp")
    assert group["status"] == "ok" and float(group["max_parallel"]) == 2
    t = _times(jobs)
    assert t["arrival_s"] == [0.0, 0.0, 0.0, 2.0]
    for i in range(4):
        assert t["admitted_s"][i] >= t["arrival_s"][i] - 1e-9
        assert t["completed_s"][i] > t["admitted_s"][i]
        assert t["jct_s"][i] == pytest.approx(t["completed_s"][i] - t["arrival_s"][i])
    assert t["admitted_s"] == sorted(t["admitted_s"])  # FIFO
    # the third job waited for a slot: admitted no earlier than the first of two ended
    assert t["admitted_s"][2] >= min(t["completed_s"][:2]) - 1e-9
    for i in range(4):  # never more than two at once
        running = [k for k in range(4) if t["admitted_s"][k] <= t["admitted_s"][i]
                   < t["completed_s"][k]]
        assert len(running) <= 2
    assert float(group["arrival_rate_jps"]) == pytest.approx(3 / 2.0)
    assert float(group["jct_p95_s"]) >= float(group["jct_p50_s"]) > 0


@pytest.mark.parametrize("executor", ["mp", "ray"])
def test_an_online_pool_admits_fifo_at_most_max_parallel_never_before_arrival(run, executor):
    """mp's processes and ray's actors (issue 51): the same admission rules, the same
    columns."""
    group, jobs = _cell(run, executor)
    assert group["status"] == "ok" and float(group["max_parallel"]) == 2
    t = _times(jobs)
    assert t["arrival_s"] == [0.0, 0.0, 0.0, 2.0]
    for i in range(4):
        assert t["admitted_s"][i] >= t["arrival_s"][i] - 1e-9
        assert t["completed_s"][i] > t["admitted_s"][i]
        assert t["queue_delay_s"][i] == pytest.approx(t["admitted_s"][i] - t["arrival_s"][i])
        assert t["jct_s"][i] == pytest.approx(t["completed_s"][i] - t["arrival_s"][i])
    assert t["admitted_s"] == sorted(t["admitted_s"])  # FIFO
    assert t["admitted_s"][2] >= min(t["completed_s"][:2]) - 1e-9  # waited for a slot
    assert t["admitted_s"][3] - t["arrival_s"][3] < 0.5  # a free actor took it on arrival
    # max_parallel is measured: the most jobs in service at once (ray said its pool's size)
    spans = list(zip(t["admitted_s"], t["completed_s"], strict=True))
    most = max(sum(1 for a, c in spans if a <= at < c) for at, _ in spans)
    assert float(group["max_parallel"]) == most
    jct = sorted(t["jct_s"])
    assert float(group["jct_mean_s"]) == pytest.approx(sum(jct) / 4)
    assert float(group["makespan_s"]) == pytest.approx(max(t["completed_s"]))
    assert float(group["T_group"]) >= 2.0
    # monitor = false: nothing measured, so the measured stream figures are empty, never 0
    assert [group[c] for c in ("busy_cores_used", "energy_per_job_j",
                               "cpu_energy_per_job_j")] == ["", "", ""]


def test_the_watchdog_never_found_a_waiting_cell_hung(run):
    log = run / "runs" / "st" / "runner.jsonl"
    types = [json.loads(line)["type"] for line in log.read_text().splitlines()]
    assert types.count("done") == 3 and "hung" not in types and "killed" not in types


def test_the_cell_waits_with_heartbeats_and_the_run_folder_holds_the_stream(run):
    from engine.define.arrivals import generate, stream_csv, stream_sha256
    from engine.define.campaign import load_campaign
    from engine.plugins import load_plugins

    folder = run / "runs" / "st"
    files = sorted(folder.glob("cells/*/attempt-1/events.jsonl"))
    assert [f.parent.parent.name[:13] for f in files] == ["001-stream-se", "002-stream-mp", "003-stream-ra"]
    for events_file in files:
        events = [json.loads(line) for line in events_file.read_text().splitlines()]
        waiting = [e for e in events if e["type"] == "waiting"]
        assert waiting and {e["job_id"] for e in waiting} == {"a0003_D_reg_ens_s1"}
        assert waiting[0]["until_s"] == 2.0
        # the waits are the stream's, not the sign of a cell held off the CPU
        [summary] = [e for e in events if e["type"] == "summary"]
        assert not any("cores it could use" in w for w in summary["warnings"])
    load_plugins()
    campaign = load_campaign(run / "c.toml")
    assert campaign.arrivals is not None and campaign.catalogue is not None
    stream = generate(campaign.arrivals, campaign.catalogue, campaign.seed)
    assert (folder / "arrivals.csv").read_text() == stream_csv(stream)
    groups = read_rows(run / "runs" / "master_groups.csv")
    assert [g["stream_sha256"] for g in groups] == [stream_sha256(stream)] * 3
    assert len({g["workload_key"] for g in groups}) == 1  # seq is mp's baseline


def test_resume_finds_the_whole_stream_cells_done_and_json_says_the_figures(run):
    """``--resume`` skips both stream cells whole; ``--json``'s summary line carries the
    streams comparison (schema-valid)."""
    import jsonschema

    from fugue_tui.jsonout import schema

    done = _batch(run, "--resume", "--json")
    assert len(read_rows(run / "runs" / "master_groups.csv")) == 3
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    validator = jsonschema.Draft202012Validator(schema("batch"))
    for doc in lines:
        validator.validate(doc)
    [summary] = [d for d in lines if d["kind"] == "summary"]
    assert [s["executor"] for s in summary["streams"]] == ["seq", "mp", "ray"]
    skipped = [d["event"] for d in lines if d["kind"] == "event"
               and d["event"]["type"] == "skipped"]
    assert len(skipped) == 3


def test_report_compares_the_strategies_on_the_stream(run, capsys):
    """``report --json``'s ``streams`` (schema-valid) and the text table: seq and mp on one
    stream, each figure the mean of its one pass (no interval below 5 passes)."""
    from fugue_tui.cli import main
    from tests.unit.fugue_tui.test_json_outputs import strict

    assert main(["report", str(run / "runs"), "--json"]) == 0
    doc = strict(capsys.readouterr().out, "report")
    seq_group, _ = _cell(run, "seq")
    assert [(c["executor"], c["passes"]) for c in doc["streams"]] == [("seq", 1), ("mp", 1), ("ray", 1)]
    first = doc["streams"][0]
    assert first["stream_sha256"] == seq_group["stream_sha256"]
    assert first["figures"]["jct_p95_s"]["mean"] == pytest.approx(float(seq_group["jct_p95_s"]))
    assert first["figures"]["jct_p95_s"]["ci_low"] is None
    assert main(["report", str(run / "runs"), "--width", "120"]) == 0
    out = capsys.readouterr().out
    assert f"stream {seq_group['stream_sha256'][:12]}: 4 jobs" in out and "p95 s" in out


def test_group_start_carries_the_stream_the_dashboard_places_as_the_rows_measure(
        run, monkeypatch):
    """Each cell's ``group_start`` event carries the stream's arrivals (for the dashboard's
    timeline, which reads events, never the run folder's files): placed from that event's
    time by the state reducer, each job's arrival, ``job_started`` and ``job_done`` give
    the rows' queueing delay and completion time to within the event writes (measured:
    2-20 ms; a loaded host is allowed 0.25 s)."""
    from engine.observe.state import rebuild

    monkeypatch.chdir(run)  # the runner's events name the cells' files from there
    state = rebuild(run / "runs" / "st", all_sessions=True)  # --resume ran after
    for executor in ("seq", "mp"):
        _, jobs = _cell(run, executor)
        [cell] = [c for c in state.cells.values() if c.label.split()[1] == executor]
        t = _times(jobs)
        ids = [j["job_id"] for j in jobs]
        assert list(cell.arrivals) == ids
        origin = cell.arrivals[ids[0]] - t["arrival_s"][0]
        for i, job_id in enumerate(ids):
            arrival, job = cell.arrivals[job_id], cell.jobs[job_id]
            assert arrival - origin == pytest.approx(t["arrival_s"][i], abs=1e-6)
            assert job.started_ts is not None and job.ended_ts is not None
            assert job.started_ts - arrival == pytest.approx(t["queue_delay_s"][i], abs=0.25)
            assert job.ended_ts - arrival == pytest.approx(t["jct_s"][i], abs=0.25)
