"""Hung-cell detection for the runner. Torch-free.

A cell makes *progress* when it emits a training-progress or lifecycle event (monitor samples
never count: a sampler keeps writing while training is stuck). Every ``interval_s`` the
runner calls :meth:`Watchdog.check`. A check *strikes* when, since the previous check,

1. no progress event arrived, and
2. the CPU time of the cell's whole process tree (the leader, its descendants, and anything
   left in its session) grew by less than ``cpu_fraction`` of one core
   (``cpu_fraction × interval_s`` CPU-seconds), and
3. the device under test shows no work, by the best signal its monitor samples carry:

   - *utilisation* (NVML's, as the cell's monitor last sampled it, within two intervals):
     idle below ``gpu_busy_pct``;
   - *memory* when the device reports no utilisation (a MIG slice: NVML answers
     NotSupported for it, while memory info works per instance): idle when the memory used
     did not move between the previous check and this one (a blocked process holds its
     memory still; a working one allocates and frees); a working cell whose memory stays
     flat still keeps a strike from its CPU or its progress events;
   - *unknown* when a cell on a GPU sends neither (no monitor, no sample yet, a device
     that reports nothing): the device condition is dropped and the cell is hung only
     after twice ``hung_after`` strikes, its reason saying "device signal unknown";
   - a cell without a GPU has no device condition to meet;
   - a *packed* cell (mp/ray ``devices``: its jobs on several GPUs) is watched on every
     device it packs onto, not only the one its monitor samples: each other packed GPU is
     read through NVML at each check (:class:`PackedDevices`: utilisation, else its
     memory used moving since the previous check), so jobs busy on a second GPU with
     little host CPU keep the cell alive. The cell is idle only when every device is; any
     device whose signal is unknown makes the device condition unknown (as above).

After ``suspect_after`` consecutive strikes the cell is *suspect*; after ``hung_after`` (twice
that while the device signal is unknown) it is *hung*. Any check without a strike resets the
count. A cell that keeps a core busy without
reporting is therefore never declared hung (it may be computing a long epoch); a process
stopped by a signal (state T, e.g. after reading the terminal) uses no CPU and is reported
as stopped.

``cpu_fraction`` defaults to 0.05 of a core: above the cost of an idle Python process and of the cell's
monitor sidecar (a process of the cell's session: < 1 % of a core at the default interval),
well below any training. Which events count as progress, and the executor's own idle share
(``idle_cpu_fraction``), are applied by :mod:`engine.runner.attempt`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable

import psutil

from engine.define.watchdog_settings import WatchdogSettings
from engine.event_types import MonitorSample

# It lives in engine.processes so that the monitor (engine.measure.cores) counts the same
# processes without importing the runner; used here, and taken from here by the runner.
from engine.processes import session_processes


def tree_cpu_seconds(procs: list[psutil.Process]) -> tuple[float, list[str]]:
    """Total user+system CPU seconds of ``procs`` (reaped children included) and the
    processes found stopped (``"pid 123 stopped"``)."""
    total, stopped = 0.0, []
    for proc in procs:
        try:
            with proc.oneshot():
                t = proc.cpu_times()
                total += t.user + t.system + t.children_user + t.children_system
                if proc.status() == psutil.STATUS_STOPPED:
                    stopped.append(f"pid {proc.pid} stopped")
        except psutil.Error:
            continue
    return total, stopped


#: The device signals a check can rest on (see the module docstring): NVML utilisation,
#: memory used moving (a device without utilisation), nothing known, no device at all.
UTILISATION, MEMORY, UNKNOWN, NO_DEVICE = "utilisation", "memory", "unknown", "none"


class PackedDevices:
    """The GPUs a packed cell's jobs run on besides the one its monitor samples, read at
    each watchdog check (one NVML reading of utilisation and memory per device and check,
    every ``interval_s``: no sampler, nothing recorded). Torch-free; NVML is opened lazily,
    in the runner's process (``nvml``: a fake module in tests)."""

    def __init__(self, uuids: list[str], nvml: Any = None):
        self.uuids = list(uuids)
        self.nvml = nvml
        self._devices: dict[str, Any] = {}
        self._unreadable: dict[str, str] = {}
        self._mem: dict[str, float] = {}

    def _device(self, uuid: str) -> Any:
        if uuid not in self._devices and uuid not in self._unreadable:
            from engine.measure.nvml import open_gpu

            try:
                self._devices[uuid] = open_gpu(uuid, self.nvml)
            except RuntimeError as exc:  # said in the verdict: "signal unknown (why)"
                self._unreadable[uuid] = str(exc)
        return self._devices.get(uuid)

    def activity(self, busy_pct: float) -> list[tuple[str, str, float | None, bool | None]]:
        """``(uuid, signal, utilisation, busy)`` of each device now: its utilisation when
        it reports one (busy at ``busy_pct`` or more), else whether its memory used moved
        since the previous call (:data:`MEMORY`), else :data:`UNKNOWN` (busy None)."""
        from engine.measure.nvml import GPU_METRICS

        out: list[tuple[str, str, float | None, bool | None]] = []
        for uuid in self.uuids:
            device = self._device(uuid)
            values: dict[str, float | None] = {}
            for metric in ("utilization", "memory"):
                if device is not None and metric in device.supported:
                    name, reader = GPU_METRICS[metric]
                    try:
                        values[name] = reader(device.nvml, device.handle)
                    except Exception:  # noqa: BLE001 - a driver hiccup: unknown this time
                        values[name] = None
            util, mem = values.get("gpu_util_pct"), values.get("mem_used_mib")
            before = self._mem.pop(uuid, None)
            if mem is not None:
                self._mem[uuid] = mem
            if util is not None:
                out.append((uuid, UTILISATION, util, util >= busy_pct))
            elif mem is not None and before is not None:
                out.append((uuid, MEMORY, None, mem != before))
            else:
                out.append((uuid, UNKNOWN, None, None))
        return out

    def describe(self, seen: list[tuple[str, str, float | None, bool | None]]) -> list[str]:
        """One note per device for a verdict: ``GPU-b at 0 %``."""
        notes = []
        for uuid, signal, util, busy in seen:
            if signal == UTILISATION:
                notes.append(f"packed {uuid} at {util:.0f} %")
            elif signal == MEMORY:
                notes.append(f"packed {uuid} memory {'changing' if busy else 'unchanged'}")
            else:
                why = self._unreadable.get(uuid)
                notes.append(f"packed {uuid} signal unknown" + (f" ({why})" if why else ""))
        return notes


@dataclass
class Check:
    """One watchdog verdict: ``state`` ok | suspect | hung, and what was seen.
    ``device_signal`` is one of :data:`UTILISATION`, :data:`MEMORY`, :data:`UNKNOWN`,
    :data:`NO_DEVICE`; ``device_busy`` what it said (``None`` when unknown)."""

    state: str
    strikes: int
    cpu_core_fraction: float | None
    device_util_pct: float | None
    progressed: bool
    notes: list[str] = field(default_factory=list)
    device_signal: str = UTILISATION
    device_busy: bool | None = None

    def describe(self) -> str:
        parts = [f"{self.strikes} checks without progress"]
        if self.cpu_core_fraction is not None:
            parts.append(f"process tree at {self.cpu_core_fraction:.1%} of a core")
        if self.device_signal == MEMORY:
            parts.append("device memory changing" if self.device_busy
                         else "device memory unchanged (utilisation not reported)")
        elif self.device_signal == UNKNOWN:
            parts.append("device signal unknown (neither utilisation nor memory reported: "
                         "hung after twice hung_after checks)")
        else:
            parts.append("device idle" if self.device_util_pct is None or self.device_util_pct == 0
                         else f"device at {self.device_util_pct:.0f} %")
        return ", ".join(parts + self.notes)


class Watchdog:
    """Watches one cell attempt (see the module docstring for the rule)."""

    def __init__(self, settings: WatchdogSettings, leader_pid: int, session_id: int,
                 device_util=None, clock=time.monotonic, has_device: bool = False,
                 packed: PackedDevices | None = None):
        """``has_device``: the cell runs on a GPU (whose silence is then *unknown*, not
        idle); ``device_util``: a callable returning the utilisation to use (tests);
        ``packed``: the other GPUs a packed cell's jobs run on (module docstring)."""
        self.settings = settings
        self.packed = packed
        self._packed_notes: list[str] = []
        self.leader_pid = leader_pid
        self.session_id = session_id
        self.has_device = has_device
        self.device_util = device_util or self._latest_device_util
        self._device_util: tuple[float, float] | None = None
        #: The last sampled memory used (MiB) and when; whether it moved, and how many
        #: samples carried it, since the previous check.
        self._device_mem: tuple[float, float] | None = None
        self._mem_moved = False
        self._mem_samples = 0
        self.clock = clock
        self.strikes = 0
        self._progressed = False
        self._last_cpu: float | None = None
        self._last_time = clock()
        self.next_check = self._last_time + settings.interval_s
        #: Where the cell's process-tree CPU seconds come from when it is not a session on
        #: this host (a cell on a cluster node: its agent measures them there), else None.
        self.cpu_seconds: Callable[[], tuple[float, list[str]]] | None = None

    def progress(self) -> None:
        """Call for every training-progress or lifecycle event of the cell."""
        self._progressed = True

    def sample(self, event: MonitorSample) -> None:
        """Call for every monitor ``sample`` event of the cell: its device utilisation is
        the watchdog's device input (the monitor is the device's only sampler)."""
        now = self.clock()
        util = event.gpu_util_pct
        self._device_util = (float(util), now) if util is not None else None
        mem = event.mem_used_mib
        if mem is None:
            self._device_mem = None
            return
        mem = float(mem)
        if self._device_mem is not None:
            self._mem_moved |= mem != self._device_mem[0]
            self._mem_samples += 1  # a sample that could show a move
        self._device_mem = (mem, now)

    def _recent(self, at: float) -> bool:
        return self.clock() - at <= 2 * self.settings.interval_s

    def _latest_device_util(self) -> float | None:
        """The last sampled utilisation, if it is recent (two check intervals); else None."""
        if self._device_util is None:
            return None
        util, at = self._device_util
        return util if self._recent(at) else None

    def _device_activity(self) -> tuple[str, float | None, bool | None]:
        """(signal, utilisation, busy) for this check; clears the memory record."""
        moved, samples = self._mem_moved, self._mem_samples
        self._mem_moved, self._mem_samples = False, 0
        own = self._own_activity(moved, samples)
        if self.packed is None:
            return own
        # A packed cell: busy when any of its devices is; idle only when all are known idle.
        seen = self.packed.activity(self.settings.gpu_busy_pct)
        self._packed_notes = self.packed.describe(seen)
        every = ([own] if own[0] != NO_DEVICE else []) + [s[1:] for s in seen]
        utils = [u for _, u, _ in every if u is not None]
        util = max(utils) if utils else None
        busy = next((e for e in every if e[2]), None)
        if busy is not None:
            return busy[0], util, True
        if any(signal == UNKNOWN for signal, _, _ in every):
            return UNKNOWN, util, None
        return (MEMORY if any(s == MEMORY for s, _, _ in every) else UTILISATION), util, False

    def _own_activity(self, moved: bool, samples: int) -> tuple[str, float | None, bool | None]:
        """The device the cell's monitor samples: (signal, utilisation, busy)."""
        util = self.device_util()
        if util is not None:
            return UTILISATION, util, util >= self.settings.gpu_busy_pct
        if not self.has_device:
            return NO_DEVICE, None, False
        if self._device_mem is not None and self._recent(self._device_mem[1]) and samples:
            return MEMORY, None, moved
        return UNKNOWN, None, None

    def due(self) -> bool:
        return self.clock() >= self.next_check

    def check(self) -> Check:
        now = self.clock()
        if self.cpu_seconds is not None:
            cpu, notes = self.cpu_seconds()
        else:
            cpu, notes = tree_cpu_seconds(session_processes(self.leader_pid, self.session_id))
        elapsed = max(now - self._last_time, 1e-9)
        fraction = None if self._last_cpu is None else max(cpu - self._last_cpu, 0.0) / elapsed
        self._last_cpu, self._last_time = cpu, now
        self.next_check = now + self.settings.interval_s
        device_signal, util, busy = self._device_activity()
        progressed, self._progressed = self._progressed, False
        cpu_idle = fraction is not None and fraction < self.settings.cpu_fraction
        if not progressed and cpu_idle and not busy:  # unknown (None): condition dropped
            self.strikes += 1
        else:
            self.strikes = 0
        # Without a device signal only two conditions are left: ask twice the evidence.
        hung_after = self.settings.hung_after * (2 if device_signal == UNKNOWN else 1)
        state = ("hung" if self.strikes >= hung_after else
                 "suspect" if self.strikes >= self.settings.suspect_after else "ok")
        return Check(state, self.strikes, fraction, util, progressed,
                     notes + self._packed_notes, device_signal, busy)
