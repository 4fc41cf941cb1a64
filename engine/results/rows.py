"""Build CSV rows for a cell: the static part (known before any training, torch-free, so
the runner can record a cell that died without writing its own row). The measured part is
filled inside the cell (``engine.cell.rows``: the executor's results, its ``ctx.group``
facts, the monitor's columns). A value not measured stays ``None`` → an empty cell.

Rows are :class:`GroupRow` / :class:`JobRow`: dicts that check every key against the column
registry (:mod:`engine.results.columns`) as it is set, so a misspelt column fails where it
is written (an executor's ``ctx.group["max_paralel"] = 2`` fails at that line, naming
``max_parallel``), not when the rows are appended after the whole group trained."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engine.measure.provenance import (
    WINDOW_RULE,
    backend_flags,
    host_facts,
    stack_versions,
)
from engine.measure.samples import MONITOR_META, samples_on_disk
from engine.precision import AMP_PRECISIONS, applied, legacy_request
from engine.results.columns import GROUPS_FILE, INDIVIDUAL_FILE, check_names, header
from engine.results.values import new_group_id, row_stamps

if TYPE_CHECKING:  # engine.cell imports this module: the spec's class only for the types
    from engine.cell.protocol import CellRunSpec
    from engine.define.matrix import CellSpec


class CheckedRow(dict):
    """A row (or part of one) of :attr:`file`: a dict whose keys are checked against the
    registry as they are set (``row[name] = v``, ``update``, ``setdefault``, ``|=``), so a
    misspelt column fails at once, where it is written, not when the row is appended."""

    file = GROUPS_FILE

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__()
        self.update(*args, **kwargs)

    def __setitem__(self, name: str, value: Any) -> None:
        check_names(self.file, (name,))
        super().__setitem__(name, value)

    def update(self, *args: Any, **kwargs: Any) -> None:  # type: ignore[override]
        items = dict(*args, **kwargs)
        check_names(self.file, items)
        super().update(items)

    def setdefault(self, name: str, default: Any = None) -> Any:
        if name not in self:
            self[name] = default
        return self[name]

    def __ior__(self, other: Any) -> CheckedRow:  # type: ignore[override]
        self.update(other)
        return self

    def copy(self) -> CheckedRow:
        return type(self)(self)


class GroupRow(CheckedRow):
    """Columns of a ``master_groups.csv`` row (``CellContext.group``, the cell's group row)."""

    file = GROUPS_FILE


class JobRow(CheckedRow):
    """Columns of a ``master_individual.csv`` row."""

    file = INDIVIDUAL_FILE


def _cpu_list(cpus: list[int] | None) -> str | None:
    """``0-3,6`` for the cores a cell was pinned to; None when it was not."""
    if not cpus:
        return None
    from engine.results.values import cpu_list

    return cpu_list(cpus)


def group_static(spec: CellRunSpec) -> GroupRow:
    """Group-row columns known from the cell spec alone (see ``engine.cell.main`` for the
    spec)."""
    cell = spec.cell
    exp = cell.experiment
    facts = host_facts()
    # The cell's requested precision (None: the jobs' legacy amp flags) and, for the
    # backend flags every process of the cell sets, the one that runs on its device.
    requested = cell.precision
    ran = applied(requested, str(spec.device).split(":")[0], True)[0] if requested else None
    return GroupRow({
        "group_id": spec.group_id or new_group_id(cell.executor),
        "exp_id": cell.exp_id, "executor": cell.executor,
        "compile": cell.compile_mode != "off", "mode": exp["type"], "size": exp["size"] or None,
        "K": len(cell.jobs), "max_parallel": None, "num_workers": 0,
        "scheduler": cell.scheduler, "features": None,
        "scheduler_requested": cell.scheduler, "features_requested": cell.features,
        "rung": cell.rung, "config_key": cell.config_key or None,
        "workload_key": cell.workload_key or None,
        **row_stamps(), "cpu_model": facts["cpu_model"],
        "cpu_cores": facts["cpu_cores"], "campaign_id": spec.campaign_id,
        "cell_key": cell.key, "pass": cell.pass_index, "attempt": spec.attempt,
        "compile_requested": cell.compile_mode,
        "amp_requested": requested in AMP_PRECISIONS if requested else any(
            j["amp"] for j in cell.jobs),
        "precision_requested": requested or legacy_request(any(j["amp"] for j in cell.jobs)),
        "host": facts["host"], "python_version": facts["python_version"],
        "fugue_tui_version": facts["fugue_tui_version"],
        "fugue_tui_commit": facts["fugue_tui_commit"], "campaign_hash": spec.campaign_hash,
        "device": spec.device_requested or spec.device, "seed": spec.seed,
        "passes": spec.passes, "backend_flags": backend_flags(ran), "threads": spec.threads,
        # The device under test as the runner resolved it (NVML's UUID): known before the
        # cell starts, so even a cell that died first is recorded on its device.
        "gpu_uuid": spec.gpu_uuid,
        # A multi-device campaign's placement and core share (issue 27), known from the spec.
        "placement": spec.placement,
        "cpu_affinity": _cpu_list(spec.cpus),
        # A cluster campaign's node (issue 28), known from the spec the node's agent wrote.
        "node": spec.node,
        # The T_group rule this version measures under: provenance of the code, like its
        # version, so a row the runner writes for a killed cell carries it too.
        "window_rule": WINDOW_RULE,
        # How the cell's process began (engine.cell.zygote); the runner adds it to the rows
        # it writes for its attempts, a cell to its own.
        "cell_start": spec.cell_start,
        # The stack's versions, torch-free (issue 29): a row the runner writes for a cell
        # killed before it reported carries them too (torch's from its version.py); the
        # cell's own torch facts replace torch's and cuDNN's with what it loaded.
        **stack_versions(),
        # the runner's plugins (the cell's own replace them in the rows it writes)
        "plugin_versions": spec.plugin_versions or None,
        # The user experiments file's bytes, apart from campaign_hash (which --by-campaign
        # groups by): an edited experiment definition shows here.
        "experiments_file_hash": spec.experiments_file_hash,
        # How many jobs the plan let run at once and how that was decided (user, profile,
        # all: engine.profile.auto); "all" is the cell's K. Empty for seq (no such option).
        **_parallel_plan(cell),
        # A stream cell's identity (issue 51), known from the spec: the row the runner
        # writes for a killed stream cell still groups with its stream (it had neither).
        **_stream_identity(cell),
    })


def _stream_identity(cell: CellSpec) -> dict[str, Any]:
    """``stream_sha256`` and ``stream_jobs`` of a stream cell, as its own row has them
    (``engine.cell.main``); nothing for a batch cell."""
    if not cell.stream:
        return {}
    return {"stream_sha256": cell.stream.get("sha256"),
            "stream_jobs": len(cell.arrivals) if cell.arrivals is not None else None}


def _parallel_plan(cell: CellSpec) -> dict[str, Any]:
    method = cell.max_parallel_method
    if not method:
        return {}
    k = len(cell.jobs)
    planned = cell.max_parallel
    return {"max_parallel_resolved": min(planned, k) if planned else k,
            "max_parallel_method": method,
            "max_parallel_profile": cell.max_parallel_profile or None}


def failed_group_row(spec: CellRunSpec, status: str, error: str,
                     extra: dict[str, Any] | None = None) -> GroupRow:
    """A group row for a cell that ended without writing its own (crash, kill, bad input):
    the spec's columns (its ``group_id`` is the one the cell ran as), what the cell's
    monitor left (:func:`monitor_leftovers`), then ``extra``."""
    row = group_static(spec)
    row.update(monitor_leftovers(spec))
    row.update(status=status, error=error[:500], **(extra or {}))
    return row


def monitor_leftovers(spec: CellRunSpec) -> dict[str, Any]:
    """What the monitor of the spec's attempt left on disk, as group columns: the samples
    file it wrote (``samples_file``, relative to the runs folder, under the name it has:
    ``.csv.partial`` when its sampler never finished it — :mod:`engine.measure.samples`),
    its interval and the device facts it read from NVML (``monitor.json`` in the attempt
    folder). Nothing when no monitor started (or the spec names no group)."""
    out: dict[str, Any] = {}
    group_id = spec.group_id
    if not group_id:
        return out
    samples = samples_on_disk(spec.runs_dir, group_id)
    if samples is not None:
        out["samples_file"] = os.path.relpath(samples, spec.runs_dir)
    try:
        meta = json.loads((Path(spec.events).parent / MONITOR_META).read_text())
    except (OSError, ValueError):
        return out
    if not isinstance(meta, dict):
        return out
    if meta.get("interval_s") is not None:
        out["monitor_interval_s"] = meta["interval_s"]
    gpu = meta.get("gpu") or {}
    out.update({k: v for k, v in gpu.items() if v is not None and k in header(GROUPS_FILE)})
    return out
