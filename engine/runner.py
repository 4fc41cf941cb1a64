"""The campaign runner: expands a campaign into cells and runs each as a fresh Python
subprocess (``python -m engine.cell``), following its events and recording cells that
die without writing their own rows. Torch-free: it never creates a CUDA context, so the
processes it starts never inherit one.

Every front end (``fugue-tui --batch``, the dashboard) drives this one implementation and
receives the same event dictionaries through ``on_event``.

Run folder layout (``runs/<campaign>-<YYYYmmdd-HHMMSS>/``)::

    campaign.toml                 copy of the campaign file as run
    runner.jsonl                  runner lifecycle events (queued, started, done, failed…)
    cells/<NNN-exp-executor-pN>/attempt-<a>/{spec.json, events.jsonl, cell.log}
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import engine
from engine.availability import experiment_availability
from engine.campaign import Campaign
from engine.cell import SPEC_SCHEMA
from engine.events import EventTail, EventWriter
from engine.matrix import CellSpec, build_cells
from engine.plugins import load_plugins
from engine.provenance import machine_identity, resolve_device
from engine.results import GROUP_COLUMNS, append_rows, preflight, timestamp_now
from engine.rows import failed_group_row

EventFn = Callable[[dict[str, Any]], None]
#: Seconds between SIGTERM and SIGKILL when a cell's session is stopped.
TERM_GRACE_S = 5.0
POLL_S = 0.1


@dataclass
class CellOutcome:
    """How one cell ended, as the runner saw it."""

    cell: CellSpec
    status: str                 # ok | failed | killed
    exit_code: int | None
    seconds: float
    error: str = ""
    log: Path | None = None


@dataclass
class CampaignOutcome:
    campaign_id: str
    run_dir: Path
    outcomes: list[CellOutcome] = field(default_factory=list)
    interrupted: bool = False

    @property
    def ok(self) -> bool:
        return not self.interrupted and all(o.status == "ok" for o in self.outcomes)


class Runner:
    """Runs a campaign's cells one after another.

    ``on_event(event)`` receives every runner lifecycle event and every cell event, in
    order, each a dict with at least ``type`` and ``ts`` (``engine.events``).
    """

    def __init__(self, campaign: Campaign, on_event: EventFn | None = None):
        self.campaign = campaign
        self.on_event = on_event or (lambda event: None)
        load_plugins()  # the runner knows the same names as its cells
        self.device = resolve_device(campaign.device)
        self.machine = machine_identity(self.device)
        self.cells = build_cells(campaign, self.machine)

    def run(self) -> CampaignOutcome:
        """Run every cell. Ctrl-C (``KeyboardInterrupt``) stops the running cell's whole
        session, records it as killed, and returns the outcome marked ``interrupted``.

        Raises:
            OutputError: the runs directory cannot be written (before anything runs).
        """
        runs_dir = preflight(self.campaign.runs_dir)
        campaign_id = f"{self.campaign.name}-{timestamp_now().replace('_', '-')}"
        run_dir = runs_dir / campaign_id
        run_dir.mkdir(parents=True, exist_ok=False)
        if self.campaign.source is not None:
            shutil.copyfile(self.campaign.source, run_dir / "campaign.toml")
        outcome = CampaignOutcome(campaign_id, run_dir)
        log = EventWriter(run_dir / "runner.jsonl", campaign=campaign_id)
        self._emit(log, "campaign_started", cells=len(self.cells), run_dir=str(run_dir),
                   device=self.device)
        try:
            for cell in self.cells:
                self._emit(log, "queued", cell=cell.key, index=cell.index, label=cell.label)
            for cell in self.cells:
                result = self._run_cell(cell, campaign_id, runs_dir, run_dir, log)
                outcome.outcomes.append(result)
        except KeyboardInterrupt:
            outcome.interrupted = True
            self._emit(log, "campaign_interrupted")
        finally:
            self._emit(log, "campaign_done", ok=outcome.ok,
                       failed=sum(o.status != "ok" for o in outcome.outcomes))
            log.close()
        return outcome

    def _emit(self, writer: EventWriter, type: str, **fields: Any) -> None:
        self.on_event(writer.emit(type, **fields))

    def _spec(self, cell: CellSpec, campaign_id: str, runs_dir: Path, attempt_dir: Path,
              attempt: int) -> dict[str, Any]:
        return {
            "schema": SPEC_SCHEMA, "campaign_id": campaign_id,
            "campaign_hash": self.campaign.file_hash, "runs_dir": str(runs_dir),
            "events": str(attempt_dir / "events.jsonl"), "attempt": attempt,
            "seed": self.campaign.seed, "passes": self.campaign.passes, "device": self.device,
            "threads": self.campaign.threads, "cell": asdict(cell),
        }

    def unavailable(self, cell: CellSpec) -> str:
        """Why ``cell`` cannot run on this machine (missing data, model, plugin), or ``""``."""
        assert self.campaign.catalogue is not None
        ok, reason = experiment_availability(self.campaign.catalogue.get(cell.exp_id))
        return "" if ok else reason

    def _run_cell(self, cell: CellSpec, campaign_id: str, runs_dir: Path, run_dir: Path,
                  log: EventWriter) -> CellOutcome:
        attempt = 1
        attempt_dir = run_dir / "cells" / cell.slug / f"attempt-{attempt}"
        attempt_dir.mkdir(parents=True)
        spec = self._spec(cell, campaign_id, runs_dir, attempt_dir, attempt)
        reason = self.unavailable(cell)
        if reason:  # recorded, never started: a cell that cannot run here is not a crash
            self._record(spec, "skipped", f"unavailable here: {reason}", runs_dir)
            self._emit(log, "skipped", cell=cell.key, index=cell.index, label=cell.label,
                       reason=reason)
            return CellOutcome(cell, "skipped", None, 0.0, f"unavailable here: {reason}")
        spec_path = attempt_dir / "spec.json"
        spec_path.write_text(json.dumps(spec, indent=1))
        log_path = attempt_dir / "cell.log"
        scratch = Path(tempfile.mkdtemp(prefix="fugue-cell-"))
        env = _cell_env(scratch, self.campaign.threads)
        self._emit(log, "cell_started", cell=cell.key, index=cell.index, label=cell.label,
                   attempt=attempt, log_path=str(log_path))
        tail = EventTail(attempt_dir / "events.jsonl")
        t0 = time.perf_counter()
        written = False
        with open(log_path, "wb") as out:
            proc = subprocess.Popen(
                [sys.executable, "-m", "engine.cell", str(spec_path)], stdin=subprocess.DEVNULL,
                stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)
            try:
                while proc.poll() is None:
                    written |= self._forward(tail)
                    time.sleep(POLL_S)
            except KeyboardInterrupt:
                stop_session(proc)
                self._forward(tail)
                self._record(spec, "killed", "interrupted (Ctrl-C)", runs_dir)
                self._emit(log, "killed", cell=cell.key, attempt=attempt,
                           reason="interrupted (Ctrl-C)")
                shutil.rmtree(scratch, ignore_errors=True)
                raise
        written |= self._forward(tail)
        shutil.rmtree(scratch, ignore_errors=True)
        seconds = time.perf_counter() - t0
        code = proc.returncode
        if code == 0:
            status, error = "ok", ""
        else:
            status = "failed"
            error = _last_line(log_path) or f"cell exited with status {code}"
            if code < 0:
                error = f"cell killed by signal {-code}: {error}"
            if not written:
                self._record(spec, "failed", error, runs_dir)
        self._emit(log, "done" if status == "ok" else "failed", cell=cell.key,
                   attempt=attempt, exit_code=code, error=error, seconds=seconds)
        return CellOutcome(cell, status, code, seconds, error, log_path)

    def _forward(self, tail: EventTail) -> bool:
        """Pass new cell events on; True if the cell says it wrote its group row."""
        written = False
        for event in tail.read():
            written |= bool(event.get("group_written"))
            self.on_event(event)
        return written

    def _record(self, spec: dict[str, Any], status: str, error: str, runs_dir: Path) -> None:
        append_rows(runs_dir / "master_groups.csv", [failed_group_row(spec, status, error)],
                    GROUP_COLUMNS)


def _cell_env(scratch: Path, threads: int) -> dict[str, str]:
    """The cell's environment: a fresh TorchInductor/Triton cache (compile warm-up is
    measured cold), the thread count for OpenMP/MKL, and this engine on the path."""
    env = dict(os.environ)
    root = str(Path(engine.__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    env["TORCHINDUCTOR_CACHE_DIR"] = str(scratch / "inductor")
    env["TRITON_CACHE_DIR"] = str(scratch / "triton")
    env["PYTHONUNBUFFERED"] = "1"
    n = str(threads or os.cpu_count() or 1)
    env["OMP_NUM_THREADS"] = n
    env["MKL_NUM_THREADS"] = n
    return env


def stop_session(proc: subprocess.Popen, grace: float = TERM_GRACE_S) -> None:
    """SIGTERM the process's whole session, wait ``grace`` seconds, then SIGKILL it."""
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, grace)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


def _last_line(path: Path) -> str:
    try:
        lines = [ln.strip() for ln in path.read_text(errors="replace").splitlines() if ln.strip()]
    except OSError:
        return ""
    return lines[-1][:500] if lines else ""
