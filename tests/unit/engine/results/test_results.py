"""engine.results (columns, values, store, read, paths, preflight): schema, value formatting,
locked atomic appends, header upgrade, repair, and output-path failures — with real files and
real processes."""

from __future__ import annotations

import concurrent.futures
import csv
import errno
import math
import multiprocessing
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import filelock
import pytest

from engine.errors import OutputError
from engine.results import store as results
from engine.results.columns import (
    COLUMN_DOCS,
    EXTRA_GROUP_COLUMNS,
    EXTRA_INDIVIDUAL_COLUMNS,
    GROUP_COLUMNS,
    HARNESS_GROUP_COLUMNS,
    HARNESS_INDIVIDUAL_COLUMNS,
    INDIVIDUAL_COLUMNS,
)
from engine.results.preflight import preflight
from engine.results.read import read_rows
from engine.results.store import append_rows
from engine.results.values import format_value, new_group_id, timestamp_now

ROOT = Path(__file__).resolve().parents[4]
HARNESS = Path(__file__).resolve().parents[3] / "fixtures" / "fugue-harness-cpu"
ERROR_LEN = 20 * 1024


def _records(path: Path) -> list[list[str]]:
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.reader(f))


def _error_text(p: int, r: int) -> str:
    """A 20 KiB error string unique to (process, row), with the characters CSV must quote."""
    unit = f"<p{p}r{r}> line, \"quoted\"\n"
    return (unit * (ERROR_LEN // len(unit) + 1))[:ERROR_LEN]


def _append_worker(path: str, p: int, n_rows: int) -> None:
    for r in range(n_rows):
        append_rows(path, [{"group_id": f"g{p}", "job_id": f"p{p}r{r}", "pass": p,
                            "attempt": r, "error": _error_text(p, r), "status": "failed",
                            "total_time_s": None, "early_stopped": False}],
                    INDIVIDUAL_COLUMNS)


def _fsize_limited_append(path: str, limit: int) -> str:
    """In a child: cap file size (RLIMIT_FSIZE) so the kernel makes a real short write then
    fails with EFBIG; return the OutputError's message."""
    import resource
    import signal
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.RLIM_INFINITY))
    try:
        append_rows(path, [{"group_id": "big", "error": "x" * 40_000}], GROUP_COLUMNS)
    except OutputError as e:
        return str(e)
    return "no error"


def _spawn_pool(n: int) -> concurrent.futures.ProcessPoolExecutor:
    return concurrent.futures.ProcessPoolExecutor(
        max_workers=n, mp_context=multiprocessing.get_context("spawn"))


# --------------------------------------------------------------------------- schema

def test_schema_columns():
    assert HARNESS_GROUP_COLUMNS[0] == "group_id" and len(HARNESS_GROUP_COLUMNS) == 27
    assert HARNESS_INDIVIDUAL_COLUMNS[-1] == "amp" and len(HARNESS_INDIVIDUAL_COLUMNS) == 27
    assert GROUP_COLUMNS[:len(HARNESS_GROUP_COLUMNS)] == HARNESS_GROUP_COLUMNS
    assert INDIVIDUAL_COLUMNS[:len(HARNESS_INDIVIDUAL_COLUMNS)] == HARNESS_INDIVIDUAL_COLUMNS
    assert len(set(GROUP_COLUMNS)) == len(GROUP_COLUMNS)
    assert len(set(INDIVIDUAL_COLUMNS)) == len(INDIVIDUAL_COLUMNS)
    ours = set(EXTRA_GROUP_COLUMNS) | set(EXTRA_INDIVIDUAL_COLUMNS)
    assert ours == set(COLUMN_DOCS)
    assert all(doc and "\n" not in doc for doc in COLUMN_DOCS.values())


def test_harness_headers_match_schema():
    assert tuple(_records(HARNESS / "master_groups.csv")[0]) == HARNESS_GROUP_COLUMNS
    assert tuple(_records(HARNESS / "master_individual.csv")[0]) == HARNESS_INDIVIDUAL_COLUMNS


def test_format_value():
    assert format_value(None) == ""
    assert format_value(0.0) == "0.0"
    assert format_value(0) == "0"
    assert format_value(True) == "True" and format_value(False) == "False"
    assert format_value(math.nan) == ""
    assert format_value(math.inf) == "" and format_value(-math.inf) == ""
    assert format_value(1 / 3) == repr(1 / 3)
    assert format_value({"a": 1, "b": [1, 2]}) == '{"a":1,"b":[1,2]}'
    assert format_value([1, "x"]) == '[1,"x"]'
    assert format_value("vf:1,s:1,fl:1") == "vf:1,s:1,fl:1"
    assert format_value(Path("a/b")) == "a/b"


def test_group_id_and_timestamp():
    gid = new_group_id("unified_model")
    assert re.fullmatch(r"unified_model_[0-9a-f]{8}", gid)
    assert new_group_id("seq") != new_group_id("seq")
    assert re.fullmatch(r"\d{8}_\d{6}", timestamp_now())


def test_results_module_imports_no_torch_or_pandas():
    code = ("import sys, engine.results.store, engine.results.read, engine.results.columns, "
            "engine.results.values, engine.results.paths, engine.results.preflight; "
            "bad = [m for m in ('torch', 'pandas') if m in sys.modules]; "
            "sys.exit(1 if bad else 0)")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    assert subprocess.run([sys.executable, "-c", code], env=env, cwd=ROOT).returncode == 0


# --------------------------------------------------------------------------- appends

def test_create_and_append(tmp_path):
    path = tmp_path / "runs" / "c" / "master_groups.csv"
    append_rows(path, [{"group_id": "seq_1", "T_group": 1.5, "energy_group": None,
                        "compile": False, "backend_flags": {"tf32": True}}], GROUP_COLUMNS)
    append_rows(path, [{"group_id": "seq_2"}, {"group_id": "seq_3", "K": 4}], GROUP_COLUMNS)
    records = _records(path)
    assert tuple(records[0]) == GROUP_COLUMNS
    rows = read_rows(path)
    assert [r["group_id"] for r in rows] == ["seq_1", "seq_2", "seq_3"]
    assert rows[0]["T_group"] == "1.5" and rows[0]["energy_group"] == ""
    assert rows[0]["compile"] == "False" and rows[0]["backend_flags"] == '{"tf32":true}'
    assert rows[2]["K"] == "4"
    assert path.read_bytes().endswith(b"\r\n")  # the harness's (csv's) line ending
    assert not list(path.parent.glob("*.bak-*")) and not list(path.parent.glob(".*.tmp"))


def test_unknown_key_is_a_programming_error(tmp_path):
    path = tmp_path / "master_groups.csv"
    with pytest.raises(ValueError, match="not_a_column"):
        append_rows(path, [{"group_id": "x", "not_a_column": 1}], GROUP_COLUMNS)
    assert not path.exists()


def test_concurrent_appends_of_large_rows_stay_whole(tmp_path):
    path = tmp_path / "master_individual.csv"
    with _spawn_pool(4) as pool:
        futures = [pool.submit(_append_worker, str(path), p, 25) for p in range(4)]
        for f in futures:
            f.result(timeout=120)
    records = _records(path)
    assert tuple(records[0]) == INDIVIDUAL_COLUMNS
    assert sum(1 for rec in records if tuple(rec) == INDIVIDUAL_COLUMNS) == 1
    rows = read_rows(path)
    assert len(rows) == 100
    seen = set()
    for row in rows:
        m = re.fullmatch(r"p(\d)r(\d+)", row["job_id"])
        assert m, row["job_id"][:80]
        p, r = int(m[1]), int(m[2])
        assert row["pass"] == str(p) and row["attempt"] == str(r)
        assert len(row["error"]) == ERROR_LEN
        assert row["error"] == _error_text(p, r)
        assert row["total_time_s"] == "" and row["early_stopped"] == "False"
        seen.add((p, r))
    assert seen == {(p, r) for p in range(4) for r in range(25)}


def test_header_upgrade_keeps_old_values_and_backs_up(tmp_path):
    path = tmp_path / "master_groups.csv"
    old = [{"group_id": f"seq_{i}", "exp_id": "E01", "features": "vf:1,s:0,fl:1",
            "T_group": 2.5 + i, "energy_group": None} for i in range(3)]
    append_rows(path, old, HARNESS_GROUP_COLUMNS)
    original = path.read_bytes()

    append_rows(path, [{"group_id": "new_1", "status": "ok", "cell_key": "abc",
                        "T_group": 9.0}], GROUP_COLUMNS)
    backups = list(tmp_path.glob("master_groups.csv.bak-*"))
    assert len(backups) == 1
    assert re.fullmatch(r"master_groups\.csv\.bak-\d{8}-\d{6}", backups[0].name)
    assert backups[0].read_bytes() == original
    assert tuple(_records(path)[0]) == GROUP_COLUMNS
    rows = read_rows(path)
    assert len(rows) == 4
    for i, row in enumerate(rows[:3]):
        assert row["group_id"] == f"seq_{i}" and row["exp_id"] == "E01"
        assert row["features"] == "vf:1,s:0,fl:1" and row["T_group"] == repr(2.5 + i)
        assert row["energy_group"] == "" and row["status"] == "" and row["cell_key"] == ""
    assert rows[3]["group_id"] == "new_1" and rows[3]["status"] == "ok"
    assert rows[3]["cell_key"] == "abc" and rows[3]["T_group"] == "9.0"
    assert not list(tmp_path.glob(".*.tmp"))

    # Same header now: plain append, no new backup.
    append_rows(path, [{"group_id": "new_2"}], GROUP_COLUMNS)
    assert len(list(tmp_path.glob("master_groups.csv.bak-*"))) == 1
    assert len(read_rows(path)) == 5


def test_two_upgrades_in_one_second_get_distinct_backups(tmp_path):
    path = tmp_path / "g.csv"
    append_rows(path, [{"a": 1}], ["a"])
    append_rows(path, [{"a": 2, "b": 2}], ["a", "b"])
    append_rows(path, [{"a": 3, "c": 3}], ["a", "c"])
    backups = sorted(tmp_path.glob("g.csv.bak-*"))
    assert len(backups) == 2
    assert _records(path)[0] == ["a", "b", "c"]
    assert [(r["a"], r["b"], r["c"]) for r in read_rows(path)] == [
        ("1", "", ""), ("2", "2", ""), ("3", "", "3")]


def test_foreign_columns_are_kept(tmp_path):
    path = tmp_path / "master_groups.csv"
    long_note = "n" * 50_000 + ",\"end\""
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["group_id", "my_note", "exp_id"])
        w.writerow(["seq_a", "first, note", "E01"])
        w.writerow(["seq_b", long_note, "E02"])
    append_rows(path, [{"group_id": "ours", "exp_id": "E03", "status": "ok"}], GROUP_COLUMNS)
    header = _records(path)[0]
    assert header[:3] == ["group_id", "my_note", "exp_id"]
    assert header[3:] == [c for c in GROUP_COLUMNS if c not in ("group_id", "exp_id")]
    rows = read_rows(path)
    assert len(rows) == 3
    assert rows[0]["my_note"] == "first, note" and rows[0]["exp_id"] == "E01"
    assert rows[1]["my_note"] == long_note and rows[1]["exp_id"] == "E02"
    assert rows[2]["my_note"] == "" and rows[2]["exp_id"] == "E03" and rows[2]["status"] == "ok"

    # The union header is now in place: the next append is a plain append, column kept.
    append_rows(path, [{"group_id": "ours2"}], GROUP_COLUMNS)
    rows = read_rows(path)
    assert len(rows) == 4 and rows[1]["my_note"] == long_note
    assert len(list(tmp_path.glob("master_groups.csv.bak-*"))) == 1


def test_harness_file_survives_our_appends(tmp_path):
    path = tmp_path / "master_groups.csv"
    shutil.copyfile(HARNESS / "master_groups.csv", path)
    before = read_rows(path)
    assert len(before) == 12
    append_rows(path, [{"group_id": new_group_id("seq"), "exp_id": "E01", "executor": "seq",
                        "features": "vf:0,s:0,fl:0", "status": "ok", "energy_group": None}],
                GROUP_COLUMNS)
    assert tuple(_records(path)[0]) == GROUP_COLUMNS
    rows = read_rows(path)
    assert len(rows) == 13
    for old, new in zip(before, rows, strict=False):
        assert all(new[k] == v for k, v in old.items())
    unified = [r for r in rows[:12] if r["executor"] == "unified_model"]
    assert unified and all(r["features"] == "vf:1,s:1,fl:1" for r in unified)
    seq = [r for r in rows[:12] if r["executor"] == "seq"]
    assert all(r["energy_group"] == "0" for r in seq)  # kept as written, not reinterpreted
    data = path.read_bytes()
    assert data.count(b'"vf:1,s:1,fl:1"') == len(unified)
    assert data.count(b"\n") == data.count(b"\r\n")  # the harness's CRLF kept throughout
    assert rows[12]["features"] == "vf:0,s:0,fl:0" and rows[12]["energy_group"] == ""


def test_harness_individual_file_appends_by_name(tmp_path):
    path = tmp_path / "master_individual.csv"
    shutil.copyfile(HARNESS / "master_individual.csv", path)
    before = read_rows(path)
    append_rows(path, [{"group_id": "g", "job_id": "j", "split": "holdout", "lr": 0.1}],
                INDIVIDUAL_COLUMNS)
    rows = read_rows(path)
    assert len(rows) == len(before) + 1 == 37
    assert rows[:36] == [{**old, **{c: "" for c in EXTRA_INDIVIDUAL_COLUMNS}} for old in before]
    assert rows[36]["split"] == "holdout" and rows[36]["lr"] == "0.1"


# --------------------------------------------------------------------------- torn lines

def test_read_rows_ignores_torn_last_line(tmp_path):
    path = tmp_path / "t.csv"
    path.write_bytes(b"a,b\r\n1,2\r\n3,")
    assert read_rows(path) == [{"a": "1", "b": "2"}]
    path.write_bytes(b'a,b\r\n1,2\r\n3,"open field\r\nstill open\r\n')
    assert read_rows(path) == [{"a": "1", "b": "2"}]
    path.write_bytes(b'a,b\r\n1,"x\r\ny"\r\n')
    assert read_rows(path) == [{"a": "1", "b": "x\r\ny"}]
    path.write_bytes(b"a,b\r\n1,2")
    assert read_rows(path) == []
    assert read_rows(tmp_path / "missing.csv") == []


def test_append_repairs_a_torn_tail(tmp_path):
    path = tmp_path / "g.csv"
    append_rows(path, [{"a": 1, "b": "ok"}], ["a", "b"])
    with open(path, "ab") as f:
        f.write(b'2,"half a row\r\n')  # crashed writer: open quote, ends in a line break
    torn = path.read_bytes()
    append_rows(path, [{"a": 3, "b": "after"}], ["a", "b"])
    assert read_rows(path) == [{"a": "1", "b": "ok"}, {"a": "3", "b": "after"}]
    (backup,) = tmp_path.glob("g.csv.bak-*")
    assert backup.read_bytes() == torn


# --------------------------------------------------------------------------- failures

def test_enospc_mid_write_leaves_file_byte_identical(tmp_path, monkeypatch):
    path = tmp_path / "master_groups.csv"
    append_rows(path, [{"group_id": "a"}], GROUP_COLUMNS)
    before = path.read_bytes()
    calls = []

    def half_then_full(fd, data):
        calls.append(len(data))
        if len(calls) == 1:
            return os.write(fd, data[:len(data) // 2])
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(results, "_write", half_then_full)
    with pytest.raises(OutputError, match="No space left on device") as info:
        append_rows(path, [{"group_id": "b", "error": "e" * 30_000}], GROUP_COLUMNS)
    assert str(path) in str(info.value)
    assert len(calls) == 2
    assert path.read_bytes() == before


def test_real_short_write_and_efbig_leave_file_byte_identical(tmp_path):
    path = tmp_path / "master_groups.csv"
    append_rows(path, [{"group_id": "a"}], GROUP_COLUMNS)
    before = path.read_bytes()
    with _spawn_pool(1) as pool:
        message = pool.submit(_fsize_limited_append, str(path),
                              len(before) + 10_000).result(timeout=60)
    assert "File too large" in message and str(path) in message
    assert path.read_bytes() == before


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full")
def test_dev_full_symlink_is_refused_before_writing(tmp_path):
    runs = tmp_path / "runs"
    runs.mkdir()
    (runs / "master_groups.csv").symlink_to("/dev/full")
    with pytest.raises(OutputError, match="master_groups.csv.*not a regular file"):
        preflight(runs)
    with pytest.raises(OutputError, match="master_groups.csv"):
        append_rows(runs / "master_groups.csv", [{"group_id": "x"}], GROUP_COLUMNS)
    assert os.listdir(runs) == ["master_groups.csv"]


def test_results_path_that_is_a_directory(tmp_path):
    (tmp_path / "master_individual.csv").mkdir()
    with pytest.raises(OutputError, match="master_individual.csv.*directory"):
        preflight(tmp_path)
    with pytest.raises(OutputError, match="not a regular file"):
        append_rows(tmp_path / "master_individual.csv", [{"job_id": "x"}], INDIVIDUAL_COLUMNS)


def test_runs_dir_under_a_regular_file(tmp_path):
    blocker = tmp_path / "afile"
    blocker.write_text("not a folder\n")
    runs = blocker / "runs" / "c1"
    with pytest.raises(OutputError) as info:
        preflight(runs)
    msg = str(info.value)
    assert "is under a regular file" in msg and str(runs) in msg and f"'{blocker}'" in msg
    with pytest.raises(OutputError) as info:
        append_rows(runs / "master_groups.csv", [{"group_id": "x"}], GROUP_COLUMNS)
    msg = str(info.value)
    assert "is under a regular file" in msg and str(runs) in msg and f"'{blocker}'" in msg
    with pytest.raises(OutputError, match="not a directory"):
        preflight(blocker)
    assert blocker.read_text() == "not a folder\n"
    assert os.listdir(tmp_path) == ["afile"]


def test_preflight_creates_and_leaves_nothing(tmp_path):
    runs = tmp_path / "a" / "b"
    assert preflight(runs) == runs.resolve()
    assert runs.is_dir() and os.listdir(runs) == []
    append_rows(runs / "master_groups.csv", [{"group_id": "x"}], GROUP_COLUMNS)
    assert preflight(runs) == runs.resolve()  # an existing regular file is fine


def test_lock_timeout_names_the_lock_file(tmp_path):
    path = tmp_path / "master_groups.csv"
    with filelock.FileLock(str(path) + ".lock"):
        with pytest.raises(OutputError, match=re.escape(str(path) + ".lock")):
            append_rows(path, [{"group_id": "x"}], GROUP_COLUMNS, lock_timeout=0.2)
    assert not path.exists()
