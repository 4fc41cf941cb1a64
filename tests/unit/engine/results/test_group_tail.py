"""engine.results.tail: one campaign's group rows read incrementally (issue 47, item 2: the
dashboard reloaded the whole runs folder at each cell end)."""

from __future__ import annotations

import csv
import io
import os
from pathlib import Path

import pandas as pd

from engine.results.load import load_runs
from engine.results.tail import GroupTail

FIXTURE = Path(__file__).resolve().parents[3] / "fixtures" / "dashboard" / "runs" / "master_groups.csv"


def _rows() -> tuple[list[str], list[dict[str, str]]]:
    with FIXTURE.open(newline="") as f:
        reader = csv.DictReader(f)
        return list(reader.fieldnames or []), list(reader)


def _encode(header: list[str], rows: list[dict[str, str]], with_header: bool) -> bytes:
    out = io.StringIO()
    writer = csv.DictWriter(out, header, lineterminator="\r\n")
    if with_header:
        writer.writeheader()
    writer.writerows(rows)
    return out.getvalue().encode()


def test_an_update_parses_only_the_rows_appended_since_the_last(tmp_path):
    header, rows = _rows()
    ladder = [r for r in rows if r["campaign_id"] == "ladder"]
    speed = [r for r in rows if r["campaign_id"] == "speed"]
    earlier = [{**ladder[i % len(ladder)], "campaign_id": f"old{i // len(ladder)}"}
               for i in range(300)]
    path = tmp_path / "master_groups.csv"
    path.write_bytes(_encode(header, earlier + speed[:2], True))
    tail = GroupTail(path, "speed")
    assert tail.update()
    assert tail.rows_parsed == 302 and len(tail.runs().groups) == 2
    assert set(tail.runs().groups["exp_id"]) == {"D_ens"}
    assert not tail.update()  # nothing appended: nothing read
    read, parsed = tail.bytes_read, tail.rows_parsed

    # two rows of the campaign and one of another, the last one torn (a write in progress)
    more = _encode(header, speed[2:4] + [{**ladder[0], "campaign_id": "other"}], False)
    torn = _encode(header, [speed[4]], False)
    with path.open("ab") as f:
        f.write(more + torn[:40])
    assert tail.update()
    assert tail.bytes_read - read == len(more) + 40  # the earlier campaigns never again
    assert tail.rows_parsed - parsed == 3
    assert list(tail.runs().groups["exp_id"]) == ["D_ens", "D_ens", "D_cv", "D_cv"]
    with path.open("ab") as f:
        f.write(torn[40:])
    assert tail.update() and len(tail.runs().groups) == 5
    assert tail.rows_parsed - parsed == 4
    # the rows as load_runs normalises them, read whole (what the report and Results show)
    whole = load_runs(path).select("speed").groups.reset_index(drop=True)
    ours = tail.runs().groups
    columns = ["exp_id", "executor", "status", "machine", "precision", "compile_mode", "K",
               "T_group", "features", "row"]
    pd.testing.assert_frame_equal(ours[columns], whole[columns].assign(row=range(5)))


def test_a_quoted_line_end_waits_for_its_record_and_a_replaced_file_is_read_again(tmp_path):
    header, rows = _rows()
    speed = [r for r in rows if r["campaign_id"] == "speed"]
    path = tmp_path / "master_groups.csv"
    path.write_bytes(_encode(header, speed[:1], True))
    tail = GroupTail(path, "speed")
    assert tail.update() and len(tail.runs().groups) == 1
    failed = _encode(header, [{**speed[1], "status": "failed", "error": "line one\nline two"}],
                     False)
    cut = failed.index(b"\n") + 1  # inside the quoted error: no complete record yet
    with path.open("ab") as f:
        f.write(failed[:cut])
    assert not tail.update()
    with path.open("ab") as f:
        f.write(failed[cut:])
    assert tail.update()
    assert list(tail.runs().groups["error"]) == ["", "line one\nline two"]
    # an upgrade or a repair rewrites the file (another inode): read from its start
    new = tmp_path / "new.csv"
    new.write_bytes(_encode(header, speed[:3], True))
    os.replace(new, path)
    assert tail.update() and len(tail.runs().groups) == 3


def test_each_update_checks_and_normalises_only_its_new_rows_and_answers_as_a_whole_load(
        tmp_path):
    """Issue 47, item 2: at each cell end the strip normalised every row of the campaign
    again and checked the new one with pandas, so its cost grew with the campaign. Now the
    rows are normalised once each (count, not time), plain numbers skip pandas, and the
    answer is what one normalisation of all rows gives."""
    header, rows = _rows()
    speed = [r for r in rows if r["campaign_id"] == "speed" and r["status"] == "ok"]
    path = tmp_path / "master_groups.csv"
    path.write_bytes(_encode(header, speed[:1], True))
    tail = GroupTail(path, "speed")
    tail.update()
    tail.runs()
    # what normalising fills in: a compile mode from `compile`, the machine from the CPU
    # (or "unknown machine"), the precision from `amp`, a harness's unmeasured 0 energy
    odd = ({}, {"compile_mode": "", "compile": "True"},
           {"host": "", "precision": "", "amp": "True", "cpu_cores": "8"},
           {"energy_group": "0", "energy_method": "", "gpu_name": "", "host": "",
            "cpu_model": "", "cpu_cores": ""})
    for i in range(1, 12):  # one cell end after another
        row = {**speed[i % len(speed)], "group_id": f"g{i}", **odd[i % len(odd)]}
        with path.open("ab") as f:
            f.write(_encode(header, [{k: v for k, v in row.items() if k in header}], False))
        assert tail.update()
        ours = tail.runs().groups
    assert tail.rows_normalised == 12 and tail.checked_by_pandas == 0
    whole = load_runs(path).select("speed").groups.reset_index(drop=True)
    pd.testing.assert_frame_equal(ours.drop(columns="source"),
                                  whole.assign(row=range(12)).drop(columns="source"),
                                  check_dtype=True)


def test_an_impossible_value_or_an_unfinished_row_takes_the_whole_way(tmp_path):
    """What the fast paths cannot decide goes the way of a whole load: a number that is
    no plain decimal through pandas' rule (left out, with its note), and once a row is
    not ok (its fills read the cell's ok rows) all rows are normalised together."""
    header, rows = _rows()
    speed = [r for r in rows if r["campaign_id"] == "speed" and r["status"] == "ok"]
    path = tmp_path / "master_groups.csv"
    path.write_bytes(_encode(header, speed[:2], True))
    tail = GroupTail(path, "speed")
    tail.update()
    tail.runs()
    with path.open("ab") as f:
        f.write(_encode(header, [{**speed[2], "T_group": "-3"}, {**speed[3], "T_group": "1e999"},
                                 {**speed[4], "T_group": " 2"}], False))
    assert tail.update()
    assert tail.checked_by_pandas == 3
    assert len(tail.runs().groups) == 3 and tail.runs().groups["T_group"].iloc[-1] == 2.0
    assert "2 rows with an impossible value left out" in tail.notes[-1]
    killed = {**speed[0], "status": "killed", "group_id": "k1", "features": "",
              "T_group": ""}
    with path.open("ab") as f:
        f.write(_encode(header, [killed], False))
    assert tail.update()
    before = tail.rows_normalised
    groups = tail.runs().groups
    assert tail.rows_normalised - before == 4  # all of them again
    whole = load_runs(path).select("speed").groups.reset_index(drop=True)
    assert list(groups["features"]) == list(whole["features"])
