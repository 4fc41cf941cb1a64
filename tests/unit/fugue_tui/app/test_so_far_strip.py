"""The run header's "speedup so far" strip (issue 47): it is updated from the rows appended
since the last cell end, never by reloading the runs folder (item 2), and its labels carry
the axes that tell its cells apart, such as a K sweep's K (item 4)."""

from __future__ import annotations

import asyncio
import csv
import io
import json
from pathlib import Path

from fugue_tui.app.app import FugueApp
from fugue_tui.app.screens.run import RunScreen
from tests.app_screen import screen_text, until

SIZE = (150, 48)


def _encode(header: list[str], rows: list[dict[str, str]], with_header: bool) -> bytes:
    out = io.StringIO()
    writer = csv.DictWriter(out, header, lineterminator="\r\n")
    if with_header:
        writer.writeheader()
    writer.writerows(rows)
    return out.getvalue().encode()


def _fixture_rows(runs: Path) -> tuple[list[str], list[dict[str, str]]]:
    with (runs / "master_groups.csv").open(newline="") as f:
        reader = csv.DictReader(f)
        return list(reader.fieldnames or []), list(reader)


def test_a_k_sweep_keeps_k_in_the_strip_and_an_ordinary_campaign_short_labels(tmp_path):
    """``D_ens unified_model 1.53× · D_ens unified_model 0.67×`` after a K sweep: which is
    which? Each label names the K; the recorded campaign (one K, one precision) keeps
    ``D_ens unified_model``."""
    from fugue_tui.app.models.eta import Eta
    from fugue_tui.app.models.so_far import fit_strip, speedup_parts
    from tests.snapshots.helpers import install

    runs = install(tmp_path)
    header, rows = _fixture_rows(runs)
    ordinary = speedup_parts(runs, "speed", n_boot=0)
    assert [label for label, _, _ in ordinary] == ["D_ens unified_model", "D_cv unified_model"]
    # the same experiment at K=5 and K=10: seq and unified_model at each, one pass
    speed = [r for r in rows if r["campaign_id"] == "speed" and r["exp_id"] == "D_ens"]
    sweep = [{**r, "campaign_id": "sweep"} for r in speed[:2]]
    sweep += [{**r, "campaign_id": "sweep", "K": "10", "group_id": r["group_id"] + "k10",
               "T_group": str(float(r["T_group"]) * (1.0 if r["executor"] == "seq" else 3.0))}
              for r in speed[:2]]
    (runs / "master_groups.csv").write_bytes(_encode(header, rows + sweep, True))
    parts = speedup_parts(runs, "sweep", n_boot=0)
    labels = [label for label, _, _ in parts]
    assert sorted(labels) == ["D_ens unified_model K=10", "D_ens unified_model K=5"], labels
    # the narrowest forms keep the K too (the experiment and executor alone would repeat)
    for width in (84, 100):
        strip = fit_strip(parts, Eta(200.0, 0.0, 4, 4), width)
        assert "K=5 " in strip and "K=10 " in strip and len(strip) <= width, strip


def test_labels_name_only_the_axes_that_separate_the_cells():
    """A K sweep from K=1: unified_model's K=1 cell does not vectorise, so its features
    differ from K=2's as well as its K. The label names K alone (``… K=1 vf:0,s:0,fl:0``
    pushed whole items off an 80-column strip); an axis that separates what K leaves alike
    (precision here) is still named."""
    from fugue_tui.app.models.so_far import strip_labels

    def row(k: int, features: str, precision: str = "fp32") -> dict[str, str]:
        return {"exp_id": "D_ens", "executor": "unified_model", "K": str(k),
                "features": features, "precision": precision}

    assert strip_labels([row(1, "vf:0,s:0,fl:0"), row(2, "vf:1,s:0,fl:0")]) == [
        "D_ens unified_model K=1", "D_ens unified_model K=2"]
    assert strip_labels([row(1, "vf:0"), row(2, "vf:1"), row(2, "vf:1", "bf16")]) == [
        "D_ens unified_model K=1 fp32", "D_ens unified_model K=2 fp32",
        "D_ens unified_model K=2 bf16"]


def _run_screen(app) -> RunScreen | None:
    return app.screen if isinstance(app.screen, RunScreen) else None


def test_the_strip_reads_only_the_rows_appended_since_the_last_cell_end(tmp_path, monkeypatch):
    """A runs folder with 300 earlier group rows: the strip's update at a cell end parses
    the rows appended since the previous one, never the folder again (the dashboard
    reloaded every campaign's rows at each cell end: its CPU climbed with the folder)."""
    import engine.results.load as load
    import fugue_tui.app.models.so_far as so_far
    from fugue_tui.app.widgets.run_header import RunHeader
    from tests.snapshots.helpers import install

    monkeypatch.setattr(so_far, "STRIP_WINDOW_S", 0.2)  # the folding is not what this checks
    monkeypatch.chdir(tmp_path)
    runs = install(tmp_path)
    header, rows = _fixture_rows(runs)
    ladder = [r for r in rows if r["campaign_id"] == "ladder"]
    speed = [r for r in rows if r["campaign_id"] == "speed"]
    earlier = [{**ladder[i % len(ladder)], "campaign_id": f"old{i // len(ladder)}"}
               for i in range(300)]
    groups = runs / "master_groups.csv"
    groups.write_bytes(_encode(header, earlier + speed[:2], True))
    events = runs / "speed" / "runner.jsonl"
    lines = events.read_text().splitlines(keepends=True)
    ends = [i for i, line in enumerate(lines) if json.loads(line)["type"] == "done"]
    events.write_text("".join(lines[:ends[1] + 1]))  # D_ens seq and unified_model ended

    loads = []
    real = load.load_runs
    monkeypatch.setattr(load, "load_runs", lambda *a, **k: loads.append(a) or real(*a, **k))

    async def scenario():
        app = FugueApp(attach=str(runs / "speed"), clock=lambda: 1_800_000_000.0)
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: _run_screen(app)
                        and "so far: D_ens unified_model" in screen_text(app), timeout=30,
                        what="the strip after two cells")
            assert loads == []  # not the whole runs folder: this campaign's rows
            tail = app.screen.query_one(RunHeader)._so_far_model[1].tail
            read, parsed = tail.bytes_read, tail.rows_parsed
            assert parsed == 302
            # the next two cells end: their rows, then their events
            more = _encode(header, speed[2:4], False)
            with groups.open("ab") as f:
                f.write(more)
            with events.open("a") as f:
                f.write("".join(lines[ends[1] + 1:ends[3] + 1]))
            # the strip's line itself (the cell table shows D_cv too, before the analysis:
            # it may wait up to a window, STRIP_WINDOW_S, after the previous one)
            await until(pilot, lambda: any("so far:" in line and "D_cv unified_model" in line
                                           for line in screen_text(app).splitlines()),
                        timeout=30, what="the strip after four cells")
            assert tail.bytes_read - read == len(more)
            assert tail.rows_parsed - parsed == 2
        assert loads == []  # the runs folder never reloaded

    asyncio.run(scenario())


def test_a_stream_campaign_shows_each_strategys_p95_completion_time_not_a_speedup(tmp_path):
    """A stream's T_group is mostly its last arrival: its "speedup" said 0.98× for mp
    whatever mp did. The strip shows each strategy's mean ``jct_p95_s`` (seq's included),
    with the mean's interval once there are passes enough, as report's streams table."""
    from engine.results.stream_report import stream_cells
    from engine.results.tail import GroupTail
    from fugue_tui.app.models.so_far import STREAM_HEAD, SoFar, fit_strip, speedup_line
    from tests.snapshots.helpers import install

    runs = install(tmp_path, "stream_runs")
    header, rows = _fixture_rows(runs)
    tail = GroupTail(runs / "master_groups.csv", "stream")
    tail.update()
    assert tail.any_value("stream_sha256") and not tail.any_value("no_such_column")
    model = SoFar(runs, "stream")
    parts = model.parts(n_boot=0)
    assert model.head == STREAM_HEAD
    by = {r["executor"]: float(r["jct_p95_s"]) for r in rows}
    assert parts == [("seq", f"{by['seq']:.2f} s", "(n=1, no interval yet)"),
                     ("mp", f"{by['mp']:.2f} s", "(n=1, no interval yet)")]
    assert speedup_line(runs, "stream").startswith(f"p95 job completion so far: seq {by['seq']:.2f} s")
    assert "×" not in fit_strip(parts, None, 160, model.head)
    # narrow: the short form still says what the numbers are (it read "so far: seq 4.77 s")
    narrow = fit_strip(parts * 3, None, 60, model.head)
    assert narrow.startswith("p95 so far: ") and len(narrow) <= 60, narrow

    # MIN_BOOT_N passes of each: an interval, the one report's streams table gives
    from engine.results.analysis import MIN_BOOT_N

    more = [{**r, "pass": str(p), "group_id": f"{r['group_id']}p{p}",
             "jct_p95_s": str(float(r["jct_p95_s"]) + 0.1 * p)}
            for p in range(2, MIN_BOOT_N + 1) for r in rows]
    (runs / "master_groups.csv").write_bytes(_encode(header, rows + more, True))
    parts = model.parts(n_boot=0)
    table = {c["executor"]: c["figures"]["jct_p95_s"] for c in stream_cells(model.tail.runs().groups)}
    for label, value, interval in parts:
        figure = table[label]
        assert figure["n"] == MIN_BOOT_N and value == f"{figure['mean']:.2f} s"
        assert interval == f"[{figure['ci_low']:.2f}, {figure['ci_high']:.2f}]"
    # a batch campaign in the same folder keeps its speedups
    assert SoFar(runs, "nothing-here").head != STREAM_HEAD
