"""The process view's model, Textual-free: the campaign's processes with their CPU, RSS and
GPU memory, sorted, and which of them a kill may name.

The campaign's processes are the process tree under its runner: the cells (each in a
session of its own, still the runner's descendants, forked by the zygote or not), their mp
workers, their monitor sidecars (started by the cell), and a Ray executor's private runtime
(``ray.init`` in the cell starts the GCS, the raylet and its workers as the cell's
descendants). Each row names its role and, below a cell's process, the cell it belongs to.

GPU memory per process comes from NVML (:class:`engine.measure.nvml_procs.NvmlReader`);
where NVML cannot say (no GPU, a process it does not list) the column is empty, never 0.
CPU % (of one core, as the monitor's) needs two readings of a process: a process seen the
first time has it empty.

A kill names a pid; :func:`kill_target` says what it does: a process of a cell goes to the
runner as the cell's ``kill`` command carrying the pid (the runner stops the attempt, all
its processes, and records who killed what: :func:`engine.runner.control.send`); the runner
itself, a process of the campaign in no cell, or a process not of this campaign is refused
with one line.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import psutil

#: (key, header, numeric) of the view's columns, in order; the sort picker lists them.
COLUMNS = (("pid", "PID", True), ("role", "role", False), ("cell", "cell", False),
           ("cpu_pct", "CPU %", True), ("rss_mib", "RSS MiB", True),
           ("gpu_mib", "GPU MiB", True), ("command", "command", False))
#: Seconds between samples (the screen's worker).
SAMPLE_S = 1.0


@dataclass(frozen=True)
class ProcRow:
    """One process: ``cpu_pct`` % of one core, ``rss_mib`` and ``gpu_mib`` in MiB (None:
    not measurable), ``cell`` the label of the cell it belongs to ("" for none),
    ``cell_key`` its key."""

    pid: int
    ppid: int
    role: str
    cell: str
    cell_key: str
    command: str
    cpu_pct: float | None
    rss_mib: float | None
    gpu_mib: float | None

    def value(self, column: str) -> Any:
        return getattr(self, column)


def role_of(cmdline: list[str], name: str) -> str:
    """What a process is, from its command line: monitor, raylet, gcs, ray (a Ray worker
    or actor), zygote, guard, cell, or the bare process name."""
    text = " ".join(cmdline)
    for needle, role in (("engine.measure.monitor", "monitor"), ("raylet", "raylet"),
                         ("gcs_server", "gcs"), ("ray::", "ray"), ("default_worker.py", "ray"),
                         ("engine.runner.zygote", "zygote"), ("engine.runner.guard", "guard"),
                         ("engine.cell", "cell"), ("engine.runner", "runner")):
        if needle in text or needle == name:
            return role
    return name or "?"


def short_command(cmdline: list[str], name: str, width: int = 200) -> str:
    """The command line in one line (the process name when it has none: a kernel thread,
    no permission)."""
    text = " ".join(" ".join(cmdline).split()) or f"[{name}]"  # one line: no newlines
    return text if len(text) <= width else text[:width - 1] + "…"


class ProcessSampler:
    """Samples the process tree of ``runner_pid`` (see the module). ``cells``: the cell of
    each cell process pid, ``{pid: (key, label)}`` (the run model's running cells; called
    at each sample); ``nvml``: a pynvml-like module (None: the real one, when there is one;
    False: no NVML). Not thread-safe: one worker samples."""

    def __init__(self, runner_pid: int | None,
                 cells: Callable[[], Mapping[int, tuple[str, str]]] = dict,
                 nvml: Any = None) -> None:
        from engine.measure.nvml_procs import NvmlReader

        self.runner_pid = runner_pid
        self.cells = cells
        self.nvml = NvmlReader(nvml) if nvml is not False else None
        #: pid → the psutil process seen (cpu_percent needs the same object each time).
        self._seen: dict[int, psutil.Process] = {}
        self.rows: list[ProcRow] = []
        self.sampled_at = 0.0

    def tree(self) -> list[psutil.Process]:
        """The runner and its descendants alive now (empty: no runner)."""
        if not self.runner_pid:
            return []
        try:
            root = psutil.Process(self.runner_pid)
            return [root, *root.children(recursive=True)]
        except psutil.Error:
            return []

    def sample(self) -> list[ProcRow]:
        """One reading of every campaign process (also kept in :attr:`rows`)."""
        procs = self.tree()
        cells = dict(self.cells())
        gpu = self.nvml.memory_by_pid() if self.nvml is not None else {}
        measurable = self.nvml is not None and self.nvml.available
        seen: dict[int, psutil.Process] = {}
        owner: dict[int, tuple[str, str]] = {}
        rows = []
        for fresh in procs:  # parents before children (psutil lists them so)
            proc = self._seen.get(fresh.pid, fresh)
            try:
                with proc.oneshot():
                    first = proc is fresh
                    cpu = proc.cpu_percent(interval=None)
                    rss = proc.memory_info().rss / 2**20
                    cmdline, name, ppid = proc.cmdline(), proc.name(), proc.ppid()
            except psutil.Error:
                continue
            seen[proc.pid] = proc
            mine = cells.get(proc.pid) or owner.get(ppid)
            if mine is not None:
                owner[proc.pid] = mine
            role = "runner" if proc.pid == self.runner_pid else role_of(cmdline, name)
            if proc.pid in cells:
                role = "cell"
            elif mine is not None and role in ("cell", "zygote", "runner", name):
                role = "worker"  # a fork of the cell carries its parent's command line
            rows.append(ProcRow(proc.pid, ppid, role, mine[1] if mine else "",
                                mine[0] if mine else "", short_command(cmdline, name),
                                None if first else cpu, rss,
                                gpu.get(proc.pid) if measurable else None))
        self._seen = seen
        self.rows = rows
        self.sampled_at = time.time()
        return rows

    def close(self) -> None:
        if self.nvml is not None:
            self.nvml.close()


def sort_rows(rows: list[ProcRow], column: str, reverse: bool = False) -> list[ProcRow]:
    """``rows`` sorted by ``column`` (a :data:`COLUMNS` key); an empty value sorts last
    both ways (unknown is not small); ties by pid."""
    numeric = {key: num for key, _, num in COLUMNS}.get(column)
    if numeric is None:
        raise KeyError(column)
    known = [r for r in rows if r.value(column) not in (None, "")]
    empty = [r for r in rows if r.value(column) in (None, "")]
    known.sort(key=lambda r: r.pid)
    known.sort(key=lambda r: r.value(column) if numeric else str(r.value(column)).lower(),
               reverse=reverse)
    return known + sorted(empty, key=lambda r: r.pid)


def cell_text(value: Any, column: str) -> str:
    """A row's ``column`` as the table shows it (empty for None)."""
    if value is None:
        return ""
    if column == "cpu_pct":
        return f"{value:.0f}"
    if column in ("rss_mib", "gpu_mib"):
        return f"{value:,.0f}"
    return str(value)


@dataclass(frozen=True)
class KillTarget:
    """What a kill of a pid does: ``cell_key`` to send the kill for (None: refused, with
    ``refusal`` saying why in one line), the ``row`` killed."""

    pid: int
    row: ProcRow | None
    cell_key: str | None
    refusal: str = ""


def kill_target(pid: int, rows: list[ProcRow]) -> KillTarget:
    """What a kill of ``pid`` does among the campaign's processes ``rows`` (a fresh
    sample: a pid reused since is not the one shown)."""
    row = next((r for r in rows if r.pid == pid), None)
    if row is None:
        return KillTarget(pid, None, None,
                          f"pid {pid} is not a process of this campaign: not killed")
    if row.role == "runner":
        return KillTarget(pid, row, None, f"pid {pid} is the campaign's runner: stop the "
                          "campaign instead (S), which records the running cell")
    if not row.cell_key:
        return KillTarget(pid, row, None, f"pid {pid} ({row.role}) belongs to no cell: "
                          "only a cell's processes are killed (through the runner)")
    return KillTarget(pid, row, row.cell_key)


def confirm_text(target: KillTarget) -> str:
    """The kill modal's question: the pid, its command, and what the kill does."""
    row = target.row
    assert row is not None
    what = "the cell's process" if row.role == "cell" else f"a {row.role} of cell {row.cell}"
    return (f"Kill pid {row.pid} ({what})?\n{row.command}\nThe runner kills cell "
            f"{row.cell}'s attempt (every process of it) and records it killed by this pid's "
            "kill command; it is not retried.")
