"""Whole-device NVML readings and GPU memory per process, for the dashboard's host bar and
process view. Torch-free; the NVML layer's conventions (:mod:`engine.measure.nvml`): the
``nvml`` module is passed in (tests: the fake NVML of tests/fixtures), a reading NVML cannot
give is None (missing is empty, never 0), and no NVML at all is no devices.

NVML is initialised once per :class:`NvmlReader` (``nvmlInit`` costs milliseconds; the
readers call it about once a second) and shut down by :meth:`NvmlReader.close`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

#: Bytes in a MiB.
_MIB = 2**20


@dataclass(frozen=True)
class DeviceReading:
    """One device's reading: its NVML ``index``, utilisation % (0-100), memory used and
    total in MiB; each None when NVML cannot say."""

    index: int
    util_pct: float | None
    mem_used_mib: float | None
    mem_total_mib: float | None


class NvmlReader:
    """Readings of every NVML device of this host (see the module). ``nvml``: the pynvml
    module (None: import it); an NVML that cannot start leaves :attr:`available` False and
    every reading empty, with :attr:`problem` saying why."""

    def __init__(self, nvml: Any = None) -> None:
        from engine.measure.nvml import nvml_reason

        self.nvml, self.available, self.problem = nvml, False, ""
        try:
            if self.nvml is None:
                import pynvml

                self.nvml = pynvml
            self.nvml.nvmlInit()
            self.handles = [self.nvml.nvmlDeviceGetHandleByIndex(i)
                            for i in range(self.nvml.nvmlDeviceGetCount())]
            self.available = True
        except Exception as exc:  # no driver, no library, no device: nothing to read
            self.handles = []
            self.problem = nvml_reason(exc) if not isinstance(exc, ImportError) else str(exc)

    def devices(self) -> list[DeviceReading]:
        """Every device's utilisation and memory now (NVML order)."""
        out = []
        for index, handle in enumerate(self.handles):
            util = _ask(lambda h=handle: float(self.nvml.nvmlDeviceGetUtilizationRates(h).gpu))
            memory = _ask(lambda h=handle: self.nvml.nvmlDeviceGetMemoryInfo(h))
            out.append(DeviceReading(
                index, util, memory.used / _MIB if memory is not None else None,
                memory.total / _MIB if memory is not None else None))
        return out

    def memory_by_pid(self) -> dict[int, float]:
        """GPU memory (MiB) each process holds, summed over the devices
        (``nvmlDeviceGetComputeRunningProcesses``). A process NVML lists without a figure
        (``usedGpuMemory`` None: some drivers, inside containers) is left out: unknown,
        not 0."""
        held: dict[int, float] = {}
        for handle in self.handles:
            procs = _ask(lambda h=handle: self.nvml.nvmlDeviceGetComputeRunningProcesses(h))
            for proc in procs or ():
                used = getattr(proc, "usedGpuMemory", None)
                if isinstance(used, int) and used >= 0:
                    held[int(proc.pid)] = held.get(int(proc.pid), 0.0) + used / _MIB
        return held

    def close(self) -> None:
        if self.available:
            self.available = False
            _ask(self.nvml.nvmlShutdown)


def _ask(call: Any) -> Any:
    """``call()``, or None when NVML raises (not supported, a lost GPU: that reading only)."""
    try:
        return call()
    except Exception:  # NVMLError_* or a driver hiccup
        return None
