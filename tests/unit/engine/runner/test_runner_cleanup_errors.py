"""A cleanup failure never hides the first error (issue 43).

A runs folder remounted read-only while a cell runs: the runner's row write fails first,
then its own cleanup (``runner.pid``'s removal) fails too. The first error is the one said
(one line, exit 2), the guard and the campaign lock are released all the same. A full disk
at the row write: ``campaign_done`` says ``failed = 1`` and the exit code the runner
returns.

The read-only file system is injected at the OS boundary in the runner's process: every
``os.open`` for writing, ``os.write``, ``os.replace``, ``os.unlink`` and ``os.ftruncate``
on a path under the runs folder raises ``EROFS`` from the moment the cell starts, as a
remount does; reads keep working. The cell is a real subprocess (torch-free stand-in)."""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from filelock import FileLock

import engine.results.store as store
import engine.runner.attempt as attempt_mod
from engine.runner import cli
from engine.runner.guard import Guard

REPO = Path(__file__).resolve().parents[4]
READ_ONLY = os.strerror(errno.EROFS)
NOSPACE = os.strerror(errno.ENOSPC)

#: A cell that says it started and fails at once (the runner writes its row).
CRASH = """
import json, os, sys
from engine.events import EventWriter
spec = json.load(open(sys.argv[1]))
EventWriter(spec["events"], cell=spec["cell"]["key"], attempt=spec["attempt"]).emit(
    "started", pid=os.getpid(), exp_id=spec["cell"]["exp_id"],
    executor=spec["cell"]["executor"], jobs=[])
sys.exit(1)
"""

_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC


class ReadOnly:
    """Makes every write under ``root`` fail with EROFS once :attr:`on` is set."""

    def __init__(self, root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        self.root, self.on = str(root.resolve()), False
        real_open, real_write = os.open, os.write
        real_replace, real_unlink, real_truncate = os.replace, os.unlink, os.ftruncate

        def under(path) -> bool:
            try:
                return os.path.abspath(os.fspath(path)).startswith(self.root)
            except TypeError:
                return False

        def fd_under(fd: int) -> bool:
            try:
                return os.readlink(f"/proc/self/fd/{fd}").startswith(self.root)
            except OSError:
                return False

        def deny(path):
            raise OSError(errno.EROFS, READ_ONLY, os.fspath(path))

        def fake_open(path, flags, *args, **kwargs):
            if self.on and flags & _WRITE_FLAGS and under(path):
                deny(path)
            return real_open(path, flags, *args, **kwargs)

        def fake_write(fd, data):
            if self.on and fd_under(fd):
                raise OSError(errno.EROFS, READ_ONLY)
            return real_write(fd, data)

        def fake_replace(src, dst, *args, **kwargs):
            if self.on and under(dst):
                deny(dst)
            return real_replace(src, dst, *args, **kwargs)

        def fake_unlink(path, *args, **kwargs):
            if self.on and under(path):
                deny(path)
            return real_unlink(path, *args, **kwargs)

        def fake_truncate(fd, size):
            if self.on and fd_under(fd):
                raise OSError(errno.EROFS, READ_ONLY)
            return real_truncate(fd, size)

        monkeypatch.setattr(os, "open", fake_open)
        monkeypatch.setattr(os, "write", fake_write)
        monkeypatch.setattr(os, "replace", fake_replace)
        monkeypatch.setattr(os, "unlink", fake_unlink)
        monkeypatch.setattr(os, "ftruncate", fake_truncate)


@pytest.fixture
def runner_main(tmp_path, monkeypatch):
    """``cli.main`` on a one-cell campaign whose cell is :data:`CRASH`; ``on_start`` runs
    as the cell starts. Restores the signal handlers main installs."""
    monkeypatch.setenv("FUGUE_CELL_START", "spawn")
    saved = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    hooks: dict = {"on_start": lambda: None}
    guards: list[Guard] = []
    real_guard_start = Guard.start

    def start_guard(run_dir):
        guard = real_guard_start(run_dir)
        guards.append(guard)
        return guard

    monkeypatch.setattr(Guard, "start", staticmethod(start_guard))

    def start_cell(spec_path, log_path, env):
        env = {**env, "PYTHONPATH": str(REPO)}
        with open(log_path, "ab") as out:
            proc = subprocess.Popen([sys.executable, "-c", CRASH, str(spec_path)],
                                    stdout=out, stderr=subprocess.STDOUT, env=env,
                                    start_new_session=True)
        proc.wait(60)  # the cell has failed when the disk goes
        hooks["on_start"]()
        return proc

    monkeypatch.setattr(attempt_mod, "start_cell", start_cell)
    runs = tmp_path / "runs"
    campaign = tmp_path / "c.toml"
    campaign.write_text(f'name = "c"\nexperiments = ["D_ens"]\nexecutors = ["seq"]\n'
                        f'passes = 1\ndevice = "cpu"\nruns_dir = "{runs}"\n')

    def run() -> int:
        try:
            return cli.main([str(campaign)])
        finally:
            for sig, handler in saved.items():
                signal.signal(sig, handler)

    hooks["run"], hooks["runs"], hooks["guards"] = run, runs, guards
    return hooks


def _gone(pid: int, within_s: float = 10.0) -> bool:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        try:  # our child: reap it so that it does not stay a zombie
            if os.waitpid(pid, os.WNOHANG)[0] == pid:
                return True
        except ChildProcessError:
            pass
        time.sleep(0.02)
    return False


def test_a_read_only_runs_folder_mid_cell_reports_the_first_error_not_the_cleanups(
        runner_main, monkeypatch, capsys):
    read_only = ReadOnly(runner_main["runs"], monkeypatch)
    runner_main["on_start"] = lambda: setattr(read_only, "on", True)
    code = runner_main["run"]()
    read_only.on = False
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert len(err) == 1 and READ_ONLY in err[0], err
    assert "runner.pid" not in err[0] and "Traceback" not in err[0]
    # said where the disk did not allow recording it: the cell that failed
    assert "cell 1 D_ens seq pass 1 attempt 1" in err[0] and "not recorded" in err[0]
    # the releases were not skipped: the guard is gone, the campaign lock is free
    (guard,) = runner_main["guards"]
    assert _gone(guard.pid)
    lock = FileLock(runner_main["runs"] / "c" / "runner.lock")
    lock.acquire(timeout=0)
    lock.release()


def test_campaign_done_counts_the_cell_that_failed_on_a_full_disk(runner_main, monkeypatch):
    full = {"on": False}
    real_write = store._write

    def write(fd, data):
        if full["on"]:
            raise OSError(errno.ENOSPC, NOSPACE)
        return real_write(fd, data)

    monkeypatch.setattr(store, "_write", write)
    runner_main["on_start"] = lambda: full.update(on=True)
    code = runner_main["run"]()
    events = [json.loads(line) for line in
              (runner_main["runs"] / "c" / "runner.jsonl").read_text().splitlines()]
    (done,) = [e for e in events if e["type"] == "campaign_done"]
    assert code == 2
    assert done["ok"] is False and done["exit_code"] == code
    assert done["failed"] == 1
