"""Stack dumps of every Python process of a cell (engine.stacks, the runner's dump_stacks),
on a real process tree without torch: a parent waiting on a spawned multiprocessing worker
blocked in its own function, and a Python child with no dump handler. Each registered
process writes its own file; the unregistered one is named, not signalled (the signal
would kill it); a reused pid is never signalled; files without a dump are pruned."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import psutil
import pytest

from engine.runner.cellproc import dump_stacks, forget
from engine.stacks import STACKS_ENV, header

TREE = '''
import multiprocessing, subprocess, sys, threading
from engine import stacks

def blocked_in_worker():
    threading.Event().wait()

def worker():
    stacks.install("mp-worker")
    blocked_in_worker()

if __name__ == "__main__":
    stacks.install("cell")
    p = multiprocessing.get_context("spawn").Process(target=worker)
    p.start()
    q = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    print(p.pid, q.pid, flush=True)
    p.join()
'''


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


@pytest.fixture
def tree(tmp_path):
    """(attempt folder, the tree's session leader, worker pid, unhandled pid, stranger)."""
    attempt = tmp_path / "attempt-1"
    (attempt / "stacks").mkdir(parents=True)
    (tmp_path / "tree.py").write_text(TREE)
    env = {**os.environ, STACKS_ENV: str(attempt / "stacks")}
    leader = subprocess.Popen([sys.executable, str(tmp_path / "tree.py")], cwd=tmp_path, env=env,
                              stdout=subprocess.PIPE, text=True, start_new_session=True)
    stranger = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        worker, unhandled = map(int, leader.stdout.readline().split())
        deadline = time.monotonic() + 30
        while not (attempt / "stacks" / f"mp-worker-{worker}.txt").exists():
            assert time.monotonic() < deadline, "the worker never registered"
            time.sleep(0.05)
        yield attempt, leader.pid, worker, unhandled, stranger.pid
    finally:
        os.killpg(leader.pid, signal.SIGKILL)
        leader.wait()
        stranger.kill()
        stranger.wait()


def test_every_registered_process_dumps_its_own_stacks(tree):
    attempt, leader, worker, unhandled, stranger = tree
    stacks = attempt / "stacks"
    # a registration left by a process that is gone, whose pid now belongs to another
    (stacks / f"ray-worker-{stranger}.txt").write_text(header("ray-worker", stranger, 1.0))
    note = dump_stacks(attempt, leader, wait=5.0)
    worker_dump = (stacks / f"mp-worker-{worker}.txt").read_text()
    assert "most recent call first" in worker_dump and "in blocked_in_worker" in worker_dump
    cell_dump = (stacks / f"cell-{leader}.txt").read_text()
    assert "in join" in cell_dump  # the parent only shows it waits
    assert f"stacks/cell-{leader}.txt" in note and f"stacks/mp-worker-{worker}.txt" in note
    unhandled_part = note.split("Python processes without a dump handler: ")[1]
    assert f"pid {unhandled} (" in unhandled_part  # (and multiprocessing's resource tracker)
    assert _alive(unhandled) and _alive(stranger)  # neither was sent the signal
    assert "no answer" not in note


def test_files_without_a_dump_are_pruned_when_the_attempt_ends(tree):
    attempt, leader, worker, _, _ = tree
    stacks = attempt / "stacks"
    forget(attempt)
    assert not stacks.exists()  # nobody dumped: nothing left
    os.kill(worker, signal.SIGSTOP)  # a stopped process cannot answer
    try:
        stacks.mkdir()
        (stacks / f"mp-worker-{worker}.txt").write_text(
            header("mp-worker", worker, psutil.Process(worker).create_time()))
        note = dump_stacks(attempt, leader, wait=0.3)
        assert f"no answer from mp-worker pid {worker}" in note
    finally:
        os.kill(worker, signal.SIGCONT)
