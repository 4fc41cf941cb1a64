"""``fugue-tui --batch CAMPAIGN``: the headless front end of the runner.

Prints one plain line per lifecycle event and per job epoch, then a summary table of
``T_group`` and throughput per experiment and executor (means over this campaign's passes).
"""

from __future__ import annotations

import signal
import sys
from statistics import mean
from typing import Any

from rich.console import Console
from rich.table import Table

from engine.campaign import load_campaign
from engine.results import read_rows
from engine.runner import Runner


class PlainProgress:
    """Event consumer writing short lines (one per lifecycle event and epoch end)."""

    def __init__(self, total: int, stream=None):
        self.total = total
        self.stream = stream or sys.stdout
        self.done = 0

    def __call__(self, event: dict[str, Any]) -> None:
        kind = event.get("type")
        line = None
        if kind == "campaign_started":
            line = f"campaign: {event['cells']} cells, device {event['device']}, run folder {event['run_dir']}"
        elif kind == "cell_started":
            line = f"[{event['index']}/{self.total}] {event['label']} (attempt {event['attempt']})"
        elif kind == "phase" and event.get("phase") == "data_load":
            line = f"    datasets loaded in {event['seconds']:.2f} s"
        elif kind == "job_progress" and event.get("epoch_end"):
            extra = ""
            if event.get("val_acc") is not None:
                extra = f"  val_acc {event['val_acc']:.3f}"
            line = (f"    {event['job_id']}  epoch {event['epoch']}/{event['epochs']}  "
                    f"loss {event['loss']:.4f}{extra}  {event.get('train_sps', 0):,.0f} samples/s")
        elif kind == "summary":
            line = (f"    T_group {event['T_group']:.2f} s  throughput "
                    f"{event['throughput_group']:,.0f} samples/s  status {event['status']}")
        elif kind == "skipped" and "reason" in event:
            line = f"[{event['index']}/{self.total}] {event['label']}: skipped, {event['reason']}"
        elif kind in ("done", "failed", "killed") and "exit_code" in event:
            self.done += 1
            if kind != "done":
                line = f"    cell {kind}: {event.get('error') or event.get('reason', '')}"
        if line is not None:
            print(line, file=self.stream, flush=True)


def run_batch(path: str, overrides: dict[str, Any], dry_run: bool = False) -> int:
    """Run (or, with ``dry_run``, list) a campaign; return the process exit status:
    0 when every cell is ok; 1 when a cell failed or was skipped (cannot run here), after
    the rest ran; 130 on Ctrl-C or SIGTERM (after stopping the running cell's session)."""
    campaign = load_campaign(path, overrides)
    runner_probe = Runner(campaign)
    console = Console()
    if dry_run:
        table = Table(title=f"{len(runner_probe.cells)} cells of {path}", title_justify="left")
        for column in ("#", "experiment", "executor", "compile", "pass", "jobs", "cell key"):
            table.add_column(column)
        for cell in runner_probe.cells:
            table.add_row(str(cell.index), cell.exp_id, cell.executor, cell.compile_mode,
                          str(cell.pass_index), str(len(cell.jobs)), cell.key)
        console.print(table)
        return 0
    progress = PlainProgress(len(runner_probe.cells))
    runner_probe.on_event = progress
    # SIGTERM (a scheduler, `kill`) ends the campaign exactly like Ctrl-C does.
    previous = signal.signal(signal.SIGTERM, _raise_interrupt)
    try:
        outcome = runner_probe.run()
    finally:
        signal.signal(signal.SIGTERM, previous)
    print_summary(console, campaign.runs_dir / "master_groups.csv", outcome.campaign_id)
    failed = [o for o in outcome.outcomes if o.status != "ok"]
    for o in failed:
        where = f" (log: {o.log})" if o.log else ""
        print(f"{o.status}: {o.cell.label}: {o.error}{where}", file=sys.stderr)
    if outcome.interrupted:
        print(f"interrupted after {len(outcome.outcomes)} of {len(runner_probe.cells)} cells: "
              "the running cell was stopped and recorded as killed", file=sys.stderr)
        return 130
    return 0 if not failed else 1


def _raise_interrupt(signum, frame):
    raise KeyboardInterrupt


def print_summary(console: Console, groups_csv, campaign_id: str) -> None:
    """Mean ``T_group`` and throughput per experiment × executor over ok rows."""
    rows = [r for r in read_rows(groups_csv) if r.get("campaign_id") == campaign_id]
    table = Table(title=f"campaign {campaign_id}", title_justify="left")
    for column in ("experiment", "executor", "compile", "passes ok", "T_group s (mean)",
                   "throughput samples/s", "train throughput samples/s", "failed"):
        table.add_column(column, justify="right" if "s" in column[:1] else "left")
    groups: dict[tuple[str, str, str], list[dict[str, str]]] = {}
    for row in rows:
        groups.setdefault((row["exp_id"], row["executor"], row["compile_mode"] or "off"), []).append(row)
    for (exp_id, executor, compile_mode), members in groups.items():
        ok = [r for r in members if r["status"] == "ok"]
        table.add_row(exp_id, executor, compile_mode, str(len(ok)),
                      _mean(ok, "T_group", ".2f"), _mean(ok, "throughput_group", ",.0f"),
                      _mean(ok, "train_throughput_sps", ",.0f"), str(len(members) - len(ok)))
    console.print(table)


def _mean(rows: list[dict[str, str]], key: str, fmt: str) -> str:
    values = [float(r[key]) for r in rows if r.get(key)]
    return format(mean(values), fmt) if values else ""
