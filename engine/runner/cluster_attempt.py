"""One attempt of a cell on a Ray cluster node (issue 28), seen from the head runner: the
cell's agent (:class:`engine.runner.agent.CellAgent`) is placed by Ray, starts the cell on
its node and sends back what it wrote; :class:`ClusterAttempt` runs :class:`Attempt`'s
lifecycle through it (:mod:`engine.runner.cluster` says how a cluster campaign runs).
Torch-free; a Ray driver module (the runner imports it only for a cluster campaign).

Like every attempt it never sees the runner: its :class:`~engine.runner.attempt.Crew`,
and the campaign's cluster as :class:`Nodes` (what places its agent).
"""

from __future__ import annotations

import contextlib
import csv
import io
import os
import socket
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import ray
from ray.exceptions import GetTimeoutError, RayActorError, RayError

from engine.event_types import RunnerCellStarted, RunnerFailed, RunnerKilled
from engine.events import EventTail
from engine.results.columns import header
from engine.runner.agent import Started
from engine.runner.attempt import (
    INTERRUPTED_BY,
    POLL_S,
    Aborted,
    Attempt,
    Crew,
    cleanup_event,
)
from engine.runner.records import AGENT_RECORD, write_agent_record, write_whole
from engine.runner.watchdog import Watchdog

if TYPE_CHECKING:
    from engine.cell.protocol import CellRunSpec
    from engine.define.cluster import ClusterSettings
    from engine.define.matrix import CellSpec
    from engine.runfolder import AttemptFolder

#: Seconds one poll of an agent may take before its node counts as unresponsive.
POLL_TIMEOUT_S = 60.0
#: Seconds between two looks, while a cell waits for room, at whether any node still fits.
FIT_CHECK_S = 2.0


#: What a cluster attempt that never started adds to its one line: what to do next.
NEVER_STARTED = " (the cell never started; run the campaign again with --resume to run it)"

class NodeLost(Exception):
    """The agent of a running attempt died with (or lost) its node."""


class Nodes(Protocol):
    """What an attempt asks of the campaign's cluster (:class:`engine.runner.cluster.ClusterHead`)."""

    settings: ClusterSettings

    def new_agent(self, runner_info: dict[str, Any]) -> Any:
        """An agent actor holding one cell's resources, wherever Ray places it."""
        ...

    def fits_now(self) -> bool:
        """Whether an alive node could ever hold a cell."""
        ...

    def describe_need(self) -> str:
        """What one cell holds, in words."""
        ...


class RemoteCell:
    """A cell running on a node, seen from the head like a local cell process (what
    :meth:`Attempt._supervise` polls): :meth:`poll` fetches what the agent collected,
    writes it into the run folder, and returns the exit code once the cell ended."""

    def __init__(self, attempt: ClusterAttempt, agent, pid: int, node: str):
        self.attempt, self.agent, self.pid, self.node = attempt, agent, pid, node
        self.returncode: int | None = None
        self.cpu_s = 0.0
        self._headers: dict[str, list[str]] = {}

    def _call(self, method: str, *args):
        try:
            return ray.get(getattr(self.agent, method).remote(*args), timeout=POLL_TIMEOUT_S)
        except RayActorError as exc:
            raise NodeLost(error_line(exc)) from None
        except GetTimeoutError:
            raise NodeLost(f"its agent did not answer for {POLL_TIMEOUT_S:g} s") from None

    def poll(self) -> int | None:
        data = self._call("poll")
        self.apply(data)
        if data["cpu_s"] is not None:
            self.cpu_s = float(data["cpu_s"])
        if data["exit"] is not None:
            self.returncode = int(data["exit"])
        return self.returncode

    def apply(self, data: dict[str, Any]) -> None:
        """Rows first (the cell's ``group_written`` event may be in the same batch), then
        events and log, then (at the end) the files the cell wrote whole."""
        attempt = self.attempt
        for name, text in (data.get("rows") or {}).items():
            rows = self._rows(name, text)
            if rows:
                attempt.journal.append(name, rows, attempt.cell.key, attempt.number)
        if data.get("events"):
            with open(attempt.spec.events, "a", encoding="utf-8") as fh:
                fh.write("".join(line + "\n" for line in data["events"]))
        if data.get("log"):
            with open(attempt.log_path, "a", encoding="utf-8") as fh:
                fh.write(data["log"])
        _write_under(attempt.settings.runs_dir, data.get("files") or {})
        _write_under(attempt.dir, data.get("attempt_files") or {})

    def fetch_attempt_files(self) -> None:
        """The attempt folder's files from the node now (before a killed cell's row is
        written: its monitor's device facts)."""
        _write_under(self.attempt.dir, self._call("attempt_files"))

    def _rows(self, name: str, text: str) -> list[dict[str, str]]:
        """Complete CSV lines of results file ``name`` as rows (the first batch of a file
        starts with its header: the cell created the file on the node)."""
        reader = csv.reader(io.StringIO(text))
        lines = list(reader)
        if name not in self._headers and lines:
            self._headers[name] = lines.pop(0)
        cols = self._headers.get(name) or []
        known = set(header(name))
        return [{k: v for k, v in zip(cols, line, strict=False) if k in known}
                for line in lines if line]

    def stop(self, dump: bool) -> dict[str, Any]:
        return self._call("stop", dump)

    def finish(self) -> dict[str, Any]:
        data = self._call("finish")
        self.apply(data)
        return data

    def dispose(self) -> None:
        """Nothing of the attempt stays on its node; the actor (and its resources) go."""
        with contextlib.suppress(Exception):
            ray.get(self.agent.dispose.remote(), timeout=10)
        with contextlib.suppress(Exception):
            ray.kill(self.agent)


class ClusterAttempt(Attempt):
    """One attempt of a cell on a cluster node: :class:`Attempt`'s lifecycle, with the cell
    started and stopped by its agent on a node of ``nodes`` (see the module docstring)."""

    def __init__(self, cell: CellSpec, number: int, folder: AttemptFolder, spec: CellRunSpec,
                 crew: Crew, env: Callable[[Path], dict[str, str]], nodes: Nodes):
        super().__init__(cell, number, folder, spec, crew, env)
        self.nodes = nodes

    def run(self) -> tuple[str, str, Path, str]:
        journal, cell, number = self.journal, self.cell, self.number
        self._prepare_head()
        placed = self._place()
        if isinstance(placed, tuple):  # never started: failed (no node) or stopped
            self._forget()
            self._drop_empty_files()
            return placed
        proc = placed
        tail = EventTail(self.spec.events)
        self.crew.started(self)
        watchdog = self._watchdog(proc)
        try:
            journal.emit(RunnerCellStarted(
                cell=cell.key, index=cell.index, label=cell.label, attempt=number,
                events=self.spec.events, log_path=str(self.log_path), pid=proc.pid,
                start="spawn", start_s=round(time.perf_counter() - self.decided, 4),
                node=proc.node))
            written, verdict, after = self._supervise(proc, tail, watchdog)
        except NodeLost as lost:
            return self._lost(proc, tail, str(lost))
        except KeyboardInterrupt:
            with contextlib.suppress(NodeLost):
                self.stop(proc, f"interrupted ({INTERRUPTED_BY[0]})", dump=False)
                proc.finish()
            self.forward(tail, None)
            proc.dispose()
            self._forget()
            raise
        except BaseException:
            proc.dispose()
            self._forget()
            raise
        try:
            final = proc.finish()
        except NodeLost as lost:
            if verdict is None:
                return self._lost(proc, tail, str(lost))
            final = {}
        written |= self.forward(tail, None)
        proc.dispose()
        self._forget()
        if final.get("cleanup"):
            journal.emit(cleanup_event(cell.key, number, final["cleanup"]))
        if after == "abort":
            raise Aborted()
        if verdict is not None:
            return "killed", verdict, self.log_path, after
        return self._exited(proc.returncode or 0, written, final.get("reason") or "",
                            final.get("leftovers") or [])

    # -- steps ------------------------------------------------------------------------------
    def _prepare_head(self) -> None:
        """The attempt's folder on the head with its spec (what ``--resume`` and the rows the
        head writes read) and an empty log and events file the agent's batches extend."""
        self.dir.mkdir(parents=True)
        write_whole(self.folder.spec, self.spec.to_json())
        self.log_path.touch()
        Path(self.spec.events).touch()

    def _drop_empty_files(self) -> None:
        """An attempt that never started leaves no 0-byte ``cell.log``/``events.jsonl``
        (issue 43; its row and the runner's event say why; ``spec.json`` stays, which the
        row's attempt names), as a local attempt that could not start leaves none."""
        for path in (self.log_path, Path(self.spec.events)):
            with contextlib.suppress(OSError):
                if path.stat().st_size == 0:
                    path.unlink()

    def _place(self) -> RemoteCell | tuple[str, str, Path, str]:
        """Create the agent, wait until Ray placed it (commands for the waiting cell apply;
        a cell that no alive node can hold any more fails at once), start the cell."""
        journal, head, settings = self.journal, self.nodes, self.settings
        agent = head.new_agent({"pid": os.getpid(), "host": socket.gethostname(),
                                "campaign": settings.campaign_id})
        hello = agent.hello.remote()
        next_fit = time.monotonic() + FIT_CHECK_S
        while True:
            ready, _ = ray.wait([hello], timeout=POLL_S * 2)
            if ready:
                break
            command = self.crew.stops.stop_for(self.cell)
            if command:
                ray.kill(agent)
                if command[0] == "abort":
                    raise Aborted()
                journal.ended(self.spec, RunnerKilled(cell=self.cell.key, attempt=self.number,
                                                      reason=command[1], exit_code=None))
                return "killed", command[1], self.log_path, command[0]
            if time.monotonic() >= next_fit:
                next_fit = time.monotonic() + FIT_CHECK_S
                if not head.fits_now():
                    ray.kill(agent)
                    error = (f"no node of cluster {head.settings.address!r} can hold this cell "
                             f"any more ({head.describe_need()}): the nodes that could are gone"
                             f"{NEVER_STARTED}")
                    journal.ended(self.spec, RunnerFailed(cell=self.cell.key,
                                                          attempt=self.number, exit_code=None,
                                                          error=error))
                    return "failed", error, self.log_path, "stop"
        try:
            facts: dict[str, Any] = {}
            facts = ray.get(hello)
            threads = (settings.threads or head.settings.cpus_per_cell
                       or max(1, int(facts.get("cores") or 1)))
            self.spec = replace(self.spec, threads=threads)
            rel = str(self.dir.relative_to(settings.runs_dir))
            started: Started = ray.get(agent.start.remote(self.spec, threads, rel),
                                       timeout=POLL_TIMEOUT_S)
        except (RayActorError, GetTimeoutError) as exc:
            with contextlib.suppress(Exception):
                ray.kill(agent)
            reason = f"node lost before the cell started: {error_line(exc)}{NEVER_STARTED}"
            journal.ended(self.spec, RunnerKilled(cell=self.cell.key, attempt=self.number,
                                                  reason=reason, exit_code=None))
            return "killed", reason, self.log_path, "node"
        except RayError as exc:  # the agent could not start the cell there (its error)
            with contextlib.suppress(Exception):
                ray.kill(agent)
            error = (f"the agent on node {facts.get('node')} could not start the cell: "
                     f"{error_line(exc)}{NEVER_STARTED}")
            journal.ended(self.spec, RunnerFailed(cell=self.cell.key, attempt=self.number,
                                                  exit_code=None, error=error))
            return "failed", error, self.log_path, ""
        on_node = started.spec
        # What the head records for this attempt names the node, its GPU and its threads.
        self.spec = replace(self.spec, **{
            key: getattr(on_node, key) for key in ("node", "gpu_uuid", "device", "threads")
            if getattr(on_node, key) is not None})
        write_whole(self.folder.spec, self.spec.to_json())
        write_agent_record(self.dir / AGENT_RECORD, facts["node"], facts["host"], started.pid)
        return RemoteCell(self, agent, started.pid, facts["node"])

    def _watchdog(self, proc) -> Watchdog:
        watchdog = super()._watchdog(proc)
        watchdog.cpu_seconds = lambda: (proc.cpu_s, [])
        return watchdog

    def stop(self, proc, reason: str, dump: bool) -> str:
        """Stop the cell through its agent and record it as killed."""
        try:
            done = proc.stop(dump)
            if done.get("dump"):
                with open(self.log_path, "a", encoding="utf-8") as fh:
                    fh.write(f"fugue-tui runner: {done['dump']} (on node {proc.node})\n")
            if done.get("forced"):
                reason += f" (SIGKILL needed for pids {done['forced']} on node {proc.node})"
            if done.get("error"):
                reason += f"; {done['error']}"
            proc.fetch_attempt_files()  # its monitor's facts go into the row, dumps kept
        except NodeLost as lost:
            reason += f"; its node was lost meanwhile: {lost}"
        self.journal.ended(self.spec, RunnerKilled(cell=self.cell.key, attempt=self.number,
                                                   reason=reason, exit_code=proc.returncode))
        return reason

    def _lost(self, proc: RemoteCell, tail: EventTail, why: str):
        reason = f"node {proc.node} lost while the cell ran ({why})"
        self.forward(tail, None)
        with contextlib.suppress(Exception):
            ray.kill(proc.agent)
        self._forget()
        self.journal.ended(self.spec, RunnerKilled(cell=self.cell.key, attempt=self.number,
                                                   reason=reason, exit_code=None, node_lost=True))
        return "killed", reason, self.log_path, "node"

    def _forget(self) -> None:
        (self.dir / AGENT_RECORD).unlink(missing_ok=True)


def _write_under(root: Path, files: dict[str, bytes]) -> None:
    """Each ``files`` entry (path relative to ``root``: bytes) written whole, only under
    ``root``, whatever a node sends."""
    base = Path(root).resolve()
    for rel, content in files.items():
        target = (base / rel).resolve()
        if base not in target.parents:
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(target.name + ".tmp")
        tmp.write_bytes(content)
        tmp.replace(target)


def error_line(exc: BaseException) -> str:
    """One line for a Ray error: the remote exception's own message when there is one."""
    cause = getattr(exc, "cause", None)
    if isinstance(cause, BaseException) and str(cause).strip():
        exc = cause
    text = [t for t in str(exc).strip().splitlines() if t.strip()][-1:]
    return text[0][:300] if text else type(exc).__name__
