"""Build CSV rows for a cell: the static part (known before any training, torch-free, so
the runner can record a cell that died without writing its own row). The measured part is
filled inside the cell (``engine.cell.main``: the executor's results, its ``ctx.group``
facts, the monitor's columns). A value not measured stays ``None`` → an empty cell."""

from __future__ import annotations

from typing import Any

from engine.measure.provenance import backend_flags, host_facts
from engine.results.values import new_group_id, timestamp_now


def group_static(spec: dict[str, Any]) -> dict[str, Any]:
    """Group-row columns known from the cell spec alone (see ``engine.cell.main`` for the spec)."""
    cell = spec["cell"]
    exp = cell["experiment"]
    facts = host_facts()
    return {
        "group_id": spec.get("group_id") or new_group_id(cell["executor"]),
        "exp_id": cell["exp_id"], "executor": cell["executor"],
        "compile": cell["compile_mode"] != "off", "mode": exp["type"], "size": exp["size"] or None,
        "K": len(cell["jobs"]), "max_parallel": None, "num_workers": 0,
        "scheduler": cell.get("scheduler"), "features": None,
        "scheduler_requested": cell.get("scheduler"), "features_requested": cell.get("features"),
        "rung": cell.get("rung"), "config_key": cell.get("config_key") or None,
        "workload_key": cell.get("workload_key") or None,
        "timestamp": timestamp_now(), "cpu_model": facts["cpu_model"],
        "cpu_cores": facts["cpu_cores"], "campaign_id": spec["campaign_id"],
        "cell_key": cell["key"], "pass": cell["pass_index"], "attempt": spec["attempt"],
        "compile_requested": cell["compile_mode"], "amp_requested": any(
            j["amp"] for j in cell["jobs"]),
        "host": facts["host"], "python_version": facts["python_version"],
        "fugue_tui_version": facts["fugue_tui_version"],
        "fugue_tui_commit": facts["fugue_tui_commit"], "campaign_hash": spec["campaign_hash"],
        "device": spec.get("device_requested") or spec["device"], "seed": spec["seed"], "passes": spec["passes"],
        "backend_flags": backend_flags(), "threads": spec.get("threads"),
    }


def failed_group_row(spec: dict[str, Any], status: str, error: str,
                     extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """A group row for a cell that ended without writing its own (crash, kill, bad input)."""
    row = group_static(spec)
    row.update(status=status, error=error[:500], **(extra or {}))
    return row
