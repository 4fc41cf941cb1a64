"""The live view of ``fugue-tui --batch`` (fugue_tui.console.live over fugue_tui.live.view), its ETA arithmetic, the choice
between it and the plain lines, NO_COLOR, and the report's chart at the end of a batch run.
Nothing trains here: the views are driven by recorded events."""

from __future__ import annotations

import io
import re
import time

import pytest
from rich.console import Console

from engine.events import EventWriter
from engine.observe.follow import CampaignFollower
from engine.results.columns import GROUP_COLUMNS
from engine.results.store import append_rows
from fugue_tui.console.batch import make_progress, print_summary
from fugue_tui.console.live import LiveProgress
from fugue_tui.console.plain import PlainProgress, plain_requested
from fugue_tui.format import PENDING as DASH
from fugue_tui.format import fmt_duration
from fugue_tui.live.progress_math import eta_seconds, fraction_done
from fugue_tui.live.view import LiveView

LABELS = {"c1": "D_ens seq pass 1", "c2": "D_cv seq pass 1", "c3": "D_hpo seq pass 1",
          "c4": "E01 seq pass 1"}


def runner(type, ts, **fields):
    return {"v": 1, "ts": ts, "type": type, "campaign": "quick", **fields}


def cell(type, ts, key, attempt, **fields):
    return {"v": 1, "ts": ts, "type": type, "cell": key, "attempt": attempt, **fields}


def started(key, index, attempt, ts):
    return runner("cell_started", ts, cell=key, index=index, label=LABELS[key], attempt=attempt,
                  events="unused", log_path="unused", pid=100 + index)


def recorded() -> list[dict]:
    """Four cells: c1 killed by the watchdog, retried and ok (its summary warns of a busy
    host); c2 killed by a control command; c3 running (one job done, one half-way through
    its second epoch, one waiting), then suspect, then hung; c4 skipped."""
    events = [runner("campaign_started", 1000.0, cells=4, run_dir="runs/quick", device="cpu",
                     runner_pid=1, resume=False)]
    for index, key in enumerate(("c1", "c2", "c3"), start=1):
        events.append(runner("queued", 1000.1, cell=key, index=index, label=LABELS[key]))
    events.append(runner("skipped", 1000.2, cell="c4", index=4, label=LABELS["c4"],
                         reason="unavailable here: no cifar-10-batches-py"))
    events += [
        started("c1", 1, 1, 1001.0),
        cell("started", 1001.5, "c1", 1, pid=101, jobs=["D_ens_ens_s0"]),
        runner("killed", 1010.0, cell="c1", attempt=1, reason="hung: no progress"),
        runner("retried", 1010.1, cell="c1", attempt=2, manual=False, retry=1, retries=1),
        started("c1", 1, 2, 1011.0),
        cell("summary", 1040.0, "c1", 2, status="ok", T_group=20.0, warnings=[
            "host load average 5.0 on 2 cores: the machine was busy"]),
        runner("done", 1040.5, cell="c1", attempt=2, exit_code=0, error=""),
        started("c2", 2, 1, 1041.0),
        runner("control", 1049.9, cmd="kill", cell="c2", applied=True),
        runner("killed", 1050.0, cell="c2", attempt=1, reason="killed by control command"),
        started("c3", 3, 1, 1060.0),
        cell("started", 1060.5, "c3", 1, pid=103, jobs=["D_hpo_t0", "D_hpo_t1", "D_hpo_t2"]),
        cell("phase", 1061.0, "c3", 1, phase="data_load", seconds=0.4),
        cell("phase", 1061.1, "c3", 1, phase="setup", seconds=0.0),
        cell("phase", 1061.2, "c3", 1, phase="group_start"),
        cell("job_started", 1062.0, "c3", 1, job_id="D_hpo_t0"),
        cell("job_progress", 1066.0, "c3", 1, job_id="D_hpo_t0", epoch=2, epochs=2, step=44,
             steps=44, samples=2816, loss=0.1234, val_loss=0.2, val_acc=0.95, elapsed=4.0,
             epoch_end=True, train_sps=1408.0),
        cell("job_done", 1066.1, "c3", 1, job_id="D_hpo_t0", status="ok"),
        cell("job_started", 1067.0, "c3", 1, job_id="D_hpo_t1"),
        cell("job_progress", 1082.0, "c3", 1, job_id="D_hpo_t1", epoch=1, epochs=2, step=44,
             steps=44, samples=1408, loss=0.8, val_loss=0.7, val_acc=0.81, elapsed=15.0,
             epoch_end=True, train_sps=1500.0),
        # 66 of 88 steps (75 %) after 30 s of its own time: 10 s left as of ts 1097
        cell("job_progress", 1097.0, "c3", 1, job_id="D_hpo_t1", epoch=2, epochs=2, step=22,
             steps=44, samples=2112, loss=0.4567, elapsed=30.0),
        runner("suspect", 1098.5, cell="c3", attempt=1, seen="no progress for 30 s"),
        runner("hung", 1099.0, cell="c3", attempt=1, seen="no progress for 60 s, 0.00 cores",
               action="flag"),
    ]
    return events


def render(view: LiveView, width: int = 100) -> str:
    console = Console(record=True, width=width, force_terminal=True, color_system=None,
                      file=io.StringIO())
    console.print(view.render())
    return "\n".join(line.rstrip() for line in console.export_text().splitlines())


def view_of(events, now: float, total: int = 4) -> LiveView:
    view = LiveView(total, clock=lambda: now)
    for event in events:
        view.apply(event)
    return view


def stamp(ts: float) -> str:
    return time.strftime("%H:%M:%S", time.localtime(ts))


BAR = "━" * 20


def test_running_cell_exact_view():
    events = [e for e in recorded() if e["type"] not in ("suspect", "hung")]
    text = render(view_of(events, now=1098.0))
    assert text == "\n".join([
        "campaign quick · cpu · elapsed 1:38",
        "━━━━━━━━━━━━━━━      cells 3/4 done: 1 ok, 0 failed, 1 killed, 1 skipped",
        "[3/4] D_hpo seq pass 1 · attempt 1 · cell 0:38 · running · training",
        "  job       epoch   step  progress                         loss  val acc  samples/s"
        "  elapsed   ETA",
        f"  D_hpo_t0    2/2  44/44  {BAR}     100%  0.1234    0.950      1,408     0:04  0:00",
        f"  D_hpo_t1    2/2  22/44  {BAR[:15]}           75%  0.4567    0.810      1,500"
        "     0:31  0:09",
        "  D_hpo_t2      –      –                        waiting       –        –          –"
        "        –     –",
        "recent:",
        f"  {stamp(1010.0)} D_ens seq pass 1: killed, hung: no progress",
        f"  {stamp(1010.1)} D_ens seq pass 1: retry 1/1, attempt 2 next",
        f"  {stamp(1040.0)} D_ens seq pass 1: warning: host load average 5.0 on 2 cores: "
        "the machine was busy",
        f"  {stamp(1049.9)} control kill D_cv seq pass 1 applied",
        f"  {stamp(1050.0)} D_cv seq pass 1: killed, killed by control command",
    ])


def test_hung_cell_is_shown_with_what_the_watchdog_saw():
    text = render(view_of(recorded(), now=1100.0))
    lines = text.splitlines()
    assert lines[2] == ("[3/4] D_hpo seq pass 1 · attempt 1 · cell 0:40 · hung "
                        "(no progress for 60 s, 0.00 cores)")
    # elapsed keeps counting; a hung job has no rate to extrapolate: no ETA
    assert re.fullmatch(r"  D_hpo_t1 .* 75%  0\.4567 .* 0:33     –", lines[5]), lines[5]
    assert lines[-2:] == [
        f"  {stamp(1098.5)} D_hpo seq pass 1: suspect, no progress for 30 s",
        f"  {stamp(1099.0)} D_hpo seq pass 1: hung, no progress for 60 s, 0.00 cores"]


def test_summary_warnings_shown_under_the_running_cell():
    events = recorded()[:-2] + [
        cell("summary", 1099.0, "c3", 1, status="ok", T_group=37.0,
             warnings=["the cell used 0.40 of the 2 cores it could use"])]
    lines = render(view_of(events, now=1099.5)).splitlines()
    assert "  warning: the cell used 0.40 of the 2 cores it could use" in lines
    assert lines[-1] == (f"  {stamp(1099.0)} D_hpo seq pass 1: warning: the cell used 0.40 "
                         "of the 2 cores it could use")


def test_finished_campaign_and_stale_attempts():
    events = recorded() + [
        runner("control", 1100.0, cmd="skip", cell="nope", applied=False,
               reason="no such cell (or an ambiguous key prefix)"),
        runner("control", 1100.5, cmd="abort", applied=True),
        # a late line of c1's killed first attempt changes nothing
        cell("job_progress", 1099.5, "c1", 1, job_id="D_ens_ens_s0", epoch=1, epochs=9,
             step=1, steps=10, samples=64, loss=9.0, elapsed=1.0),
        runner("killed", 1101.0, cell="c3", attempt=1, reason="killed by control command"),
        runner("campaign_done", 1102.0, ok=False, exit_code=1, failed=2),
    ]
    view = view_of(events, now=2000.0)
    assert view.counts() == {"ok": 1, "failed": 0, "killed": 2, "skipped": 1}
    lines = render(view).splitlines()
    assert lines[:3] == [
        "campaign quick · cpu · elapsed 1:42 · done",  # the clock stopped at campaign_done
        "━━━━━━━━━━━━━━━━━━━━ cells 4/4 done: 1 ok, 0 failed, 2 killed, 1 skipped",
        "last cell [3/4] D_hpo seq pass 1: killed"]
    assert "D_ens_ens_s0" not in "\n".join(lines)
    assert lines[-3:] == [
        f"  {stamp(1100.0)} control skip nope ignored (no such cell (or an ambiguous key "
        "prefix))",
        f"  {stamp(1100.5)} control abort applied",
        f"  {stamp(1101.0)} D_hpo seq pass 1: killed, killed by control command"]


def test_many_jobs_are_summarised():
    jobs = [f"j{i:02d}" for i in range(20)]
    events = [runner("campaign_started", 0.0, cells=1, run_dir="r", device="cpu",
                     runner_pid=1, resume=False),
              runner("queued", 0.0, cell="c1", index=1, label="D_ens seq pass 1"),
              started("c1", 1, 1, 1.0),
              cell("started", 1.0, "c1", 1, jobs=jobs)]
    for i in range(8):  # eight done, the ninth running
        events += [cell("job_started", 2.0 + i, "c1", 1, job_id=jobs[i]),
                   cell("job_done", 2.5 + i, "c1", 1, job_id=jobs[i], status="ok")]
    events.append(cell("job_started", 11.0, "c1", 1, job_id=jobs[8]))
    text = render(view_of(events, now=12.0, total=1))
    shown = re.findall(r"^  (j\d\d) ", text, re.M)
    # the running job, the latest six finished, the next five waiting
    assert shown == [f"j{i:02d}" for i in range(2, 14)]
    assert "  … 8 more jobs (2 finished)" in text


def test_narrow_console_drops_columns_not_the_bar():
    events = [e for e in recorded() if e["type"] not in ("suspect", "hung")]
    lines = render(view_of(events, now=1098.0), width=80).splitlines()
    assert lines[3] == ("  job       epoch  progress                         loss  val acc"
                        "  elapsed   ETA")
    assert lines[5].endswith("75%  0.4567    0.810     0:31  0:09")
    assert max(len(line) for line in lines) <= 80


def test_events_written_and_followed_from_files(tmp_path):
    """The same stream the batch front end reads: EventWriter files through CampaignFollower."""
    run = tmp_path / "run"
    log = EventWriter(run / "runner.jsonl", campaign="files")
    attempt = run / "cells" / "001" / "attempt-1" / "events.jsonl"
    log.emit("campaign_started", cells=2, run_dir=str(run), device="cpu", runner_pid=1,
             resume=False)
    log.emit("queued", cell="k1", index=1, label="D_mm seq pass 1")
    log.emit("queued", cell="k2", index=2, label="D_mm seq pass 2")
    log.emit("cell_started", cell="k1", index=1, label="D_mm seq pass 1", attempt=1,
             events=str(attempt), log_path="x", pid=5)
    events = EventWriter(attempt, cell="k1", attempt=1)
    events.emit("started", pid=5, jobs=["D_mm_digits", "D_mm_wine"])
    events.emit("job_started", job_id="D_mm_digits")
    last = events.emit("job_progress", job_id="D_mm_digits", epoch=1, epochs=4, step=5, steps=10,
                       samples=320, loss=1.5, elapsed=2.0)
    follower = CampaignFollower(run)
    view = LiveView(2, clock=lambda: last["ts"] + 1.0)
    for event in follower.poll():
        view.apply(event)
    lines = render(view).splitlines()
    assert lines[2].endswith("· attempt 1 · cell 0:01 · running · starting"), lines
    # 5 of 40 steps in 2 s: 14 s left at the report, 13 s one second later
    assert re.fullmatch(r"  D_mm_digits\s+1/4\s+5/10\s+━━╸\s+12%\s+1\.5000\s+–\s+160\s+0:03"
                        r"\s+0:13", lines[4]), lines
    assert re.fullmatch(r"  D_mm_wine\s+–\s+–\s+waiting(\s+–){5}", lines[5]), lines
    assert lines[1].endswith("cells 0/2 done: 0 ok, 0 failed, 0 killed, 0 skipped")
    for writer in (log, events):
        writer.close()


# -- ETA arithmetic -----------------------------------------------------------------------

def test_eta_from_the_jobs_own_rate_and_the_injected_clock():
    # a quarter done in 10 s: 30 s left when reported, 25 s left five seconds later
    assert eta_seconds(0.25, 10.0, observed_at=500.0, now=500.0) == pytest.approx(30.0)
    assert eta_seconds(0.25, 10.0, observed_at=500.0, now=505.0) == pytest.approx(25.0)
    assert eta_seconds(0.25, 10.0, observed_at=500.0, now=600.0) == 0.0  # late, never < 0
    assert eta_seconds(0.25, 10.0, observed_at=None, now=600.0) == pytest.approx(30.0)


def test_eta_unknown_and_finished():
    for fraction, elapsed in ((None, 5.0), (0.0, 5.0), (0.5, None), (0.5, 0.0)):
        assert eta_seconds(fraction, elapsed, observed_at=1.0, now=2.0) is None
    assert fmt_duration(eta_seconds(None, 5.0, 1.0, 2.0)) == DASH == "–"
    assert eta_seconds(1.0, 12.0, observed_at=1.0, now=99.0) == 0.0
    assert eta_seconds(1.0, None, observed_at=None, now=0.0) == 0.0
    assert fmt_duration(0.0) == "0:00"


def test_fraction_and_durations():
    assert fraction_done(1, 2, 22, 44) == pytest.approx(0.25)
    assert fraction_done(2, 2, 44, 44) == 1.0
    assert fraction_done(None, 2, 1, 44) is None and fraction_done(1, None, 1, 44) is None
    assert fraction_done(1, 2, None, 44) == 0.0
    assert [fmt_duration(s) for s in (0.4, 59.6, 61, 3600, 3725.2, None, float("nan"))] == [
        "0:00", "1:00", "1:01", "1:00:00", "1:02:05", DASH, DASH]


# -- which renderer, colours, refresh rate ------------------------------------------------

def test_plain_lines_when_not_a_terminal_or_asked_for():
    pipe = Console(file=io.StringIO(), force_terminal=False)
    tty = Console(file=io.StringIO(), force_terminal=True, width=100)
    assert isinstance(make_progress(3, pipe, environ={}), PlainProgress)
    assert isinstance(make_progress(3, tty, environ={}), LiveProgress)
    assert isinstance(make_progress(3, tty, environ={"FUGUE_PLAIN": "1"}), PlainProgress)
    assert isinstance(make_progress(3, tty, environ={"FUGUE_PLAIN": "0"}), LiveProgress)
    assert plain_requested({"FUGUE_PLAIN": "yes"}) and not plain_requested({"FUGUE_PLAIN": ""})


_COLOUR = re.compile(r"\x1b\[([0-9;]*)m")


def colour_codes(output: str) -> list[str]:
    """SGR sequences that set a foreground or background colour."""
    found = []
    for params in _COLOUR.findall(output):
        codes = [int(p) for p in params.split(";") if p]
        if any(30 <= c <= 49 or 90 <= c <= 107 for c in codes):
            found.append(params)
    return found


def drive_live(monkeypatch, no_color: bool) -> str:
    if no_color:
        monkeypatch.setenv("NO_COLOR", "1")
    else:
        monkeypatch.delenv("NO_COLOR", raising=False)
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, color_system="truecolor", width=100)
    progress = make_progress(4, console, environ={})
    assert isinstance(progress, LiveProgress)
    progress.view.clock = lambda: 1098.0
    with progress:
        for event in recorded():
            progress(event)
        progress.tick(force=True)
    return out.getvalue()


def test_no_color_means_no_colour_codes_even_on_a_forced_terminal(monkeypatch):
    coloured = drive_live(monkeypatch, no_color=False)
    assert colour_codes(coloured)  # the check below can see colours when there are some
    plain = drive_live(monkeypatch, no_color=True)
    assert "D_hpo_t1" in plain and "hung" in plain
    assert colour_codes(plain) == []


def test_redraws_are_rate_limited():
    ticks = iter([0.0, 0.1, 0.2, 0.3, 0.5, 0.55])
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, color_system=None, width=100)
    progress = LiveProgress(1, console, clock=lambda: 0.0, monotonic=lambda: next(ticks))
    drawn = []
    progress.live.update = lambda renderable, refresh=False: drawn.append(refresh)
    for _ in range(6):
        progress.tick()
    assert len(drawn) == 3  # at 0.0, 0.3 and 0.55: never twice within 0.25 s


def test_plain_progress_lines_unchanged():
    out = io.StringIO()
    plain = PlainProgress(4, stream=out)
    with plain:
        for event in recorded()[:5]:
            plain(event)
        plain.tick()
    assert out.getvalue().splitlines() == [
        "campaign quick: 4 cells, device cpu, run folder runs/quick",
        "[4/4] E01 seq pass 1: skipped, unavailable here: no cifar-10-batches-py"]


# -- the report at the end of a batch run -------------------------------------------------

def _rows(executors):
    rows = []
    for n, (executor, t) in enumerate((e, t) for e in executors for t in (4.0, 4.2)):
        if executor != "seq":
            t /= 2
        rows.append({"group_id": f"{executor}_{n:08x}", "exp_id": "D_ens", "executor": executor,
                     "K": 5, "T_group": t, "status": "ok", "campaign_id": "c",
                     "cell_key": f"k{executor}{n}", "compile_mode": "off", "host": "box",
                     "torch_version": "2.14.1", "energy_method": "none", "pass": n % 2 + 1})
    return rows


@pytest.mark.parametrize("terminal", [False, True])
def test_report_chart_with_two_executors(tmp_path, monkeypatch, terminal):
    monkeypatch.delenv("NO_COLOR", raising=False)
    append_rows(tmp_path / "master_groups.csv", _rows(["seq", "unified_model"]), GROUP_COLUMNS)
    console = Console(record=True, width=100, force_terminal=terminal, color_system=None,
                      file=io.StringIO())
    print_summary(console, tmp_path / "master_groups.csv", "c")
    text = console.export_text()
    assert "speedup over seq (ratio of mean T_group; 1 = seq)" in text
    assert re.search(r"D_ens unified_model 2\.000┤█+", text), text


def test_no_report_chart_when_only_seq_ran(tmp_path):
    append_rows(tmp_path / "master_groups.csv", _rows(["seq"]), GROUP_COLUMNS)
    console = Console(record=True, width=100, color_system=None, file=io.StringIO())
    print_summary(console, tmp_path / "master_groups.csv", "c")
    text = console.export_text()
    assert re.search(r"D_ens\s+│\s+seq\s+│", text)
    assert "speedup over seq" not in text and "┤" not in text


def test_summary_of_a_campaign_without_rows_of_its_own_is_not_an_error(tmp_path, capsys):
    """Every cell reused from another campaign (or none ended): the summary said 'no rows of
    campaign ... (known: ...)', which read like a failure of a run that exited 0."""
    append_rows(tmp_path / "master_groups.csv", _rows(["seq"]), GROUP_COLUMNS)  # campaign c
    console = Console(record=True, width=100, color_system=None, file=io.StringIO())
    print_summary(console, tmp_path / "master_groups.csv", "other")
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "campaign 'other' has no rows of its own" in err[0]
    assert "skipped or reused" in err[0] and f"fugue-tui report {tmp_path}" in err[0]
    assert "known:" not in err[0]
