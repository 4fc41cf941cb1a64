"""The Results screen's model and the figures behind it (Textual-free): filter, sort,
provenance, rows, missing values, the ablation ladder, the replay clock."""

from __future__ import annotations

import pandas as pd
import pytest

from engine.results.load import load_runs, runs_from_frames
from fugue_tui.app.models.replay import Replay
from fugue_tui.app.models.results import (
    COLUMNS,
    apply_filter,
    cell_text,
    parse_filter,
    provenance,
    sort_value,
    table_rows,
)
from fugue_tui.format import MISSING as DASH
from fugue_tui.report.figures import build, ladder_table
from tests.snapshots.helpers import FIXTURES

HARNESS = FIXTURES / "harness"


def test_filter_by_field_and_free_text():
    runs = load_runs(HARNESS)
    assert len(apply_filter(runs, parse_filter("exec:unified")).groups) == 6
    both = apply_filter(runs, parse_filter("executor:seq exp:D_cv"))
    assert set(both.groups["exp_id"]) == {"D_cv"} and set(both.groups["executor"]) == {"seq"}
    assert len(apply_filter(runs, parse_filter("gpu:none")).groups) == 12
    assert len(apply_filter(runs, parse_filter("host:epyc D_hpo")).groups) == 4
    assert len(apply_filter(runs, parse_filter("campaign:nothing")).groups) == 0
    assert len(apply_filter(runs, parse_filter("")).groups) == 12
    bad = parse_filter("exeuctor:seq")
    assert bad.terms == () and "unknown filter field 'exeuctor'" in bad.error
    assert "did you mean 'executor'" in bad.error


def test_rows_show_missing_as_dash_never_zero_and_sort_numbers_numerically():
    runs = load_runs(HARNESS)
    rows = list(table_rows(runs.groups).values())
    assert rows[0][:3] == ("D_ens", "seq", DASH)
    at = {key: i for i, (key, _, _) in enumerate(COLUMNS)}
    assert rows[0][at["T_group"]] == "2.196" and rows[0][at["gpu"]] == "no GPU"
    assert cell_text("T_group", float("nan")) == DASH and cell_text("throughput", "") == DASH
    assert sorted(["10.5", "9.1", DASH], key=lambda t: sort_value("T_group", t)) == \
        ["9.1", "10.5", DASH]


def test_provenance_of_a_harness_row():
    runs = load_runs(HARNESS)
    prov = dict(provenance(runs.groups.to_dict("records")[0]))
    assert prov["machine"] == "AMD EPYC (2 cores)" and prov["torch"] == "2.11.0+cu130"
    assert prov["cores"] == "2" and "GPU" not in prov  # no GPU: not shown as a blank


def test_figures_of_the_harness_match_its_readme_and_list_missing_energy():
    results = build(load_runs(HARNESS), n_boot=0)
    speed = {b.label: b for b in results.figure("speedup").bars}
    assert [round(b.value, 3) for b in speed.values()] == [1.464, 1.236, 1.113]
    assert all(b.low is None for b in speed.values())  # two passes: no interval
    energy = results.figure("energy")
    assert energy.drawn == [] and len(energy.missing) == 6  # seq's 0 J is "not measured"
    parity = {b.label: b for b in results.figure("parity").bars}
    assert parity["D_ens unified_model vf:1,s:1,fl:1"].text.endswith("OUTSIDE (acc)")
    assert results.figure("ladder").bars == []


def test_ladder_is_a_ratio_of_means_against_rung_a_per_machine():
    frame = pd.DataFrame({
        "exp_id": ["E"] * 7, "executor": ["unified_model"] * 7,
        "rung": ["A", "A", "B", "B", "D", "A", "B"],
        "T_group": ["1"] * 7, "throughput_group": ["100", "300", "400", "400", "", "50", "75"],
        "host": ["m1"] * 5 + ["m2"] * 2, "status": ["ok"] * 7, "cell_key": ["k"] * 7})
    ladder = ladder_table(runs_from_frames(frame))
    got = {(r["machine"], r["rung"]): r["relative"] for r in ladder.to_dict("records")}
    assert got == {("m1", "A"): 1.0, ("m1", "B"): 2.0, ("m2", "A"): 1.0, ("m2", "B"): 1.5}
    assert ladder["low"].isna().all()  # fewer than 5 passes: no interval
    bars = build(runs_from_frames(frame), n_boot=0).figure("ladder").bars
    assert [b.label for b in bars][:2] == ["m1: E rung A", "m1: E rung B"]


def test_replay_releases_events_on_their_own_clock():
    wall = [0.0]
    events = [{"type": "a", "ts": 100.0}, {"type": "b", "ts": 101.0},
              {"type": "c", "ts": 103.0}, {"type": "d", "ts": 110.0}]
    replay = Replay(events, speed=2.0, wall=lambda: wall[0])
    assert [e["type"] for e in replay.due()] == ["a"]
    wall[0] = 0.5  # one campaign second at 2x
    assert [e["type"] for e in replay.due()] == ["b"]
    replay.toggle_pause()
    wall[0] = 50.0
    assert replay.due() == [] and "paused" in replay.status()
    replay.step()
    assert [e["type"] for e in replay.due()] == ["c"] and replay.clock() == 103.0
    assert replay.set_speed(True) == 5.0 and replay.set_speed(False) == 2.0
    replay.to_end()
    assert [e["type"] for e in replay.due()] == ["d"] and replay.done
    assert replay.status() == "replay · 4/4 events · 0:10 of 0:10 · 2× · finished"


def test_replay_refuses_what_it_cannot_replay(tmp_path):
    from engine.errors import FugueError

    with pytest.raises(FugueError, match="not a campaign run folder"):
        Replay.open(tmp_path)
    (tmp_path / "empty.jsonl").write_text("")
    with pytest.raises(FugueError, match="no events to replay"):
        Replay.open(tmp_path / "empty.jsonl")
    with pytest.raises(FugueError, match="no such run folder or events file"):
        Replay.open(tmp_path / "missing")


def test_an_events_file_replays_exactly_what_the_run_folder_does(tmp_path):
    from fugue_tui.app.models.replay import write_stream
    from tests.snapshots.helpers import install

    run = install(tmp_path) / "ladder"
    n = write_stream(run, tmp_path / "ladder.jsonl")
    from_folder, _ = Replay.open(run)
    from_file, run_dir = Replay.open(tmp_path / "ladder.jsonl")
    assert run_dir is None and n == len(from_folder.events) > 0
    assert from_file.events == from_folder.events
    kinds = {e["type"] for e in from_file.events}
    assert {"campaign_started", "cell_started", "job_progress", "summary", "done",
            "campaign_done"} <= kinds
