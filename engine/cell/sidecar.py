"""The cell's handle on its monitor sidecar (``engine.measure.monitor``). Torch-free.

The cell starts the sidecar before executor setup (its start-up is outside every timed
phase), waits until the first sample exists, and stops it after the group window; then
:meth:`CellMonitor.group_columns` and :meth:`CellMonitor.job_columns` turn the samples into
row columns over exactly the measured windows. If the sidecar cannot start, the cell runs
anyway: every monitor column stays empty and the reason is reported (a missing metric is an
empty cell, never a zero). A sidecar that could not *write* its samples (a full disk) is
different: its samples are cut, so :meth:`CellMonitor.check_complete` fails the cell with
the sidecar's one line (``<samples>.csv.partial: No space left on device``), sent through
a pipe because the cell's log may be on the same full disk.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from engine.cell.protocol import safe_name
from engine.errors import OutputError
from engine.measure.cores import cores_over
from engine.measure.energy import summarise
from engine.measure.host import rapl_files
from engine.measure.monitor import DEFAULT_INTERVAL_S, MARK_SIGNAL
from engine.measure.samples import (
    MONITOR_META,
    group_samples_path,
    read_samples,
    samples_on_disk,
    write_slice,
)
from engine.processes import die_with_parent, engine_env

#: Seconds the cell waits for the sidecar's first sample (interpreter start, psutil and
#: NVML initialisation; NVML init can take seconds on a busy driver).
START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 10.0
#: Seconds the cell waits for the sidecar's answer to a mark: a sample takes milliseconds
#: (a slow NVML read, a process scan on a crowded host: tens); past this the cell goes on.
MARK_TIMEOUT_S = 2.0


class CellMonitor:
    """One cell's sampler. ``runs_dir/samples/<group_id>.csv`` holds the group's samples;
    job slices go to ``runs_dir/samples/<group_id>/<job_id>.csv``."""

    def __init__(self, runs_dir: str | Path, group_id: str, events: str | Path, cell: str,
                 attempt: int, gpu_uuid: str | None, interval_s: float = DEFAULT_INTERVAL_S):
        self.runs_dir = Path(runs_dir)
        self.group_id = group_id
        self.samples_path = group_samples_path(self.runs_dir, group_id)
        self.meta_path = Path(events).parent / MONITOR_META
        self.events = Path(events)
        self.cell = cell
        self.attempt = attempt
        self.gpu_uuid = gpu_uuid or ""
        self.interval_s = interval_s
        self.proc: subprocess.Popen | None = None
        self.meta: dict[str, Any] = {}
        self.samples: list[dict[str, Any]] = []
        self.problem = ""
        #: The sidecar's one line when it could not write its samples ("" otherwise).
        self.lost = ""
        self._status: int | None = None  # read end of the sidecar's status pipe
        self._marks: int | None = None  # read end of the sidecar's mark answers
        #: Marks the sidecar did not answer in time (the window's ends then interpolate
        #: over a sampling interval; cores_used is still filled).
        self.marks_missed = 0
        #: The sidecar died before :meth:`stop`: its samples do not cover the window.
        self.cut = False
        #: The samples file as it is on disk once stopped (``.csv`` or ``.csv.partial``).
        self.samples_file: Path | None = None

    def start(self) -> bool:
        """Start the sidecar and wait for its first sample. False (and :attr:`problem` set)
        when it could not start."""
        argv = [sys.executable, "-m", "engine.measure.monitor", "--root-pid", str(os.getpid()),
                "--parent-pid", str(os.getpid()), "--interval", repr(self.interval_s),
                "--samples", str(self.samples_path), "--events", str(self.events),
                "--meta", str(self.meta_path), "--cell", self.cell,
                "--attempt", str(self.attempt)]
        if self.gpu_uuid:
            argv += ["--gpu-uuid", self.gpu_uuid]
        self.meta_path.unlink(missing_ok=True)
        self._status, status_w = os.pipe()
        self._marks, marks_w = os.pipe()
        argv += ["--status-fd", str(status_w), "--mark-fd", str(marks_w),
                 "--attempt-dir", str(self.events.parent)]
        try:
            # Same session as the cell (the runner's clean-up reaches it). When the cell dies
            # it gets SIGTERM (not SIGKILL): one last sample, the samples file completed.
            self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, env=engine_env(),
                                         pass_fds=(status_w, marks_w),
                                         preexec_fn=die_with_parent(os.getpid(),
                                                                    signal.SIGTERM))
        except OSError as exc:
            self.problem = f"monitor did not start: {exc}"
            return False
        finally:
            os.close(status_w)  # the sidecar holds the only write end: EOF once it exits
            os.close(marks_w)
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.meta_path.exists():
                self.meta = json.loads(self.meta_path.read_text())
                return True
            if self.proc.poll() is not None:
                self._read_status()
                self.problem = self.lost or (f"monitor exited with status "
                                             f"{self.proc.returncode} (see cell.log)")
                return False
            time.sleep(0.02)
        self.proc.kill()
        self.problem = f"monitor gave no sample within {START_TIMEOUT_S:.0f} s"
        return False

    def mark(self, timeout_s: float = MARK_TIMEOUT_S) -> bool:
        """Have the sidecar take a sample now (with a fresh scan of the cell's processes)
        and wait until it is written: called just before the group window opens and just
        after it closes, so the window's ends fall milliseconds from a sample
        (``cores_used``, :mod:`engine.measure.cores`). False when no answer came within
        ``timeout_s`` (counted in :attr:`marks_missed`; the columns interpolate over a
        sampling interval then)."""
        import select

        if self.proc is None or self.proc.poll() is not None or self._marks is None:
            return False
        try:
            self.proc.send_signal(MARK_SIGNAL)
            ready, _, _ = select.select([self._marks], [], [], timeout_s)
            if ready and os.read(self._marks, 64):
                return True
        except OSError:
            pass
        self.marks_missed += 1
        return False

    def stop(self) -> None:
        """SIGTERM → one last sample → exit; then load the samples.

        A sidecar that had already exited before the window ended (a crash, an OOM kill;
        not a full disk, which :meth:`check_complete` turns into a failed cell) left its
        samples cut: its columns would describe only part of the window, so they stay
        empty, :attr:`problem` says why (``gpu_metrics_missing``) and ``samples_file``
        still names what it wrote (``.csv.partial``)."""
        if self.proc is None or self.proc.poll() is not None:
            self._read_status()
            if self.proc is not None and not self.lost:
                self.cut = True
                self.problem = self.problem or (
                    f"monitor exited with status {self.proc.returncode} before the group "
                    f"window ended: its samples are cut, so the monitor columns are left "
                    f"empty (see cell.log)")
            self._load()
            return
        self.proc.terminate()
        try:
            self.proc.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            self.problem = self.problem or "monitor did not stop within 10 s (killed)"
        self._read_status()
        self._load()

    def check_complete(self) -> None:
        """Raise :class:`OutputError` with the sidecar's one line when it could not write
        its samples: rows computed from a cut samples file would measure nothing."""
        self._read_status()
        if self.lost:
            raise OutputError(self.lost)

    def _read_status(self) -> None:
        """The sidecar's status line, once it has exited (its pipe then reads to EOF)."""
        if self._status is None or self.proc is None or self.proc.poll() is None:
            return
        fd, self._status = self._status, None
        if self._marks is not None:
            os.close(self._marks)
            self._marks = None
        chunks = []
        try:
            while chunk := os.read(fd, 4096):
                chunks.append(chunk)
        except OSError:
            pass
        finally:
            os.close(fd)
        said = b"".join(chunks).decode("utf-8", "replace").strip()
        if said:
            self.lost = said.splitlines()[-1]

    def _load(self) -> None:
        try:
            self.meta = json.loads(self.meta_path.read_text())
        except (OSError, json.JSONDecodeError):
            pass
        on_disk = samples_on_disk(self.runs_dir, self.group_id)
        self.samples_file = on_disk
        if self.cut:
            self.samples = []  # a part of the window is no measure of the window
            return
        path = on_disk or self.samples_path
        try:
            self.samples = read_samples(path)
        except OSError:
            self.samples = []

    # ------------------------------------------------------------------ columns

    def provenance(self) -> dict[str, Any]:
        """Device facts for the group row (NVML's view of the device under test)."""
        facts = dict(self.meta.get("gpu") or {})
        return {k: v for k, v in facts.items() if v is not None}

    def missing_text(self) -> str | None:
        parts = [f"{k}: {v}" for k, v in (self.meta.get("gpu_missing") or {}).items()]
        if self.problem:
            parts.append(self.problem)
        return "; ".join(parts) or None

    def group_columns(self, t0: float, t1: float) -> dict[str, Any]:
        """Group-row columns over ``[t0, t1]`` (monotonic seconds)."""
        cols: dict[str, Any] = {"monitor_interval_s": self.interval_s,
                                "gpu_metrics_missing": self.missing_text()}
        if not self.samples:
            cols["energy_method"] = "none"
            cols["cpu_energy_method"] = "none"
            if self.cut and self.samples_file is not None:
                cols["samples_file"] = os.path.relpath(self.samples_file, self.runs_dir)
            return cols
        wrap = max((w for _, w in rapl_files()), default=None)
        s = summarise(self.samples, t0, t1, rapl_wrap=wrap)
        energy = s.pop("energy")
        cols.update(s, energy_group=energy, cores_used=cores_over(self.samples, t0, t1))
        used_power = s["gpu_power_mean_w"] is not None or s["energy_method"] == "power_integral"
        cols["power_method"] = self.meta.get("power_method") if used_power else None
        cols["samples_file"] = os.path.relpath(self.samples_path, self.runs_dir)
        return cols

    def job_columns(self, job_id: str, t0: float | None, t1: float | None,
                    shared: bool) -> dict[str, Any]:
        """Job-row columns over the job's own window. ``shared``: jobs ran at the same time
        on one device, so per-job GPU figures cannot be separated — they stay empty and the
        method says so (never a copy of the group value)."""
        if not self.samples or t0 is None or t1 is None:
            return {"energy_method": "none"}
        path = write_slice(self.samples, t0, t1,
                           self.runs_dir / "samples" / self.group_id / f"{safe_name(job_id)}.csv")
        cols: dict[str, Any] = {"samples_file": os.path.relpath(path, self.runs_dir)}
        if shared:
            cols.update(energy_method="none",
                        gpu_metrics_method="shared device: group columns only")
            return cols
        s = summarise(self.samples, t0, t1)
        cols.update(gpu_util_mean=s["gpu_util_mean"], gpu_util_max=s["gpu_util_max"],
                    vram_peak_mb=s["vram_peak_mb"], energy_j=s["energy"],
                    energy_method=s["energy_method"])
        if s["energy_method"] == "power_integral":  # the job's only power-derived value
            cols["power_method"] = self.meta.get("power_method")
        if self.meta.get("gpu"):
            cols["gpu_metrics_method"] = "nvml (job window)"
        return cols


def mps_daemon_present() -> bool | None:
    """Whether an MPS control daemon runs on this host (any user's); None if unknown."""
    try:
        import psutil

        return any((p.info.get("name") or "").startswith("nvidia-cuda-mps")
                   for p in psutil.process_iter(["name"]))
    except Exception:
        return None
