"""The cell's rows: from the executor's results, the group facts it set (``ctx.group``) and
the monitor's columns, to one group row and one row per job appended together (both files or
neither), then the ``summary`` and end events. Runs inside the cell, after the window.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engine.cell.concurrency import concurrency_columns
from engine.cell.output import Emitter, say
from engine.cell.protocol import CellRunSpec, read_stopped, safe_name
from engine.errors import OutputError
from engine.event_types import CellSummary, CellWarning
from engine.measure.host import busy_warning
from engine.precision import AMP_PRECISIONS
from engine.results.decisions import FILE as DECISIONS_FILE
from engine.results.rows import JobRow, group_static
from engine.train import isolation

if TYPE_CHECKING:
    from engine.cell.sidecar import CellMonitor


def _job_monitor_columns(monitor: CellMonitor, spec: CellRunSpec, job_id: str, t0: float,
                         t1: float, shared: bool) -> dict[str, Any]:
    """The job's monitor columns; its samples slice (a file of its own) that cannot be
    written (a full disk) leaves them empty with a warning naming the file, and the rows
    still go on (they decide whether the cell's output was written)."""
    try:
        return monitor.job_columns(job_id, t0, t1, shared=shared)
    except OSError as exc:

        path = Path(spec.runs_dir) / "samples" / str(spec.group_id) / f"{safe_name(job_id)}.csv"
        with contextlib.suppress(OSError):
            path.with_name(path.name + ".tmp").unlink(missing_ok=True)
        say(f"warning: {path}: {exc.strerror or exc}; the job's monitor columns stay empty")
        return {"energy_method": "none"}


def max_present(values) -> float | None:
    present = [v for v in values if v is not None]
    return max(present) if present else None


def sum_present(values) -> float | None:
    present = [v for v in values if v is not None]
    return sum(present) if present else None


def load_warnings(t_group: float, cpu_s: float | None, threads: int,
                  loads: tuple[float | None, float | None], cores: int | None = None,
                  competitors: list[dict[str, Any]] | None = None) -> list[str]:
    """Say when the host was not the quiet machine the numbers assume.

    The cell's CPU share (``cpu_s / t_group``) is compared with the cores it could use
    (``min(threads, cores)``): less than half of them is reported in numbers. Why is not
    claimed: the cell may have waited (sleeping, blocked on I/O or the device) as well as
    been held off the CPU, and nothing here tells those apart. The 1-minute load average
    (lagging, so only a hint) is compared with the cores: that one measures a busy host.
    ``cores``: the cores the cell was pinned to (a multi-device campaign), else all.
    ``competitors``: the busiest other processes of the window
    (:func:`engine.measure.competitors.busiest`), named in the busy line when there are any.
    """
    host_cores = os.cpu_count() or 1
    out = []
    usable = min(threads, cores or host_cores)
    cores = host_cores  # the load average is the whole host's
    if cpu_s is not None and t_group > 1.0 and cpu_s / t_group < 0.5 * usable:
        out.append(f"the cell used {cpu_s / t_group:.2f} of the {usable} cores it could use "
                   f"({cpu_s:.1f} s of CPU in the {t_group:.1f} s group window)")
    busy = busy_warning(loads, cores)
    if busy:
        if competitors:
            from engine.measure.competitors import describe

            busy += f"; busiest other processes: {describe(competitors)}"
        out.append(busy)
    return out


def group_precision(results) -> str:
    """The group's ``precision``: its jobs' when they agree (always under a ``precision``
    request), else ``amp-fp16`` when some ran it (a legacy multi_model with amp members),
    as before the precision axis."""
    ran = {r.precision for r in results}
    if len(ran) == 1:
        return ran.pop()
    return "amp-fp16" if any(r.amp_applied for r in results) else "fp32"


def trial_config_of(experiment: dict[str, Any], job) -> dict[str, Any] | None:
    """An hpo job's trial configuration (``engine.define.search_space``), recomputed from
    the cell's experiment definition and the job (the campaign seed is the job's seed minus
    its index), so that the jobs hashed into cell keys carry nothing new; None otherwise."""
    from engine.define.search_space import trial_config

    if experiment.get("type") == "stream":  # a stream cell (issue 51): the job's template
        experiment = (experiment.get("definitions") or {}).get(job.exp_id) or {}
    space = experiment.get("search_space")
    if experiment.get("type") != "hpo" or not space:
        return None
    try:
        return trial_config(space, experiment.get("num_samples"), job.seed - job.index,
                            job.index)
    except (IndexError, ValueError, TypeError):  # a plugin's hpo-like job: nothing claimed
        return None


def hpo_columns(results, window_start: float) -> dict[str, Any]:
    """An hpo group's time-to-best columns (``engine.results.hpo_best``) from its trials'
    validations (each history record's ``t``), on the task's metric
    (``engine.train.early_stop.objective``); the best-so-far curve goes into
    ``executor_info.best_so_far``. Empty when no trial validated."""
    from engine.parts import tasks as task_lib
    from engine.results.hpo_best import EPSILON, best_so_far
    from engine.train.early_stop import objective

    metrics = set()
    for r in results:
        try:
            metrics.add(task_lib.resolve_task(r.job.task, r.job.dataset).metric)
        except Exception:  # noqa: BLE001 - an unknown task failed the job already
            pass
    metric, mode = objective(metrics.pop() if len(metrics) == 1 else "accuracy")
    best = best_so_far(((r.job.job_id, [(h["t"] - window_start, h.get(metric))
                                          for h in r.history if "t" in h])
                        for r in results), mode)
    if best is None:
        return {}
    return {"best_trial": best["best_trial"], "best_val_metric": best["best_val_metric"],
            "time_to_best_s": best["time_to_best_s"],
            "best_so_far": {"metric": metric, "mode": mode, "epsilon": EPSILON,
                            "curve": best["curve"]}}


#: Group columns every job row repeats (the same value): the measured stack and the
#: experiments file (issue 29; docs/results.md "Provenance in job rows").
JOB_PROVENANCE = ("torch_version", "cuda_version", "numpy_version", "sklearn_version",
                  "cudnn_version", "ray_version", "plugin_versions", "experiments_file_hash")


def stopped_warning(stopped_s: float, t_group: float) -> str:
    """The warning for a cell whose processes were stopped ``stopped_s`` seconds (the
    busy-host rule's kind: a measured fact that the window is not all training)."""
    return (f"the cell's processes were stopped (SIGSTOP, a debugger) for {stopped_s:.1f} s "
            f"while it ran: its {t_group:.1f} s group window counts that time (stopped_s)")


def write_rows(spec: CellRunSpec, events: Emitter, results: list[Any],
               t_group: float, setup_s: float, data_load_s: float | None,
               facts: dict[str, Any], settings: Any, executor_group: dict[str, Any],
               monitor: CellMonitor | None = None,
               job_columns: dict[str, dict[str, Any]] | None = None) -> str:
    """The group row and one row per job, appended together, then the ``summary`` and the
    end event; returns the group's status (ok | failed). ``job_columns``: more columns of
    each job's row by job id (a stream cell's, issue 51)."""
    from engine.registry import EXECUTORS
    from engine.results.parity_contract import BY_CONSTRUCTION_EXECUTORS, EXACT
    from engine.results.store import append_group

    cell = spec.cell
    threads = spec.threads
    group = group_static(spec)
    failed = [r for r in results if r.status != "ok"]
    status = "failed" if failed else "ok"
    error = (f"{len(failed)}/{len(results)} jobs failed; first: {failed[0].job.job_id}: "
             f"{failed[0].error}") if failed else ""
    total_samples = sum(r.samples for r in results)
    amp_applied = any(r.amp_applied for r in results)
    precision = group_precision(results)
    compiled = [r.compile_mode for r in results if r.compile_mode != "off"]
    spec_exec = EXECUTORS.get(cell.executor)
    train_wall = (sum(r.train_time_s or 0.0 for r in results)
                  if not spec_exec.concurrent else None)
    group.update(facts)
    measured = status == "ok"  # a failed group's throughput is not a measurement of anything
    group.update(
        status=status, error=error or None, T_group=t_group, total_samples=total_samples,
        throughput_group=total_samples / t_group if t_group > 0 and measured else None,
        setup_s=setup_s, data_load_s=data_load_s,
        train_throughput_sps=(total_samples / train_wall) if train_wall and measured else None,
        max_parallel=1 if not spec_exec.concurrent else None,
        compile=bool(compiled), compile_mode=compiled[0] if compiled else "off",
        amp=amp_applied, precision=precision, threads=threads,
        param_count=sum(r.param_count or 0 for r in results) or None,
        energy_method=facts.get("energy_method") or "none",
        torch_peak_allocated_mb=max_present(r.torch_peak_allocated_mb for r in results),
        torch_peak_reserved_mb=max_present(r.torch_peak_reserved_mb for r in results),
        compile_warmup_s=sum_present(r.compile_warmup_s for r in results),
        precision_reason=next((r.precision_reason for r in results if r.precision_reason),
                              None),
        amp_skipped_steps=sum_present(r.amp_skipped_steps for r in results),
        # seq, mp and ray train seq's arithmetic by construction; unified_model decides
        # per bucket (its own value below); others promise nothing (empty)
        parity_contract=EXACT if cell.executor in BY_CONSTRUCTION_EXECUTORS else None)
    # What the executor measured or decided (effective scheduler and features, max_parallel,
    # MPS use, its plan) overrides the generic values above.
    group.update(executor_group)
    # A multi-device campaign's neighbours (engine.cell.concurrency): how many cells shared
    # the host, and no energy for a MIG slice whose physical GPU another cell used.
    # (A spec without an events file - rows written outside a runner's attempt folder, as
    # tools and tests do - had no neighbours to record.)
    shared, shared_warnings, withheld = concurrency_columns(
        spec.attempt_dir, spec.cpus, group.get("gpu_metrics_missing")
    ) if spec.events else ({}, [], False)
    group.update(shared)
    # Time the runner saw the cell's processes stopped (engine.runner.stopped): counted
    # in T_group, so said in the row and as a warning.
    stopped = read_stopped(spec.attempt_dir) if spec.events else None
    group["stopped_s"] = stopped
    # The scheduler's decisions, if the executor wrote them (issue 46): named relative to
    # the runs folder, as samples_file.
    decided = spec.attempt_dir / DECISIONS_FILE if spec.events else None
    group["decisions"] = (os.path.relpath(decided, spec.runs_dir)
                          if decided is not None and decided.is_file() else None)
    rows = []
    for r in results:
        job = r.job
        rows.append(JobRow({
            "group_id": group["group_id"], "job_id": job.job_id, "exp_id": job.exp_id,
            "dataset": job.dataset, "model": job.model, "executor": cell.executor,
            "compile": r.compile_mode != "off", "num_workers": 0,
            "total_time_s": r.total_time_s,
            "total_samples": r.samples if r.samples or r.status == "ok" else None,
            "throughput_sps": r.throughput_sps if r.status == "ok" else None,
            "early_stopped": r.early_stopped, "stop_reason": r.stop_reason or None,
            "worker_pid": r.worker_pid, "torch_peak_allocated_mb": r.torch_peak_allocated_mb,
            "torch_peak_reserved_mb": r.torch_peak_reserved_mb,
            "compile_warmup_s": r.compile_warmup_s, "compile_reason": r.compile_reason or None,
            "epochs_run": r.epochs_run, "gpu_name": facts.get("gpu_name"),
            "final_train_loss": r.final_train_loss, "final_train_acc": r.final_train_acc,
            "final_val_loss": r.final_val_loss, "final_val_acc": r.final_val_acc,
            "seed": job.seed, "batch_size": job.batch_size, "epochs": job.epochs, "lr": job.lr,
            "amp": r.amp_applied, "campaign_id": spec.campaign_id, "cell_key": cell.key,
            "pass": cell.pass_index, "attempt": spec.attempt, "status": r.status,
            "error": r.error or None, "train_time_s": r.train_time_s,
            "train_throughput_sps": r.train_throughput_sps if r.status == "ok" else None,
            "val_time_s": r.val_time_s,
            "threads": threads, "compile_mode": r.compile_mode,
            # what the job was asked to run: the legacy flag, or an autocast precision
            "amp_requested": r.precision_requested in AMP_PRECISIONS,
            "param_count": r.param_count,
            "precision": r.precision, "energy_method": "none",
            "precision_requested": r.precision_requested,
            "precision_reason": r.precision_reason or None,
            "amp_skipped_steps": r.amp_skipped_steps,
            "gpu_metrics_method": None,
            "host": group["host"], "samples_dropped": r.samples_dropped,
            "split": r.val_source or None, "worker_start_s": r.worker_start_s,
            "trial_config": trial_config_of(cell.experiment or {}, job),
            # the stack as its group row records it (what this cell loaded), so that a
            # job row read without its group still names it (issue 29)
            **{name: group.get(name) for name in JOB_PROVENANCE},
            "job_device": r.device_uuid,
            "time_utc": group.get("time_utc"),  # the pair's instant (issue 43)
            "job_isolation": r.isolation,  # shared state (engine.train.isolation)
            "weights_sha256": r.weights_sha256,  # the hand-back's digest (issue 50)
            **(job_columns or {}).get(job.job_id, {}),  # a stream cell's (issue 51)
        }))
        if monitor is not None:
            rows[-1].update(_job_monitor_columns(monitor, spec, job.job_id, r.start, r.end,
                                                 spec_exec.concurrent))
    if withheld:
        for row in rows:
            row["energy_j"] = None
    # Both files or neither: a job row never stays without its group row.
    repaired = append_group(spec.runs_dir, group, rows)
    cpu_s = facts.get("cell_cpu_s")
    if spec_exec.trains_in_workers:
        # Workers outside this process's accounting (Ray's are not its children): the
        # monitor's process-tree CPU says what the cell used, or nothing is claimed.
        util = facts.get("cpu_util_mean")
        cpu_s = util / 100.0 * t_group if util is not None else None
    if cell.arrivals is not None:
        # A stream cell's window holds the waits between arrivals by design (issue 51):
        # its low CPU share says nothing about the host; the load average still does.
        cpu_s = None
    warnings = load_warnings(t_group, cpu_s, threads or 1,
                             (facts.get("host_load_start"), facts.get("host_load_end")),
                             cores=len(spec.cpus) if spec.cpus else None,
                             competitors=facts.get("competing_processes"))
    warnings += shared_warnings
    if stopped:
        warnings.append(stopped_warning(stopped, t_group))
    shared_state = isolation.warning([(r.job.job_id, r.isolation) for r in results])
    if shared_state:
        say(f"warning: {shared_state}")  # the cell's log; the summary's warnings: --batch
        warnings.append(shared_state)
    summary = CellSummary(
        group_id=group["group_id"], status=status, error=error, T_group=t_group,
        total_samples=total_samples, throughput_group=group["throughput_group"],
        setup_s=setup_s, data_load_s=data_load_s, warnings=warnings,
        jobs=[{"job_id": r.job.job_id, "status": r.status, "final_val_acc": r.final_val_acc,
               "history": r.history, "early_stopped": r.early_stopped,
               "stop_reason": r.stop_reason} for r in results])
    # The rows are written: an event lost now (a full disk) is only a warning (main says
    # so), and the runner finds the rows (it never records a second one for the attempt).
    with contextlib.suppress(OutputError):
        tell_repairs(events, repaired)
        summary.send(events.emit)
        # (emit, not CellDone/CellFailed: their constructors would write error first, and
        # the line keeps the key order it has always had)
        events.emit("done" if status == "ok" else "failed", group_written=True, error=error)
    return status


def tell_repairs(events: Emitter, lines: list[str]) -> None:
    """What appending the rows upgraded or repaired (``engine.results.store``: the file,
    what was done, where the backup is): in the cell's log, and as ``warning`` events,
    which the front ends show as they come."""
    for line in lines:
        say(f"warning: {line}")
        CellWarning(message=line).send(events.emit)
