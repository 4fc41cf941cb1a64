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

    Three rules keep a reading within what the host can do (cores × 100 %: the bound is
    exact, the kernel's 10-ms accounting ticks are absorbed by the owed CPU below):

    - a process found for the first time (a rescan, every :data:`REFRESH_S`) adds only its
      CPU since the previous reading, estimated from its life so far at its mean rate
      (all of it when it was born after that reading). Counting its whole CPU at once put
      seconds of CPU (an mp worker's imports, found up to 2 s late) into one interval: the
      dashboard's ~5,000 % spike when an mp cell started. The rest (what it used before
      that interval) is owed;
    - a reading never reports more than the host's cores can do over its interval
      (cores × 100 %): more growth than that was spent before the interval (the above,
      or children born and reaped between two rescans, whose whole CPU lands in their
      parent's children times at once). The excess is owed too, and reported by the
      following readings as far as the same bound allows, so the readings still sum to
      all the tree's CPU (nothing is hidden; it shows up to a few intervals late);
    - a reading less than :data:`MIN_INTERVAL_S` after the previous one (a cell's mark at
      its window's ends comes milliseconds after a regular sample) reports no % (None,
      missing, never 0) and leaves its CPU to the next reading's interval: over a few ms a
      single tick is hundreds of %. No CPU is dropped: the next reading measures from the
      last one that reported.
    """

    #: Seconds between rescans of the tree's membership. Finding descendants reads every
    #: process on the host (~3 ms here), which at every 0.5 s sample would cost most of the
    #: monitor's 1 %-of-a-core budget; between rescans only known members are read.
    REFRESH_S = 2.0
    #: The shortest interval a % is reported over (seconds; the default sampling
    #: interval is 0.5 s, a mark comes ~10 ms after a sample): shorter ones leave their CPU to
    #: the next reading (at 50 ms one 10-ms clock tick is 20 % per process).
    MIN_INTERVAL_S = 0.05

    def __init__(self, root_pid: int):
        import psutil

        self._psutil = psutil
        self.root = psutil.Process(root_pid)
        self._members: list[Any] = [self.root]
        self._scanned_at = -math.inf
        self._last: tuple[float, float] | None = None
        #: Wall-clock time of the last reading that reported (new members' CPU is
        #: pro-rated from it, against their ``create_time``).
        self._last_wall: float | None = None
        #: Each member's CPU seconds at the last reading (pid: seconds).
        self._seen: dict[int, float] = {}
        #: CPU seconds late-found members used before the interval they were found in,
        #: still to report (see the class docstring).
        self._owed = 0.0
        self._cores = psutil.cpu_count() or 1

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
        now, wall = time.monotonic(), time.time()
        if self._last is not None and now - self._last[0] < self.MIN_INTERVAL_S:
            return None, self._rss(procs)  # too short to mean a %: the next one counts it
        rss = 0.0
        # CPU seconds since the last reading: the growth of the known members' sum (one
        # that vanished takes its last value out, its reaper's children times bring its
        # final one in, as before), plus the new members' share of the interval.
        fresh = 0.0
        seen: dict[int, float] = {}
        for proc in procs:
            try:
                with proc.oneshot():
                    t = proc.cpu_times()
                    total = t.user + t.system + t.children_user + t.children_system
                    rss += proc.memory_info().rss
                    created = proc.create_time()
            except psutil.Error:
                continue
            seen[proc.pid] = total
            if proc.pid not in self._seen and self._last_wall is not None:
                share = _since(total, created, self._last_wall, wall)
                fresh += share
                self._owed += total - share
        pct = None
        if self._last is not None:
            dt = now - self._last[0]
            known = sum(v for pid, v in seen.items() if pid in self._seen)
            grown = max(known - sum(self._seen.values()), 0.0) + fresh
            # More than the host's cores can do in dt was spent before it (late-found
            # processes, children reaped in one go): owed, reported as cores allow.
            due = grown + self._owed
            reported = min(due, self._cores * dt)
            self._owed = due - reported
            pct = reported / dt * 100.0
        self._last, self._last_wall, self._seen = (now, sum(seen.values())), wall, seen
        return pct, rss / 2**20

    def _rss(self, procs: list[Any]) -> float | None:
        rss = 0.0
        for proc in procs:
            try:
                rss += proc.memory_info().rss
            except self._psutil.Error:
                continue
        return rss / 2**20


def _since(total: float, created: float, last: float, now: float) -> float:
    """The share of a process's ``total`` CPU seconds spent after ``last`` (wall clock),
    for a process first seen ``now`` and born at ``created``: all of it when it was born
    after ``last``, else its mean rate over its life times ``now - last``."""
    if created >= last:
        return total
    life = now - created
    return total * (now - last) / life if life > 0 else 0.0


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
