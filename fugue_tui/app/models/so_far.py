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
from engine.results.derived import BASELINE_EXECUTOR
from fugue_tui.format import fmt_duration


def speedup_line(runs_dir: Path, campaign: str, n_boot: int = 500) -> str:
    """``speedup so far: D_ens unified_model 1.20× [0.95, 1.51] · …`` for ``campaign``'s
    rows in ``runs_dir`` (empty while no strategy cell has a seq baseline yet)."""
    parts = speedup_parts(runs_dir, campaign, n_boot)
    return ("speedup so far: " + " · ".join(" ".join(p) for p in parts)) if parts else ""


def speedup_parts(runs_dir: Path, campaign: str,
                  n_boot: int = 500) -> list[tuple[str, str, str]]:
    """Each strategy cell's ``(label, "1.20×", "[0.95, 1.51]")`` for ``campaign``'s rows in
    ``runs_dir`` (``"1.20× on 1.93 cores"`` where its rows recorded ``cores_used``; the
    interval ``(n=1/1, no interval yet)`` while a side has too few passes); empty while no
    strategy cell has a seq baseline yet. :func:`fit_strip` lays them out."""
    from engine.errors import FugueError
    from engine.results.analysis import speedups
    from engine.results.load import Runs, load_runs
    from fugue_tui.report.figures import cell_label

    try:
        runs = load_runs(runs_dir)
    except FugueError:
        return []
    groups = runs.groups[runs.groups["campaign_id"] == campaign]
    if not len(groups):
        return []
    jobs = runs.jobs
    if len(jobs):
        jobs = jobs[jobs["group_id"].isin(set(groups["group_id"]))]
    table = speedups(Runs(groups, jobs, list(runs.sources)), n_boot=n_boot)
    parts = []
    for row in table.to_dict("records"):
        value = row.get("speedup")
        if row["executor"] == BASELINE_EXECUTOR or value is None or not math.isfinite(value):
            continue
        low, high = row.get("ci_low"), row.get("ci_high")
        interval = (f"[{low:.2f}, {high:.2f}]" if low is not None and high is not None
                    and math.isfinite(low) and math.isfinite(high)
                    else f"(n={int(row['n_strategy'])}/{int(row['n_seq'])}, no interval yet)")
        # the cores behind it (issue 46: mp and ray use several, seq one), when recorded
        cores = row.get("cores_used_mean")
        on = (f" on {cores:.2f} cores" if cores is not None and math.isfinite(cores)
              else "")
        parts.append((cell_label(row), f"{value:.2f}×{on}", interval))
    return parts


def fit_strip(parts: list[tuple[str, str, str]], eta: float | None, width: int) -> str:
    """The run header's strip — each speedup so far and the ETA — in one line of
    ``width`` cells (the header is at most three lines: a strip that wrapped was cut off,
    at 160 columns too). Tries, in order: everything; the ETA without its explanation;
    the speedups without their intervals; without their configuration (experiment and
    executor only); as many of those as fit and ``+N more (v: results)``. The ETA is kept
    whole in each."""
    eta_long = (f"ETA {fmt_duration(eta)} (cells left at their executor's mean)"
                if eta is not None else "")
    eta_short = f"ETA {fmt_duration(eta)}" if eta is not None else ""
    full = [" ".join(p) for p in parts]
    bare = [f"{label} {value}" for label, value, _ in parts]
    # the experiment and executor only (a configuration such as vf:1,s:0,fl:0 dropped)
    short = [" ".join([*label.split()[:2], value]) for label, value, _ in parts]

    def line(head: str, items: list[str], tail: str) -> str:
        body = (head + " · ".join(items)) if items else ""
        return " · ".join(p for p in (body, tail) if p)

    for head, items, tail in (("speedup so far: ", full, eta_long),
                              ("speedup so far: ", full, eta_short),
                              ("speedup so far: ", bare, eta_short),
                              ("so far: ", bare, eta_short),
                              ("so far: ", short, eta_short)):
        text = line(head, items, tail)
        if len(text) <= width:
            return text
    for shown in range(len(short) - 1, -1, -1):
        more = f"+{len(short) - shown} more (v: results)"
        text = line("so far: ", [*short[:shown], more], eta_short)
        if len(text) <= width or shown == 0:
            return text if len(text) <= width else text[: max(0, width - 1)] + "…"
    return line("", [], eta_short)


def comparable(state: CampaignState) -> bool:
    """Whether some experiment has a finished seq cell and a finished cell of another
    executor: only then can a speedup exist (loading the rows and the analysis, pandas
    included, cost a dashboard about a second of CPU: not for nothing)."""
    from fugue_tui.app.models.cells import split_label

    seen: dict[str, set[str]] = {}
    for cell in state.cells.values():
        if cell.state == "done":
            exp, executor, _, _ = split_label(cell.label)
            seen.setdefault(exp, set()).add(executor)
    return any(BASELINE_EXECUTOR in executors and len(executors) > 1 for executors in seen.values())


def eta_seconds(state: CampaignState, now: float) -> float | None:
    """Seconds until the campaign ends, from what its cells took so far: each queued cell
    costs the mean duration of the ended cells of its executor (of all ended cells when its
    executor has none yet), a running one that less what it has run. None before any cell
    ended."""
    from fugue_tui.app.models.cells import split_label

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
