"""``--json``: the machine-readable form of ``list``, ``validate``, ``report``,
``selfcheck`` and the dry runs' plans (``--batch C --dry-run``, ``run --dry-run``).

Every document is one JSON object with ``"schema"`` (``"fugue-tui/list"``,
``"fugue-tui/validate"``, ``"fugue-tui/report"``, ``"fugue-tui/plan"``,
``"fugue-tui/selfcheck"``, ``"fugue-tui/models"``) and ``"version"``
(:data:`SCHEMA_VERSION`; ``"fugue-tui/batch"`` is a stream of such objects, one a line:
:mod:`fugue_tui.console.batch_json`): the JSON Schema of each is ``fugue_tui/schemas/<kind>.v1.json``,
described in docs/json.md. A later version adds keys (a reader ignores those it does not
know); removing or changing the meaning of one raises ``version``.

Missing values are ``null``: never NaN or Infinity (not JSON: the documents are written
with ``allow_nan=False``), never 0, never ``""``. Torch-free.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any

#: The version of every document's schema (``"version"``).
SCHEMA_VERSION = 1
#: Where the JSON Schemas live (one per kind: ``<kind>.v<version>.json``).
SCHEMAS = Path(__file__).resolve().parent / "schemas"
KINDS = ("list", "validate", "report", "plan", "batch", "selfcheck", "models")


def document(kind: str, **body: Any) -> dict[str, Any]:
    """A document of ``kind`` (one of :data:`KINDS`) with ``body``, cleaned (:func:`clean`)."""
    if kind not in KINDS:
        raise ValueError(f"unknown document kind {kind!r}")
    return {"schema": f"fugue-tui/{kind}", "version": SCHEMA_VERSION, **clean(body)}


def clean(value: Any) -> Any:
    """``value`` with every missing mark as None: NaN, infinities, pandas' NA and ``""``;
    numpy scalars as Python numbers (an integral float stays a float: a column's type
    does not change from one row to the next)."""
    if isinstance(value, dict):
        return {str(k): clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [clean(v) for v in value]
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, str):
        return value if value != "" else None
    try:
        import numpy as np

        if isinstance(value, np.bool_):
            return bool(value)
        if isinstance(value, np.integer):
            return int(value)
        if isinstance(value, np.floating):
            value = float(value)
    except ImportError:  # numpy comes with pandas; without it nothing here is numpy's
        pass
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, int):
        return value
    try:
        import pandas as pd

        if value is pd.NA or value is pd.NaT:
            return None
    except ImportError:
        pass
    return str(value)


def dump(doc: dict[str, Any], stream=None) -> None:
    """Write ``doc`` (from :func:`document`) as one JSON text and a newline."""
    stream = stream or sys.stdout
    stream.write(json.dumps(doc, allow_nan=False, ensure_ascii=False, indent=1))
    stream.write("\n")
    stream.flush()


def schema(kind: str) -> dict[str, Any]:
    """The JSON Schema of ``kind``'s documents (version :data:`SCHEMA_VERSION`)."""
    return json.loads((SCHEMAS / f"{kind}.v{SCHEMA_VERSION}.json").read_text())


# --------------------------------------------------------------------------- builders

def experiment_entry(exp, ok: bool, reason: str) -> dict[str, Any]:
    """One experiment of ``list`` / ``validate``."""
    return {
        "id": exp.id, "type": exp.type, "models": list(exp.models()),
        "datasets": list(exp.datasets()), "k": exp.k, "batch_size": exp.batch_size,
        "epochs": exp.epochs, "lr": exp.lr,
        "optimizer": exp.optimizer if not exp.members else "mixed",
        "search_space": ({k: list(v) for k, v in exp.search_space.items()}
                         if exp.search_space else None),
        "amp": bool(exp.amp), "precision": exp.precision, "size": exp.size or None,
        "available": bool(ok), "reason": None if ok else reason,
    }


def report_cells(runs, by_campaign: bool = False,
                 baseline: str | None = None) -> list[dict[str, Any]]:
    """The report's cells (:func:`engine.results.analysis.speedups` merged with
    :func:`~engine.results.analysis.cell_status`, as the tables show them): every cell
    column, the figures, ``ok`` / ``not_ok`` row counts, ``ci_low`` / ``ci_high`` (null
    without an interval) and ``parity`` (null when not computed). ``baseline``: the
    precision every cell is compared with (``--baseline fp32``), as in the tables."""
    import pandas as pd

    from engine.results.analysis import cell_columns, cell_status, speedups

    keys = cell_columns(by_campaign)
    table = speedups(runs, by_campaign=by_campaign, baseline_precision=baseline)
    status = cell_status(runs, by_campaign=by_campaign)
    frame = table
    if len(status):  # the tables' order: cells with an ok row, then those without any
        frame = table.merge(status, on=keys, how="left", sort=False)
        extra = status.merge(table[keys], on=keys, how="left", indicator=True)
        extra = extra[extra["_merge"] == "left_only"].drop(columns="_merge")
        if len(extra):
            frame = extra if not len(frame) else pd.concat([frame, extra], ignore_index=True)
    if not len(frame):
        return []
    frame = frame.drop(columns=[c for c in ("ci",) if c in frame.columns])
    cells = []
    for row in frame.to_dict("records"):
        cell = {k: row.get(k) for k in frame.columns}
        if cell.get("parity") == "n/a":
            cell["parity"] = None
        for count in ("ok", "not_ok", "n_strategy", "n_seq", "energy_n", "acc_n", "busy_n",
                      "short_n", "seq_busy_n"):
            value = cell.get(count)
            cell[count] = 0 if value is None or (isinstance(value, float)
                                                 and math.isnan(value)) else int(value)
        k = cell.get("K")
        cell["K"] = None if k is None or pd.isna(k) else int(k)
        cells.append(cell)
    return cells


def plan_devices(slots) -> list[dict[str, Any]]:
    """The devices of a multi-device campaign (``engine.runner.placement.Slot``, in the
    order of ``devices``): ``device`` (1-based), ``entry`` (as written, or ``cuda:N`` for
    ``"auto"``), ``uuid``, ``name`` (the GPU model NVML gives), ``parent_uuid`` (a MIG
    slice's physical GPU, else null), ``cpus`` (the host cores its cells are pinned to;
    null: not pinned) and ``placement`` (the rows' ``placement`` text)."""
    return [{"device": s.index + 1, "entry": s.gpu.get("entry"), "uuid": s.uuid,
             "name": s.gpu.get("name"), "parent_uuid": s.gpu.get("parent_uuid"),
             "cpus": list(s.cpus) or None, "placement": s.describe(len(slots))}
            for s in slots]


def _packing(cell) -> dict[str, Any]:
    """A packed cell's (mp/ray ``devices`` option) ``packed_devices`` (GPU UUIDs, job i on
    the (i mod n)-th) and ``jobs_per_device`` (null: not limited); {} when it packs none."""
    devices = cell.options.get("devices")
    if not devices:
        return {}
    return {"packed_devices": list(devices),
            "jobs_per_device": cell.options.get("jobs_per_device")}


def plan_cells(planned, slot_of=None, n_devices: int = 1) -> list[dict[str, Any]]:
    """A dry run's cells (:meth:`engine.runner.supervisor.Runner.plan`). With several
    devices (``n_devices`` > 1, ``slot_of``: a cell's ``Slot``, the runner's
    ``slot_of``) each cell has ``placement``: ``device`` (1-based), ``uuid`` and the
    ``placement`` text its rows will carry; a packed cell has :func:`_packing`'s keys."""
    out = []
    for p in planned:
        c = p.cell
        extra = dict(_packing(c))
        if slot_of is not None and n_devices > 1:
            slot = slot_of(c)
            extra["placement"] = {"device": slot.index + 1, "uuid": slot.uuid,
                                  "placement": slot.describe(n_devices)}
        if c.max_parallel_method:
            extra["max_parallel_method"] = c.max_parallel_method
        out.append({
            "index": c.index, "exp_id": c.exp_id, "executor": c.executor,
            "compile_mode": c.compile_mode, "pass": c.pass_index, "jobs": len(c.jobs),
            "scheduler": c.scheduler, "rung": c.rung, "features": c.features,
            "max_parallel": c.max_parallel, "variant": c.variant, "label": c.label,
            "slug": c.slug, "key": c.key, "config_key": c.config_key,
            "workload_key": c.workload_key, "would": "skip" if p.skip else "run",
            "skip_reason": p.skip or None,
            "reused_from": ({"campaign_id": p.reused.get("campaign_id"),
                             "attempt": p.reused.get("attempt"),
                             "timestamp": p.reused.get("timestamp")} if p.reused else None),
            **extra,
        })
    return out
