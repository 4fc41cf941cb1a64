"""The text every front end writes for an event, pinned byte for byte (issue 41).

One scripted campaign covers every event type the writers handle (and the silent ones):
for each event, the plain line of ``--batch`` off a terminal (:class:`PlainProgress`), the
stderr warning line, the recent lines of the terminal's live view (:class:`LiveProgress`)
and the lines the dashboard's run screen adds (:func:`note_lifecycle`, after the view's
own). The table was recorded from the three writers before they became one function
(:mod:`fugue_tui.live.event_text`): a change of any text fails here."""

from __future__ import annotations

import contextlib
import io
import time
from collections import deque
from typing import Any

import pytest
from rich.console import Console

from fugue_tui.app.models.run_text import note_lifecycle
from fugue_tui.console.batch import PlainProgress
from fugue_tui.console.live import LiveProgress
from fugue_tui.live.event_text import (
    Form,
    NamedCell,
    event_text,
    not_shown,
    warning_line,
)
from fugue_tui.live.view import LiveView

A, B, C = "aaaaaaaa1111", "bbbbbbbb2222", "cccccccc3333"
LABELS = {A: "E01 seq pass 1", B: "E01 mp pass 1", C: "E02 seq pass 1"}


def runner(type: str, **fields: Any) -> dict[str, Any]:
    return {"v": 1, "ts": 1000.0, "type": type, "campaign": "camp", **fields}


def cell(type: str, key: str, attempt: int, **fields: Any) -> dict[str, Any]:
    return {"v": 1, "ts": 1000.0, "type": type, "cell": key, "attempt": attempt, **fields}


def monitor(key: str, attempt: int) -> dict[str, Any]:
    return cell("sample", key, attempt, t=1.0, cpu_pct=50.0, rss_mib=100.0)


def started(key: str, index: int, attempt: int) -> dict[str, Any]:
    return runner("cell_started", cell=key, index=index, label=LABELS[key], attempt=attempt,
                  events="e", log_path="l", pid=100 + index)


def progress(key: str, attempt: int, **fields: Any) -> dict[str, Any]:
    return cell("job_progress", key, attempt, **{
        "job_id": "E01_j0", "epoch": 1, "epochs": 2, "step": 10, "steps": 10, "samples": 640,
        "loss": 0.1234, "elapsed": 2.0, **fields})


#: (event, plain stdout lines, stderr lines, live view's recent lines, run screen's extra
#: recent lines). A plain "line" with a newline is one print of two lines.
SCRIPT: list[tuple[dict[str, Any], list[str], list[str], list[str], list[str]]] = [
    (runner("campaign_started", cells=3, run_dir="runs/camp", device="cpu", runner_pid=1,
            resume=False),
     ["campaign camp: 3 cells, device cpu, run folder runs/camp"], [], [],
     ["campaign started: 3 cells"]),
    (runner("zygote", pid=5, warm_s=1.0), [], [], [], []),
    (runner("queued", cell=A, index=1, label=LABELS[A]), [], [], [], []),
    (runner("queued", cell=B, index=2, label=LABELS[B]), [], [], [], []),
    (runner("queued", cell=C, index=3, label=LABELS[C]), [], [], [], []),
    (runner("warning", message="results file repaired: 2 torn lines"), [],
     ["fugue-tui: warning: results file repaired: 2 torn lines"],
     ["warning: results file repaired: 2 torn lines"], []),
    (started(A, 1, 1), ["[1/3] E01 seq pass 1 (attempt 1)"], [], [],
     ["E01 seq pass 1: started (attempt 1)"]),
    (cell("started", A, 1, pid=101, exp_id="E01", executor="seq", jobs=["E01_j0"]),
     [], [], [], []),
    (cell("executor", A, 1, name="seq"), [], [], [], []),
    (cell("phase", A, 1, phase="data_load", seconds=0.4),
     ["    datasets loaded in 0.40 s"], [], [], []),
    (cell("phase", A, 1, phase="setup", seconds=0.1), [], [], [], []),
    (cell("job_started", A, 1, job_id="E01_j0"), [], [], [], []),
    (progress(A, 1), [], [], [], []),
    (progress(A, 1, epoch_end=True, val_acc=0.95, train_sps=1408.4),
     ["    E01_j0  epoch 1/2  loss 0.1234  val_acc 0.950  1,408 samples/s"], [], [], []),
    (progress(A, 1, epoch=2, loss=0.1, epoch_end=True),
     ["    E01_j0  epoch 2/2  loss 0.1000  0 samples/s"], [], [], []),
    (monitor(A, 1), [], [], [], []),
    (cell("warning", A, 1, message="workers capped at 2"), [],
     ["fugue-tui: warning: E01 seq pass 1: workers capped at 2"],
     ["E01 seq pass 1: warning: workers capped at 2"], []),
    (runner("warning", cell=A, attempt=1, message="disk nearly full"), [],
     ["fugue-tui: warning: E01 seq pass 1: disk nearly full"],
     ["E01 seq pass 1: warning: disk nearly full"], []),
    (runner("suspect", cell=A, attempt=1, seen="no progress for 30 s"),
     ["    cell suspect: no progress for 30 s"], [],
     ["E01 seq pass 1: suspect, no progress for 30 s"], []),
    (runner("resumed", cell=A, attempt=1), [], [], ["E01 seq pass 1: progressing again"], []),
    (runner("hung", cell=A, attempt=1, seen="no progress for 60 s", action="kill"),
     ["    cell hung: no progress for 60 s"], [],
     ["E01 seq pass 1: hung, no progress for 60 s"], []),
    (runner("killed", cell=A, attempt=1, reason="hung: no progress"),
     ["    cell killed: hung: no progress"], [], ["E01 seq pass 1: killed, hung: no progress"],
     []),
    (runner("leftovers_killed", cell=A, attempt=1, pids=[12, 13]), [], [],
     ["E01 seq pass 1: leftover processes killed [12, 13]"], []),
    (runner("cleanup", cell=A, attempt=1, messages=["removed /tmp/x"]), [], [], [], []),
    (runner("retried", cell=A, attempt=2, manual=False, retry=1, retries=2),
     ["    retry 1/2: attempt 2 next"], [], ["E01 seq pass 1: retry 1/2, attempt 2 next"], []),
    (started(A, 1, 2), ["[1/3] E01 seq pass 1 (attempt 2)"], [], [],
     ["E01 seq pass 1: started (attempt 2)"]),
    # a late line of the killed attempt: the stderr warning still, no recent line
    (cell("warning", A, 1, message="late"), [],
     ["fugue-tui: warning: E01 seq pass 1: late"], [], []),
    (cell("summary", A, 1, status="killed", T_group=1.0, warnings=["stale"]),
     ["    T_group 1.00 s  status killed\n    warning: stale"], [], [], []),
    (cell("summary", A, 2, group_id="g", status="ok", error="", T_group=20.0,
          total_samples=1000, throughput_group=1234.4, setup_s=0.1, data_load_s=0.4,
          warnings=["host busy", "clock drift"], jobs=[]),
     ["    T_group 20.00 s  throughput 1,234 samples/s  status ok\n    warning: host busy\n"
      "    warning: clock drift"], [],
     ["E01 seq pass 1: warning: host busy", "E01 seq pass 1: warning: clock drift"], []),
    (cell("job_done", A, 2, job_id="E01_j0", status="ok", error=""), [], [], [], []),
    (cell("done", A, 2, error=None, group_written=True), [], [], [], []),
    (runner("done", cell=A, attempt=2, exit_code=0, error=""), [], [], [],
     ["E01 seq pass 1: done"]),
    (started(B, 2, 1), ["[2/3] E01 mp pass 1 (attempt 1)"], [], [],
     ["E01 mp pass 1: started (attempt 1)"]),
    (cell("summary", B, 1, status="failed", T_group=3.0, throughput_group=None, warnings=[]),
     ["    T_group 3.00 s  status failed"], [], [], []),
    (cell("failed", B, 1, error="boom", group_written=False), [], [], [], []),
    (runner("failed", cell=B, attempt=1, exit_code=1, error="exit code 1"),
     ["    cell failed: exit code 1"], [], ["E01 mp pass 1: failed, exit code 1"], []),
    (runner("retried", cell=B, attempt=2, manual=True),
     ["    manual retry: attempt 2 next"], [], ["E01 mp pass 1: manual retry, attempt 2 next"],
     []),
    (cell("killed", B, 1, reason="sigterm"), [], [], [], []),
    (runner("control", cmd="skip", cell=C, applied=True),
     ["control skip [3/3] E02 seq pass 1: applied"], [],
     ["control skip E02 seq pass 1 applied"], []),
    (runner("skipped", cell=C, index=3, label=LABELS[C], reason="unavailable here: no data"),
     ["[3/3] E02 seq pass 1: skipped, unavailable here: no data"], [],
     ["E02 seq pass 1: skipped, unavailable here: no data"], []),
    (runner("control", cmd="abort", applied=False, reason="not running"),
     ["control abort: ignored (not running)"], [], ["control abort ignored (not running)"], []),
    (runner("control", cmd="retry", cell="zzz", applied=False, reason="no such cell"),
     ["control retry zzz: ignored (no such cell)"], [],
     ["control retry zzz ignored (no such cell)"], []),
    (runner("killed", cell="dddddddd9999", attempt=1, reason="earlier runner died",
            predecessor=True),
     ["    cell killed: earlier runner died"], [],
     ["cell dddddddd (earlier runner): killed, earlier runner died"], []),
    (runner("campaign_interrupted"), [], [], ["campaign interrupted"], []),
    (runner("campaign_aborted"), [], [], ["campaign aborted"], []),
    (runner("campaign_done", ok=False, exit_code=3, failed=1), [], [], [],
     ["campaign finished, exit code 3"]),
    (runner("campaign_started", cells=3, run_dir="runs/camp", device="cuda:0", runner_pid=2,
            resume=True),
     ["campaign camp: 3 cells, device cuda:0, resuming, run folder runs/camp"], [], [],
     ["campaign started: 3 cells"]),
    # a malformed event: each writer says it could not show it, and goes on
    (progress(A, 2, epoch_end=True, loss=None),
     ["    (event 'job_progress' not shown: TypeError: unsupported format string passed to "
      "NoneType.__format__)"], [], [], []),
]


def _stamp_free(lines: list[str]) -> list[str]:
    return [line[len("HH:MM:SS "):] for line in lines]


@pytest.fixture(scope="module")
def replies() -> list[tuple[list[str], list[str], list[str], list[str]]]:
    """What each writer wrote for each event of :data:`SCRIPT`, in order."""
    stdout = io.StringIO()
    plain = PlainProgress(3, stream=stdout)
    live = LiveProgress(3, Console(file=io.StringIO()), clock=lambda: 1000.0)
    live.view.recent = deque(maxlen=1000)  # every line, not the last few
    dashboard = LiveView(0, clock=lambda: 1000.0, recent=1000)
    out = []
    for event, *_ in SCRIPT:
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            at = stdout.tell()
            plain(event)
            printed = stdout.getvalue()[at:]
            live_before = len(live.view.recent)
            live(event)
        live_new = list(live.view.recent)[live_before:]
        dash_before = len(dashboard.recent)
        dashboard.apply(event)
        view_lines = list(dashboard.recent)[dash_before:]
        note_lifecycle(dashboard, event)
        extra = list(dashboard.recent)[dash_before + len(view_lines):]
        # the run screen's stderr line: the same function, the label its view knows
        key = event.get("cell") or ""
        known = dashboard.state.cells.get(key)
        dash_warning = warning_line(event, known.label if known else "")
        errors = err.getvalue().splitlines()
        # the terminal view prints each warning too: every stderr line comes twice
        assert errors[: len(errors) // 2] == errors[len(errors) // 2:]
        errors = errors[: len(errors) // 2]
        assert ([dash_warning] if dash_warning else []) == errors
        assert _stamp_free(view_lines) == _stamp_free(live_new)
        out.append(([printed[:-1]] if printed else [], errors, _stamp_free(live_new),
                    _stamp_free(extra)))
    return out


@pytest.mark.parametrize("i", range(len(SCRIPT)),
                         ids=[f"{i}-{event['type']}" for i, (event, *_) in enumerate(SCRIPT)])
def test_every_writer_writes_the_pinned_text(replies, i) -> None:
    event, plain, stderr, recent, extra = SCRIPT[i]
    assert replies[i] == (plain, stderr, recent, extra), event


def test_recent_lines_are_stamped_with_the_events_local_time() -> None:
    view = LiveView(1)
    ts = 1_700_000_000.0
    view.apply(runner("campaign_interrupted") | {"ts": ts})
    view.apply({"type": "campaign_aborted", "campaign": "camp"})
    assert list(view.recent) == [
        f"{time.strftime('%H:%M:%S', time.localtime(ts))} campaign interrupted",
        "--:--:-- campaign aborted"]


def test_a_display_bug_is_a_line_not_a_crash() -> None:
    """A live view that cannot apply an event says so in its recent lines, unstamped."""
    live = LiveProgress(1, Console(file=io.StringIO()))
    live(runner("killed", cell=["not", "a", "key"], attempt=1, reason="r"))
    assert list(live.view.recent) == [
        "(event 'killed' not shown: TypeError: unhashable type: 'list')"]


def test_one_function_gives_each_place_its_text() -> None:
    """The same event, four places: each form of :func:`event_text` on its own."""
    killed = runner("killed", cell=A, attempt=1, reason="hung: no progress")
    known = NamedCell(LABELS[A], 1, 1)
    assert event_text(killed, Form.PLAIN, known, 3) == ["    cell killed: hung: no progress"]
    assert event_text(killed, Form.RECENT, known) == ["E01 seq pass 1: killed, hung: no progress"]
    assert event_text(killed, Form.LIFECYCLE, known) == []
    assert event_text(killed, Form.WARNING, known) == []
    warned = cell("warning", A, 1, message="m")
    assert event_text(warned, Form.WARNING, known) == ["fugue-tui: warning: E01 seq pass 1: m"]
    assert event_text(warned, Form.WARNING, None) == ["fugue-tui: warning: m"]
    # the recent lines follow the cell's current attempt: an older one's lines are left out
    assert event_text(warned, Form.RECENT, NamedCell(LABELS[A], 1, 2)) == []


def test_control_names_the_cell_as_each_place_knows_it() -> None:
    control = runner("control", cmd="retry", cell=B, applied=True)
    assert event_text(control, Form.PLAIN, NamedCell(LABELS[B], 2), 3) == [
        "control retry [2/3] E01 mp pass 1: applied"]
    # the plain line needs both the index and the label, else it names the key
    assert event_text(control, Form.PLAIN, NamedCell(LABELS[B]), 3) == [
        f"control retry {B}: applied"]
    assert event_text(control, Form.RECENT, None) == [f"control retry {B} applied"]


def test_a_missing_field_raises_for_the_writer_to_report() -> None:
    bad = runner("skipped", cell=C, index=3, label=LABELS[C])  # no reason
    with pytest.raises(KeyError) as raised:
        event_text(bad, Form.PLAIN, None, 3)
    assert not_shown(bad, raised.value) == "(event 'skipped' not shown: KeyError: 'reason')"
    # the recent line reads it leniently, as the live view always did
    assert event_text(bad, Form.RECENT, NamedCell(LABELS[C], 3)) == ["E02 seq pass 1: skipped, "]


@pytest.mark.parametrize("counts, where", [
    ({"retry": 1, "retries": 2}, "attempt 2 of 3"),
    ({}, "attempt 2"),  # as a runner before the counts were written sent it
], ids=["counted", "uncounted"])
def test_a_node_loss_rerun_reads_the_same_in_batch_and_dashboard(counts, where) -> None:
    """A cell whose cluster node was lost runs again without using the campaign's retries:
    the plain line of ``--batch`` and the dashboard's recent line both say so (issue 49;
    they printed ``(event 'retried' not shown: KeyError: 'retry')`` and ``retry
    None/None``)."""
    said = f"node lost: rerun on another node ({where})"
    stdout = io.StringIO()
    plain = PlainProgress(1, stream=stdout)
    dashboard = LiveView(0, clock=lambda: 1000.0, recent=10)
    begun = started(A, 1, 1)
    lost = runner("retried", cell=A, attempt=2, manual=False, node_lost=True, **counts)
    for event in (begun, lost):
        plain(event)
        dashboard.apply(event)
        note_lifecycle(dashboard, event)
    assert stdout.getvalue().splitlines()[-1] == f"    {said}"
    assert _stamp_free([list(dashboard.recent)[-1]]) == [f"E01 seq pass 1: {said}"]
