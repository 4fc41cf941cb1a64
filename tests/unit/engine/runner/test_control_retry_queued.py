"""``control RUN retry N`` on a cell that has not started yet is refused (fresh-user finding
5): the runner applied the retry only once the cell ran, killed the attempt it had just
started and ran attempt 2 — a pointless killed row. Exit 1 and one line, as for a
campaign no runner is running (a state, not bad input); nothing is queued. A running or
finished cell still gets its retry. On the real CLI, against a runner log as the runner
writes it and a runner on another host (``runner.pid``: its state cannot be read here, so
the command would be queued)."""

from __future__ import annotations

import json

import pytest

from engine.events import EventWriter
from tests.unit.fugue_tui.test_json_outputs import fugue


@pytest.fixture
def run_dir(tmp_path):
    """Cell 1 done, cell 2 running, cell 3 queued (keys aaa1…, bbb2…, ccc3…)."""
    runner = EventWriter(tmp_path / "runner.jsonl", campaign="mysweep")
    runner.emit("campaign_started", cells=3, run_dir=str(tmp_path), device="cpu",
                session="s1")
    for i, key in enumerate(("aaa1", "bbb2", "ccc3"), 1):
        runner.emit("queued", cell=key, index=i, label=f"D_ens seq K={i}")
    for key, index in (("aaa1", 1), ("bbb2", 2)):
        runner.emit("cell_started", cell=key, index=index, label="x", attempt=1,
                    events=str(tmp_path / f"{key}.jsonl"), pid=123, log_path="x.log")
    runner.emit("done", cell="aaa1", attempt=1, exit_code=0, error="")
    runner.close()
    (tmp_path / "runner.pid").write_text(json.dumps({"pid": 1, "host": "another-host"}))
    return tmp_path


def _queued(run_dir):
    return sorted(p.name for p in (run_dir / "control").glob("*.json")) \
        if (run_dir / "control").is_dir() else []


@pytest.mark.parametrize("ref", ["3", "ccc"])
def test_retry_of_a_queued_cell_is_refused(run_dir, ref):
    done = fugue("control", str(run_dir), "retry", ref)
    assert done.returncode == 1, done.stdout + done.stderr
    (line,) = done.stderr.splitlines()
    assert f"cell 3 (ccc3) of {run_dir} has not started yet: nothing to retry" in line
    assert f"'skip {ref}' takes it out of the queue" in line and "was not sent" in line
    assert _queued(run_dir) == [] and done.stdout == ""


@pytest.mark.parametrize("ref", ["1", "2"])  # finished, running: the retry is queued
def test_retry_of_a_started_cell_is_sent(run_dir, ref):
    done = fugue("control", str(run_dir), "retry", ref)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"sent retry {ref} (") and len(_queued(run_dir)) == 1


def test_abort_line_has_no_double_space(run_dir):
    done = fugue("control", str(run_dir), "abort")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("sent abort (") and "  " not in done.stdout
