"""Monitor samples as time series for the run screen's device charts. Textual-free.

A cell's monitor writes ``sample`` events (fields:
:data:`engine.measure.samples.SAMPLE_EVENT_FIELDS`: ``t`` monotonic seconds, GPU utilisation
%, VRAM MiB, power W ... — None without a GPU — and ``cpu_pct``, % of one core, and
``rss_mib`` of the cell's process tree). The store keeps
the last :data:`MAX_POINTS` of each cell attempt. :func:`panels` picks what to draw: the GPU
panels when the samples carry GPU values, else the process tree's CPU and RSS, labelled as
such. :class:`HostPoller` samples the host with psutil for the "idle polling" view when no
cell runs and, with its devices' NVML readings, for the run screen's host bar
(:mod:`fugue_tui.app.widgets.host_bar`) always.
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

from engine import cgroup_memory
from engine.event_base import Event
from engine.event_types import MonitorSample
from engine.events import parse_event

#: Points kept per series (at one sample a second: ten minutes).
MAX_POINTS = 600

#: (field, chart title) with a GPU, and without one.
GPU_PANELS = (("gpu_util_pct", "GPU utilisation %"), ("mem_used_mib", "VRAM used MiB"),
              ("power_w", "GPU power W"))
CPU_PANELS = (("cpu_pct", "CPU % of one core (cell process tree, no GPU)"),
              ("rss_mib", "RSS MiB (cell process tree, no GPU)"))
HOST_PANELS = (("cpu_pct", "host CPU % of one core (idle polling)"),
               ("rss_mib", "host memory used MiB (idle polling)"))


@dataclass
class Series:
    """Samples of one cell attempt: ``t`` and one list per field (None where missing).
    ``version`` grows with every sample (charts redraw only when it changed)."""

    t: deque = field(default_factory=lambda: deque(maxlen=MAX_POINTS))
    values: dict[str, deque] = field(default_factory=dict)
    version: int = 0

    def add(self, sample: Mapping[str, Any], fields: tuple[str, ...]) -> None:
        t = sample.get("t")
        if not isinstance(t, (int, float)):
            return
        self.t.append(float(t))
        for name in fields:
            value = sample.get(name)
            self.values.setdefault(name, deque(maxlen=MAX_POINTS)).append(
                float(value) if isinstance(value, (int, float)) and not isinstance(value, bool)
                and math.isfinite(value) else None)
        self.version += 1

    def has(self, name: str) -> bool:
        return any(v is not None for v in self.values.get(name, ()))

    def latest(self, name: str) -> float | None:
        for value in reversed(self.values.get(name, ())):
            if value is not None:
                return value
        return None


def cell_sample(event: Event) -> MonitorSample | None:
    """``event`` as a cell's monitor sample (typed), or None for anything else: the one test
    of which events the sample stores take (:class:`SampleStore`,
    :class:`fugue_tui.app.models.timeline.CampaignTimeline`; a ``sample`` of the runner's or
    one that names no cell is not a cell's). A JSON document is read as its typed event."""
    typed = parse_event(event)
    return typed if isinstance(typed, MonitorSample) and typed.cell is not None else None


class SampleStore:
    """Series per (cell key, attempt), filled from ``sample`` events."""

    FIELDS = ("gpu_util_pct", "mem_used_mib", "power_w", "cpu_pct", "rss_mib")

    def __init__(self) -> None:
        self.series: dict[tuple[str, int], Series] = {}

    def add(self, event: Event) -> bool:
        """Take a cell's ``sample`` event; False for anything else."""
        sample = cell_sample(event)
        if sample is None:
            return False
        self.take(sample)
        return True

    def take(self, sample: MonitorSample) -> None:
        """Add a cell's sample (one :func:`cell_sample` let through)."""
        key = (str(sample.cell), int(sample.attempt or 0))
        self.series.setdefault(key, Series()).add(sample, self.FIELDS)

    def get(self, cell: str, attempt: int) -> Series | None:
        return self.series.get((cell, attempt))


def panels(series: Series) -> tuple[tuple[str, str], ...]:
    """What to draw for a cell: GPU panels when any sample has GPU values, else CPU/RSS."""
    if series.has("gpu_util_pct") or series.has("mem_used_mib"):
        return tuple(p for p in GPU_PANELS if series.has(p[0]))
    return CPU_PANELS


class HostPoller:
    """Host CPU (% of one core, like a cell's ``cpu_pct``) and memory in use, via psutil.
    Inside a memory cgroup with a limit (a container, a batch job) memory in use is the
    cgroup's (usage less its reclaimable file cache, :mod:`engine.cgroup_memory`), the
    figure the kernel kills at, not the whole host's. ``root``: where the cgroup files are
    read (tests: a fixture tree). Call :meth:`sample` from a worker thread about once a
    second."""

    def __init__(self, clock=time.monotonic, root: Path | None = None,
                 devices: bool = False) -> None:
        self.clock = clock
        #: ``devices``: each NVML device's utilisation and memory too (the host bar), read
        #: through one :class:`engine.measure.nvml_procs.NvmlReader` (no NVML: none).
        self.nvml = None
        if devices:
            from engine.measure.nvml_procs import NvmlReader

            self.nvml = NvmlReader()
        # located once: a process does not change cgroup; read at every sample (~0.1 ms)
        self.cgroup = cgroup_memory.locate(root)
        psutil.cpu_percent(interval=None)  # the first call only starts the measurement

    def sample(self) -> dict[str, Any]:
        cores = psutil.cpu_count() or 1
        memory = psutil.virtual_memory()
        used = (memory.total - memory.available) / 2**20
        level = self.cgroup.read() if self.cgroup is not None else None
        if level is not None:
            used = min(used, max(level.usage_mib - level.reclaimable_mib, 0.0))
        sample = {"t": self.clock(), "cpu_pct": psutil.cpu_percent(interval=None) * cores,
                  "rss_mib": used, "cores": cores,
                  "mem_total_mib": memory.total / 2**20 if level is None
                  else min(memory.total / 2**20, level.limit_mib)}
        if self.nvml is not None:
            sample["devices"] = self.nvml.devices()
        return sample
