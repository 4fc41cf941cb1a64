"""One cell: ``python -m engine.cell SPEC.json`` — a fresh process that trains one group
and appends its rows to the runs directory.

The runner writes the spec (JSON) and starts this module with stdin from /dev/null and
output to the cell's log. Spec keys: ``schema``, ``campaign_id``, ``campaign_hash``,
``runs_dir``, ``events`` (path of events.jsonl), ``reason_file`` (optional: see
:func:`write_reason`), ``attempt``, ``seed``, ``passes``,
``device`` (cpu | cuda | cuda:N), ``threads`` (0 = all cores), and ``cell`` (a
``engine.define.matrix.CellSpec`` as a dict: index, key, exp_id, executor, compile_mode,
pass_index, options, experiment, jobs).

Phases, in order (``docs/measurement.md`` has the per-executor table):
imports and torch set-up → host dataset load (``data_load_s``) → executor setup
(``setup_s``) → the group window (``T_group``) → the hand-back (``digest_s``) →
teardown → rows.

Exit status: 0 all jobs ok; 1 the group ran but a job failed (rows written with status
failed); 2 bad input (message on stderr, failed group row written); 3 an internal error;
4 the cell could not write its output (a full disk, a quota, a read-only or size-limited
file: :data:`EXIT_OUTPUT`). Every failure is one line naming the file and the reason
(``runs/master_groups.csv: No space left on device``), printed to the log and sent in the
``failed`` event as far as the disk still allows; rows are all-or-nothing
(:mod:`engine.results.store`). The runner stops the campaign on exit status 4.
This entry point is stable: the runner and later front ends depend on it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import faulthandler
import importlib
import os
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engine import stacks
from engine.cell.hand_back import run_hand_back
from engine.cell.output import CellEvents, say
from engine.cell.protocol import (
    EXIT_OUTPUT,
    CellRunSpec,
    output_failure,
    write_reason,
)
from engine.cell.rows import max_present, tell_repairs, write_rows
from engine.errors import FugueError, OutputError, failure_line
from engine.event_base import ABSENT
from engine.event_types import CellFailed, CellPhase, CellStarted
from engine.results.rows import failed_group_row
from engine.results.values import new_group_id

if TYPE_CHECKING:
    from engine.cell.sidecar import CellMonitor


def main(argv: list[str] | None = None, start: str = "spawn") -> int:
    """Run the cell whose spec ``argv`` names. ``start`` says how this process began (the
    rows' ``cell_start``): ``spawn``, a fresh interpreter, or ``zygote``, forked from the
    runner's pre-warmed parent (:mod:`engine.cell.zygote`)."""
    argv = sys.argv[1:] if argv is None else argv
    # The runner's watchdog asks for a dump of every thread before killing a hung cell:
    # into the attempt's stacks/ (engine.stacks), or stderr (the log) outside a runner.
    faulthandler.register(stacks.DUMP_SIGNAL, file=stacks.stack_file("cell"), all_threads=True)
    # A fatal signal (a segfault in a native library) leaves Python's one-line report and
    # the stacks in the log too: the runner quotes that line as the cell's reason.
    with contextlib.suppress(ValueError, OSError):  # a stderr that is not a file (in-process)
        faulthandler.enable(all_threads=True)
    if len(argv) != 1:
        print("usage: python -m engine.cell SPEC.json", file=sys.stderr)
        return 2
    try:  # the runner's spec, validated (engine.cell.protocol.CellRunSpec)
        spec = CellRunSpec.read(argv[0])
    except FugueError as exc:
        print(str(exc), file=sys.stderr)
        return 2
    # A multi-device campaign splits the host's cores between concurrent cells: this one
    # and every process it starts (workers inherit the affinity) stay on its share.
    if spec.cpus and hasattr(os, "sched_setaffinity"):
        try:
            os.sched_setaffinity(0, spec.cpus)
        except OSError:  # cores gone (a hot-unplug): unpinned, and the row says none
            spec = dataclasses.replace(spec, cpus=None)
    # Known from the start: the monitor's samples file is named after the group. How this
    # process began is the provenance of every row the cell writes (group_static).
    spec = dataclasses.replace(spec, group_id=spec.group_id or new_group_id(spec.cell.executor),
                               cell_start=start)
    try:
        events = CellEvents(spec.events, cell=spec.cell.key, attempt=spec.attempt)
    except OutputError as exc:
        say(str(exc))
        return EXIT_OUTPUT
    try:
        CellStarted(pid=os.getpid(), exp_id=spec.cell.exp_id, executor=spec.cell.executor,
                    jobs=[j["job_id"] for j in spec.cell.jobs]).send(events.emit)
        status = run_cell(spec, events)
        if events.failure is not None:  # rows written, but progress events were lost
            say(f"warning: events lost: {events.failure}")
    except BaseException as exc:
        reason = output_failure(exc, where=spec.runs_dir)
        if reason is not None:  # the output cannot be written: one line, naming the file
            write_reason(spec, reason)
            say(reason)
            _record_failure(spec, events, reason, output_error=True)
            return EXIT_OUTPUT
        if isinstance(exc, FugueError):
            say(str(exc))
            _record_failure(spec, events, str(exc))
            return 2
        # internal error: keep the traceback in the log
        with contextlib.suppress(OSError, ValueError):
            traceback.print_exc()
        _record_failure(spec, events, failure_line(exc, None))
        return 3
    finally:
        events.close()
    return 0 if status == "ok" else 1


def _record_failure(spec: CellRunSpec, events: CellEvents, error: str,
                    output_error: bool = False) -> None:
    """Best effort on a disk that may be full: the failed group row (all or nothing), then
    the ``failed`` event saying whether it was written (``output_error``: the cell's output
    could not be written). Never raises."""
    from engine.results.columns import GROUPS_FILE, header
    from engine.results.store import append_rows

    repaired: list[str] = []
    try:
        repaired = append_rows(Path(spec.runs_dir) / GROUPS_FILE,
                               [failed_group_row(spec, "failed", error)], header(GROUPS_FILE))
        written = True
    except FugueError as exc:
        if str(exc) != error:
            say(str(exc))
        written = False
    except Exception as exc:  # noqa: BLE001 - the reason being recorded matters more
        say(output_failure(exc) or f"failed row not written: {type(exc).__name__}: {exc}")
        written = False
    with contextlib.suppress(FugueError, OSError):
        tell_repairs(events, repaired)
    with contextlib.suppress(FugueError, OSError):
        CellFailed(error=error, group_written=written,
                   output_error=True if output_error else ABSENT).send(events.emit)


#: The engine modules a cell uses, imported inside the ``imports`` phase.
_CELL_MODULES = ("engine.parts.datasets", "engine.train.data", "engine.executors.base",
                 "engine.registry", "engine.train.loop", "engine.define.workloads",
                 "engine.train.backend", "engine.plugins")


def preload() -> None:
    """What every cell imports before anything of its own: torch, ``torch._dynamo`` (which
    ``torch.optim`` imports on first use, ~2 s), the engine's cell modules and the built-in
    parts. It runs no tensor operation, starts no thread and leaves CUDA alone, so the
    zygote (:mod:`engine.cell.zygote`) runs it once and forks each cell from the result; a
    cell started the old way runs it first thing in its ``imports`` phase. Everything a
    cell imports later (its executor, a dataset loader, a model, TorchInductor) stays
    where it was: in the same phase, inside or outside ``T_group`` alike."""
    import torch  # after the runner set the TorchInductor cache and thread variables
    import torch._dynamo  # noqa: F401 - what torch.optim imports on its first use

    from engine.plugins import load_builtins

    for name in _CELL_MODULES:
        importlib.import_module(name)
    load_builtins()


def _import_torch(threads: int, events: CellEvents) -> list[str]:
    """Torch, the engine and the plugins, imported and set up: part of a cell's fixed cost
    (bench fixed_cost), reported as the ``imports`` phase (in a cell forked by the zygote
    the imports are already done: the phase is the per-cell set-up). Returns the plugins
    loaded."""
    t_imports = time.perf_counter()
    preload()
    import torch

    from engine.plugins import load_plugins
    from engine.train.backend import apply_backend_flags

    torch.set_num_threads(threads)
    apply_backend_flags()
    # torch.optim imports torch._dynamo on first use (~2 s): part of this process's imports,
    # which fall outside T_group, not a cost of whichever job happens to build an optimizer
    # first (docs/measurement.md).
    torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.1)
    plugins = load_plugins()
    CellPhase(phase="imports", seconds=time.perf_counter() - t_imports).send(events.emit)
    return plugins


def _load_data(jobs: list, device: Any, in_workers: bool, events: CellEvents
               ) -> tuple[Callable[[str], Any], float | None]:
    """The group's datasets loaded on the host (the ``data_load`` phase; nothing when the
    workers load their own) and a function that moves one to the device on first use,
    inside the group window. Returns it and the load's seconds (None when nothing loaded)."""
    from engine.parts import datasets as dataset_lib
    from engine.train.data import to_device

    t0 = time.perf_counter()
    host_data = {} if in_workers else {
        name: dataset_lib.load_dataset(name) for name in dict.fromkeys(j.dataset for j in jobs)}
    data_load_s = None if in_workers else time.perf_counter() - t0
    CellPhase(phase="data_load", seconds=data_load_s or 0.0).send(events.emit)
    device_data: dict[str, Any] = {}

    def datasets(name: str):
        if name not in device_data:  # first use, inside the group window
            device_data[name] = to_device(host_data[name], device)
        return device_data[name]

    return datasets, data_load_s


def _start_monitor(spec: CellRunSpec) -> CellMonitor | None:
    """The cell's monitor sidecar, started (None when the spec turns it off). Started before
    setup: its start-up is outside every timed phase, and its first sample precedes the
    window (energy interpolates the window's ends)."""
    if not spec.monitor:
        return None
    from engine.cell.sidecar import CellMonitor
    from engine.measure.monitor import DEFAULT_INTERVAL_S

    monitor = CellMonitor(spec.runs_dir, spec.group_id or "", spec.events, spec.cell.key,
                          spec.attempt, spec.gpu_uuid,
                          spec.monitor_interval_s or DEFAULT_INTERVAL_S)
    if not monitor.start():
        monitor.check_complete()  # it could not write its samples: a full disk fails the cell
        print(f"warning: {monitor.problem}; monitor columns stay empty", file=sys.stderr)
    return monitor


def _group_facts(spec: CellRunSpec, device: Any, in_workers: bool, host: dict[str, Any],
                 monitor: CellMonitor | None, group: dict[str, Any],
                 window: tuple[float, float]) -> dict[str, Any]:
    """The group row's facts measured around the group: torch's and the host's, the
    monitor's provenance and window columns (or NVML's device facts without a monitor),
    MPS presence and the peak RSS."""
    import torch

    from engine.train.backend import torch_facts

    # torch's view of the device would initialise CUDA in a parent that must not hold a
    # context; NVML (the monitor) names the device then.
    facts = {**torch_facts(torch.device("cpu") if in_workers else device), **host}
    if monitor is None and spec.gpu_uuid:
        facts.update(_nvml_facts(spec.gpu_uuid))
    if monitor is not None:
        facts.update(monitor.provenance())
        facts.update(monitor.group_columns(*window))
    if (group.get("executor_info") or {}).get("ray_mode") == "address":
        # Jobs on a Ray cluster's nodes: no process of this host sees their CPU, and a
        # per-node figure would need each node's own count (docs/measurement.md).
        facts["cores_used"] = None
    facts["mps_present"] = group.get("mps_present", _mps_present())
    facts["rss_peak_mb"] = max_present([facts.get("rss_peak_mb"), _own_peak_rss_mb()])
    return facts


def run_cell(spec: CellRunSpec, events: CellEvents) -> str:
    """Run the cell's group and write its rows; return the group status (ok | failed)."""
    threads = int(spec.threads or 0) or (os.cpu_count() or 1)
    spec = dataclasses.replace(spec, threads=threads)
    plugins = _import_torch(threads, events)
    import torch

    from engine.define.workloads import JobSpec
    from engine.executors.base import CellContext
    from engine.registry import EXECUTORS
    from engine.train.loop import TrainSettings

    cell = spec.cell
    device = torch.device(spec.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise FugueError(f"device '{spec.device}' requested but torch sees no CUDA device "
                         f"(torch {torch.__version__}, built for CUDA {torch.version.cuda})")
    settings = TrainSettings(device=device, compile_mode=cell.compile_mode,
                             amp_allowed=device.type == "cuda", precision=cell.precision)
    jobs = [JobSpec.from_dict(j) for j in cell.jobs]
    spec_exec = EXECUTORS.get(cell.executor)
    # Executors whose workers load their own data and own the device (mp, ray): the
    # parent loads nothing and never creates a CUDA context (docs/measurement.md).
    in_workers = spec_exec.trains_in_workers
    sync_device = device.type == "cuda" and not in_workers
    datasets, data_load_s = _load_data(jobs, device, in_workers, events)
    monitor = _start_monitor(spec)
    executor = spec_exec.load()()
    ctx = CellContext(settings=settings, datasets=datasets,
                      emit=lambda type, **f: events.emit(type, **f), threads=threads,
                      options=cell.options, seed=spec.seed, scheduler=cell.scheduler,
                      rung=cell.rung, features=cell.features, max_parallel=cell.max_parallel,
                      attempt_dir=spec.attempt_dir, job_env=dict(spec.job_env or {}),
                      gpu_uuid=spec.gpu_uuid,
                      save_models=cell.save_models, arrivals=cell.arrivals)
    from engine.plugins import plugin_versions

    host: dict[str, Any] = {"plugins": ",".join(plugins) or None,
                            "plugin_versions": plugin_versions() or None}
    try:
        t_setup = time.perf_counter()
        executor.setup(jobs, ctx)
        setup_s = time.perf_counter() - t_setup
        CellPhase(phase="setup", seconds=setup_s).send(events.emit)
        host["host_load_start"] = os.getloadavg()[0]
        # Who else used the CPUs during the window (engine.measure.competitors): read just
        # before and just after it, never inside.
        others0 = _others_snapshot()
        try:
            # A stream cell's arrivals (issue 51) ride on it: the front ends place each
            # job's arrival from this event's time (docs/events.md).
            CellPhase(phase="group_start", arrivals=ABSENT if cell.arrivals is None
                      else list(cell.arrivals)).send(events.emit)
            if sync_device:
                torch.cuda.synchronize(device)
            if monitor is not None:
                # A sample at each end of the window, so that cores_used (the CPU the
                # cell's processes used in it, engine.measure.cores) is read there.
                monitor.mark()
            cpu0 = _cpu_seconds()
            g0 = time.perf_counter()
            ctx.stream_origin = g0  # a stream's time 0 (issue 51)
            results = executor.run(jobs, ctx)
            if sync_device:
                torch.cuda.synchronize(device)
            g1 = time.perf_counter()
            if monitor is not None:
                monitor.mark()
            # Work the window rule keeps out (unified_model's parity probe) is subtracted:
            # the window's ends stay where they were, its length loses those intervals.
            t_group = g1 - g0 - sum(max(0.0, min(b, g1) - max(a, g0))
                                    for a, b in ctx.outside_window)
            host.update(cell_cpu_s=_cpu_seconds() - cpu0, host_load_end=os.getloadavg()[0],
                        competing_processes=_competitors(others0, t_group))
            # The window's ends on perf_counter (system-wide monotonic): what a check of the
            # window rule compares per-job and runtime timestamps with (docs/measurement.md).
            CellPhase(phase="group_end", seconds=t_group, window=[g0, g1]).send(events.emit)
            # Each job's final weights, digested (and saved) after the window (issue 50).
            run_hand_back(executor, jobs, results, ctx, cell.executor, events.emit)
        finally:
            if monitor is not None:
                monitor.stop()  # one last sample after the window closed
            t_teardown = time.perf_counter()
            executor.teardown(ctx)
            CellPhase(phase="teardown",
                      seconds=time.perf_counter() - t_teardown).send(events.emit)
    finally:
        if monitor is not None and monitor.proc is not None and monitor.proc.poll() is None:
            monitor.stop()
    if monitor is not None:
        # Samples cut by a write that failed (a disk that filled during the cell): no row
        # may be computed from them; the cell fails naming the file, --resume reruns it.
        monitor.check_complete()
    if cell.experiment.get("type") == "hpo":  # time to best (issue 25)
        from engine.cell.rows import hpo_columns

        found = hpo_columns(results, g0)
        curve = found.pop("best_so_far", None)
        ctx.group.update(found)
        if curve is not None:
            info = dict(ctx.group.get("executor_info") or {})
            info["best_so_far"] = curve
            ctx.group["executor_info"] = info
    job_columns = None
    if cell.arrivals is not None:  # a stream cell's figures (issue 51)
        job_columns = _stream_columns(cell, results, ctx)
    facts = _group_facts(spec, device, in_workers, host, monitor, ctx.group, (g0, g1))
    if job_columns is not None:  # a stream cell's measured figures (issue 51)
        ctx.group.update(_stream_measures(job_columns, facts, monitor, ctx.stream_origin))
    return write_rows(spec, events, results, t_group, setup_s, data_load_s, facts, settings,
                       ctx.group, monitor, job_columns)


def _stream_columns(cell: Any, results: list[Any], ctx: Any) -> dict[str, dict[str, Any]]:
    """A stream cell's group columns, set on ``ctx.group``, and each job's by job id
    (:mod:`engine.results.streams`): times from the executor's marks, else each result's
    ``start`` and ``end``, relative to the window's opening."""
    from engine.results.streams import stream_figures

    origin = ctx.stream_origin
    admitted: list[float | None] = []
    completed: list[float | None] = []
    for r in results:
        start, end = ctx.stream_marks.get(r.job.job_id, (r.start, r.end))
        admitted.append(start - origin if start is not None else None)
        completed.append(end - origin if end is not None else None)
    stream = cell.stream or {}
    group, jobs = stream_figures(cell.arrivals, admitted, completed,
                                 [r.status == "ok" for r in results], stream.get("rate"))
    ctx.group.update(group, stream_sha256=stream.get("sha256"))
    joins = getattr(ctx, "stream_joins", {})
    for r, cols in zip(results, jobs, strict=True):  # unified_model's joins (issue 52)
        joined = joins.get(r.job.job_id)
        cols["joined_s"] = joined - origin if joined is not None else None
    return {r.job.job_id: cols for r, cols in zip(results, jobs, strict=True)}


def _stream_measures(job_columns: dict[str, dict[str, Any]], facts: dict[str, Any],
                     monitor: Any, origin: float) -> dict[str, Any]:
    """A stream cell's utilisation over its busy period and energy per completed job
    (:mod:`engine.results.streams`): empty when the monitor measured nothing, never 0."""
    from engine.measure.cores import cores_over
    from engine.results.streams import busy_cores, per_job

    done = [c for c in job_columns.values() if c.get("jct_s") is not None]
    spans = [(origin + c["arrival_s"], origin + c["completed_s"]) for c in job_columns.values()
             if c.get("completed_s") is not None]
    samples = getattr(monitor, "samples", None) if monitor is not None else None
    resolution = float(getattr(monitor, "interval_s", 0.0) or 0.0)
    cores = (busy_cores(spans, lambda a, b: cores_over(samples, a, b), resolution)
             if samples and done else None)
    return {"busy_cores_used": cores,
            "energy_per_job_j": per_job(facts.get("energy_group"), len(done)),
            "cpu_energy_per_job_j": per_job(facts.get("cpu_energy_j"), len(done))}


def _nvml_facts(uuid: str) -> dict[str, Any]:
    """Device provenance without the monitor (monitor = false): NVML once, by UUID."""
    from engine.measure.nvml import open_gpu

    try:
        return {k: v for k, v in open_gpu(uuid).facts.items() if v is not None}
    except RuntimeError as exc:
        print(f"warning: {exc}", file=sys.stderr)
        return {"gpu_uuid": uuid}


def _mps_present() -> bool | None:
    from engine.cell.sidecar import mps_daemon_present

    return mps_daemon_present()


def _others_snapshot():
    """CPU times of every process outside this cell's tree (None: not readable here)."""
    try:
        from engine.measure.competitors import snapshot

        return snapshot()
    except Exception:  # noqa: BLE001 - provenance only: never fail a cell over it
        return None


def _competitors(before, seconds: float) -> list | None:
    """The busiest processes outside this cell's tree over its group window (a list, maybe
    empty), or None when they could not be read."""
    if before is None:
        return None
    try:
        from engine.measure.competitors import busiest, snapshot

        return busiest(before, snapshot(), seconds)
    except Exception:  # noqa: BLE001 - provenance only
        return None


def _own_peak_rss_mb() -> float | None:
    """This process's peak resident memory (``ru_maxrss``, KiB on Linux), MiB."""
    try:
        import resource

        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    except (ImportError, OSError):
        return None


def _cpu_seconds() -> float:
    """User + system CPU seconds of this process and its waited-for children."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system
