"""Part ``fixed_cost``: what a cell costs besides training, per executor.

``python -m bench.fixed_cost [--reps N] [--executors seq mp ray unified_model]`` runs a
tiny real cell (two mlp members on the wine data, one epoch: training is a few
milliseconds) for each executor, as a campaign would — ``python -m engine.cell`` in a fresh
process, the monitor on — and splits its wall time (process spawn to exit) with the cell's
own events and group row:

* ``startup``: spawn → the cell's ``started`` event (interpreter, ``engine.cell.main``'s imports);
* ``imports``: torch, the engine, plugins (``phase imports``);
* ``data_load``: host dataset load (``data_load_s``), with the bundled-dataset cache warm
  (the warm-up cell fills it, as a machine's first cell does; ``FUGUE_NO_DATASET_CACHE=1``
  in the environment measures scikit-learn's own load instead);
* ``monitor_start`` … everything between data load and setup (the sidecar's start);
* ``setup``: executor setup (``setup_s``: MPS daemon, ``ray.init`` and actors);
* ``T_group``: the group window (training, which is tiny here, plus per-job work an
  executor does inside the window: mp's worker processes, ray's per-trial work);
* ``teardown``: executor teardown (``phase teardown``);
* ``fixed_cost``: wall − T_group, the figure with the targets (≤ 3 s for seq and
  unified_model, ≤ 8 s for ray on this machine — issue 20: ray's runtime starts without the
  head processes a cell never uses, and its teardown no longer waits on them; mp has no
  target).

Protocol: one warm-up cell per executor, then ``--reps`` (default 5) repetitions with the
executors' order rotating.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from engine.cell.protocol import CellRunSpec

PART = "fixed_cost"
TARGETS = {"seq": "<=3", "unified_model": "<=3", "ray": "<=8", "mp": ""}
EXPERIMENTS = """
[experiments.X_fixed]
type = "ensemble"
model = "mlp"
dataset = "wine"
k = 2
batch_size = 16
epochs = 1
lr = 0.01
optimizer = "sgd"
"""
COMPONENTS = ("startup", "imports", "data_load", "monitor_start", "setup", "T_group",
              "teardown", "rows_and_exit")


def specs(tmp: Path, executors: list[str]) -> dict[str, CellRunSpec]:
    from engine.define.campaign import parse_campaign
    from engine.runner.supervisor import Runner

    (tmp / "exps.toml").write_text(EXPERIMENTS)
    doc = {"name": "bench-fixed", "experiments": "X_fixed", "executors": executors,
           "runs_dir": str(tmp / "runs"), "device": "cpu", "threads": 1,
           "experiments_file": str(tmp / "exps.toml")}
    from engine.plugins import load_plugins

    load_plugins()
    runner = Runner(parse_campaign(doc, "bench"))
    return {c.executor: runner.cell_spec(c, 1) for c in runner.cells}


def run_cell(spec: CellRunSpec, tmp: Path, attempt: int) -> dict[str, float]:
    """One real cell; its wall time split into :data:`COMPONENTS` (seconds)."""
    from engine.runner.cellproc import cell_env
    from engine.events import read_events
    from engine.results.columns import GROUPS_FILE
    from engine.results.read import read_rows

    folder = tmp / f"{spec.cell['executor']}-{attempt}"
    folder.mkdir()
    spec = dataclasses.replace(spec, attempt=attempt, events=str(folder / "events.jsonl"))
    spec.write(folder / "spec.json")
    env = cell_env(folder, 1)
    t0 = time.time()
    proc = subprocess.run([sys.executable, "-m", "engine.cell", str(folder / "spec.json")],
                          env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True)
    t_exit = time.time()
    if proc.returncode != 0:
        raise RuntimeError(f"{spec.cell['executor']} cell failed ({proc.returncode}): "
                           f"{proc.stderr[-2000:]}")
    events = list(read_events(folder / "events.jsonl"))
    phase = {e["phase"]: e for e in events if e["type"] == "phase"}
    started = next(e["ts"] for e in events if e["type"] == "started")
    done = next(e["ts"] for e in events if e["type"] == "done")
    row = [r for r in read_rows(Path(spec.runs_dir) / GROUPS_FILE)
           if r["cell_key"] == spec.cell["key"] and r["attempt"] == str(attempt)][-1]
    t_group = float(row["T_group"])
    setup = float(row["setup_s"])
    # Between the data load's end and setup's start: the monitor sidecar's start-up.
    monitor_start = (phase["setup"]["ts"] - setup) - phase["data_load"]["ts"]
    parts = {"startup": started - t0, "imports": phase["imports"]["seconds"],
             "data_load": float(row["data_load_s"] or 0.0), "monitor_start": monitor_start,
             "setup": setup, "T_group": t_group,
             "teardown": phase["teardown"]["seconds"] if "teardown" in phase else 0.0,
             "rows_and_exit": t_exit - done}
    parts["wall"] = t_exit - t0
    parts["fixed_cost"] = parts["wall"] - t_group
    return parts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=f"python -m bench.{PART}", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reps", type=int, default=5, help="repetitions (default 5)")
    parser.add_argument("--executors", nargs="+", default=None,
                        help="default: every registered executor")
    parser.add_argument("--no-write", action="store_true", help="print only")
    parser.add_argument("--results-dir", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    from bench import results as bench_results
    from engine.registry import EXECUTORS

    executors = args.executors or [e for e in ("seq", "mp", "ray", "unified_model")
                                   if e in EXECUTORS]
    command = f"python -m bench.{PART} --reps {args.reps} --executors {' '.join(executors)}"
    values: dict[str, dict[str, list[float]]] = {
        c: {e: [] for e in executors} for c in COMPONENTS + ("wall", "fixed_cost")}
    load: dict[str, list[float]] = {"machine": []}
    with tempfile.TemporaryDirectory(prefix="bench-fixed-") as tmp_name:
        tmp = Path(tmp_name)
        cell_specs = specs(tmp, executors)
        for name in executors:  # warm-up
            run_cell(cell_specs[name], tmp, 1)
        for rep in range(args.reps):
            order = executors[rep % len(executors):] + executors[:rep % len(executors)]
            for name in order:
                parts = run_cell(cell_specs[name], tmp, rep + 2)
                for key, value in parts.items():
                    values[key][name].append(value)
            load["machine"].append(os.getloadavg()[0])
            print(f"rep {rep + 1}/{args.reps}: " + ", ".join(
                f"{n} fixed {values['fixed_cost'][n][-1]:.2f} s (setup "
                f"{values['setup'][n][-1]:.2f})" for n in executors)
                + f"; load {load['machine'][-1]:.2f}", flush=True)
    Figure = bench_results.Figure
    run_id = bench_results.new_run_id()
    prov = bench_results.provenance(command)
    rows = []
    for name in executors:
        rows += bench_results.figure_rows(
            PART, Figure(f"fixed_cost_{name}", "s", target=TARGETS.get(name, ""),
                         note=f"{name}: cell wall time (spawn to exit) minus T_group"),
            {name: values["fixed_cost"][name]}, run_id, prov)
    for component in COMPONENTS:
        rows += bench_results.figure_rows(
            PART, Figure(component, "s", baseline="seq" if "seq" in executors else "",
                         note="component of a tiny cell's wall time (module docstring)"),
            values[component], run_id, prov)
    rows += bench_results.figure_rows(PART, Figure("load_1min", "load"), load, run_id, prov)
    if args.no_write:
        return 0
    bench_results.publish(PART, rows, args.results_dir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
