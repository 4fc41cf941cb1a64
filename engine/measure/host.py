"""The host side of a sample: CPU and memory of the cell's process tree (psutil) and the
CPU package energy counters (RAPL). Torch-free.
"""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any


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


#: How far the 1-minute load average may exceed the host's cores before the host counts as
#: busy: half a core. One rule for cells, profiles and the report's verdicts
#: (``engine.results.conditions``).
BUSY_MARGIN = 0.5


def busy_warning(loads: tuple[float | None, ...], cores: int | None = None) -> str | None:
    """The measured hint that the host was busy: the highest of ``loads`` (1-minute load
    averages, lagging) above the host's ``cores`` (default: all) plus half a core; the
    line to tell the user, or None. One rule for cells (``engine.cell.rows``) and
    profiles (``engine.profile.collect``), so both warn alike."""
    import os

    cores = cores or os.cpu_count() or 1
    peak = max((x for x in loads if x is not None), default=None)
    if peak is not None and peak > cores + BUSY_MARGIN:
        return f"host load average {peak:.1f} on {cores} cores: the machine was busy"
    return None


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
