"""Part ``fixed_cost``: what a cell costs besides training, per executor and per start.

``python -m bench.fixed_cost [--reps N] [--executors seq unified_model ...]`` runs real
campaigns through the runner (in this process, as ``python -m engine.runner`` runs them) of
one fixed cell per executor: one job, one training step (an mlp on the wine data, one epoch
of one batch: training takes milliseconds), the monitor on. The figure with the target:

* ``fixed_cost_<executor>``: the cell's **total wall time from the runner's decision to
  start it until its rows are durable** (the runner's ``cell_started`` event minus its
  ``start_s``, to the cell's ``summary`` event, which follows the rows' locked, fsync'ed
  append). ``T_group`` is inside it, so moving work across the group window's boundary
  cannot improve it. Targets: ≤ 3 s for seq and unified_model, ≤ 8 s for ray (issue 20: ray's runtime starts
  without the head processes a cell never uses, and its teardown no longer waits on them);
  mp none.

Each repetition measures both starts, interleaved: ``zygote`` (the cell forked from the
runner's pre-warmed parent, the default) and ``spawn`` (a fresh interpreter that imports
torch, ``FUGUE_CELL_START=spawn``: the start before the zygote), each in a campaign of its
own. The zygote's own start-up and imports are paid once per campaign, before its first
cell is decided on (``zygote_warm``: reported, in no cell's figure).

Components of the same wall time (seconds, from the events):

* ``start``: decision → the cell's ``started`` event: the runner's spec, scratch folder and
  ``cell.pid``, and the fork (zygote) or the interpreter's start and its first imports
  (spawn);
* ``imports``: the cell's ``imports`` phase (torch and the engine, spawn; the per-cell
  set-up only, zygote);
* ``data_load``, ``monitor_start`` (the sidecar's start-up, between data load and setup),
  ``setup``, ``T_group``, ``teardown``;
* ``rows``: the window's end (teardown done) → rows durable: the monitor's last sample,
  the group's facts and the rows' append;
* ``after_rows`` (not in the fixed cost): rows durable → the runner's verdict (the cell's
  exit and the runner noticing it).

Protocol: one untimed campaign per start first (the bundled dataset's cache, the disk
cache), then ``--reps`` (default 5) repetitions, the starts' order and the executors' order
rotating. ``--note`` adds a remark to the notes of the figures with a target (say,
"indicative: a loaded machine").
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

PART = "fixed_cost"
TARGETS = {"seq": "<=3", "unified_model": "<=3", "ray": "<=8", "mp": ""}
STARTS = ("zygote", "spawn")
EXPERIMENTS = """
[experiments.X_fixed]
type = "ensemble"
model = "mlp"
dataset = "wine"
k = 1
batch_size = 142   # the wine holdout split's training samples: one step per epoch
epochs = 1
lr = 0.01
optimizer = "sgd"
"""
COMPONENTS = ("start", "imports", "data_load", "monitor_start", "setup", "T_group",
              "teardown", "rows")


def run_campaign(tmp: Path, name: str, start: str, executors: list[str]
                 ) -> tuple[dict[str, dict[str, float]], float | None]:
    """One campaign of the fixed cell under ``executors`` (in that order), its cells started
    by ``start``. Returns, per executor, its fixed cost and components (seconds), and the
    zygote's warm-up (None without one).

    Raises:
        RuntimeError: a cell did not end ok, or did not start as asked.
    """
    from engine.define.campaign import parse_campaign
    from engine.events import is_runner_event
    from engine.runner.supervisor import Runner

    doc = {"name": name, "experiments": "X_fixed", "executors": executors,
           "runs_dir": str(tmp / "runs"), "device": "cpu", "threads": 1,
           "experiments_file": str(tmp / "exps.toml")}
    events: list[dict[str, Any]] = []
    outcome = Runner(parse_campaign(doc, "bench"), on_event=events.append,
                     cell_start=start).run()
    if outcome.exit_code != 0:
        raise RuntimeError(f"campaign {name}: " + "; ".join(
            f"{o.cell.label}: {o.status} {o.error}" for o in outcome.outcomes))
    warm = next((e.get("warm_s") for e in events if e["type"] == "zygote"), None)
    out = {}
    for started in [e for e in events if e["type"] == "cell_started"]:
        if started.get("start") != start:
            raise RuntimeError(f"{started['label']} started by {started.get('start')}, "
                               f"not {start} (see runner.jsonl)")
        own = [e for e in events if e.get("cell") == started["cell"]
               and e.get("attempt") == started["attempt"] and not is_runner_event(e)]
        verdict = next(e for e in events if is_runner_event(e) and e["type"] == "done"
                       and e.get("cell") == started["cell"])
        out[started["label"].split()[1]] = split(started, own, verdict)
    return out, warm


def split(started: dict[str, Any], cell_events: list[dict[str, Any]],
          verdict: dict[str, Any]) -> dict[str, float]:
    """One cell's fixed cost and its components (the module docstring) from the runner's
    ``cell_started`` and ``done`` events and the cell's own events."""
    def first(kind: str, **match: Any) -> dict[str, Any]:
        return next(e for e in cell_events
                    if e["type"] == kind and all(e.get(k) == v for k, v in match.items()))

    decided = started["ts"] - started["start_s"]
    cell_started = first("started")
    phase = {p: first("phase", phase=p) for p in ("imports", "data_load", "setup", "teardown")}
    summary = first("summary")
    setup_s = phase["setup"]["seconds"]
    parts = {
        "start": cell_started["ts"] - decided,
        "imports": phase["imports"]["seconds"],
        "data_load": phase["data_load"]["seconds"],
        "monitor_start": (phase["setup"]["ts"] - setup_s) - phase["data_load"]["ts"],
        "setup": setup_s,
        "T_group": summary["T_group"],
        "teardown": phase["teardown"]["seconds"],
        "rows": summary["ts"] - phase["teardown"]["ts"],
        "after_rows": verdict["ts"] - summary["ts"],
    }
    parts["fixed_cost"] = summary["ts"] - decided
    return parts


def main(argv: list[str] | None = None) -> int:
    from bench import prog

    parser = argparse.ArgumentParser(prog=prog(PART), description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reps", type=int, default=5, help="repetitions (default 5)")
    parser.add_argument("--executors", nargs="+", default=["seq", "unified_model"],
                        help="default: seq unified_model (the ones with a 3 s target)")
    parser.add_argument("--note", default="",
                        help="a remark added to the note of the figures with a target")
    parser.add_argument("--no-write", action="store_true", help="print only")
    parser.add_argument("--results-dir", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    from bench import results as bench_results
    from engine.plugins import load_plugins
    from engine.registry import EXECUTORS

    load_plugins()
    unknown = [e for e in args.executors if e not in EXECUTORS]
    if unknown:
        parser.error(f"unknown executor(s) {', '.join(unknown)}")
    executors = args.executors
    command = (f"python -m bench.{PART} --reps {args.reps} --executors {' '.join(executors)}"
               + (f" --note {args.note!r}" if args.note else ""))
    keys = COMPONENTS + ("after_rows", "fixed_cost")
    values: dict[str, dict[str, dict[str, list[float]]]] = {
        k: {s: {e: [] for e in executors} for s in STARTS} for k in keys}
    warm: list[float] = []
    load: dict[str, list[float]] = {"machine": []}
    with tempfile.TemporaryDirectory(prefix="bench-fixed-") as tmp_name:
        tmp = Path(tmp_name)
        (tmp / "exps.toml").write_text(EXPERIMENTS)
        for start in STARTS:  # warm-up
            run_campaign(tmp, f"warm-{start}", start, executors)
        for rep in range(args.reps):
            starts = STARTS if rep % 2 == 0 else STARTS[::-1]
            order = executors[rep % len(executors):] + executors[:rep % len(executors)]
            for start in starts:
                cells, warm_s = run_campaign(tmp, f"rep{rep + 1}-{start}", start, order)
                if warm_s is not None:
                    warm.append(warm_s)
                for name, parts in cells.items():
                    for key in keys:
                        values[key][start][name].append(parts[key])
            load["machine"].append(os.getloadavg()[0])
            print(f"rep {rep + 1}/{args.reps}: " + ", ".join(
                f"{n} {s} {values['fixed_cost'][s][n][-1]:.2f} s" for n in executors
                for s in STARTS) + f"; load {load['machine'][-1]:.2f}", flush=True)
    for name in executors:
        print(f"{name}: median fixed cost " + ", ".join(
            f"{s} {statistics.median(values['fixed_cost'][s][name]):.2f} s" for s in STARTS))
    if args.no_write:
        return 0
    Figure = bench_results.Figure
    run_id = bench_results.new_run_id()
    prov = bench_results.provenance(command)
    remark = f" ({args.note})" if args.note else ""
    rows = []
    for name in executors:
        rows += bench_results.figure_rows(
            PART, Figure(f"fixed_cost_{name}", "s", target=TARGETS.get(name, ""),
                         note=f"{name}: a 1-job 1-step cell's wall time from the runner's "
                              f"decision to start it until its rows are durable; zygote: "
                              f"forked from the runner's pre-warmed parent, spawn: a fresh "
                              f"interpreter (the old start), measured beside it{remark}"),
            {s: values["fixed_cost"][s][name] for s in STARTS}, run_id, prov)
    for component in keys[:-1]:
        rows += bench_results.figure_rows(
            PART, Figure(component, "s",
                         note="component of a fixed cell's wall time (module docstring)"),
            {f"{name} {s}": values[component][s][name] for name in executors
             for s in STARTS}, run_id, prov)
    rows += bench_results.figure_rows(
        PART, Figure("zygote_warm", "s", note="the zygote's start and imports, once per "
                                              "campaign before its first cell"),
        {"zygote": warm}, run_id, prov)
    rows += bench_results.figure_rows(PART, Figure("load_1min", "load"), load, run_id, prov)
    bench_results.publish(PART, rows, args.results_dir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
