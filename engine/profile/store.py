"""The profiles file: ``<runs_dir>/profiles.csv``, one row per profile run.

**Why in the runs folder.** A profile is a measurement of this machine, like the rows of
``master_groups.csv`` beside it: it is found where a campaign's results go (its
``runs_dir``, ``--runs-dir``), travels and is backed up with them, and is written with the
same locked, atomic CSV append (``engine.results.store.append_rows``). A second machine
sharing the folder adds its own rows; they are told apart by the identity columns.

**Key.** A profile answers for one *profile key*: (model with its ``model_kwargs``,
dataset, batch size, precision, compile mode, optimizer with its kwargs) — what changes a
job's memory — on one *machine identity*: host, device kind, GPU name and UUID, torch
version and the CUDA version torch was built for. A row of another identity is never used:
:func:`lookup` says so in one line (a profile from another GPU, or from before a torch
upgrade, describes memory that is not this one's). Among rows of the same key and identity
the latest wins.

Columns are declared once in :data:`COLUMNS` (name → meaning; sizes MiB, times ms); an
empty cell is a figure that was not measured (device columns on a CPU), never 0.

Torch-free.
"""

from __future__ import annotations

import json
import os
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.runfolder import PROFILES_FILE

#: name → meaning, in file order (append-only: a new column goes at the end).
COLUMNS: dict[str, str] = {
    "profile_id": "16 hex digits: sha256 of the profile key and the machine identity",
    "timestamp": "when the probe ended, YYYYmmdd_HHMMSS (UTC)",
    "host": "identity: host name",
    "device": "identity: cpu or cuda",
    "gpu_name": "identity: NVML name of the device (empty on CPU)",
    "gpu_uuid": "identity: NVML UUID of the device (empty on CPU)",
    "torch": "identity: torch distribution version",
    "cuda": "identity: the CUDA version torch was built for (empty: a CPU build)",
    "model": "key: model name",
    "model_kwargs": "key: the model's kwargs, canonical JSON",
    "dataset": "key: dataset name",
    "batch_size": "key: batch size",
    "precision": "key: the precision the probe ran (fp32, or amp-fp16: the legacy amp "
                 "flag applies on CUDA only); an estimate for another precision scales the "
                 "fp32 profile (engine.profile.precision_model)",
    "compile_mode": "key: off or the torch.compile mode",
    "optimizer": "key: optimizer name",
    "optimizer_kwargs": "key: the optimizer's kwargs, canonical JSON",
    "threads": "torch threads of the probe",
    "ks": "the stack sizes measured, e.g. 1,2,4",
    "rss_mb": "JSON {K: peak RSS of a process training K stacked members, MiB}",
    "rss1_mb": "peak RSS of one job alone (K = 1), MiB",
    "rss_per_member_mb": "measured increment of peak RSS per stacked member: least-squares "
                         "slope over the stacked sizes (K >= 2; K = 1 trains unstacked) of "
                         "the training peaks (rss_train_mb) where the probe split them, else "
                         "of the whole peaks, MiB",
    "parent_rss_mb": "RSS of the probe's parent (torch, engine and host data loaded, nothing "
                     "trained): what a pre-warmed parent costs once, MiB",
    "private1_mb": "private (unshared) memory of one job forked from that parent: what each "
                   "more mp worker adds under start = forkserver, MiB",
    "ray_import_mb": "RSS added by importing ray into a job's process (a ray actor's own "
                     "overhead over a plain worker), MiB; empty when ray is not installed",
    "device_context_mb": "device memory of one CUDA context (NVML, per process, before any "
                         "tensor), MiB",
    "device_dataset_mb": "device memory of one dataset copy (torch allocated after the "
                         "copy), MiB",
    "device_reserved_mb": "JSON {K: torch.cuda.max_memory_reserved}, MiB",
    "device_allocated_mb": "JSON {K: torch.cuda.max_memory_allocated}, MiB",
    "device_per_member_mb": "measured increment of peak reserved device memory per stacked "
                            "member (slope over K >= 2), MiB",
    "step_time_ms": "median step time of one job after warm-up (K = 1), ms",
    "step_time_ms_by_k": "JSON {K: median step time of the K-stack after warm-up}, ms",
    "steps": "training steps per K (after warm-up steps)",
    "load_avg": "host load average (1 min) when the probe started",
    "probe_s": "wall time of the probe, s",
    "rss_stack_base_mb": "intercept of the stacked line: RSS(K) = base + K x per-member for "
                         "K >= 2, MiB",
    "device_stack_base_mb": "intercept of the stacked line of reserved device memory, MiB",
    # Load (fresh-user finding 4: a probe at load 12.9 stored a 234.7 ms step for a model
    # that trains at ~2 ms): the row says how busy the host was, and warns as --batch does.
    "load_avg_end": "host load average (1 min) when the probe ended",
    "cpu_cores": "the host's cores (os.cpu_count), what the load averages compare with",
    "load_warning": "the load warning the profile was measured under (a load average above "
                    "the cores plus half a core: step times and CPU figures are inflated; "
                    "re-profile on a quiet machine); empty when the host was quiet",
    "rss_setup_mb": "JSON {K: peak RSS before training: models built, verification, the "
                    "stack}, MiB; empty where the peak could not be reset (not Linux)",
    "rss_train_mb": "JSON {K: peak RSS during training}, MiB; empty as rss_setup_mb",
    "rss_setup_base_mb": "intercept of the set-up line (K >= 2); the predicted peak of a "
                         "K-stack is the higher of the set-up and the training line, MiB",
    "rss_setup_per_member_mb": "slope of the set-up line (K >= 2), MiB per member",
    "time_utc": "when the probe ended, ISO 8601 with its zone (+00:00): the instant "
                "timestamp names in UTC (issue 43: the file says its zone)",
}
IDENTITY = ("host", "device", "gpu_name", "gpu_uuid", "torch", "cuda")
KEY = ("model", "model_kwargs", "dataset", "batch_size", "precision", "compile_mode",
       "optimizer", "optimizer_kwargs")


def profiles_path(runs_dir: str | os.PathLike[str]) -> Path:
    return Path(runs_dir) / PROFILES_FILE


def canonical(value: Any) -> str:
    """Canonical JSON (sorted keys, no spaces): how kwargs enter a key."""
    return json.dumps(value or {}, sort_keys=True, separators=(",", ":"))


def torch_cuda_version() -> str:
    """The CUDA version the installed torch was built for, read from ``torch/version.py``
    without importing torch (the runner side never does); "" for a CPU build or none."""
    import importlib.util
    import re

    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.origin:
        return ""
    try:
        text = (Path(spec.origin).parent / "version.py").read_text()
    except OSError:
        return ""
    m = re.search(r"^cuda\s*(?::[^=]*)?=\s*['\"]([^'\"]+)['\"]", text, re.MULTILINE)
    return m.group(1) if m else ""


def identity(device: str, gpu: dict[str, Any] | None = None) -> dict[str, str]:
    """This machine's identity for profiles (``device``: cpu, cuda or cuda:N; ``gpu``: the
    device under test as ``engine.measure.nvml.resolve_gpu`` found it)."""
    from engine.measure.provenance import dist_version

    gpu = gpu or {}
    return {"host": socket.gethostname(), "device": "cuda" if device.startswith("cuda") else
            "cpu", "gpu_name": str(gpu.get("name") or ""), "gpu_uuid": str(gpu.get("uuid") or ""),
            "torch": dist_version("torch"), "cuda": torch_cuda_version()}


def job_key(job: dict[str, Any], compile_mode: str, device: str,
            precision: str | None = None) -> dict[str, str]:
    """The profile key of a job (a ``JobSpec.to_dict()``) run with ``compile_mode`` on
    ``device``: what changes its memory. ``precision``: what the job runs there (the
    cell's precision as applied on the device); None: the legacy amp flag (CUDA only)."""
    amp = bool(job.get("amp")) and device.startswith("cuda")
    if precision is None:
        precision = "amp-fp16" if amp else "fp32"
    return {"model": str(job["model"]), "model_kwargs": canonical(job.get("model_kwargs")),
            "dataset": str(job["dataset"]), "batch_size": str(int(job["batch_size"])),
            "precision": precision, "compile_mode": compile_mode,
            "optimizer": str(job["optimizer"]),
            "optimizer_kwargs": canonical(job.get("optimizer_kwargs"))}


def key_text(key: dict[str, str]) -> str:
    """A profile key in a few words: ``mlp{"hidden":4096} digits bs64 fp32 sgd``."""
    kwargs = "" if key["model_kwargs"] == "{}" else key["model_kwargs"]
    okw = "" if key["optimizer_kwargs"] == "{}" else key["optimizer_kwargs"]
    comp = "" if key["compile_mode"] == "off" else f" compile={key['compile_mode']}"
    return (f"{key['model']}{kwargs} {key['dataset']} bs{key['batch_size']} "
            f"{key['precision']} {key['optimizer']}{okw}{comp}")


def profile_id(key: dict[str, str], ident: dict[str, str]) -> str:
    import hashlib

    doc = canonical({"key": {k: key[k] for k in KEY}, "identity": {k: ident[k] for k in IDENTITY}})
    return hashlib.sha256(doc.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class Profile:
    """One row of the profiles file, its figures parsed (MiB, ms; None: not measured)."""

    row: dict[str, str]

    def num(self, name: str) -> float | None:
        text = self.row.get(name, "")
        try:
            return float(text) if text != "" else None
        except ValueError:
            return None

    def by_k(self, name: str) -> dict[int, float]:
        try:
            doc = json.loads(self.row.get(name) or "{}")
        except ValueError:
            return {}
        return {int(k): float(v) for k, v in doc.items() if v is not None}

    @property
    def id(self) -> str:
        return self.row.get("profile_id", "")

    @property
    def key(self) -> dict[str, str]:
        return {k: self.row.get(k, "") for k in KEY}

    @property
    def identity(self) -> dict[str, str]:
        return {k: self.row.get(k, "") for k in IDENTITY}


#: Profile columns of one number that cannot be negative (sizes, times, counts, loads).
#: The fitted slopes and intercepts (``*_per_member_mb``, ``*_base_mb``) may be: a noisy
#: fit is clamped where it is used (engine.profile.memory_model), so only NaN, ±inf or
#: text is damage there.
UNSIGNED_NUMBERS = ("threads", "rss1_mb", "parent_rss_mb", "private1_mb", "ray_import_mb",
                    "device_context_mb", "device_dataset_mb", "step_time_ms", "steps",
                    "load_avg", "probe_s", "load_avg_end", "cpu_cores")
SIGNED_NUMBERS = ("rss_per_member_mb", "device_per_member_mb", "rss_stack_base_mb",
                  "device_stack_base_mb", "rss_setup_base_mb", "rss_setup_per_member_mb")
#: JSON ``{K: value}`` columns: every value a number >= 0.
BY_K_NUMBERS = ("rss_mb", "device_reserved_mb", "device_allocated_mb", "step_time_ms_by_k",
                "rss_setup_mb", "rss_train_mb")
#: How many damaged rows the one warning line names (the rest are counted).
SHOWN_DAMAGED = 3


def read_profiles(runs_dir: str | os.PathLike[str], notes: list[str] | None = None
                  ) -> list[Profile]:
    """Every usable row of ``<runs_dir>/profiles.csv`` in file order ([] without the file).

    A row with an impossible figure (:func:`impossible`: a negative or NaN size or time,
    text in a number column, a ``{K: MiB}`` that is no such JSON) is left out, and so is a
    damaged or torn line; ``notes`` (when given) gets one line per kind naming the file and
    the first few as ``file:line column=value``. The file is never changed.

    Raises:
        OutputError: the file exists but cannot be read (a directory, no permission) or is
            no profiles file (no ``profile_id`` column: another CSV, binary garbage), naming
            the file and the cause.
    """
    from engine.errors import OutputError, shown
    from engine.results.read import read_rows_numbered, torn_note

    path = profiles_path(runs_dir)
    if not os.path.lexists(path):
        return []
    if path.is_dir():
        raise OutputError(f"{path}: is a directory, not a profiles file")
    if not path.is_file():
        raise OutputError(f"{path}: is not a regular file (a FIFO, socket, device or a "
                          "broken link)")
    rows, lines, torn, damaged = read_rows_numbered(path)
    header = list(rows[0]) if rows else _header(path)
    if header and "profile_id" not in header:
        raise OutputError(f"{path}: not a profiles file of fugue-tui (no profile_id column"
                          f" in its first line {shown(','.join(header)[:60])})")
    said = list(damaged) + ([torn_note(path)] if torn else [])
    kept: list[Profile] = []
    found: list[str] = []
    for row, line in zip(rows, lines, strict=True):
        problem = impossible(row)
        if problem is None:
            kept.append(Profile(row))
        else:
            column, why = problem
            found.append(f"{path}:{line} {column}={shown(row.get(column, ''))} ({why})")
    if found:
        more = f" and {len(found) - SHOWN_DAMAGED} more" if len(found) > SHOWN_DAMAGED else ""
        said.append(f"{path}: {len(found)} profile row{'s' if len(found) != 1 else ''} with "
                    f"an impossible value left out (the file is unchanged): "
                    f"{', '.join(found[:SHOWN_DAMAGED])}{more}")
    if notes is not None:
        notes.extend(said)
    return kept


def impossible(row: dict[str, str]) -> tuple[str, str] | None:
    """The first impossible figure of a profile row as (column, why), None when every
    figure is possible. Empty cells are "not measured" (device figures on a CPU): fine."""
    import math

    def number(text: str) -> float | None:
        try:
            value = float(text)
        except ValueError:
            return None
        return value if math.isfinite(value) else None

    for column in UNSIGNED_NUMBERS + SIGNED_NUMBERS:
        text = (row.get(column) or "").strip()
        if not text:
            continue
        value = number(text)
        if value is None:
            return column, "not a number"
        if value < 0 and column in UNSIGNED_NUMBERS:
            return column, "negative"
    for column in BY_K_NUMBERS:
        text = (row.get(column) or "").strip()
        if not text:
            continue
        try:
            doc = json.loads(text)
        except ValueError:
            return column, "not JSON {K: number}"
        if not isinstance(doc, dict):
            return column, "not JSON {K: number}"
        for k, v in doc.items():
            if v is None:
                continue  # a K not measured
            if not (str(k).isascii() and str(k).isdigit()):
                return column, "not JSON {K: number}"
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
                return column, "not a number"
            if v < 0:
                return column, "negative"
    return None


def _header(path: Path) -> list[str]:
    """The first line of ``path`` as CSV fields ([] for an empty file)."""
    import csv

    with open(path, encoding="utf-8-sig", errors="replace", newline="") as f:
        return next(csv.reader(f), [])


def append_profile(runs_dir: str | os.PathLike[str], row: dict[str, Any]) -> list[str]:
    """Append one profile row (locked, atomic; ``engine.results.store.append_rows``).

    Returns the lines the user must be told (a repaired or upgraded file)."""
    from engine.results.store import append_rows

    return append_rows(profiles_path(runs_dir), [row], list(COLUMNS))


def lookup(profiles: list[Profile], key: dict[str, str], ident: dict[str, str]
           ) -> tuple[Profile | None, str]:
    """The latest profile of ``key`` on this machine identity, and a note: "" when found or
    when none exists at all, else one line naming why the rows found do not count (another
    machine or software stack)."""
    same_key = [p for p in profiles if p.key == key]
    mine = [p for p in same_key if p.identity == ident]
    if mine:
        return max(mine, key=lambda p: p.row.get("timestamp", "")), ""
    if not same_key:
        return None, ""
    other = same_key[-1].identity
    diff = ", ".join(f"{k} {other[k] or '-'} (here {ident[k] or '-'})" for k in IDENTITY
                     if other[k] != ident[k])
    return None, (f"profile {same_key[-1].id} of {key_text(key)} ignored: measured on another "
                  f"machine or stack ({diff})")
