"""``fugue-tui profile``'s engine side: one fresh probe process per distinct profile key of
the selected experiments (``engine.cell.profile_probe``), its figures appended to
``<runs_dir>/profiles.csv`` with the machine identity (``engine.profile.store``).

Torch-free: the probe is a child process (``python -m engine.cell.profile_probe``), started with
this interpreter and the engine's root on ``PYTHONPATH`` as cells are, its output kept in
``<runs_dir>/.profiles/<profile_id>.log``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from engine.errors import FugueError
from engine.measure.host import busy_warning
from engine.profile.store import (
    COLUMNS,
    append_profile,
    job_key,
    key_text,
    profile_id,
)
from engine.results.values import utc_text


class ProfileError(FugueError):
    """A probe that failed: a measurement, not bad input (exit status 1)."""

    exit_code = 1


#: Stack sizes measured by default: K = 1 (a job alone, unstacked) and three stacked sizes
#: for the stacked line (bench/RESULTS.md, part profile_estimate: fitted over 2, 4 only the
#: error at K = 32 was 16 %, over 2, 4, 8 under 1 %), small enough to stay brief.
DEFAULT_KS = (1, 2, 4, 8)
#: Longest a probe may run before it is stopped (s): a profile is meant to be brief.
PROBE_TIMEOUT_S = 1800


def distinct_keys(jobs_by_exp: dict[str, list[dict[str, Any]]], compile_mode: str,
                  device: str) -> list[tuple[dict[str, str], dict[str, Any], list[str]]]:
    """The distinct profile keys of the experiments' jobs, in first-seen order: ``(key, a
    job with it, the experiments that have it)``."""
    seen: dict[str, tuple[dict[str, str], dict[str, Any], list[str]]] = {}
    for exp_id, jobs in jobs_by_exp.items():
        for job in jobs:
            key = job_key(job, compile_mode, device)
            text = json.dumps(key, sort_keys=True)
            if text not in seen:
                seen[text] = (key, job, [])
            if exp_id not in seen[text][2]:
                seen[text][2].append(exp_id)
    return list(seen.values())


def run_probe(job: dict[str, Any], *, device: str, compile_mode: str, threads: int,
              ks: tuple[int, ...], gpu_uuid: str | None, log: Path,
              max_steps: int | None = None,
              progress: Callable[[dict[str, Any]], None] | None = None) -> dict[str, Any]:
    """One probe process; its figures (the profiles file's columns). ``max_steps``: stop
    each K after that many training steps (default: one epoch). ``progress``: called with
    each note the probe writes while it runs (``{"t", "phase": "loaded"}``, then per K
    ``{"t", "k", "phase": "start"}`` and ``{"t", "k", "phase": "end", "ok"}``), and with
    ``{"phase": "tick"}`` about every half second between them (a redraw of the ETA).

    Raises:
        ProfileError: the probe failed (its one-line reason; the log holds the rest).
    """
    import engine

    root = str(Path(engine.__file__).resolve().parent.parent)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [root, *[p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]])}
    if gpu_uuid:
        env.update(CUDA_DEVICE_ORDER="PCI_BUS_ID", CUDA_VISIBLE_DEVICES=gpu_uuid)
    spec = {"job": job, "ks": list(ks), "device": "cuda:0" if device.startswith("cuda")
            else "cpu", "threads": threads, "compile_mode": compile_mode, "gpu_uuid": gpu_uuid,
            "max_steps": max_steps}
    log.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="fugue-profile-") as tmp:
        spec_path, out_path = Path(tmp) / "spec.json", Path(tmp) / "out.json"
        notes = Path(tmp) / "progress.jsonl"
        spec_path.write_text(json.dumps({**spec, "progress": str(notes)}))
        with open(log, "w") as out:
            # its own session, so a terminal's Ctrl-C reaches only us; we end the whole
            # group ourselves (the probe forks one child per K), then the temp folder goes
            proc = subprocess.Popen([sys.executable, "-m", "engine.cell.profile_probe",
                                     str(spec_path), str(out_path)], env=env,
                                    stdin=subprocess.DEVNULL, stdout=out,
                                    stderr=subprocess.STDOUT, start_new_session=True)
            try:
                _wait(proc, notes, progress)
            except subprocess.TimeoutExpired:
                stop_probe(proc)
                raise ProfileError(f"the profile probe ran over {PROBE_TIMEOUT_S} s (log: "
                                 f"{log})") from None
            except BaseException:  # Ctrl-C, SIGTERM (the command turns it into one), ...
                stop_probe(proc)
                raise
        try:
            doc = json.loads(out_path.read_text())
        except (OSError, ValueError):
            raise ProfileError(f"the profile probe ended with status {proc.returncode} and no "
                             f"result (log: {log})") from None
    if "error" in doc:
        raise ProfileError(f"{doc['error']} (log: {log})")
    return doc


def _wait(proc: subprocess.Popen, notes: Path,
          progress: Callable[[dict[str, Any]], None] | None) -> None:
    """Wait for the probe (at most :data:`PROBE_TIMEOUT_S`), passing each new line of its
    ``notes`` file to ``progress``, and a tick between them.

    Raises:
        subprocess.TimeoutExpired: the probe ran over :data:`PROBE_TIMEOUT_S`.
    """
    if progress is None:
        proc.wait(timeout=PROBE_TIMEOUT_S)
        return
    deadline = time.monotonic() + PROBE_TIMEOUT_S
    read = 0
    while True:
        try:
            proc.wait(timeout=min(0.5, max(0.0, deadline - time.monotonic())))
            done = True
        except subprocess.TimeoutExpired:
            if time.monotonic() >= deadline:
                raise
            done = False
        try:
            text = notes.read_text()
        except OSError:
            text = ""
        complete = text[read:text.rfind("\n") + 1] if "\n" in text[read:] else ""
        read += len(complete)
        for line in complete.splitlines():
            try:
                progress(json.loads(line))
            except ValueError:
                continue
        if done:
            return
        progress({"phase": "tick"})


#: How long the probe's process group gets between SIGTERM and SIGKILL (s).
STOP_GRACE_S = 2.0


def stop_probe(proc: subprocess.Popen, grace_s: float = STOP_GRACE_S) -> None:
    """End a probe and every process it forked (its process group: the probe started a
    session of its own): SIGTERM, then SIGKILL after ``grace_s``; waits for the probe.
    A group that is already gone is fine."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            break
        try:
            proc.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            continue
        # the leader is gone; its forked children (same group) get the same signal
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        break
    try:
        proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        pass


def collect(jobs_by_exp: dict[str, list[dict[str, Any]]], *, runs_dir: str | os.PathLike[str],
            device: str, ident: dict[str, str], gpu_uuid: str | None, compile_mode: str = "off",
            threads: int = 0, ks: tuple[int, ...] = DEFAULT_KS, max_steps: int | None = None,
            say: Callable[[str], None] = print,
            progress: Callable[[int, int, str, dict[str, Any]], None] | None = None,
            ) -> list[dict[str, Any]]:
    """Profile every distinct key of ``jobs_by_exp`` (experiment id → its jobs as dicts)
    and append one row each; return the rows written. ``progress``: called as
    ``progress(i, n, key text, note)`` with each of the ``i``-th probe's notes
    (:func:`run_probe`) and ``{"phase": "done"}`` when its row is written.

    Raises:
        ProfileError: a probe failed (the rows of the keys profiled before it are kept).
    """
    threads = threads or os.cpu_count() or 1
    written = []
    keys = distinct_keys(jobs_by_exp, compile_mode, device)
    for i, (key, job, exps) in enumerate(keys, 1):
        pid = profile_id(key, ident)
        say(f"profile {i}/{len(keys)}: {key_text(key)} ({', '.join(exps)}) K = "
            f"{', '.join(map(str, ks))} ...")
        doc = run_probe(job, device=device, compile_mode=compile_mode, threads=threads, ks=ks,
                        gpu_uuid=gpu_uuid, log=Path(runs_dir) / ".profiles" / f"{pid}.log",
                        max_steps=max_steps,
                        progress=None if progress is None else
                        (lambda note, i=i, key=key: progress(i, len(keys), key_text(key),
                                                             note)))
        for line in doc.pop("errors", []):
            say(f"  warning: {line}: left out of the profile")
        busy = busy_warning((_float(doc.get("load_avg")), _float(doc.get("load_avg_end"))),
                            int(doc.get("cpu_cores") or 0) or None)
        doc["load_warning"] = busy or ""
        ended = time.time()
        row = {"profile_id": pid, "timestamp": time.strftime("%Y%m%d_%H%M%S",
                                                              time.gmtime(ended)),
               "time_utc": utc_text(ended),
               **ident, **key, **{k: ("" if v is None else v) for k, v in doc.items()
                                  if k in COLUMNS}}
        for line in append_profile(runs_dir, row):
            say(f"warning: {line}")
        say(f"  {pid}: RSS(1) {float(row['rss1_mb']):.0f} MiB, +"
            f"{_num(row.get('rss_per_member_mb'))} MiB per stacked member, step "
            f"{_num(row.get('step_time_ms'), '.1f')} ms ({row['probe_s']} s)")
        if busy:  # as --batch warns for a cell: the figures are not a quiet machine's
            say(f"  warning: {busy} (load {_num(row.get('load_avg'), '.1f')} at the start, "
                f"{_num(row.get('load_avg_end'), '.1f')} at the end): step times and CPU "
                f"figures of {pid} are inflated; profile again on a quiet machine "
                f"(the row records load_avg, load_avg_end and load_warning)")
        written.append(row)
        if progress is not None:
            progress(i, len(keys), key_text(key), {"phase": "done"})
    return written


def _float(value: Any) -> float | None:
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def _num(value: Any, fmt: str = ".0f") -> str:
    return "n/a" if value in (None, "") else format(float(value), fmt)
