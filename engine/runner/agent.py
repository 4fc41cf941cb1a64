"""The node's side of a campaign on a Ray cluster (issue 28): one :class:`CellAgent` per
cell attempt, a Ray actor that the head runner (:mod:`engine.runner.cluster`) creates with
the cell's resources (one GPU, or ``cpus_per_cell`` CPUs), so Ray's placement is the
cell's placement and the actor holds those resources on its node for exactly the cell's
life. Torch-free; Ray is imported only where a method needs it.

What the agent does on its node is what the runner does on its own host
(:mod:`engine.runner.cellproc`): it writes the spec into a node-local staging run folder
(``$TMPDIR/fugue-cell-<agent pid>-node-*``: a node shares no file system with the head),
starts ``python -m engine.cell`` there in a fresh session (never a zygote: the node has
none) with a parent-death signal on the agent, and the cell's monitor runs beside it as on one host.
The head polls it (:meth:`CellAgent.poll`): the cell's new events, its log, the rows it
appended to the results files (complete lines only) and its process-tree CPU seconds for
the head's watchdog; the head writes them into the run folder through the same locked
appends, so ``report``, the dashboard and ``--resume`` see a cell like any other. Files the
cell writes whole (samples) travel when it ended (:meth:`CellAgent.finish`).

Nothing outlives the campaign on a node: a stop from the head (control, watchdog,
Ctrl-C) stops the cell's session here; when the agent's process dies (the head runner was
SIGKILLed and Ray ended its actors, or the node's Ray shut down) the kernel kills the cell
(parent-death signal) and the agent's guard (:mod:`engine.runner.guard`, started on the
staging folder) stops what the cell started outside its session and removes the staging
and scratch folders; an agent that hears nothing from the head for :data:`HEAD_SILENT_S`
seconds (a head cut off from the cluster) takes its cell down itself and exits.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import socket
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engine.cell.protocol import REASON_BYTES, CellRunSpec, read_reason
from engine.cleanup import run_recorded
from engine.measure.provenance import dist_version
from engine.runfolder import CELL_LOG, CELL_PID, EVENTS, SPEC, AttemptFolder, RunFolder
from engine.runner.cellproc import (
    cell_env,
    dump_stacks,
    forget,
    scratch_prefix,
    start_cell,
    stop_session,
)
from engine.runner.guard import Guard
from engine.runner.records import write_whole
from engine.runner.watchdog import session_processes, tree_cpu_seconds

if TYPE_CHECKING:
    import subprocess

    from engine.runner.zygote import ForkedCell

#: Seconds without a poll from the head after which the agent stops its cell and exits.
HEAD_SILENT_S = 30.0
#: What follows the agent's scratch prefix (``fugue-cell-<agent pid>-``) in its staging
#: folder's name: under that prefix the agent's guard removes it when the agent dies.
STAGING_TAG = "node-"
#: Environment variables of a Ray worker that must not reach the cell: with them a
#: ``ray`` executor's ``ray.init()`` would join the campaign's cluster instead of starting
#: its own private runtime on the node (and schedule its trials onto the campaign's nodes).
RAY_ENV_PREFIXES = ("RAY_", "RAYLET_", "FUGUE_RAY_TAG")


def node_name(host: str, address: str) -> str:
    """``<host> <8 hex of sha256(address)>``: what the ``node`` column says (host names
    repeat across clusters and on one test host; the address hash tells nodes apart)."""
    return f"{host} {hashlib.sha256(address.encode()).hexdigest()[:8]}"


def host_class(facts: dict[str, Any]) -> str:
    """The node's host class, the machine part of a cluster cell's key: its CPU model and
    logical core count (two nodes of one class run the same cell in the same time)."""
    return f"{facts.get('cpu_model') or 'unknown CPU'} x{facts.get('cores') or '?'}"


def node_facts() -> dict[str, Any]:
    """This node's own provenance: host, address, CPU model, cores, torch (as installed),
    the GPU models NVML shows. Cheap and torch-free (run by the head's planning probe)."""
    cpu_model = ""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu_model = line.split(":", 1)[1].strip()
                break
    address, node_id = socket.gethostname(), ""
    ray = sys.modules.get("ray")
    # Only inside a Ray worker: asked elsewhere, Ray would connect to (or start) a runtime.
    if ray is not None and ray.is_initialized():
        with contextlib.suppress(Exception):
            address = ray.util.get_node_ip_address()
            node_id = ray.get_runtime_context().get_node_id()
    from engine.measure.provenance import nvml_devices

    try:
        gpus = [str(d.get("name") or "") for d in nvml_devices()]
    except Exception:
        gpus = []
    facts: dict[str, Any] = {"host": socket.gethostname(), "address": address, "node_id": node_id,
             "cpu_model": cpu_model or os.uname().machine, "cores": os.cpu_count() or 1,
             "torch": dist_version("torch"), "gpus": gpus}
    facts["node"] = node_name(facts["host"], f"{address}/{node_id}")
    facts["host_class"] = host_class(facts)
    return facts


@dataclass(frozen=True)
class Started:
    """A cell the agent started: its pid on the node and the spec as the cell got it (its
    ``node``, and on a GPU node its ``gpu_uuid``; paths in the node's staging folder)."""

    pid: int
    spec: CellRunSpec


class CellAgent:
    """One cell attempt on this node (see the module docstring). Created by the head with
    ``ray.remote(CellAgent).options(num_cpus=…, num_gpus=…, resources=…)``."""

    def __init__(self, runner_info: dict[str, Any]):
        #: Who runs the campaign (pid, host, campaign): named in what the agent writes.
        self.runner = runner_info
        self.facts = node_facts()
        self.proc: subprocess.Popen | ForkedCell | None = None
        self.spec: CellRunSpec | None = None
        self.staging: Path | None = None
        self.scratch: Path | None = None
        self.guard: Guard | None = None
        self._offsets: dict[str, int] = {}
        self._last_poll = time.monotonic()
        self._lock = threading.Lock()
        threading.Thread(target=self._watch_head, daemon=True, name="fugue-head-watch").start()

    # -- the head's calls -------------------------------------------------------------------
    def hello(self) -> dict[str, Any]:
        """The node's facts (the head waits for this: the actor was placed and started)."""
        self._last_poll = time.monotonic()
        return dict(self.facts)

    def start(self, spec: CellRunSpec, threads: int, attempt_rel: str) -> Started:
        """Start the cell of ``spec`` (the head's spec; its paths are rewritten into this
        node's staging folder, the attempt's folder at ``attempt_rel`` under its runs
        folder as on the head) with ``threads`` threads."""
        with self._lock:
            self._last_poll = time.monotonic()
            self.staging = Path(tempfile.mkdtemp(prefix=scratch_prefix() + STAGING_TAG))
            try:
                return self._start(spec, threads, attempt_rel)
            except BaseException:  # never started: nothing of it stays on the node
                self._remove()
                raise

    def _start(self, spec: CellRunSpec, threads: int, attempt_rel: str) -> Started:
        assert self.staging is not None
        # The agent's guard watches this process from now on: if the agent dies (its
        # runner died and Ray ended it), the guard stops the cell's leftovers and removes
        # the staging and scratch folders (both under this process's scratch prefix).
        runs = self.staging / "runs"
        folder = AttemptFolder(runs / attempt_rel)
        folder.path.mkdir(parents=True)
        self.guard = _detached_guard(RunFolder.of(runs, spec.campaign_id).path)
        local, device_env = self._device(replace(
            spec, runs_dir=str(runs), events=str(folder.events),
            reason_file=str(folder.reason), node=self.facts["node"], threads=threads))
        write_whole(folder.spec, local.to_json())
        folder.reason.write_bytes(b" " * REASON_BYTES)
        self.scratch = Path(tempfile.mkdtemp(prefix=scratch_prefix()))
        env = {k: v for k, v in cell_env(self.scratch, threads, device_env).items()
               if not k.startswith(RAY_ENV_PREFIXES)}
        self.proc = start_cell(folder.spec, folder.log, env)
        self.spec, self.folder = local, folder
        return Started(self.proc.pid, local)

    def _device(self, spec: CellRunSpec) -> tuple[CellRunSpec, dict[str, str]]:
        """The GPU Ray gave this actor, pinned by UUID for the cell (the spec with its
        ``gpu_uuid`` and device, and the environment that pins it); nothing for a CPU cell. ``FUGUE_CELLS_ON_CPU=1``: trains on the CPU while Ray still
        places the cell by GPU (a check of placement on a cluster whose GPUs stay free)."""
        import ray

        ids = [str(i) for i in ray.get_gpu_ids()]
        if not ids:
            return spec, {"CUDA_VISIBLE_DEVICES": ""} if spec.device == "cpu" else {}
        from engine.measure.nvml import resolve_gpu

        on_cpu = os.environ.get("FUGUE_CELLS_ON_CPU") == "1"
        try:
            gpu = resolve_gpu("cuda:0", {**os.environ, "CUDA_VISIBLE_DEVICES": ids[0]})
        except ValueError:
            gpu = None
        spec = replace(spec, gpu_uuid=gpu["uuid"] if gpu else spec.gpu_uuid,
                       device="cpu" if on_cpu else "cuda:0")
        return spec, {"CUDA_VISIBLE_DEVICES": gpu["uuid"] if gpu else ids[0],
                      "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}

    def poll(self) -> dict[str, Any]:
        """What is new since the last poll: ``events`` (whole lines), ``log`` (text),
        ``rows`` ({results file: complete CSV lines, the header with the first}), the
        cell's process-tree ``cpu_s`` (None once it ended) and its ``exit`` code (None while
        it runs)."""
        with self._lock:
            self._last_poll = time.monotonic()
            return self._collect(final=False)

    def stop(self, dump: bool) -> dict[str, Any]:
        """Stop the cell's whole session (after a stack dump of its Python processes when
        ``dump``): ``{"forced": pids that needed SIGKILL, "error": …, "dump": …}``."""
        with self._lock:
            self._last_poll = time.monotonic()
            out: dict[str, Any] = {"forced": [], "error": "", "dump": ""}
            if self.proc is None:
                return out
            if dump:
                out["dump"] = dump_stacks(self.folder.path, self.proc.pid)
            try:
                out["forced"] = stop_session(self.proc.pid, self.proc)
            except RuntimeError as exc:
                out["error"] = str(exc)
            return out

    def attempt_files(self) -> dict[str, bytes]:
        """The files the cell and its monitor left in its attempt folder on the node, by
        path relative to it (``monitor.json``: the device facts a killed cell's row needs;
        ``stacks/*``: stack dumps), without what the head already has (spec, events, log)
        or must not (``cell.pid`` names a process of this node)."""
        with self._lock:
            self._last_poll = time.monotonic()
            return self._attempt_files()

    def _attempt_files(self) -> dict[str, bytes]:
        if self.staging is None or self.proc is None:
            return {}
        out = {}
        skip = {SPEC, EVENTS, CELL_LOG, CELL_PID}
        for path in self.folder.path.rglob("*"):
            rel = path.relative_to(self.folder.path)
            if path.is_file() and str(rel) not in skip and not path.name.endswith(".tmp"):
                with contextlib.suppress(OSError):
                    if path.stat().st_size:  # an empty stack file: no dump was written
                        out[str(rel)] = path.read_bytes()
        return out

    def finish(self) -> dict[str, Any]:
        """The cell ended (or was stopped): what is left of its session is stopped, its
        cleanup records run, and the rest of its output is returned as :meth:`poll` does,
        with ``leftovers`` (pids killed), ``cleanup`` (messages), ``reason`` (the line in
        its reason file) and ``files`` ({path relative to the runs folder: bytes}: the
        files it wrote whole). The staging and scratch folders are removed."""
        with self._lock:
            self._last_poll = time.monotonic()
            out: dict[str, Any] = {"leftovers": [], "cleanup": [], "reason": "", "files": {}}
            if self.proc is None:
                return out
            try:
                out["leftovers"] = stop_session(self.proc.pid, None, grace=1.0)
            except RuntimeError as exc:
                out["leftovers"] = [str(exc)]
            out.update(self._collect(final=True))
            out["cleanup"] = run_recorded(self.folder.path)
            out["attempt_files"] = self._attempt_files()
            forget(self.folder.path)
            out["reason"] = read_reason(self.folder.reason)
            out["files"] = self._whole_files()
            self._remove()
            return out

    def dispose(self) -> None:
        """The head is done with this agent: nothing of the attempt stays on the node."""
        with self._lock:
            if self.proc is not None and self.proc.poll() is None:
                with contextlib.suppress(RuntimeError):
                    stop_session(self.proc.pid, self.proc, grace=1.0)
            self._remove()

    # -- inside the agent -------------------------------------------------------------------
    def _collect(self, final: bool) -> dict[str, Any]:
        if self.proc is None:
            return {"events": [], "log": "", "rows": {}, "cpu_s": None, "exit": None}
        code = self.proc.poll()
        cpu = None
        if code is None:
            cpu, _ = tree_cpu_seconds(session_processes(self.proc.pid, self.proc.pid))
        events = self._new(self.folder.events, whole_lines=True)
        log = self._new(self.folder.log, whole_lines=not final)
        rows = {}
        from engine.results.columns import RESULT_FILES

        for name in RESULT_FILES:
            chunk = self._new(self._runs() / name, whole_lines=True)
            if chunk:
                rows[name] = chunk
        return {"events": events.splitlines(), "log": log, "rows": rows, "cpu_s": cpu,
                "exit": code}

    def _new(self, path: Path, whole_lines: bool) -> str:
        """The text of ``path`` after what was already sent (up to its last newline when
        ``whole_lines``: a line being written goes with the next poll)."""
        at = self._offsets.get(str(path), 0)
        try:
            with open(path, "rb") as fh:
                fh.seek(at)
                data = fh.read()
        except OSError:
            return ""
        if whole_lines:
            cut = data.rfind(b"\n")
            data = data[:cut + 1] if cut >= 0 else b""
        self._offsets[str(path)] = at + len(data)
        return data.decode("utf-8", "replace")

    def _whole_files(self) -> dict[str, bytes]:
        """Every file the cell wrote under its runs folder other than the results files
        (sent as rows) and its run folder (events, log: sent as they grew)."""
        from engine.results.columns import RESULT_FILES

        runs = self._runs()
        skip = {runs / name for name in RESULT_FILES}
        run_dir = RunFolder.of(runs, self._started().campaign_id).path
        out = {}
        for path in runs.rglob("*"):
            if (path.is_file() and path not in skip and run_dir not in path.parents
                    and not path.name.endswith(".lock")):
                with contextlib.suppress(OSError):
                    out[str(path.relative_to(runs))] = path.read_bytes()
        return out

    def _started(self) -> CellRunSpec:
        """The spec of the cell this agent started (a call before :meth:`start` is a bug)."""
        if self.spec is None:
            raise RuntimeError("the agent has not started a cell")
        return self.spec

    def _runs(self) -> Path:
        """The staging runs folder the cell writes its results into."""
        return Path(self._started().runs_dir)

    def _remove(self) -> None:
        for folder in (self.scratch, self.staging):
            if folder is not None:
                shutil.rmtree(folder, ignore_errors=True)
        self.scratch = self.staging = None
        if self.guard is not None:
            self.guard.release()
            self.guard = None

    def _watch_head(self) -> None:
        """A head that stopped polling (cut off, or gone without Ray noticing yet): the
        cell is taken down and the agent exits (its guard removes what is left)."""
        while True:
            time.sleep(1.0)
            if time.monotonic() - self._last_poll > HEAD_SILENT_S:
                with contextlib.suppress(Exception):
                    if self.proc is not None and self.proc.poll() is None:
                        stop_session(self.proc.pid, self.proc, grace=1.0)
                os._exit(0)


def _detached_guard(run_dir: Path) -> Guard:
    """The agent's guard (:mod:`engine.runner.guard`) for its staging run folder, started
    through a short-lived intermediate process so that it is no child of the agent: Ray
    kills a worker's direct children when the worker exits (its
    ``kill_child_processes_on_worker_exit``), which is exactly when the guard must act.
    It reads EOF on its stdin when the agent's process ends, however it ends."""
    import subprocess
    import sys

    from engine.processes import engine_env

    # Without the runtime's tag: a local cluster's own clean-up (which stops every process
    # carrying it) must not stop the guard before it did its work.
    env = {k: v for k, v in engine_env().items() if not k.startswith(RAY_ENV_PREFIXES)}
    read, write = os.pipe()
    launcher = ("import subprocess, sys; subprocess.Popen([sys.executable, '-m', "
                "'engine.runner.guard', sys.argv[1], sys.argv[2]], stdin=0, "
                "stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)")
    try:
        subprocess.run([sys.executable, "-c", launcher, str(run_dir), str(os.getpid())],
                       stdin=read, env=env, check=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        os.close(write)
        return Guard(None, None)
    finally:
        os.close(read)
    return Guard(None, write)


def stop_processes(info: dict[str, Any]) -> str:
    """``engine.cleanup`` handler for processes recorded by pid *and* start time (a local
    cluster's runtime processes, recorded while its raylet still named them: once the
    raylet is gone, its orphaned agents carry neither its folder nor its tag that
    :func:`engine.executors.ray.runtime.find_ours` could see). SIGTERM, then SIGKILL after
    ``grace_s``; a pid now used by another process (other start time) is left alone."""
    import psutil

    procs = []
    for pid, started in info.get("processes") or []:
        with contextlib.suppress(psutil.Error):
            proc = psutil.Process(int(pid))
            if abs(proc.create_time() - float(started)) < 0.01:
                procs.append(proc)
    for proc in procs:
        with contextlib.suppress(psutil.Error):
            proc.terminate()
    _, alive = psutil.wait_procs(procs, timeout=float(info.get("grace_s", 3.0)))
    for proc in alive:
        with contextlib.suppress(psutil.Error):
            proc.kill()
    return (f"stopped {len(procs)} recorded process(es)" if procs
            else "no recorded process left")
