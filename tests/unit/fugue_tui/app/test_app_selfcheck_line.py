"""The plan screen's self-check line (fugue_tui/app/models/selfcheck.py, its widget): the
last verdict of this machine from <runs_dir>/selfcheck.csv (when, how many bit for bit /
within bound / outside), never another machine's; the run's outcome per exit status; and
F6 on the plan screen running the check in a worker and refreshing the line."""

from __future__ import annotations

import asyncio
import subprocess

from engine.profile.store import identity
from engine.selfcheck.store import append
from fugue_tui.app.models import selfcheck as model


def _body(outside=0):
    return {"device": "cpu", "elapsed_s": 3.0, "exit_status": 1 if outside else 0,
            "counts": {"bit_for_bit": 9, "within_bound": 12 - outside, "outside_bound": outside},
            "machine": {}, "paths": []}


def test_the_line_says_never_then_the_last_verdict_of_this_machine(tmp_path):
    assert model.last_line(tmp_path) == "self-check: never run here · F6 runs it"
    here = identity("cpu")
    append(tmp_path, _body(), here, "20261204_151720")
    append(tmp_path, _body(outside=1), {**here, "host": "elsewhere"}, "20261205_000000")
    assert model.last_line(tmp_path) == (
        "self-check: 9 bit for bit, 12 within bound, 0 outside (cpu, 2026-12-04 15:17 UTC)"
        " · F6 reruns")
    append(tmp_path, _body(outside=1), here, "20261204_160000")
    line = model.last_line(tmp_path)
    assert "1 outside — a defect, please report it" in line and "16:00 UTC" in line


def test_the_command_and_each_outcome(monkeypatch, tmp_path):
    argv = model.command(tmp_path)
    assert argv[1:5] == ["-m", "fugue_tui", "selfcheck", "--json"]
    assert argv[-2:] == ["--runs-dir", str(tmp_path)]
    answers = iter([subprocess.CompletedProcess(argv, 0, "", ""),
                    subprocess.CompletedProcess(argv, 1, "", ""),
                    subprocess.CompletedProcess(argv, 2, "", "fugue-tui: error: bad\n")])
    monkeypatch.setattr("fugue_tui.app.process.run_to_end", lambda *a, **k: next(answers))
    ok, outside, bad = (model.run(tmp_path) for _ in range(3))
    assert (ok.status, ok.severity) == (0, "information")
    assert outside.status == 1 and "a defect" in outside.message
    assert outside.severity == "error"
    assert bad.message == "self-check did not run: fugue-tui: error: bad"

    def slow(*args, **kwargs):
        raise subprocess.TimeoutExpired(argv, 1.0)

    monkeypatch.setattr("fugue_tui.app.process.run_to_end", slow)
    assert model.run(tmp_path, timeout=1.0).status is None


def test_f6_runs_the_check_without_blocking_and_refreshes_the_line(tmp_path, monkeypatch):
    from textual.widgets import Static  # noqa: F401 - the pilot needs Textual

    from fugue_tui.app.app import FugueApp
    from fugue_tui.app.widgets.selfcheck_line import SelfcheckLine
    from tests.app_screen import until

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("FUGUE_CONFIG_DIR", str(tmp_path / "config"))
    release = __import__("threading").Event()

    def fake_run(runs_dir, timeout=model.TIMEOUT_S, started=None):  # the CLI's test runs it
        release.wait(10)
        append(runs_dir, _body(), identity("cpu"), "20261204_170000")
        return model.Outcome(0, "self-check: every path at or inside its documented bound")

    monkeypatch.setattr(model, "run", fake_run)

    async def scenario():
        app = FugueApp(runs_dir="runs")
        async with app.run_test(size=(150, 46)) as pilot:
            line = lambda: str(app.screen.query_one(SelfcheckLine).render())  # noqa: E731
            await until(pilot, lambda: "never run here" in line(), what="the line")
            await pilot.press("f6")
            await until(pilot, lambda: "running" in line(), what="running")
            await pilot.press("f6")  # one at a time: said, not started twice
            release.set()
            await until(pilot, lambda: "17:00 UTC" in line(), what="the new verdict")
            assert "9 bit for bit, 12 within bound, 0 outside" in line()

    asyncio.run(scenario())


def test_run_to_end_hands_over_its_process_and_stop_session_ends_it():
    """What lets the dashboard quit during a check at once (it waited ~9 s for the check
    to finish, the screen blank): the caller gets the process and can end its session."""
    import sys
    import threading
    import time

    from fugue_tui.app.process import run_to_end, stop_session

    got = []
    done = []
    argv = [sys.executable, "-c", "import subprocess, sys, time; "
            "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); "
            "time.sleep(60)"]
    worker = threading.Thread(target=lambda: done.append(run_to_end(argv, started=got.append)))
    worker.start()
    deadline = time.monotonic() + 10
    while not got and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.3)  # its child started too
    import psutil

    family = [got[0].pid] + [c.pid for c in psutil.Process(got[0].pid).children(recursive=True)]
    t0 = time.monotonic()
    stop_session(got[0])
    worker.join(10)
    assert done and done[0].returncode == -9 and time.monotonic() - t0 < 5
    gone = time.monotonic() + 5
    while any(psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
              for pid in family) and time.monotonic() < gone:
        time.sleep(0.05)
    assert not any(psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
                   for pid in family)

