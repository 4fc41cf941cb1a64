"""The run screen's "speedup so far" line: each strategy cell's speedup over seq from the
rows this campaign has written up to now — the same analysis as the Results screen and
``fugue-tui report`` (:func:`engine.results.analysis.speedups`: ratio of mean ``T_group``,
the bootstrap interval once both sides have enough passes) — and the campaign's ETA.
Textual-free; :func:`speedup_line` reads files (call it from a worker), :func:`eta_seconds`
only the state.
"""

from __future__ import annotations

import math
from pathlib import Path

from engine.observe.state import CampaignState
from fugue_tui.format import fmt_duration


def speedup_line(runs_dir: Path, campaign: str, n_boot: int = 500) -> str:
    """``speedup so far: D_ens unified_model 1.20× [0.95, 1.51] · …`` for ``campaign``'s
    rows in ``runs_dir`` (empty while no strategy cell has a seq baseline yet)."""
    from engine.errors import FugueError
    from engine.results.analysis import speedups
    from engine.results.load import Runs, load_runs
    from fugue_tui.figures import cell_label

    try:
        runs = load_runs(runs_dir)
    except FugueError:
        return ""
    groups = runs.groups[runs.groups["campaign_id"] == campaign]
    if not len(groups):
        return ""
    jobs = runs.jobs
    if len(jobs):
        jobs = jobs[jobs["group_id"].isin(set(groups["group_id"]))]
    table = speedups(Runs(groups, jobs, list(runs.sources)), n_boot=n_boot)
    parts = []
    for row in table.to_dict("records"):
        value = row.get("speedup")
        if row["executor"] == "seq" or value is None or not math.isfinite(value):
            continue
        low, high = row.get("ci_low"), row.get("ci_high")
        interval = (f" [{low:.2f}, {high:.2f}]" if low is not None and high is not None
                    and math.isfinite(low) and math.isfinite(high)
                    else f" (n={int(row['n_strategy'])}/{int(row['n_seq'])}, no interval yet)")
        parts.append(f"{cell_label(row)} {value:.2f}×{interval}")
    return ("speedup so far: " + " · ".join(parts)) if parts else ""


def comparable(state: CampaignState) -> bool:
    """Whether some experiment has a finished seq cell and a finished cell of another
    executor: only then can a speedup exist (loading the rows and the analysis, pandas
    included, cost a dashboard about a second of CPU: not for nothing)."""
    from fugue_tui.app.widgets.cell_table import split_label

    seen: dict[str, set[str]] = {}
    for cell in state.cells.values():
        if cell.state == "done":
            exp, executor, _, _ = split_label(cell.label)
            seen.setdefault(exp, set()).add(executor)
    return any("seq" in executors and len(executors) > 1 for executors in seen.values())


def eta_seconds(state: CampaignState, now: float) -> float | None:
    """Seconds until the campaign ends, from what its cells took so far: each queued cell
    costs the mean duration of the ended cells of its executor (of all ended cells when its
    executor has none yet), a running one that less what it has run. None before any cell
    ended."""
    from fugue_tui.app.widgets.cell_table import split_label

    took: dict[str, list[float]] = {}
    for cell in state.cells.values():
        if cell.ended and cell.started_ts is not None and cell.ended_ts is not None:
            took.setdefault(split_label(cell.label)[1], []).append(
                cell.ended_ts - cell.started_ts)
    every = [t for times in took.values() for t in times]
    if not every:
        return None
    left = 0.0
    for cell in state.cells.values():
        if cell.state != "queued" and not cell.active:
            continue
        times = took.get(split_label(cell.label)[1]) or every
        cost = sum(times) / len(times)
        if cell.active and cell.started_ts is not None:
            cost = max(0.0, cost - (now - cell.started_ts))
        left += cost
    return left


def eta_text(state: CampaignState, now: float) -> str:
    eta = eta_seconds(state, now)
    return "" if eta is None else f"ETA {fmt_duration(eta)} (cells left at their executor's mean)"
