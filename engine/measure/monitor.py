"""The monitor: one sampler per cell, identical for every executor. Torch-free.

The sampler runs as a **sidecar process** in the cell's session (``python -m
engine.measure.monitor``), not as a thread of the training process: a thread would compete with the
training loop for the GIL, and a slow NVML call (seconds, on a busy or misbehaving driver)
would then stall training. The sidecar samples at a fixed interval (default
:data:`DEFAULT_INTERVAL_S`) and writes every sample, timestamped with ``time.monotonic``
(the clock ``time.perf_counter`` also reads on Linux, so samples and the cell's timings share
one time axis across processes):

- to ``<runs>/samples/<group_id>.csv`` (``.partial`` until the sidecar stops cleanly), and
- as a ``sample`` event into the cell's ``events.jsonl`` (the dashboard's live charts; the
  watchdog reads device utilisation from these, so no second sampler opens the device).

What it samples:

- the device under test through NVML (``pynvml`` from nvidia-ml-py), opened by UUID:
  utilisation (%, NVML's "percent of time a kernel was running", not SM occupancy), memory
  used (MiB), power (W), the total-energy counter (mJ), SM clock (MHz), temperature (°C).
  Each metric is probed once when the sidecar starts; an unsupported one (old GPUs, MIG
  slices, virtual GPUs) is recorded as missing with NVML's reason and never read again, and
  an error of one metric during the run blanks that value in that sample only;
- the cell's process tree (psutil): CPU use (% of one core), resident memory (MiB, summed);
  host memory available (MiB);
- CPU package energy from RAPL (``/sys/class/powercap/intel-rapl:*``) where it exists and is
  readable; missing otherwise (never invented).

After the group window the cell stops the sidecar (SIGTERM: one last sample, then exit) and
:func:`summarise` turns the samples into the row's columns over exactly the window:
energy is the counter's difference interpolated at the window's ends where the device has a
counter (``energy_method = nvml_energy_counter``), otherwise the trapezoidal time integral
of sampled power with the ends interpolated (``power_integral``), otherwise missing
(``none``) — never 0 J for an unknown.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import signal
import socket
import sys
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: Seconds between samples: sub-second, so a window of a few seconds still has several
#: samples, at a sidecar cost well under 1 % of one core (bench part 4 measures it).
DEFAULT_INTERVAL_S = 0.5

#: Columns of a samples file, in order. ``t`` is ``time.monotonic`` seconds; ``time`` Unix
#: seconds; an empty cell means the value was not available in that sample.
SAMPLE_FIELDS: tuple[str, ...] = (
    "t", "time", "gpu_util_pct", "mem_used_mib", "power_w", "energy_mj", "sm_clock_mhz",
    "temp_c", "cpu_pct", "rss_mib", "host_mem_available_mib", "cpu_energy_uj",
    "monitor_cpu_s",
)

#: NVML metric → (sample field, reader). Readers take the pynvml module and a handle.
GPU_METRICS: dict[str, tuple[str, Callable[[Any, Any], float]]] = {
    "utilization": ("gpu_util_pct", lambda n, h: float(n.nvmlDeviceGetUtilizationRates(h).gpu)),
    "memory": ("mem_used_mib", lambda n, h: n.nvmlDeviceGetMemoryInfo(h).used / 2**20),
    "power": ("power_w", lambda n, h: n.nvmlDeviceGetPowerUsage(h) / 1000.0),
    "energy": ("energy_mj", lambda n, h: float(n.nvmlDeviceGetTotalEnergyConsumption(h))),
    "sm_clock": ("sm_clock_mhz",
                 lambda n, h: float(n.nvmlDeviceGetClockInfo(h, n.NVML_CLOCK_SM))),
    "temperature": ("temp_c",
                    lambda n, h: float(n.nvmlDeviceGetTemperature(h, n.NVML_TEMPERATURE_GPU))),
}

_COMPUTE_MODES = {0: "DEFAULT", 1: "EXCLUSIVE_THREAD", 2: "PROHIBITED", 3: "EXCLUSIVE_PROCESS"}


def nvml_reason(exc: BaseException) -> str:
    """NVML's name for an error: ``NVMLError_NotSupported`` → ``NotSupported``."""
    name = type(exc).__name__
    return name.split("_", 1)[1] if name.startswith("NVMLError_") else f"{name}: {exc}"


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


# --------------------------------------------------------------------------- the device

@dataclass
class GpuDevice:
    """An NVML device opened by UUID, with the metrics it supports (probed once).

    ``missing`` maps metric → NVML's reason for every metric this device cannot report;
    ``facts`` holds provenance (name, uuid, driver, compute mode, total memory, power limit),
    each ``None`` when NVML cannot say.
    """

    nvml: Any
    handle: Any
    uuid: str
    supported: list[str] = field(default_factory=list)
    missing: dict[str, str] = field(default_factory=dict)
    facts: dict[str, Any] = field(default_factory=dict)

    def read(self) -> tuple[dict[str, float | None], list[str]]:
        """One reading of every supported metric; returns values and per-metric errors.
        An error blanks that metric's value in this reading only."""
        values: dict[str, float | None] = {}
        errors = []
        for metric in self.supported:
            field_name, reader = GPU_METRICS[metric]
            try:
                values[field_name] = reader(self.nvml, self.handle)
            except Exception as exc:  # NVMLError_* or a driver hiccup: keep sampling
                values[field_name] = None
                errors.append(f"{metric}: {nvml_reason(exc)}")
        return values, errors


def open_gpu(uuid: str, nvml: Any = None) -> GpuDevice:
    """Initialise NVML and open the device ``uuid`` (``GPU-…`` or ``MIG-…``); probe each
    metric once.

    Raises:
        RuntimeError: NVML cannot be initialised or has no device with that UUID (the
            message says which).
    """
    if nvml is None:
        import pynvml as nvml
    try:
        nvml.nvmlInit()
    except Exception as exc:
        raise RuntimeError(f"NVML unavailable: {nvml_reason(exc)}") from None
    try:
        handle = nvml.nvmlDeviceGetHandleByUUID(uuid)
    except Exception as exc:
        raise RuntimeError(f"NVML has no device {uuid}: {nvml_reason(exc)}") from None
    device = GpuDevice(nvml, handle, uuid)
    for metric, (_, reader) in GPU_METRICS.items():
        try:
            reader(nvml, handle)
            device.supported.append(metric)
        except Exception as exc:
            device.missing[metric] = nvml_reason(exc)
    device.facts = _device_facts(nvml, handle, uuid)
    return device


def _device_facts(nvml: Any, handle: Any, uuid: str) -> dict[str, Any]:
    def ask(fn: Callable[[], Any]) -> Any:
        try:
            return fn()
        except Exception:
            return None

    limit = ask(lambda: nvml.nvmlDeviceGetEnforcedPowerLimit(handle))
    total = ask(lambda: nvml.nvmlDeviceGetMemoryInfo(handle).total)
    mode = ask(lambda: nvml.nvmlDeviceGetComputeMode(handle))
    driver = ask(nvml.nvmlSystemGetDriverVersion)
    name = ask(lambda: nvml.nvmlDeviceGetName(handle))
    return {"gpu_uuid": uuid, "gpu_name": _text(name) if name is not None else None,
            "nv_driver_version": _text(driver) if driver is not None else None,
            "gpu_compute_mode": _COMPUTE_MODES.get(mode) if mode is not None else None,
            "gpu_vram_total_mb": round(total / 2**20) if total is not None else None,
            "gpu_power_limit_w": limit / 1000.0 if limit is not None else None}


def resolve_gpu(device: str, environ: Mapping[str, str], nvml: Any = None) -> dict[str, Any] | None:
    """The NVML identity of the device under test, or ``None`` for ``cpu``.

    ``cuda:N`` means the N-th device CUDA shows this process: the N-th entry of
    ``CUDA_VISIBLE_DEVICES`` when set (an index — an NVML index when CUDA enumerates in
    PCI bus order — or a ``GPU-``/``MIG-`` UUID or UUID prefix), otherwise NVML index N.
    An NVML index is not a CUDA index: CUDA's default order is fastest-first, so the runner
    gives every cell ``CUDA_DEVICE_ORDER=PCI_BUS_ID`` and ``CUDA_VISIBLE_DEVICES=<uuid>``.

    Returns ``{"uuid", "name", "nvml_index", "how"}`` or ``None`` when NVML is unavailable
    (the cell then reports the missing GPU itself).

    Raises:
        ValueError: ``cuda:N`` beyond the devices ``CUDA_VISIBLE_DEVICES`` lists, or an entry
            that matches no NVML device.
    """
    if not device.startswith("cuda"):
        return None
    index = int(device.split(":", 1)[1]) if ":" in device else 0
    if nvml is None:
        try:
            import pynvml as nvml
        except ImportError:
            return None
    try:
        nvml.nvmlInit()
    except Exception:
        return None
    try:
        gpus = []
        for i in range(nvml.nvmlDeviceGetCount()):
            handle = nvml.nvmlDeviceGetHandleByIndex(i)
            gpus.append({"nvml_index": i, "uuid": _text(nvml.nvmlDeviceGetUUID(handle)),
                         "name": _text(nvml.nvmlDeviceGetName(handle))})
        visible = environ.get("CUDA_VISIBLE_DEVICES")
        if visible is None:
            if index >= len(gpus):
                raise ValueError(f"device {device}: NVML sees {len(gpus)} GPU(s)")
            return {**gpus[index], "how": f"NVML index {index}"}
        entries = [e.strip() for e in visible.split(",") if e.strip()]
        if index >= len(entries):
            raise ValueError(f"device {device}: CUDA_VISIBLE_DEVICES={visible!r} lists "
                             f"{len(entries)} device(s)")
        entry = entries[index]
        if entry.isdigit():
            n = int(entry)
            if n >= len(gpus):
                raise ValueError(f"CUDA_VISIBLE_DEVICES entry {entry!r}: NVML sees "
                                 f"{len(gpus)} GPU(s)")
            order = environ.get("CUDA_DEVICE_ORDER", "FASTEST_FIRST")
            how = f"CUDA_VISIBLE_DEVICES entry {entry} as NVML index"
            if order != "PCI_BUS_ID":
                how += " (CUDA_DEVICE_ORDER is not PCI_BUS_ID: order assumed)"
            return {**gpus[n], "how": how}
        if entry.startswith("MIG-"):
            return {"nvml_index": None, "uuid": entry, "name": None,
                    "how": "CUDA_VISIBLE_DEVICES MIG UUID"}
        matches = [g for g in gpus if g["uuid"].startswith(entry)]
        if len(matches) != 1:
            raise ValueError(f"CUDA_VISIBLE_DEVICES entry {entry!r} matches "
                             f"{len(matches)} NVML device(s)")
        return {**matches[0], "how": "CUDA_VISIBLE_DEVICES UUID"}
    except ValueError:
        raise
    except Exception:
        return None
    finally:
        try:
            nvml.nvmlShutdown()
        except Exception:
            pass


# --------------------------------------------------------------------------- the host

class ProcessTree:
    """CPU and memory of a process and all its descendants (psutil).

    CPU use is the growth of the tree's total CPU seconds (each process's user + system,
    plus what its reaped children used) between two readings, as % of one core; a process
    that exits unreaped between readings takes its CPU time with it, so this is a lower
    bound (``cell_cpu_s`` in the row counts the cell exactly).
    """

    #: Seconds between rescans of the tree's membership. Finding descendants reads every
    #: process on the host (~3 ms here), which at every 0.5 s sample would cost most of the
    #: monitor's 1 %-of-a-core budget; between rescans only known members are read.
    REFRESH_S = 2.0

    def __init__(self, root_pid: int):
        import psutil

        self._psutil = psutil
        self.root = psutil.Process(root_pid)
        self._members: list[Any] = [self.root]
        self._scanned_at = -math.inf
        self._last: tuple[float, float] | None = None

    def _procs(self) -> list[Any]:
        now = time.monotonic()
        if now - self._scanned_at >= self.REFRESH_S:
            self._scanned_at = now
            known = {p.pid: p for p in self._members}
            fresh = [self.root] + self.root.children(recursive=True)
            # One object per process, so a pid reused by a stranger is never mistaken
            # for a member (psutil checks creation times on the objects it returned).
            self._members = [known.get(p.pid, p) for p in fresh]
        return self._members

    def read(self) -> tuple[float | None, float | None]:
        """``(cpu_pct, rss_mib)`` now; cpu_pct is None on the first reading."""
        psutil = self._psutil
        try:
            procs = self._procs()
        except psutil.Error:
            return None, None
        cpu = rss = 0.0
        for proc in procs:
            try:
                with proc.oneshot():
                    t = proc.cpu_times()
                    cpu += t.user + t.system + t.children_user + t.children_system
                    rss += proc.memory_info().rss
            except psutil.Error:
                continue
        now = time.monotonic()
        pct = None
        if self._last is not None and now > self._last[0]:
            pct = max(cpu - self._last[1], 0.0) / (now - self._last[0]) * 100.0
        self._last = (now, cpu)
        return pct, rss / 2**20


def rapl_files() -> list[tuple[Path, int]]:
    """Readable RAPL package counters (``energy_uj`` files) with their wrap range, µJ."""
    out = []
    for zone in sorted(Path("/sys/class/powercap").glob("intel-rapl:[0-9]*")):
        if zone.name.count(":") != 1:
            continue  # sub-zones (core, uncore) are inside the package counter
        try:
            int((zone / "energy_uj").read_text())
            out.append((zone / "energy_uj", int((zone / "max_energy_range_uj").read_text())))
        except (OSError, ValueError):
            continue
    return out


def rapl_missing_reason() -> str:
    base = Path("/sys/class/powercap")
    if not any(base.glob("intel-rapl:[0-9]*")):
        return "no RAPL interface on this host"
    return "RAPL counters not readable (permission)"


# --------------------------------------------------------------------------- sampling

class Sampler:
    """Takes one sample at a time (the sidecar's loop calls :meth:`sample`)."""

    def __init__(self, root_pid: int, gpu: GpuDevice | None):
        self.gpu = gpu
        self.tree = ProcessTree(root_pid)
        self.rapl = rapl_files()
        self.errors: dict[str, int] = {}

    def sample(self) -> dict[str, Any]:
        import psutil

        row: dict[str, Any] = {"t": time.monotonic(), "time": time.time()}
        if self.gpu is not None:
            values, errors = self.gpu.read()
            row.update(values)
            for err in errors:
                self.errors[err] = self.errors.get(err, 0) + 1
        row["cpu_pct"], row["rss_mib"] = self.tree.read()
        row["host_mem_available_mib"] = psutil.virtual_memory().available / 2**20
        if self.rapl:
            try:
                row["cpu_energy_uj"] = sum(int(p.read_text()) for p, _ in self.rapl)
            except (OSError, ValueError):
                row["cpu_energy_uj"] = None
        return row


def _fmt(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return repr(value) if math.isfinite(value) else ""
    return str(value)


def run_sidecar(args: argparse.Namespace) -> int:
    """The sidecar's loop (see the module docstring). Exit 0 after SIGTERM/SIGINT."""
    from engine.events import EventWriter

    # Signals are taken synchronously (sigtimedwait), never in the middle of a write, so a
    # samples line is always whole.
    stop_signals = {signal.SIGTERM, signal.SIGINT}
    signal.pthread_sigmask(signal.SIG_BLOCK, stop_signals)
    gpu, gpu_error = None, None
    if args.gpu_uuid:
        try:
            gpu = open_gpu(args.gpu_uuid)
        except RuntimeError as exc:
            gpu_error = str(exc)
    sampler = Sampler(args.root_pid, gpu)
    final = Path(args.samples)
    final.parent.mkdir(parents=True, exist_ok=True)
    partial = final.with_name(final.name + ".partial")
    events = EventWriter(args.events, cell=args.cell, attempt=args.attempt)
    meta_path = Path(args.meta)
    missing = dict(gpu.missing) if gpu else ({"gpu": gpu_error} if gpu_error else {})
    meta: dict[str, Any] = {
        "pid": os.getpid(), "interval_s": args.interval, "host": socket.gethostname(),
        "gpu": gpu.facts if gpu else None, "gpu_missing": missing,
        "gpu_supported": gpu.supported if gpu else [],
        "cpu_energy": "rapl" if sampler.rapl else None,
        "cpu_energy_missing": None if sampler.rapl else rapl_missing_reason(),
        "samples_file": str(final), "state": "running",
    }
    n = 0
    with open(partial, "w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(SAMPLE_FIELDS)

        def take() -> None:
            nonlocal n
            row = sampler.sample()
            # The sampler's own CPU so far: its cost over any window is a difference.
            row["monitor_cpu_s"] = time.process_time()
            writer.writerow([_fmt(row.get(k)) for k in SAMPLE_FIELDS])
            fh.flush()
            n += 1
            events.emit("sample", **{k: (round(v, 3) if isinstance(v, float) else v)
                                     for k, v in row.items()
                                     if k not in ("cpu_energy_uj", "monitor_cpu_s")})

        take()
        _write_json(meta_path, meta)  # "ready": the first sample exists
        # The sampling loop's own CPU from here on (start-up — imports, NVML probe, the
        # first scan — precedes the group window, like the cell's own imports).
        cpu0 = time.process_time()
        next_at = time.monotonic() + args.interval
        while True:
            wait = max(next_at - time.monotonic(), 0.0)
            got = signal.sigtimedwait(stop_signals, wait) if wait > 0 else None
            if got is not None:
                take()  # the last sample, after the window closed
                break
            if os.getppid() != args.parent_pid:  # the cell is gone: stop quietly
                break
            take()
            next_at += args.interval
            if next_at < time.monotonic():  # a slow read: skip missed ticks, keep the grid
                next_at = time.monotonic() + args.interval
    os.replace(partial, final)
    meta.update(state="stopped", samples=n, errors=sampler.errors,
                cpu_s=time.process_time() - cpu0)
    _write_json(meta_path, meta)
    events.close()
    return 0


def _write_json(path: Path, doc: dict[str, Any]) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(doc, default=str))
    os.replace(tmp, path)


# --------------------------------------------------------------------------- reading

def read_samples(path: str | Path) -> list[dict[str, float | None]]:
    """A samples file as dicts of floats (``None`` for empty cells). A torn last line (a
    sidecar killed mid-write) is dropped."""
    out = []
    with open(path, newline="", encoding="utf-8") as fh:
        for row in csv.DictReader(fh):
            try:
                out.append({k: (float(v) if v not in ("", None) else None)
                            for k, v in row.items() if k is not None})
            except ValueError:
                continue
    return [r for r in out if r.get("t") is not None]


def _series(samples: Iterable[Mapping[str, Any]], key: str) -> list[tuple[float, float]]:
    return [(s["t"], s[key]) for s in samples if s.get(key) is not None]


def _interp(points: list[tuple[float, float]], t: float) -> float | None:
    """Linear interpolation of ``points`` (sorted by time) at ``t``; None outside them."""
    if not points or t < points[0][0] or t > points[-1][0]:
        return None
    for (ta, va), (tb, vb) in zip(points, points[1:]):
        if ta <= t <= tb:
            return va if tb == ta else va + (vb - va) * (t - ta) / (tb - ta)
    return points[-1][1] if t == points[-1][0] else None


def integrate(points: list[tuple[float, float]], t0: float, t1: float) -> float | None:
    """Trapezoidal integral of ``points`` over ``[t0, t1]`` with the ends interpolated;
    None when the points do not cover the window."""
    a, b = _interp(points, t0), _interp(points, t1)
    if a is None or b is None or t1 < t0:
        return None
    inner = [(t, v) for t, v in points if t0 < t < t1]
    pts = [(t0, a)] + inner + [(t1, b)]
    return sum((tb - ta) * (va + vb) / 2 for (ta, va), (tb, vb) in zip(pts, pts[1:]))


def counter_delta(points: list[tuple[float, float]], t0: float, t1: float,
                  wrap: float | None = None) -> float | None:
    """Growth of a cumulative counter over ``[t0, t1]`` (interpolated at the ends); a
    decrease between neighbouring samples counts as one wrap of ``wrap`` when given."""
    if wrap:
        unwrapped, offset = [], 0.0
        for i, (t, v) in enumerate(points):
            if i and v < points[i - 1][1]:
                offset += wrap
            unwrapped.append((t, v + offset))
        points = unwrapped
    a, b = _interp(points, t0), _interp(points, t1)
    if a is None or b is None:
        return None
    return b - a


def energy_over(samples: list[dict[str, Any]], t0: float, t1: float) -> tuple[float | None, str]:
    """GPU energy (J) over ``[t0, t1]`` and its method: ``nvml_energy_counter``,
    ``power_integral``, or ``none`` (then the energy is None — unknown, not 0)."""
    delta = counter_delta(_series(samples, "energy_mj"), t0, t1)
    if delta is not None:
        return delta / 1000.0, "nvml_energy_counter"
    joules = integrate(_series(samples, "power_w"), t0, t1)
    if joules is not None:
        return joules, "power_integral"
    return None, "none"


def summarise(samples: list[dict[str, Any]], t0: float, t1: float,
              rapl_wrap: float | None = None) -> dict[str, Any]:
    """Row columns over the window ``[t0, t1]`` (monotonic seconds).

    Means and maxima use the samples inside the window (the nearest sample when the window
    is shorter than one interval); energy interpolates the window's ends (see
    :func:`energy_over`). A metric no sample has stays ``None``.
    """
    inside = [s for s in samples if t0 <= s["t"] <= t1]
    if not inside and samples:
        mid = (t0 + t1) / 2
        inside = [min(samples, key=lambda s: abs(s["t"] - mid))]

    def values(key: str) -> list[float]:
        return [s[key] for s in inside if s.get(key) is not None]

    def mean(key: str) -> float | None:
        v = values(key)
        return sum(v) / len(v) if v else None

    def peak(key: str, fn=max) -> float | None:
        v = values(key)
        return fn(v) if v else None

    energy, method = energy_over(samples, t0, t1)
    cpu_energy = counter_delta(_series(samples, "cpu_energy_uj"), t0, t1, rapl_wrap)
    return {
        "gpu_util_mean": mean("gpu_util_pct"), "gpu_util_max": peak("gpu_util_pct"),
        "vram_peak_mb": peak("mem_used_mib"), "energy": energy, "energy_method": method,
        "gpu_power_mean_w": mean("power_w"), "gpu_sm_clock_mean_mhz": mean("sm_clock_mhz"),
        "gpu_temp_max_c": peak("temp_c"), "cpu_util_mean": mean("cpu_pct"),
        "cpu_util_max": peak("cpu_pct"), "rss_peak_mb": peak("rss_mib"),
        "host_mem_available_min_mb": peak("host_mem_available_mib", min),
        "cpu_energy_j": cpu_energy / 1e6 if cpu_energy is not None else None,
        "cpu_energy_method": "rapl" if cpu_energy is not None else "none",
        "monitor_samples": len([s for s in samples if t0 <= s["t"] <= t1]),
        "monitor_cpu_share": _share(counter_delta(_series(samples, "monitor_cpu_s"), t0, t1),
                                    t1 - t0),
    }


def _share(cpu_s: float | None, seconds: float) -> float | None:
    return cpu_s / seconds if cpu_s is not None and seconds > 0 else None


def write_slice(samples: list[dict[str, Any]], t0: float, t1: float, path: Path) -> Path:
    """The samples of ``[t0, t1]`` plus one on each side (for interpolation) as a CSV."""
    before = [s for s in samples if s["t"] < t0][-1:]
    after = [s for s in samples if s["t"] > t1][:1]
    rows = before + [s for s in samples if t0 <= s["t"] <= t1] + after
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(SAMPLE_FIELDS)
        for s in rows:
            writer.writerow([_fmt(s.get(k)) for k in SAMPLE_FIELDS])
    os.replace(tmp, path)
    return path


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
    return run_sidecar(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
