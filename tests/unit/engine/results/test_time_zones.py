"""Time that compares across zones (issue 43): rows keep the harness's ``timestamp`` (the
writing host's local time, no zone) and add ``time_utc``; ``--since`` takes ISO 8601 with
an offset or the old form (the reading host's local time); rows are compared as instants.
Rows are written by real subprocesses under ``TZ=Asia/Tokyo`` and ``TZ=UTC``, and read by
``fugue-tui --batch --dry-run --resume --since`` under ``TZ=UTC``."""

from __future__ import annotations

import datetime
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from engine.results.columns import GROUP_COLUMNS, INDIVIDUAL_COLUMNS
from engine.results.values import row_instant, since_instant

REPO = Path(__file__).resolve().parents[4]
WRITE = ("import sys; from engine.results.store import append_rows; "
         "from engine.results.columns import GROUP_COLUMNS; "
         "from engine.results.values import row_stamps; "
         "row = dict(campaign_id='c', cell_key=sys.argv[2], status='ok', attempt=sys.argv[3], "
         "exp_id='D_ens', executor='seq', T_group=1.0, group_id='seq_' + sys.argv[3], "
         "**row_stamps(float(sys.argv[4]))); append_rows(sys.argv[1], [row], GROUP_COLUMNS)")


def _env(tz: str) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO), "TZ": tz}


def _write(runs: Path, key: str, attempt: int, when: float, tz: str) -> None:
    subprocess.run([sys.executable, "-c", WRITE, str(runs / "master_groups.csv"), key,
                    str(attempt), str(when)], env=_env(tz), check=True, timeout=60)


def _plan(root: Path, *since: str) -> dict:
    proc = subprocess.run([sys.executable, "-m", "fugue_tui", "--batch", "c.toml", "--dry-run",
                           "--json", *(("--resume", "--since", *since) if since else ())],
                          cwd=root, env=_env("UTC"), capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)["cells"][0]


def _iso(seconds: float, hours: int = 0) -> str:
    zone = datetime.timezone(datetime.timedelta(hours=hours))
    return datetime.datetime.fromtimestamp(int(seconds), zone).isoformat()


@pytest.fixture
def campaign(tmp_path):
    (tmp_path / "c.toml").write_text('name = "c"\nexperiments = ["D_ens"]\n'
                                     'executors = ["seq"]\ndevice = "cpu"\nruns_dir = "runs"\n')
    return tmp_path, _plan(tmp_path)["key"]


def test_since_compares_instants_across_zones(campaign):
    root, key = campaign
    now = time.time()
    # written an hour ago on a host in Tokyo: its timestamp text reads 8 hours *later*
    # than a UTC host's clock now, which a text comparison took for newer
    _write(root / "runs", key, 1, now - 3600, "Asia/Tokyo")
    half_hour_ago = now - 1800
    utc_old_form = time.strftime("%Y%m%d_%H%M%S", time.gmtime(half_hour_ago))
    for since in (_iso(half_hour_ago), _iso(half_hour_ago, 9), utc_old_form):
        cell = _plan(root, since)
        assert cell["would"] == "run", since  # the row is older than --since
    for since in (_iso(now - 7200), _iso(now - 7200, -5)):
        assert _plan(root, since)["would"] != "run", since  # newer than --since: reused


def test_the_later_attempt_is_the_later_instant(campaign):
    root, key = campaign
    now = time.time()
    _write(root / "runs", key, 1, now - 100, "Asia/Tokyo")
    _write(root / "runs", key, 2, now - 50, "UTC")  # later, though its text sorts earlier
    cell = _plan(root, _iso(now - 3600))
    assert cell["reused_from"]["attempt"] == "2", cell["reused_from"]


def test_rows_carry_both_forms_and_older_rows_read_as_local_time(tmp_path):
    import csv

    # at the end of the order when it landed (parity_contract before it, stopped_s after)
    assert INDIVIDUAL_COLUMNS[-1] == "time_utc"
    at = GROUP_COLUMNS.index("time_utc")  # later issues append after these (issue 46)
    assert list(GROUP_COLUMNS[at - 1:at + 3]) == ["parity_contract", "time_utc", "stopped_s",
                                                  "eager_buckets"]
    now = int(time.time())
    _write(tmp_path, "k" * 16, 1, now, "Asia/Tokyo")
    (row,) = csv.DictReader(open(tmp_path / "master_groups.csv", newline=""))
    assert row["time_utc"] == _iso(now) and row["time_utc"].endswith("+00:00")
    assert row["timestamp"] == time.strftime(  # the harness's form, Tokyo's local time
        "%Y%m%d_%H%M%S", time.gmtime(now + 9 * 3600))
    assert row_instant(row) == now
    older = {"timestamp": time.strftime("%Y%m%d_%H%M%S", time.localtime(now))}
    assert row_instant(older) == now  # no time_utc: this (reading) host's local time
    assert since_instant(_iso(now, 9)) == since_instant(_iso(now)) == now
    with pytest.raises(ValueError, match="offset"):
        since_instant("2026-11-30T14:00:00")
    with pytest.raises(ValueError, match="YYYYmmdd_HHMMSS"):
        since_instant("yesterday")


def test_a_runner_row_carries_time_utc(tmp_path, monkeypatch):
    """The runner's row for a cell that died without one (engine.results.rows.group_static,
    which the cell's own rows share) names the instant too."""
    import engine.runner.attempt as attempt_mod
    from engine.define.campaign import load_campaign
    from engine.results.read import read_rows
    from engine.runner.supervisor import Runner

    monkeypatch.setenv("FUGUE_CELL_START", "spawn")
    monkeypatch.setattr(attempt_mod, "start_cell", lambda spec, log, env: subprocess.Popen(
        [sys.executable, "-c", "raise SystemExit(1)"], start_new_session=True))
    (tmp_path / "c.toml").write_text(f'name = "c"\nexperiments = ["D_ens"]\nexecutors = '
                                     f'["seq"]\ndevice = "cpu"\nruns_dir = "{tmp_path}/runs"\n')
    before = int(time.time())
    Runner(load_campaign(tmp_path / "c.toml")).run()
    (row,) = read_rows(tmp_path / "runs" / "master_groups.csv")
    assert row["time_utc"].endswith("+00:00")
    assert before <= row_instant(row) <= time.time()
    assert row_instant({"timestamp": row["timestamp"]}) == row_instant(row)
