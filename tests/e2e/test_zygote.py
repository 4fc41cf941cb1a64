"""Cells forked from the runner's zygote keep every guarantee of a cell started as a fresh
interpreter (docs/measurement.md, "How a cell starts"), checked on real cells.

One campaign (``guarded``): two cells of a probe model (tests/fixtures/plugins/
fugue_zygote_probe.py) that report what their process is, under seq and unified_model, at
two threads (numpy's OpenBLAS then starts a thread at import, which the zygote must not hold
at any fork), then a cell that blocks, during which the runner is killed with SIGKILL:
nothing of the campaign may be left 5 s later, the zygote included. A second campaign
(``handed_over``) kills its zygote from inside its first cell: the next cell starts the old
way, and the rows and events say so.
"""

from __future__ import annotations

import json
import os
import signal
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import psutil
import pytest

from engine.events import read_events
from engine.results.read import read_rows
from tests.e2e.conftest import (
    PLUGINS,
    X_BLOCK,
    campaign_text,
    one_job,
    start,
    wait_for,
    write_campaign,
)

pytestmark = pytest.mark.slow

PROBE = one_job("X_probe", "process_probe")
WATCHDOG = '\n[watchdog]\ninterval_s = 5.0\naction = "flag"\n'


def _env(probe_dir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("FUGUE_REGISTRY_DIR", "FUGUE_CELL_START")}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(PLUGINS), env.get("PYTHONPATH")) if p)
    env["FUGUE_PLUGINS"] = "fugue_test_plugin,fugue_zygote_probe"
    env["FUGUE_PROBE_DIR"] = str(probe_dir)
    return env


def _facts(probe_dir: Path, kind: str) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(probe_dir.glob(f"{kind}-*.json"))]


def _attempt(guarded_or_dir, cell: dict) -> Path:
    """The cell's attempt folder (it names it relative to the working folder)."""
    workdir = getattr(guarded_or_dir, "workdir", guarded_or_dir)
    return workdir / cell["attempt"]


def _scratch(runner_pid: int) -> list[Path]:
    """The runner's scratch folders (its zygote's and its cells' compile caches)."""
    return list(Path(tempfile.gettempdir()).glob(f"fugue-cell-{runner_pid}-*"))


def _alive(pids) -> dict[int, str]:
    """Of ``pids``, those still running (a zombie runs nothing), with their command."""
    out = {}
    for pid in pids:
        try:
            proc = psutil.Process(pid)
            if proc.status() != psutil.STATUS_ZOMBIE:
                out[pid] = " ".join(proc.cmdline())[:120]
        except psutil.Error:
            continue
    return out


@dataclass
class Guarded:
    workdir: Path
    run_dir: Path
    runner_pid: int
    cells: list[dict]          # the probe cells' reports, in the order they ran
    imports: list[dict]        # the probe plugin's import-time reports
    rows: list[dict]
    events: list[dict]         # runner.jsonl
    zygote_pid: int
    left_after_5s: dict[str, str]   # processes and scratch folders (the zygote's, cells')
    watched: set[int]


@pytest.fixture(scope="module")
def guarded(tmp_path_factory) -> Guarded:
    workdir = tmp_path_factory.mktemp("zygote")
    probe_dir = workdir / "probe"
    write_campaign(workdir, campaign_text("zy", "X_probe,X_block", ["seq", "unified_model"])
                   .replace("threads = 1", "threads = 2") + WATCHDOG, PROBE + X_BLOCK)
    runner = start(workdir, "campaign.toml", module="engine.runner", env=_env(probe_dir))
    run_dir = workdir / "runs" / "zy"
    try:
        block = wait_for(lambda: list(run_dir.glob("cells/*X_block-seq*/attempt-1/events.jsonl")),
                         timeout=300, what="the blocking cell")[0]
        wait_for(lambda: any(e["type"] == "job_started" for e in read_events(block)),
                 what="the blocking cell's job")
        events = read_events(run_dir / "runner.jsonl")
        zygote_pid = next(e["pid"] for e in events if e["type"] == "zygote")
        block_pid = next(e["pid"] for e in read_events(block) if e["type"] == "started")
        watched = ({p.pid for p in psutil.Process(runner.pid).children(recursive=True)}
                   | {zygote_pid, block_pid})
        runner.send_signal(signal.SIGKILL)
        runner.wait(timeout=10)
        deadline = time.monotonic() + 5.0
        while (_alive(watched) or _scratch(runner.pid)) and time.monotonic() < deadline:
            time.sleep(0.1)
        left = {str(pid): cmd for pid, cmd in _alive(watched).items()}
        left.update({str(p): "scratch folder" for p in _scratch(runner.pid)})
    finally:
        if runner.poll() is None:
            runner.kill()
            runner.wait(timeout=10)
    # The next runner (only the probe cells, done: it runs nothing, starts no zygote)
    # records the attempt the killed runner left, with how that attempt was started.
    write_campaign(workdir, campaign_text("zy", "X_probe", ["seq", "unified_model"])
                   .replace("threads = 1", "threads = 2"), PROBE + X_BLOCK)
    after = start(workdir, "campaign.toml", "--resume", module="engine.runner",
                  env=_env(probe_dir))
    _, err = after.communicate(timeout=120)
    assert after.returncode == 0, err
    cells = sorted(_facts(probe_dir, "cell"), key=lambda f: f["record"]["started"])
    return Guarded(workdir, run_dir, runner.pid, cells, _facts(probe_dir, "import"),
                   read_rows(workdir / "runs" / "master_groups.csv"), events, zygote_pid,
                   left, watched)


def test_cells_are_forked_by_the_zygote_as_the_runners_own_children(guarded):
    ready = next(e for e in guarded.events if e["type"] == "zygote")
    assert not ready.get("error") and ready["warm_s"] >= ready["imports_s"] > 0
    # as the zygote saw itself before its first fork (checked again before each)
    assert (ready["threads"], ready["python_threads"], ready["cuda_initialized"]) == (1, 1, False)
    assert [(r["exp_id"], r["executor"], r["status"], r["cell_start"])
            for r in guarded.rows] == [
        ("X_probe", "seq", "ok", "zygote"), ("X_probe", "unified_model", "ok", "zygote"),
        ("X_block", "seq", "killed", "zygote")]  # recorded by the next runner
    started = [e for e in guarded.events if e["type"] == "cell_started"]
    assert [e["start"] for e in started] == ["zygote"] * 3
    assert all(0 <= e["start_s"] < 5 for e in started)
    assert len(guarded.cells) == 2
    for cell in guarded.cells:
        assert cell["ppid"] == guarded.runner_pid  # adopted: the runner waits for it
        assert cell["pid"] != guarded.zygote_pid
        # the same entry as python -m engine.cell SPEC: __main__, argv, working folder
        assert cell["main"].endswith("engine/cell/__main__.py")
        spec = str(Path(cell["attempt"]) / "spec.json")
        assert cell["argv"] == [cell["main"], spec]
        # ps shows it as it shows a spawned cell (not as the zygote)
        # (setproctitle pads with NULs: psutil lists the title, then empty strings)
        assert " ".join(cell["cmdline"]).split()[1:] == ["-m", "engine.cell", spec]
        assert Path(cell["cwd"]) == guarded.workdir


def test_each_cell_leads_its_session_reads_dev_null_and_writes_its_log(guarded):
    for cell in guarded.cells:
        assert cell["sid"] == cell["pid"] == cell["pgid"]
        fds = cell["fds"]
        assert fds["0"] == "/dev/null"
        assert fds["1"] == fds["2"] == str(_attempt(guarded, cell) / "cell.log")
        # nothing of the zygote or the runner: no zygote.log, no socket to either
        assert not [t for t in fds.values() if "zygote.log" in t or t.startswith("socket:")]
        assert "Traceback" not in Path(fds["1"]).read_text()


def test_the_runners_record_names_each_cells_session(guarded):
    for cell in guarded.cells:
        record = cell["record"]  # cell.pid, as the runner wrote it before the cell ran
        assert (record["pid"], record["sid"], record["runner_pid"]) == (
            cell["pid"], cell["pid"], guarded.runner_pid)
        assert record["start"] == "zygote" and record["create_time"] is not None


def test_cells_and_the_zygote_die_with_a_sigkilled_runner(guarded):
    for cell in guarded.cells:
        assert cell["death_signal"] == signal.SIGKILL
    assert guarded.zygote_pid in guarded.watched
    assert guarded.left_after_5s == {}, "outlived the runner by 5 s"


def test_each_cell_has_its_own_compile_cache_and_environment(guarded):
    first, second = guarded.cells
    for cell in (first, second):
        env = cell["env"]
        assert cell["inductor_cache"] == env["TORCHINDUCTOR_CACHE_DIR"]
        assert cell["triton_cache"] == env["TRITON_CACHE_DIR"]
        assert cell["triton_knob"] in (None, env["TRITON_CACHE_DIR"])
        scratch = Path(env["TORCHINDUCTOR_CACHE_DIR"]).parent
        assert scratch.name.startswith(f"fugue-cell-{guarded.runner_pid}-")
        assert not scratch.exists()  # removed when the attempt ended
        assert env["FUGUE_STACKS_DIR"] == str(Path(cell["attempt"]) / "stacks")
        assert cell["inductor_markers"] == [str(cell["pid"])]  # no other cell's files
        assert not cell["inductor_compiled"]  # no compile state came from the zygote
    assert first["inductor_cache"] != second["inductor_cache"]
    assert first["triton_cache"] != second["triton_cache"]


def test_threads_and_cuda_are_each_cells_own(guarded):
    for cell in guarded.cells:
        assert cell["env"]["OMP_NUM_THREADS"] == "2" and cell["torch_threads"] == 2
        assert not cell["cuda_initialized"] and not cell["bad_fork"]
        # the zygote, seen from outside while the cell ran: one thread, no CUDA driver
        assert cell["zygotes"] == [{"pid": guarded.zygote_pid, "threads": 1,
                                    "libcuda": False}]


def test_plugins_load_in_each_cell_with_a_fresh_random_state(guarded):
    imports = {f["pid"]: f for f in guarded.imports}
    assert guarded.zygote_pid not in imports  # each cell loads its plugins; the zygote none
    assert {c["pid"] for c in guarded.cells} <= set(imports)
    first, second = (imports[c["pid"]] for c in guarded.cells)
    for key in ("torch_seed", "numpy_state", "random_state"):
        assert first[key] != second[key], key


def test_each_cell_registers_its_stack_dump_and_fault_handler(guarded):
    for cell in guarded.cells:
        assert cell["faulthandler"]
        name = f"cell-{cell['pid']}.txt"
        assert name in cell["stacks"]
        dump = (_attempt(guarded, cell) / "stacks" / name).read_text()
        assert json.loads(dump.splitlines()[0][2:])["pid"] == cell["pid"]
        assert "build_process_probe" in dump


# --------------------------------------------------------------------------- hand-over

KILLER = one_job("X_killer", "process_probe",
                 model_kwargs="{ kill_zygote = true, exit_status = 7 }")


def test_a_zygote_that_dies_hands_the_next_cells_to_a_fresh_interpreter(tmp_path):
    probe_dir = tmp_path / "probe"
    write_campaign(tmp_path, campaign_text("zy-lost", "X_killer,X_probe"), KILLER + PROBE)
    runner = start(tmp_path, "campaign.toml", module="engine.runner", env=_env(probe_dir))
    _, err = runner.communicate(timeout=300)
    assert runner.returncode == 1, err  # the first cell died (exit 7) after killing it
    rows = read_rows(tmp_path / "runs" / "master_groups.csv")
    # the runner wrote the first row (the cell could not): it says how that cell started
    assert [(r["exp_id"], r["status"], r["cell_start"]) for r in rows] == [
        ("X_killer", "failed", "zygote"), ("X_probe", "ok", "spawn")]
    assert "exited with status 7" in rows[0]["error"]
    events = read_events(tmp_path / "runs" / "zy-lost" / "runner.jsonl")
    ready, lost = [e for e in events if e["type"] == "zygote"]
    assert ready["warm_s"] > 0 and "signal 9" in lost["error"]
    assert any(e["type"] == "warning" and "fresh interpreters" in e["message"]
               and lost["error"] in e["message"] for e in events)
    assert [e["start"] for e in events if e["type"] == "cell_started"] == ["zygote", "spawn"]
    spawned = next(c for c in _facts(probe_dir, "cell") if c["record"]["start"] == "spawn")
    assert spawned["ppid"] == runner.pid and spawned["sid"] == spawned["pid"]
    assert spawned["death_signal"] == signal.SIGKILL and spawned["zygotes"] == []
