"""The monitor: one sampler per cell, identical for every executor. Torch-free.

The sampler runs as a **sidecar process** in the cell's session (``python -m
engine.measure.monitor``), not as a thread of the training process: a thread would compete with the
training loop for the GIL, and a slow NVML call (seconds, on a busy or misbehaving driver)
would then stall training. The sidecar samples at a fixed interval (default
:data:`DEFAULT_INTERVAL_S`) and writes every sample, timestamped with ``time.monotonic``
(the clock ``time.perf_counter`` also reads on Linux, so samples and the cell's timings share
one time axis across processes):

- to ``<runs>/samples/<group_id>.csv`` (``.csv.partial`` until the sidecar stops: after the
  group, or on the SIGTERM that stops a killed cell's session; a file left ``.partial`` is
  one whose sidecar was itself killed — :mod:`engine.measure.samples`), and
- as a ``sample`` event into the cell's ``events.jsonl`` (the dashboard's live charts; the
  watchdog reads device utilisation from these, so no second sampler opens the device).

What it samples:

- the device under test through NVML (``pynvml`` from nvidia-ml-py), opened by UUID:
  utilisation (%, NVML's "percent of time a kernel was running", not SM occupancy), memory
  used (MiB), power (W: the instantaneous reading where the driver offers it, else NVML's
  power usage, a 1-s average on Ampere and later; ``power_method`` in the meta file and the
  rows says which), the total-energy counter (mJ), SM clock (MHz), temperature (°C).
  Each metric is probed once when the sidecar starts; an unsupported one (old GPUs, MIG
  slices, virtual GPUs) is recorded as missing with NVML's reason and never read again, and
  an error of one metric during the run blanks that value in that sample only;
- the cell's process tree (psutil): CPU use (% of one core), resident memory (MiB, summed);
  host memory available (MiB; less where the cell's cgroup limit leaves less:
  :mod:`engine.cgroup_memory`);
- CPU package energy from RAPL (``/sys/class/powercap/intel-rapl:*``) where it exists and is
  readable; missing otherwise (never invented).

After the group window the cell stops the sidecar (SIGTERM: one last sample, then exit) and
:func:`engine.measure.energy.summarise` turns the samples into the row's columns over
exactly the window: energy is the counter's difference interpolated at the window's ends
where the device has a counter (``energy_method = nvml_energy_counter``), otherwise the
trapezoidal time integral of sampled power with the ends interpolated
(``power_integral``), otherwise missing (``none``) — never 0 J for an unknown.

This module is the sidecar itself (its loop and ``main``); the device is read by
:mod:`engine.measure.nvml`, the host by :mod:`engine.measure.host`, the samples files are
written and read by :mod:`engine.measure.samples`, and the window's maths is
:mod:`engine.measure.energy`.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import signal
import socket
import sys
import time
from pathlib import Path
from typing import Any

from engine.cgroup_memory import available_mib, locate
from engine.measure.cores import CoreMeter
from engine.measure.host import ProcessTree, rapl_files, rapl_missing_reason
from engine.measure.nvml import GpuDevice, open_gpu
from engine.measure.samples import (
    FILE_ONLY_FIELDS,
    PARTIAL_SUFFIX,
    SAMPLE_FIELDS,
    format_sample_value,
)

#: Seconds between samples: sub-second, so a window of a few seconds still has several
#: samples, at a sidecar cost well under 1 % of one core (bench part 4 measures it).
DEFAULT_INTERVAL_S = 0.5
#: The cell's request for a sample now (with a fresh scan of its processes), answered by
#: one byte on ``--mark-fd`` once the sample is written: taken just before the group window
#: opens and just after it closes, so ``cores_used`` (:mod:`engine.measure.cores`) is read
#: at the window's ends, not interpolated over a sampling interval.
MARK_SIGNAL = signal.SIGUSR1
#: Exit status of a sidecar that could not write its samples (or its status file): the
#: samples are incomplete, and its one-line reason (``<file>: <why>``) went to the
#: ``--status-fd`` pipe, so the cell fails instead of measuring from a cut file.
EXIT_SAMPLES_LOST = 4


# --------------------------------------------------------------------------- sampling

class Sampler:
    """Takes one sample at a time (the sidecar's loop calls :meth:`sample`)."""

    def __init__(self, root_pid: int, gpu: GpuDevice | None, attempt_dir: str | None = None):
        self.gpu = gpu
        self.tree = ProcessTree(root_pid)
        self.cores = CoreMeter(root_pid, attempt_dir)
        self.rapl = rapl_files()
        self.errors: dict[str, int] = {}
        #: Located once (two /proc files); its limit and usage are read at every sample.
        self.cgroup = locate()

    def sample(self, rescan: bool = False) -> dict[str, Any]:
        """One sample; ``rescan``: find the cell's processes afresh first (a mark)."""
        row: dict[str, Any] = {"t": time.monotonic(), "time": time.time()}
        if self.gpu is not None:
            values, errors = self.gpu.read()
            row.update(values)
            for err in errors:
                self.errors[err] = self.errors.get(err, 0) + 1
        row["cpu_pct"], row["rss_mib"] = self.tree.read()
        row["host_mem_available_mib"] = available_mib(cgroup=self.cgroup)
        row["tree_cpu_s"] = self.cores.read(rescan=rescan)
        if self.rapl:
            try:
                row["cpu_energy_uj"] = sum(int(p.read_text()) for p, _ in self.rapl)
            except (OSError, ValueError):
                row["cpu_energy_uj"] = None
        return row


def run_sidecar(args: argparse.Namespace) -> int:
    """The sidecar's loop (see the module docstring). Exit 0 after SIGTERM/SIGINT;
    :data:`EXIT_SAMPLES_LOST` when a write of its samples or status file failed (a full
    disk), after saying which file and why on ``--status-fd`` and stderr. A ``sample``
    event that cannot be written is dropped (the live charts miss a point, the samples
    file has it) and counted in the status file's ``events_dropped``."""
    final = Path(args.samples)
    partial = final.with_name(final.name + PARTIAL_SUFFIX)
    try:
        return _sample(args, final, partial)
    except OSError as exc:  # the samples are incomplete: not a measurement any more
        line = f"{exc.filename or partial}: {exc.strerror or exc}"
        _report(args.status_fd, line)
        return EXIT_SAMPLES_LOST


def _report(status_fd: int | None, line: str) -> None:
    """The one-line reason to the cell (its status pipe) and to stderr (its log, which
    may be on the full disk too)."""
    if status_fd is not None:
        try:
            os.write(status_fd, (line + "\n").encode("utf-8", "replace"))
        except OSError:
            pass
    try:
        print(f"monitor: {line}", file=sys.stderr, flush=True)
    except (OSError, ValueError):
        pass


def _sample(args: argparse.Namespace, final: Path, partial: Path) -> int:
    from engine import stacks
    from engine.events import EventWriter

    stacks.install("monitor")  # a hang in NVML shows in the hung cell's dumps
    # Signals are taken synchronously (sigtimedwait), never in the middle of a write, so a
    # samples line is always whole.
    stop_signals = {signal.SIGTERM, signal.SIGINT}
    signal.pthread_sigmask(signal.SIG_BLOCK, stop_signals | {MARK_SIGNAL})
    gpu, gpu_error = None, None
    if args.gpu_uuid:
        try:
            gpu = open_gpu(args.gpu_uuid)
        except RuntimeError as exc:
            gpu_error = str(exc)
    sampler = Sampler(args.root_pid, gpu, args.attempt_dir or str(Path(args.events).parent))
    final.parent.mkdir(parents=True, exist_ok=True)
    events = EventWriter(args.events, cell=args.cell, attempt=args.attempt)
    meta_path = Path(args.meta)
    missing = dict(gpu.missing) if gpu else ({"gpu": gpu_error} if gpu_error else {})
    meta: dict[str, Any] = {
        "pid": os.getpid(), "interval_s": args.interval, "host": socket.gethostname(),
        "gpu": gpu.facts if gpu else None, "gpu_missing": missing,
        "gpu_supported": gpu.supported if gpu else [],
        # Which power reading power_w holds (instant or the driver's 1-s average) and why
        # not the instant one: the rows' power_method.
        "power_method": gpu.power_method if gpu else None,
        "power_missing": gpu.power_missing if gpu else {},
        "cpu_energy": "rapl" if sampler.rapl else None,
        "cpu_energy_missing": None if sampler.rapl else rapl_missing_reason(),
        "samples_file": str(final), "state": "running",
    }
    n = dropped = 0
    with open(partial, "w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(SAMPLE_FIELDS)

        def take(rescan: bool = False) -> None:
            nonlocal n, dropped
            row = sampler.sample(rescan)
            # The sampler's own CPU so far: its cost over any window is a difference.
            row["monitor_cpu_s"] = time.process_time()
            writer.writerow([format_sample_value(row.get(k)) for k in SAMPLE_FIELDS])
            fh.flush()  # raises OSError (no file name) when the disk is full
            n += 1
            try:
                events.emit("sample", **{k: (round(v, 3) if isinstance(v, float) else v)
                                         for k, v in row.items()
                                         if k not in FILE_ONLY_FIELDS})
            except OSError:
                dropped += 1

        take()
        _write_json(meta_path, meta)  # "ready": the first sample exists
        # The sampling loop's own CPU from here on (start-up — imports, NVML probe, the
        # first scan — precedes the group window, like the cell's own imports).
        cpu0 = time.process_time()
        next_at = time.monotonic() + args.interval
        while True:
            wait = max(next_at - time.monotonic(), 0.0)
            got = (signal.sigtimedwait(stop_signals | {MARK_SIGNAL}, wait) if wait > 0
                   else None)
            if got is not None and got.si_signo == MARK_SIGNAL:
                take(rescan=True)  # off the grid: the next tick stays where it was
                _ack(args.mark_fd)
                continue
            if got is not None:
                take(rescan=True)  # the last sample, after the window closed
                break
            if os.getppid() != args.parent_pid:  # the cell is gone: stop quietly
                break
            take()
            next_at += args.interval
            if next_at < time.monotonic():  # a slow read: skip missed ticks, keep the grid
                next_at = time.monotonic() + args.interval
    os.replace(partial, final)
    meta.update(state="stopped", samples=n, errors=sampler.errors,
                cpu_s=time.process_time() - cpu0, events_dropped=dropped)
    _write_json(meta_path, meta)
    try:
        events.close()
    except OSError:
        pass  # its sample events are the live view's; the samples file is whole
    return 0


def _ack(mark_fd: int | None) -> None:
    """Tell the cell its mark's sample is written (a cell that stopped listening is no
    reason to stop sampling)."""
    if mark_fd is not None:
        try:
            os.write(mark_fd, b"m")
        except OSError:
            pass


def _write_json(path: Path, doc: dict[str, Any]) -> None:
    """``path`` whole or unchanged (a temporary file, then ``os.replace``); an ``OSError``
    names ``path``."""
    tmp = path.with_name(path.name + ".tmp")
    try:
        tmp.write_text(json.dumps(doc, default=str))
        os.replace(tmp, path)
    except OSError as exc:
        try:
            tmp.unlink(missing_ok=True)
        except OSError:
            pass
        raise OSError(exc.errno, exc.strerror, str(path)) from exc


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m engine.measure.monitor",
                                     description="The cell's sampler sidecar (started by the cell).")
    parser.add_argument("--root-pid", type=int, required=True, help="the cell's pid")
    parser.add_argument("--parent-pid", type=int, required=True)
    parser.add_argument("--interval", type=float, default=DEFAULT_INTERVAL_S)
    parser.add_argument("--samples", required=True, help="samples CSV to write")
    parser.add_argument("--events", required=True, help="the cell's events.jsonl")
    parser.add_argument("--meta", required=True, help="JSON status file")
    parser.add_argument("--cell", default="")
    parser.add_argument("--attempt", type=int, default=0)
    parser.add_argument("--gpu-uuid", default="")
    parser.add_argument("--status-fd", type=int, default=None,
                        help="a pipe to write the one-line reason to when the samples "
                             "cannot be written (exit status 4)")
    parser.add_argument("--mark-fd", type=int, default=None,
                        help="a pipe to write one byte to after each sample a mark "
                             "(SIGUSR1) asked for")
    parser.add_argument("--attempt-dir", default="",
                        help="the attempt folder, whose cleanup records name processes of "
                             "the cell outside its session (default: the events' folder)")
    return run_sidecar(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
