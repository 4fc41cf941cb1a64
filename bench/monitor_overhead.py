"""Part ``monitor_overhead``: the observer effect of the per-cell monitor.

``python -m bench.monitor_overhead [--reps N] [--epochs E]`` runs the same real cell
(``python -m engine.cell``: experiment D_ens under ``seq``, one torch thread, the
catalogue's hyperparameters; ``--epochs`` overrides the epoch count) again and again with
the monitor:

* ``off`` (``monitor = false``: no sidecar at all; the baseline),
* ``0.5s`` (the default interval),
* ``0.05s`` (ten times the default rate).

Figures, from the group rows the cells write:

* ``T_group`` (s): the cell's makespan; the ratio to ``off`` is what the monitor costs the
  measurement (per-repetition ratios: cells of the same repetition, seconds apart);
* ``monitor_cpu_share`` (fraction of one core): the sidecar's own CPU seconds ÷ T_group
  (``monitor_cpu_share`` column). Target: ≤ 0.01 at the default interval.
* ``load_1min``: the machine's load average after each repetition.

Protocol (bench/README.md): one warm-up cell of each variant, then ``--reps`` (default 10)
repetitions, the variants' order rotating from one repetition to the next. Each cell is a
fresh process (interpreter, imports, dataset load), exactly as in a campaign.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from engine.cell.protocol import CellRunSpec

PART = "monitor_overhead"
VARIANTS = {"off": None, "0.5s": 0.5, "0.05s": 0.05}


def _figures():
    from bench.results import Figure

    return (
        Figure("T_group", "s", baseline="off",
               note="makespan of a real seq cell (D_ens, 1 thread) with the monitor off, at "
                    "its default 0.5 s interval and at 0.05 s; ratio = cost of observing"),
        Figure("monitor_cpu_share", "fraction of one core", target="<=0.01",
               note="the sidecar's CPU seconds ÷ T_group (column monitor_cpu_share); the "
                    "target applies at the default interval (0.5s)"),
        Figure("load_1min", "load", note="1-minute load average after each repetition"),
    )


def base_spec(tmp: Path, epochs: int | None) -> CellRunSpec:
    """The cell spec a runner would write for D_ens × seq on this machine."""
    from engine.define.campaign import parse_campaign
    from engine.runner.supervisor import Runner

    doc = {"name": "bench-monitor", "experiments": "D_ens", "executors": ["seq"],
           "runs_dir": str(tmp / "runs"), "device": "cpu", "threads": 1}
    if epochs is not None:
        (tmp / "exps.toml").write_text(f"[experiments.D_ens]\nepochs = {epochs}\n")
        doc["experiments_file"] = str(tmp / "exps.toml")
    from engine.plugins import load_plugins

    load_plugins()
    runner = Runner(parse_campaign(doc, "bench"))
    return runner.cell_spec(runner.cells[0], 1)


def run_cell(spec: CellRunSpec, tmp: Path, attempt: int,
             interval: float | None) -> dict[str, str]:
    """One real cell process; returns its group row."""
    from engine.processes import engine_env
    from engine.results.columns import GROUPS_FILE
    from engine.results.read import read_rows

    folder = tmp / f"attempt-{attempt}"
    folder.mkdir()
    spec = dataclasses.replace(spec, attempt=attempt, events=str(folder / "events.jsonl"),
                               monitor=interval is not None, monitor_interval_s=interval or 0.5)
    spec.write(folder / "spec.json")
    env = {**engine_env(), "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    proc = subprocess.run([sys.executable, "-m", "engine.cell", str(folder / "spec.json")],
                          env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"cell failed ({proc.returncode}): {proc.stderr[-2000:]}")
    rows = [r for r in read_rows(Path(spec.runs_dir) / GROUPS_FILE)
            if r["attempt"] == str(attempt)]
    return rows[-1]


def main(argv: list[str] | None = None) -> int:
    from bench import prog

    parser = argparse.ArgumentParser(prog=prog(PART), description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reps", type=int, default=10, help="repetitions (default 10)")
    parser.add_argument("--epochs", type=int, default=None, help="epochs per job (default: the catalogue's)")
    parser.add_argument("--no-write", action="store_true", help="print only")
    parser.add_argument("--results-dir", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.reps < 1 or (args.epochs is not None and args.epochs < 1):
        parser.error("--reps and --epochs must be >= 1")
    if args.reps < 10:
        print(f"warning: {args.reps} repetitions (the protocol asks for >= 10 for A/B "
              "overhead figures)", file=sys.stderr)
    from bench import results as bench_results

    command = f"python -m bench.{PART} --reps {args.reps}" + (
        f" --epochs {args.epochs}" if args.epochs else "")
    t_group: dict[str, list[float]] = {v: [] for v in VARIANTS}
    share: dict[str, list[float]] = {v: [] for v in VARIANTS if VARIANTS[v]}
    load: dict[str, list[float]] = {"machine": []}
    names = list(VARIANTS)
    with tempfile.TemporaryDirectory(prefix="bench-monitor-") as tmp_name:
        tmp = Path(tmp_name)
        spec = base_spec(tmp, args.epochs)
        attempt = 0
        for name in names:  # warm-up: page cache, first-call costs
            attempt += 1
            run_cell(spec, tmp, attempt, VARIANTS[name])
        for rep in range(args.reps):
            order = names[rep % len(names):] + names[:rep % len(names)]
            for name in order:
                attempt += 1
                row = run_cell(spec, tmp, attempt, VARIANTS[name])
                t_group[name].append(float(row["T_group"]))
                if VARIANTS[name]:
                    share[name].append(float(row["monitor_cpu_share"]))
            load["machine"].append(os.getloadavg()[0])
            print(f"rep {rep + 1}/{args.reps}: " + ", ".join(
                f"{n} {t_group[n][-1]:.3f} s" for n in names) + ", share " + ", ".join(
                f"{n} {share[n][-1]:.4f}" for n in share) + f"; load {load['machine'][-1]:.2f}",
                flush=True)
    fig_t, fig_share, fig_load = _figures()
    run_id = bench_results.new_run_id()
    prov = bench_results.provenance(command)
    rows = (bench_results.figure_rows(PART, fig_t, t_group, run_id, prov)
            + bench_results.figure_rows(PART, fig_share, {"0.5s": share["0.5s"]}, run_id, prov)
            + bench_results.figure_rows(
                PART, bench_results.Figure("monitor_cpu_share_10x", "fraction of one core",
                                           note="the same at 0.05 s (ten times the default "
                                                "rate); no target"),
                {"0.05s": share["0.05s"]}, run_id, prov)
            + bench_results.figure_rows(PART, fig_load, load, run_id, prov))
    if args.no_write:
        return 0
    bench_results.publish(PART, rows, args.results_dir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
