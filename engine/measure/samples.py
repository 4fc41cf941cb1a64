"""Monitor samples files (``<runs>/samples/<group_id>.csv``): their names, their columns,
how a value is written, reading one back, and writing a job's slice of a group's samples.
Torch-free.

Names, the rule a reader can rely on: the sampler writes ``<group_id>.csv.partial`` and
renames it to ``<group_id>.csv`` when it stops — after the group window, and also when the
runner stops a killed cell's session (SIGTERM reaches the sampler too: one last sample, then
the rename). So ``.csv`` is a file its sampler finished, whatever became of the cell (the
row's ``status`` says that); ``.csv.partial`` is one whose sampler was itself killed or
crashed: every line in it is whole, but it ends wherever the sampler stopped.
"""

from __future__ import annotations

import csv
import math
import os
from pathlib import Path
from typing import Any

#: Columns of a samples file, in order. ``t`` is ``time.monotonic`` seconds; ``time`` Unix
#: seconds; an empty cell means the value was not available in that sample.
SAMPLE_FIELDS: tuple[str, ...] = (
    "t", "time", "gpu_util_pct", "mem_used_mib", "power_w", "energy_mj", "sm_clock_mhz",
    "temp_c", "cpu_pct", "rss_mib", "host_mem_available_mib", "cpu_energy_uj",
    "monitor_cpu_s", "tree_cpu_s",
)
#: Columns only the file has (cumulative counters: the CPU package energy, the sampler's
#: own CPU time, the cell's processes' CPU seconds — :mod:`engine.measure.cores`): the
#: monitor's ``sample`` events leave them out.
FILE_ONLY_FIELDS = ("cpu_energy_uj", "monitor_cpu_s", "tree_cpu_s")
#: Fields of a monitor ``sample`` event (GPU fields None without a GPU; ``cpu_pct`` is % of
#: one core for the cell's process tree).
SAMPLE_EVENT_FIELDS = tuple(f for f in SAMPLE_FIELDS if f not in FILE_ONLY_FIELDS)
#: What the progress views keep of a ``sample`` event as a cell's latest sample: all but
#: the wall-clock ``time``.
LATEST_SAMPLE_FIELDS = tuple(f for f in SAMPLE_EVENT_FIELDS if f != "time")


#: Suffix of a samples file its sampler has not finished (see the module docstring).
PARTIAL_SUFFIX = ".partial"
#: The monitor's status file in the attempt folder (its pid, interval, device facts, state).
MONITOR_META = "monitor.json"


def group_samples_path(runs_dir: str | Path, group_id: str) -> Path:
    """Where the group's samples end up: ``<runs_dir>/samples/<group_id>.csv``."""
    return Path(runs_dir) / "samples" / f"{group_id}.csv"


def samples_on_disk(runs_dir: str | Path, group_id: str) -> Path | None:
    """The group's samples file as it is on disk: the finished ``.csv``, else the
    ``.csv.partial`` its sampler left, else None (no monitor ran). A 0-byte ``.partial``
    (a sampler killed, or on a full disk, before it wrote its header) holds nothing: it is
    removed here, where the attempt's row is made (the cell's, or the runner's for a
    killed cell, this run's or the next ``--resume``'s), so it neither survives the
    resume nor is named by a row (issue 43)."""
    final = group_samples_path(runs_dir, group_id)
    partial = final.with_name(final.name + PARTIAL_SUFFIX)
    if final.is_file():
        return final
    try:
        if partial.is_file() and partial.stat().st_size == 0:
            partial.unlink()
            return None
    except OSError:  # a read-only disk: it stays, and is named as what it is
        pass
    return partial if partial.is_file() else None


def format_sample_value(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return repr(value) if math.isfinite(value) else ""
    return str(value)


def read_samples(path: str | Path) -> list[dict[str, float | None]]:
    """A samples file as dicts of floats (``None`` for empty cells). A torn last line (a
    sidecar killed mid-write) is dropped."""
    out = []
    with open(path, newline="", encoding="utf-8") as fh:
        for row in csv.DictReader(fh):
            try:
                out.append({k: (float(v) if v not in ("", None) else None)
                            for k, v in row.items() if k is not None})
            except ValueError:
                continue
    return [r for r in out if r.get("t") is not None]


def write_slice(samples: list[dict[str, Any]], t0: float, t1: float, path: Path) -> Path:
    """The samples of ``[t0, t1]`` plus one on each side (for interpolation) as a CSV."""
    before = [s for s in samples if s["t"] < t0][-1:]
    after = [s for s in samples if s["t"] > t1][:1]
    rows = before + [s for s in samples if t0 <= s["t"] <= t1] + after
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(SAMPLE_FIELDS)
        for s in rows:
            writer.writerow([format_sample_value(s.get(k)) for k in SAMPLE_FIELDS])
    os.replace(tmp, path)
    return path
