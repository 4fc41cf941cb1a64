"""The CSV schema and the locked, atomic append of result rows.

Two files per runs folder, both compatible with the fugue harness (fugue-compat.md, "CSV
outputs"): ``master_groups.csv`` (one row per group, i.e. per cell) and
``master_individual.csv`` (one row per job). Our columns come after the harness's, whose
names and meanings never change.

Writing (:func:`append_rows`) happens under an inter-process lock (``<file>.lock``):

- a missing file is created whole (header + rows) through a temporary file and
  ``os.replace``, so a reader never sees a file without its header;
- rows are appended with one ``os.write`` on an ``O_APPEND`` descriptor and fsync'ed; on
  any error the file is truncated back to its previous size, so no half row ever stays;
- a file whose header lacks some of our columns is upgraded: the original is copied to
  ``<file>.bak-YYYYmmdd-HHMMSS``, and the whole file is rewritten (values keyed by column
  name) with the union header through a temporary file and ``os.replace``. Columns we do
  not know (the harness's, a user's) are kept, in place, with their values;
- a file whose last line is torn (no newline, or an unterminated quoted field) is repaired
  the same way: backed up, then rewritten without the torn tail.

A value that was not measured is an empty cell, never 0 (:func:`format_value`).

Torch-free; pandas is not imported either (the runner imports this module).
"""

from __future__ import annotations

import csv
import errno
import io
import json
import math
import numbers
import os
import stat
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import filelock

from engine.errors import OutputError

GROUPS_FILE = "master_groups.csv"
INDIVIDUAL_FILE = "master_individual.csv"
RESULT_FILES = (GROUPS_FILE, INDIVIDUAL_FILE)

#: Seconds :func:`append_rows` waits for another process's lock before giving up.
LOCK_TIMEOUT_S = 120.0

#: ``master_individual.csv`` as the harness writes it, in order.
HARNESS_INDIVIDUAL_COLUMNS: tuple[str, ...] = (
    "group_id", "job_id", "exp_id", "dataset", "model", "executor", "compile", "num_workers",
    "total_time_s", "total_samples", "throughput_sps", "gpu_util_mean", "gpu_util_max",
    "vram_peak_mb", "energy_j", "early_stopped", "epochs_run", "gpu_name", "final_train_loss",
    "final_train_acc", "final_val_loss", "final_val_acc", "seed", "batch_size", "epochs", "lr",
    "amp",
)

#: ``master_groups.csv`` as the harness writes it, in order.
HARNESS_GROUP_COLUMNS: tuple[str, ...] = (
    "group_id", "exp_id", "executor", "compile", "mode", "size", "K", "max_parallel",
    "num_workers", "scheduler", "features", "T_group", "total_samples", "throughput_group",
    "energy_group", "gpu_util_mean", "gpu_util_max", "vram_peak_mb", "timestamp", "gpu_name",
    "torch_version", "cuda_version", "nv_driver_version", "gpu_compute_mode",
    "gpu_vram_total_mb", "cpu_model", "cpu_cores",
)

#: Our group columns, after the harness's.
EXTRA_GROUP_COLUMNS: tuple[str, ...] = (
    "campaign_id", "cell_key", "pass", "attempt", "status", "error", "setup_s", "data_load_s",
    "train_throughput_sps", "threads", "compile_mode", "compile_requested", "amp",
    "amp_requested", "features_requested", "features_reason", "scheduler_requested",
    "energy_method", "host", "python_version", "fugue_tui_version", "fugue_tui_commit",
    "campaign_hash", "param_count", "precision", "backend_flags", "device", "seed", "passes",
    "plugins", "host_load_start", "host_load_end", "cell_cpu_s", "rung", "gpu_uuid",
    "gpu_power_limit_w", "gpu_power_mean_w", "gpu_sm_clock_mean_mhz", "gpu_temp_max_c",
    "gpu_metrics_missing", "mps_present", "mps_used", "mps_thread_pct", "monitor_interval_s",
    "monitor_samples", "monitor_cpu_share", "cpu_util_mean", "cpu_util_max", "rss_peak_mb",
    "host_mem_available_min_mb", "cpu_energy_j", "cpu_energy_method",
    "torch_peak_allocated_mb", "torch_peak_reserved_mb", "compile_warmup_s", "samples_file",
    "executor_info", "config_key", "workload_key",
)

#: Our job columns, after the harness's.
EXTRA_INDIVIDUAL_COLUMNS: tuple[str, ...] = (
    "campaign_id", "cell_key", "pass", "attempt", "status", "error", "train_time_s",
    "train_throughput_sps", "val_time_s", "threads", "compile_mode", "amp_requested",
    "param_count", "precision", "energy_method", "gpu_metrics_method", "host",
    "samples_dropped", "split", "stop_reason", "worker_pid", "torch_peak_allocated_mb",
    "torch_peak_reserved_mb", "compile_warmup_s", "samples_file",
)

GROUP_COLUMNS: tuple[str, ...] = HARNESS_GROUP_COLUMNS + EXTRA_GROUP_COLUMNS
INDIVIDUAL_COLUMNS: tuple[str, ...] = HARNESS_INDIVIDUAL_COLUMNS + EXTRA_INDIVIDUAL_COLUMNS

#: One line per column of ours (both files): meaning and unit. An empty cell means "not
#: measured" or "does not apply", never zero.
COLUMN_DOCS: dict[str, str] = {
    "campaign_id": "identifier of the campaign run (one campaign TOML run) that wrote the row",
    "cell_key": ("hash of the cell's resolved configuration (one matrix point); resume matches on"
                 " it"),
    "pass": "number of the pass (repeat of the whole matrix) the row belongs to",
    "attempt": "attempt number of the cell within its pass (a retry increments it)",
    "status": ("outcome: ok, failed, killed, or skipped (cannot run on this machine); only ok "
               "rows count as done on resume or in analysis"),
    "error": ("error message (last traceback line or watchdog reason) of a failed cell or job; "
              "empty when ok"),
    "setup_s": ("seconds of executor setup outside the measured group window (MPS daemon, "
                "ray.init, actor start; see docs/measurement.md), s"),
    "data_load_s": ("seconds to load the cell's datasets into host memory, once per cell "
                    "process, before the group window, s"),
    "train_throughput_sps": ("samples trained ÷ time in training steps only (no validation, no "
                             "setup), samples/s"),
    "train_time_s": "sum of the job's epoch training-step phases, s",
    "val_time_s": "sum of the job's validation passes, s",
    "threads": "torch intra-op CPU threads per training process (torch.get_num_threads())",
    "compile_mode": ("torch.compile mode that actually ran: off, or the mode (default, "
                     "reduce-overhead, ...)"),
    "compile_requested": ("compile setting the campaign asked for (off or a mode); may differ "
                          "from compile_mode"),
    "amp": "True when automatic mixed precision actually ran (CUDA autocast fp16 + GradScaler)",
    "amp_requested": "True when the experiment or campaign asked for automatic mixed precision",
    "features_requested": ("unified_model flags asked for, vf:{0|1},s:{0|1},fl:{0|1}; the "
                           "harness's features column holds what ran"),
    "features_reason": ("why the effective features differ from features_requested (e.g. streams "
                        "off under CUDA graphs); empty if they match"),
    "scheduler_requested": ("Ray trial scheduler asked for (fifo, asha, median, hyperband); the "
                            "harness's scheduler column holds the one used"),
    "energy_method": ("how the energy column was obtained: NVML total-energy counter, integrated "
                      "power samples, or none when energy was not measured (the energy cell is "
                      "then empty)"),
    "gpu_metrics_method": ("how the job's GPU utilisation and VRAM columns were read (e.g. NVML "
                           "for the device under test); empty when not measured"),
    "host": "host name of the machine that ran the cell",
    "python_version": "Python version of the cell process (x.y.z)",
    "fugue_tui_version": "fugue-tui package version that wrote the row",
    "fugue_tui_commit": ("git commit of the fugue-tui source tree; empty when not run from a git "
                         "checkout"),
    "campaign_hash": "sha256 of the campaign file's bytes, first 16 hex digits",
    "param_count": "parameters of the job's model (job rows) or of all the group's models, count",
    "precision": "numeric precision training ran in: fp32, or amp-fp16 (autocast + GradScaler)",
    "backend_flags": ("torch backend settings that affect speed (cudnn benchmark, TF32, matmul "
                      "precision), compact JSON"),
    "device": "device under test (e.g. cuda:0, cpu)",
    "seed": "base seed of the group; job seeds derive from it",
    "passes": "number of passes the campaign asked for",
    "samples_dropped": "tail samples skipped over all epochs (only full batches train), count",
    "plugins": "plugin modules loaded in the cell (FUGUE_PLUGINS and entry points), comma-separated",
    "host_load_start": ("1-minute load average of the host when the group window opened "
                        "(os.getloadavg); other work on the host makes timings incomparable"),
    "host_load_end": "1-minute load average of the host when the group window closed",
    "cell_cpu_s": ("CPU seconds (user + system) the cell process used during the group window; "
                   "compare with T_group × threads to see whether it got the cores it asked for"),
    "split": "where validation data came from: test (dataset's test split), holdout or fold",
    "rung": "unified_model ablation rung (A, B, C, C+FL, D, D+FL; fugue-compat.md); empty otherwise",
    "gpu_uuid": "NVML UUID of the device under test (GPU-… or MIG-…); empty without a GPU",
    "gpu_power_limit_w": "enforced power limit of the device (NVML), W",
    "gpu_power_mean_w": "mean sampled board power over the group window (NVML), W",
    "gpu_sm_clock_mean_mhz": "mean sampled SM clock over the group window (NVML), MHz",
    "gpu_temp_max_c": "highest sampled GPU temperature over the group window (NVML), °C",
    "gpu_metrics_missing": ("GPU metrics the device could not report, with NVML's reason "
                            "(e.g. utilization: NotSupported); their columns stay empty"),
    "mps_present": ("True when an MPS control daemon was running for this device's clients "
                    "during the cell (ours or another's)"),
    "mps_used": "True when the cell's worker processes ran as clients of our MPS daemon (mp)",
    "mps_thread_pct": ("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE given to each MPS client, "
                       "floor(100 / concurrent clients), %"),
    "monitor_interval_s": "the monitor's sampling interval, s",
    "monitor_samples": "number of monitor samples inside the group window, count",
    "monitor_cpu_share": ("CPU time the monitor's sampling loop used inside the group window "
                          "(its cumulative CPU, sampled and interpolated at the window's ends) "
                          "÷ T_group: its observer cost, fraction of one core"),
    "cpu_util_mean": ("mean CPU use of the cell's whole process tree over the group window, "
                      "% of one core (200 = two cores busy)"),
    "cpu_util_max": "highest sampled CPU use of the cell's process tree, % of one core",
    "rss_peak_mb": ("peak resident memory of the cell's process tree (sum over its processes, "
                    "highest sample, or the cell's own peak if higher), MiB"),
    "host_mem_available_min_mb": "lowest host memory available during the group window, MiB",
    "cpu_energy_j": ("CPU package energy over the group window (RAPL), J; empty where the host "
                     "has no energy interface"),
    "cpu_energy_method": "how cpu_energy_j was obtained (rapl), or none when not measured",
    "torch_peak_allocated_mb": ("torch.cuda.max_memory_allocated in the training process(es) "
                                "(job: that job; group: highest over jobs or the stacked "
                                "process), MiB; empty on CPU"),
    "torch_peak_reserved_mb": "torch.cuda.max_memory_reserved, as torch_peak_allocated_mb, MiB",
    "compile_warmup_s": ("time of the first compiled step(s), reported apart from training "
                         "(inside T_group), s"),
    "samples_file": "monitor samples of the group (or the job's slice), relative to the runs folder",
    "executor_info": ("what the executor decided or observed, compact JSON (e.g. worker pids, "
                      "Ray resources, the unified model's plan)"),
    "config_key": ("hash of the cell's configuration without the pass (experiment, jobs, "
                   "executor and options, compile, scheduler, rung, features, seed, threads): "
                   "the analysis pools rows across passes and campaigns only within one"),
    "workload_key": ("hash of what all executors of the experiment share (experiment "
                     "definition, jobs, seed, threads): a strategy's seq baseline must have the "
                     "same one"),
    "stop_reason": "why a trial stopped before its epoch budget (scheduler decision); else empty",
    "worker_pid": "process id of the process that trained the job",
}


# --------------------------------------------------------------------------- values

def format_value(v: Any) -> str:
    """One cell as text.

    ``None`` → ``""`` (not measured: an empty cell, never 0); ``bool`` → ``True``/``False``;
    ``float`` → ``repr`` (full precision), NaN and ±inf → ``""``; ``dict``/``list``/``tuple``
    → compact JSON; everything else ``str()``.
    """
    if v is None:
        return ""
    if isinstance(v, bool):
        return "True" if v else "False"
    if isinstance(v, float):
        return float.__repr__(v) if math.isfinite(v) else ""
    if isinstance(v, (dict, list, tuple)):
        return json.dumps(v, separators=(",", ":"), default=str)
    if isinstance(v, numbers.Real) and not isinstance(v, numbers.Integral):
        # numpy float32 and friends: not a float subclass, str() is their shortest form.
        try:
            finite = math.isfinite(v)
        except (TypeError, ValueError, OverflowError):
            finite = True
        return str(v) if finite else ""
    return str(v)


def new_group_id(executor: str) -> str:
    """``<executor>_<8 lowercase hex>``, as the harness names groups."""
    return f"{executor}_{uuid.uuid4().hex[:8]}"


def check_timestamp(text: str) -> str:
    """Return ``text`` if it is a row timestamp (``YYYYmmdd_HHMMSS``); rows are compared with
    it as text (``--since``), so the format must be exact.

    Raises:
        ValueError: naming the expected form.
    """
    try:
        time.strptime(text, "%Y%m%d_%H%M%S")
    except ValueError:
        raise ValueError(f"{text!r} is not a time in the form YYYYmmdd_HHMMSS "
                         "(e.g. 20261130_140000)") from None
    return text


def timestamp_now() -> str:
    """Local time as ``YYYYmmdd_HHMMSS`` (the harness's ``timestamp`` column)."""
    return time.strftime("%Y%m%d_%H%M%S")


# --------------------------------------------------------------------------- reading

def _raise_field_limit() -> None:
    # Long error strings (tracebacks) exceed csv's default 128 KiB field limit.
    if csv.field_size_limit() < 2**31 - 1:
        csv.field_size_limit(2**31 - 1)


def _records(text: str) -> tuple[list[list[str]], bool]:
    """Every complete record of ``text`` and whether a torn last one was dropped.

    Torn: the text does not end with a line break, or its last quoted field is still open
    at the end of the data (the csv parser completes such a record only because input ran
    out).
    """
    _raise_field_limit()
    state = {"eof": False}

    def lines() -> Iterator[str]:
        yield from io.StringIO(text, newline="")
        state["eof"] = True

    records: list[list[str]] = []
    completed_by_eof = False
    for record in csv.reader(lines()):
        completed_by_eof = state["eof"]
        records.append(record)
    torn = completed_by_eof or (bool(text) and not text.endswith(("\n", "\r")))
    if torn and records:
        records.pop()
    return records, torn


def read_rows(path: str | os.PathLike[str]) -> list[dict[str, str]]:
    """All rows of a results CSV as dicts (``csv.DictReader``); ``[]`` for a missing file.

    A torn last line (one without its line break at the end of the file, or with an
    unterminated quoted field) is ignored. Short rows are padded with ``""``.
    """
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        return []
    except OSError as e:
        raise OutputError(f"{path}: {e.strerror or e}") from None
    _raise_field_limit()
    text = data.decode("utf-8-sig", errors="replace")
    state = {"eof": False}

    def lines() -> Iterator[str]:
        yield from io.StringIO(text, newline="")
        state["eof"] = True

    rows: list[dict[str, str]] = []
    completed_by_eof = False
    for row in csv.DictReader(lines(), restval=""):
        completed_by_eof = state["eof"]
        rows.append(row)
    if rows and (completed_by_eof or not text.endswith(("\n", "\r"))):
        rows.pop()
    return rows


# --------------------------------------------------------------------------- paths

def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISFIFO(mode):
        return "a named pipe"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def _check_target(path: str | os.PathLike[str]) -> Path:
    """The real path of a results file that is absent or a regular file; else OutputError."""
    shown = os.fspath(path)
    real = os.path.realpath(shown)
    try:
        st = os.stat(real)
    except FileNotFoundError:
        if os.path.islink(shown):
            raise OutputError(
                f"results file '{shown}' is a broken symbolic link (to '{real}')") from None
        return Path(real)
    except NotADirectoryError:
        return Path(real)  # a parent is a regular file: _make_dirs names it
    except OSError as e:
        raise OutputError(f"results file '{shown}': {e.strerror or e}") from None
    if not stat.S_ISREG(st.st_mode):
        via = f", '{real}'" if real != os.path.abspath(shown) else ""
        raise OutputError(f"results file '{shown}' is not a regular file "
                          f"({_kind(st.st_mode)}{via})")
    return Path(real)


def _blocking_file(path: Path) -> Path | None:
    """The first component of ``path`` (from the root down) that exists and is no directory."""
    for part in [*reversed(path.parents), path]:
        if os.path.lexists(part) and not os.path.isdir(part):
            return part
    return None


def _make_dirs(directory: Path, shown: str | os.PathLike[str]) -> None:
    try:
        os.makedirs(directory, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        blocker = _blocking_file(Path(directory))
        if blocker is None:
            raise OutputError(f"runs path '{shown}' cannot be created "
                              f"(a component is not a directory)") from None
        if blocker == Path(directory):
            raise OutputError(f"runs path '{shown}' is not a directory") from None
        raise OutputError(
            f"runs path '{shown}' is under a regular file '{blocker}'") from None
    except OSError as e:
        raise OutputError(f"runs path '{shown}' cannot be created: {e.strerror or e}") from None


def _fsync_dir(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def preflight(runs_dir: str | os.PathLike[str]) -> Path:
    """Check that results can be written under ``runs_dir`` before any cell runs.

    Resolves and creates the folder, checks that it is a directory, that each results file
    is absent or a regular file that opens for appending, and writes, fsyncs and removes a
    small probe file. Returns the resolved folder. Raises :class:`OutputError` (one line)
    on any failure; nothing else is written.
    """
    try:
        directory = Path(runs_dir).expanduser().resolve()
    except (OSError, RuntimeError) as e:
        raise OutputError(f"runs path '{runs_dir}' cannot be resolved: {e}") from None
    if os.path.lexists(directory) and not directory.is_dir():
        raise OutputError(f"runs path '{directory}' is not a directory")
    missing = [p for p in (directory, *directory.parents) if not os.path.lexists(p)]
    _make_dirs(directory, directory)
    try:
        _check_writable(directory)
    except OutputError:
        for created in missing:  # leave nothing behind: remove the folders made just now
            try:
                created.rmdir()
            except OSError:
                break
        raise
    return directory


def _check_writable(directory: Path) -> None:
    if not directory.is_dir():
        raise OutputError(f"runs path '{directory}' is not a directory")
    for name in RESULT_FILES:
        target = _check_target(directory / name)
        if target.exists():
            try:
                fd = os.open(target, os.O_WRONLY | os.O_APPEND | os.O_CLOEXEC | os.O_NONBLOCK)
            except OSError as e:
                raise OutputError(f"results file '{directory / name}' cannot be opened for "
                                  f"appending: {e.strerror or e}") from None
            os.close(fd)
    probe = directory / f".fugue-tui-probe-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    try:
        fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        try:
            _write_all(fd, b"fugue-tui write probe\n")
            os.fsync(fd)
        finally:
            os.close(fd)
            os.unlink(probe)
    except OSError as e:
        raise OutputError(f"runs path '{directory}' is not writable: {e.strerror or e}") from None


# --------------------------------------------------------------------------- writing

def _write(fd: int, data: memoryview) -> int:
    """One ``os.write``; a separate function so that tests can make it fail part-way."""
    return os.write(fd, data)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        n = _write(fd, view)
        if n <= 0:
            raise OSError(errno.EIO, "write made no progress")
        view = view[n:]


def _encode(records: Sequence[Sequence[str]], terminator: str, errors: str) -> bytes:
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator=terminator)
    writer.writerows(records)
    return buf.getvalue().encode("utf-8", errors=errors)


def _row_records(rows: Sequence[Mapping[str, Any]], order: Sequence[str]) -> list[list[str]]:
    return [[format_value(row.get(c)) for c in order] for row in rows]


def _write_replace(real: Path, data: bytes, shown: str, mode: int | None) -> None:
    """Write ``data`` to a temporary file next to ``real``, fsync, and rename it over."""
    tmp = real.parent / f".{real.name}.{uuid.uuid4().hex[:8]}.tmp"
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666)
        try:
            if mode is not None:
                os.fchmod(fd, mode)
            _write_all(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, real)
    except OSError as e:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise OutputError(f"{shown}: {e.strerror or e}") from None
    _fsync_dir(real.parent)


def _backup(real: Path, data: bytes, shown: str, mode: int) -> Path:
    """Copy the file's current bytes to a new ``<name>.bak-YYYYmmdd-HHMMSS[-n]``."""
    base = f"{real.name}.bak-{time.strftime('%Y%m%d-%H%M%S')}"
    for n in range(10_000):
        backup = real.parent / (base if n == 0 else f"{base}-{n}")
        try:
            fd = os.open(backup, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666)
        except FileExistsError:
            continue
        except OSError as e:
            raise OutputError(f"{shown}: cannot create backup '{backup}': "
                              f"{e.strerror or e}") from None
        try:
            try:
                os.fchmod(fd, mode)
                _write_all(fd, data)
                os.fsync(fd)
            finally:
                os.close(fd)
        except OSError as e:
            try:
                os.unlink(backup)
            except OSError:
                pass
            raise OutputError(f"{shown}: cannot write backup '{backup}': "
                              f"{e.strerror or e}") from None
        return backup
    raise OutputError(f"{shown}: no free backup name '{base}-N'")


def _terminator(text: str) -> str:
    end = text.find("\n")
    if end > 0 and text[end - 1] == "\r":
        return "\r\n"
    if end >= 0:
        return "\n"
    return "\r\n"  # csv's default, what the harness writes


def _check_columns(columns: Sequence[str]) -> list[str]:
    cols = list(columns)
    if not cols:
        raise ValueError("append_rows: no columns")
    seen: set[str] = set()
    for c in cols:
        if not isinstance(c, str):
            raise ValueError(f"append_rows: column name {c!r} is not a string")
        if c in seen:
            raise ValueError(f"append_rows: column '{c}' listed twice")
        seen.add(c)
    return cols


def append_rows(path: str | os.PathLike[str], rows: Sequence[Mapping[str, Any]],
                columns: Sequence[str], *, lock_timeout: float = LOCK_TIMEOUT_S) -> None:
    """Append ``rows`` to the CSV at ``path`` atomically, under ``<path>.lock``.

    ``columns`` is the schema the rows follow (:data:`GROUP_COLUMNS` or
    :data:`INDIVIDUAL_COLUMNS`); a row key outside it raises ``ValueError``, a missing key
    is an empty cell. Rows are written in the file's column order. See the module doc for
    creation, header upgrade (with a ``.bak-`` copy) and repair. Raises
    :class:`OutputError` when the file cannot be written; the file is then as it was.
    No rows: nothing happens.
    """
    cols = _check_columns(columns)
    allowed = set(cols)
    rows = list(rows)
    for i, row in enumerate(rows):
        unknown = [k for k in row if k not in allowed]
        if unknown:
            raise ValueError(f"append_rows: row {i} has keys outside columns: {unknown}")
    if not rows:
        return
    shown = os.fspath(path)
    real = _check_target(shown)
    _make_dirs(real.parent, os.path.dirname(os.path.abspath(shown)))
    lock = _locked(real, shown, lock_timeout)
    try:
        _append_locked(real, shown, rows, cols)
    finally:
        lock.release()


def _append_locked(real: Path, shown: str, rows: list[Mapping[str, Any]],
                   cols: list[str]) -> None:
    try:
        fd = os.open(real, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
    except FileNotFoundError:
        data = _encode([cols], "\r\n", "strict") + _encode(
            _row_records(rows, cols), "\r\n", "backslashreplace")
        _write_replace(real, data, shown, None)
        return
    except OSError as e:
        raise OutputError(f"{shown}: {e.strerror or e}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OutputError(f"results file '{shown}' is not a regular file ({_kind(st.st_mode)})")
        with os.fdopen(os.dup(fd), "rb") as f:
            data = f.read()
    except OSError as e:
        raise OutputError(f"{shown}: {e.strerror or e}") from None
    finally:
        os.close(fd)
    mode = stat.S_IMODE(st.st_mode)

    text = data.decode("utf-8", errors="surrogateescape")
    if text.startswith("\ufeff"):
        text = text[1:]
    if not text.strip():
        # Empty (or blank) file: nothing to keep, write it whole.
        payload = _encode([cols], "\r\n", "strict") + _encode(
            _row_records(rows, cols), "\r\n", "backslashreplace")
        _write_replace(real, payload, shown, mode)
        return
    terminator = _terminator(text)

    # Fast path: a complete file (ends with a line break, balanced quotes) only needs its
    # header parsed. Anything else goes through the full parser, which decides for sure.
    if text.endswith(("\n", "\r")) and text.count('"') % 2 == 0:
        _raise_field_limit()
        header = next(csv.reader(io.StringIO(text, newline="")), [])
        records: list[list[str]] | None = None
        torn = False
    else:
        records, torn = _records(text)
        header = records[0] if records else []
    if not header:
        raise OutputError(f"{shown}: the file has no header line")
    union = header + [c for c in cols if c not in header]

    if union == header and not torn:
        _append_bytes(real, shown, _encode(_row_records(rows, header), terminator,
                                           "backslashreplace"))
        return

    # Upgrade (new columns) or repair (torn tail): back up, then rewrite whole by name.
    if records is None:
        records, _ = _records(text)
    if len(set(header)) != len(header):
        dup = next(c for c in header if header.count(c) > 1)
        raise OutputError(f"{shown}: column '{dup}' appears twice in the header; "
                          f"cannot add columns safely (fix or move the file)")
    body: list[list[str]] = []
    for n, record in enumerate(records[1:], start=2):
        if not record:
            continue  # a blank line
        if len(record) > len(header):
            raise OutputError(f"{shown}: record {n} has {len(record)} fields but the header "
                              f"has {len(header)}; cannot add columns safely "
                              f"(fix or move the file)")
        values = dict(zip(header, record))
        body.append([values.get(c, "") for c in union])
    _backup(real, data, shown, mode)
    payload = (_encode([union], terminator, "surrogateescape")
               + _encode(body, terminator, "surrogateescape")
               + _encode(_row_records(rows, union), terminator, "backslashreplace"))
    _write_replace(real, payload, shown, mode)


def _append_bytes(real: Path, shown: str, payload: bytes) -> None:
    """Append ``payload`` with one write (looping on short writes) and fsync; on failure
    truncate the file back to its previous size."""
    try:
        fd = os.open(real, os.O_WRONLY | os.O_APPEND | os.O_CLOEXEC)
    except OSError as e:
        raise OutputError(f"{shown}: {e.strerror or e}") from None
    try:
        before = os.fstat(fd).st_size
        try:
            _write_all(fd, payload)
            os.fsync(fd)
        except BaseException as e:
            undo = _truncate(fd, before)
            if not isinstance(e, OSError):
                raise
            reason = e.strerror or str(e)
            if undo is not None:
                raise OutputError(f"{shown}: {reason}; the partial row could not be removed "
                                  f"({undo}), the file may end with a torn line") from None
            raise OutputError(f"{shown}: {reason}") from None
    finally:
        os.close(fd)


def _truncate(fd: int, size: int) -> str | None:
    """Cut the file back to ``size`` bytes; the error text if that failed."""
    try:
        os.ftruncate(fd, size)
    except OSError as e:
        return e.strerror or str(e)
    try:
        os.fsync(fd)
    except OSError:
        pass
    return None


def _locked(real: Path, shown: str, lock_timeout: float) -> filelock.FileLock:
    lock_path = f"{real}.lock"
    lock = filelock.FileLock(lock_path, timeout=lock_timeout)
    try:
        lock.acquire()
    except filelock.Timeout:
        raise OutputError(f"{lock_path}: still locked after {lock_timeout:g} s "
                          f"(another process writing '{shown}'?)") from None
    except OSError as e:
        raise OutputError(f"{lock_path}: cannot take the lock: {e.strerror or e}") from None
    return lock


def append_group(runs_dir: str | os.PathLike[str], group: Mapping[str, Any],
                 jobs: Sequence[Mapping[str, Any]], *,
                 lock_timeout: float = LOCK_TIMEOUT_S) -> None:
    """Append a group's job rows and its group row as one unit: both or neither.

    Takes the job file's lock, then the group file's (always in that order, so writers of
    either file cannot deadlock), appends the job rows, then the group row. If the group row
    cannot be written (a full disk), the job rows just appended are cut off again, so no job
    row is ever left without its group.

    Raises:
        OutputError: nothing was written (or, if even the roll-back failed, which rows remain).
    """
    runs = Path(runs_dir)
    jobs_shown, group_shown = os.fspath(runs / INDIVIDUAL_FILE), os.fspath(runs / GROUPS_FILE)
    jobs_real, group_real = _check_target(jobs_shown), _check_target(group_shown)
    _make_dirs(runs, os.path.abspath(runs_dir))
    cols_jobs, cols_group = _check_columns(INDIVIDUAL_COLUMNS), _check_columns(GROUP_COLUMNS)
    for row, cols in [(r, cols_jobs) for r in jobs] + [(group, cols_group)]:
        unknown = [k for k in row if k not in set(cols)]
        if unknown:
            raise ValueError(f"append_group: keys outside columns: {unknown}")
    jobs_lock = _locked(jobs_real, jobs_shown, lock_timeout)
    try:
        group_lock = _locked(group_real, group_shown, lock_timeout)
        try:
            before = jobs_real.stat().st_size if jobs_real.exists() else None
            head = _head(jobs_real)
            if jobs:
                _append_locked(jobs_real, jobs_shown, list(jobs), cols_jobs)
            try:
                _append_locked(group_real, group_shown, [group], cols_group)
            except OutputError as exc:
                if jobs:
                    _roll_back(jobs_real, jobs_shown, before, head, exc)
                raise
        finally:
            group_lock.release()
    finally:
        jobs_lock.release()


def _head(real: Path) -> bytes:
    try:
        with open(real, "rb") as f:
            return f.readline()
    except FileNotFoundError:
        return b""


def _roll_back(real: Path, shown: str, before: int | None, head: bytes, cause: Exception) -> None:
    """Remove job rows appended just now (we still hold the file's lock)."""
    try:
        if before is None:
            real.unlink()
            return
        if _head(real) == head:  # a plain append: the new rows are exactly the tail
            fd = os.open(real, os.O_WRONLY | os.O_CLOEXEC)
            try:
                if _truncate(fd, before) is None:
                    return
            finally:
                os.close(fd)
    except OSError:
        pass
    raise OutputError(f"{cause}; and the group's job rows could not be removed from {shown} "
                      f"(they have no group row)") from None
