"""How many CPU cores a cell used over its group window: the row's ``cores_used``. Torch-free.

Why: mp and ray train on several cores while seq trains on one, so a speedup on a CPU
campaign is partly cores. ``cores_used`` = the CPU seconds (user + system) the cell's
processes consumed inside the group window ÷ the window's seconds, printed beside each
speedup.

*The cell's processes* are those the runner's watchdog and clean-up track
(:func:`engine.processes.session_processes`: the cell, its descendants, and whatever stays
in its session, re-parented or not) plus those a cleanup record of the attempt identifies
(:func:`engine.cleanup.recorded_processes`: a local Ray runtime's raylet, workers and
agents, which run in sessions of their own and re-parent to init). The monitor sidecar
itself is left out: it is the observer (``monitor_cpu_share`` is its own cost).

How (the monitor calls :meth:`CoreMeter.read` at each sample and writes the result as the
samples file's cumulative ``tree_cpu_s``; :func:`cores_over` takes its difference over the
window, interpolated at the window's ends):

- each process's CPU is read with its waited-for children's (``cpu_times`` user + system +
  children_user + children_system), so a process reaped by another tracked process (a
  worker by its pool, a Ray worker by its raylet) is counted in full by its reaper, however
  briefly it lived, as long as the reaper is tracked;
- a tracked process that vanishes while its CPU does not show up in its tracked parent's
  children times (an orphan reaped by init; a parent that ignores SIGCHLD, whose children
  the kernel reaps without adding their time to it) keeps the CPU of its last reading;
- a process found for the first time counts with all its CPU so far: it was born since
  the previous scan, or the scan is the one the cell asks for just before the window
  opens (:meth:`CoreMeter.read` with ``rescan``), which finds every member before the
  window starts, so nothing accumulated before the window counts inside it.

The approximation and its bound: the counter never counts work of processes outside the
cell's; it under-counts (a) a process's CPU after its last reading when no tracked parent
reaped it (at most one sampling interval times the cores it used), (b) a process born and
gone between two membership scans (:data:`CoreMeter.RESCAN_S`) with no tracked parent
(whole: such a process lived under 2 s). The window's ends are interpolated between the
samples that bracket them; the cell has the monitor take one sample just before the window
opens and one just after it closes (:meth:`engine.cell.sidecar.CellMonitor.mark`), so the
interpolation spans milliseconds of a waiting cell, not a sampling interval. A cell on a
Ray cluster (``[options.ray] address``) leaves ``cores_used`` empty: its workers run on
other nodes, whose CPU no process of this host can read.
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.cleanup import recorded_processes
from engine.processes import session_processes


@dataclass
class _Member:
    proc: Any                    # psutil.Process
    created: float               # its create_time: a reused pid is another process
    total: float | None = None   # own + reaped children's CPU seconds at the last reading
    children: float | None = None  # of which its reaped children's
    ppid: int = 0


class CoreMeter:
    """The cumulative CPU seconds of a cell's processes (see the module docstring).

    ``root_pid``: the cell (its session is the one searched); ``attempt_dir``: where the
    cell's cleanup records are (None: none are read); ``exclude``: pids never counted
    (default: this process, the observer).
    """

    #: Seconds between membership scans (every process on the host is read: ~1-4 ms here).
    RESCAN_S = 2.0

    def __init__(self, root_pid: int, attempt_dir: str | Path | None = None,
                 exclude: tuple[int, ...] | None = None):
        import psutil

        self._psutil = psutil
        self.root_pid = root_pid
        try:
            self.session_id = os.getsid(root_pid)
        except OSError:
            self.session_id = root_pid
        self.attempt_dir = Path(attempt_dir) if attempt_dir else None
        self.exclude = set(exclude if exclude is not None else (os.getpid(),))
        self._members: dict[int, _Member] = {}
        self._gone_s = 0.0
        self._scanned_at = -math.inf

    def _scan(self) -> None:
        psutil = self._psutil
        found = session_processes(self.root_pid, self.session_id)
        if self.attempt_dir is not None:
            found += recorded_processes(self.attempt_dir)
        for proc in found:
            if proc.pid in self.exclude:
                continue
            try:
                created = proc.create_time()
            except psutil.Error:
                continue
            known = self._members.get(proc.pid)
            if known is None or known.created != created:
                if known is not None:
                    self._forget(known)
                self._members[proc.pid] = _Member(proc, created)
        self._scanned_at = time.monotonic()

    def _forget(self, member: _Member) -> None:
        # A pid reused between two readings: the old process is gone, its parent unknown.
        if member.total is not None:
            self._gone_s += member.total

    def read(self, rescan: bool = False) -> float | None:
        """The counter now, CPU seconds (only differences mean anything); ``rescan``
        forces a membership scan (else one every :data:`RESCAN_S`). None when no process
        could be read at all (the cell is gone)."""
        psutil = self._psutil
        if rescan or time.monotonic() - self._scanned_at >= self.RESCAN_S:
            try:
                self._scan()
            except psutil.Error:
                pass
        alive: dict[int, _Member] = {}
        vanished: list[_Member] = []
        before = {pid: m.children for pid, m in self._members.items()}
        for pid, member in self._members.items():
            try:
                with member.proc.oneshot():
                    t = member.proc.cpu_times()
                    member.ppid = member.proc.ppid()
                member.children = t.children_user + t.children_system
                member.total = t.user + t.system + member.children
                alive[pid] = member
            except psutil.NoSuchProcess:
                vanished.append(member)
            except psutil.Error:  # not ours to read (AccessDenied): keep its last value
                alive[pid] = member
        # A vanished process reaped by a tracked parent is in that parent's children times
        # now; what the parent's children times did not grow by (init reaped an orphan, a
        # parent ignoring SIGCHLD let the kernel reap it) keeps its last reading instead.
        by_parent: dict[int | None, float] = {}
        for member in vanished:
            if member.total is not None:
                parent = member.ppid if member.ppid in alive else None
                by_parent[parent] = by_parent.get(parent, 0.0) + member.total
        for parent, lost in by_parent.items():
            if parent is not None:
                was, now = before.get(parent), alive[parent].children
                grew = (now - was) if was is not None and now is not None else 0.0
                lost = max(lost - grew, 0.0)
            self._gone_s += lost
        self._members = alive
        if not alive and not self._gone_s:
            return None
        return sum(m.total or 0.0 for m in alive.values()) + self._gone_s


def cores_over(samples: list[dict[str, Any]], t0: float, t1: float) -> float | None:
    """Mean cores used over ``[t0, t1]`` (monotonic seconds): the growth of the samples'
    ``tree_cpu_s`` counter, interpolated at both ends, ÷ ``t1 - t0``. None (unknown, never
    0) when the window is empty or the samples do not bracket it."""
    from engine.measure.energy import counter_delta

    if t1 <= t0:
        return None
    points = [(s["t"], s["tree_cpu_s"]) for s in samples if s.get("tree_cpu_s") is not None]
    used = counter_delta(points, t0, t1)
    return max(used, 0.0) / (t1 - t0) if used is not None else None
