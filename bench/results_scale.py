"""Part 2, ``results_scale``: how long the analysis takes on a large results file.

``python -m bench.results_scale [--rows N] [--reps R]`` builds a synthetic
``master_groups.csv`` of N group rows (default 100 000; :func:`synthetic_groups`), then
times, in ONE process:

* ``load``: :func:`engine.analysis.load_runs` of the CSV (pandas parse + normalisation);
* ``speedups`` with three variants: ``no_ci`` (``n_boot=0``: the vectorised groupby
  aggregation, baseline choice and ratios only), ``bootstrap`` (the default
  ``n_boot=2000`` percentile bootstrap on every cell with >= 5 rows on both sides: every
  non-seq cell of this file, 748) and ``bootstrap_by_campaign`` (``by_campaign=True``:
  ten times as many cells, 7480 intervals);
* ``load_1min``: the machine's load average after each repetition.

Protocol (bench/README.md): one untimed warm-up call of each, then ``--reps`` (default
10) repetitions, the variants' order rotating from one repetition to the next. The
requirement these figures check is "well under 1 s" for
``speedups`` on 100 000 rows; the table shows the medians with their spread.

The synthetic file: 2 machines × 10 campaigns × 17 experiments × 2 compile modes ×
12 strategy cells (seq, mp, 4 ray schedulers, 6 unified-model rungs) × 12 passes = 97 920
rows at the default size (the pass count scales with ``--rows``); 2 % of the rows are
``failed``. T_group is log-normal around an executor-specific mean.
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

PART = "results_scale"
#: speedups() variants: no interval; intervals (default n_boot); intervals per campaign file.
VARIANTS = ("no_ci", "bootstrap", "bootstrap_by_campaign")


def _speedups(runs, variant: str):
    from engine.analysis import speedups

    if variant == "no_ci":
        return speedups(runs, n_boot=0)
    return speedups(runs, by_campaign=variant == "bootstrap_by_campaign")

_SCHEDULERS = ("fifo", "asha", "median", "hyperband")
_RUNGS = ("vf:0,s:0,fl:0", "vf:1,s:0,fl:0", "vf:1,s:1,fl:0", "vf:1,s:1,fl:1",
          "vf:1,s:0,fl:1", "vf:0,s:1,fl:0")
#: (executor, scheduler, features, relative T_group) of the 12 strategy cells.
_STRATEGIES = ([("seq", "", "", 1.0), ("mp", "", "", 0.8)]
               + [("ray", s, "", 0.7 + 0.05 * i) for i, s in enumerate(_SCHEDULERS)]
               + [("unified_model", "", f, 0.5 + 0.05 * i) for i, f in enumerate(_RUNGS)])


def synthetic_groups(n_rows: int = 100_000, seed: int = 0) -> pd.DataFrame:
    """About ``n_rows`` group rows in our CSV columns, as strings (what a CSV read gives)."""
    from engine.results import GROUP_COLUMNS

    machines, campaigns, experiments, compile_modes = 2, 10, 17, ("off", "default")
    cells = machines * campaigns * experiments * len(compile_modes) * len(_STRATEGIES)
    passes = max(1, round(n_rows / cells))
    rng = np.random.default_rng(seed)
    grid = np.indices((machines, campaigns, experiments, len(compile_modes),
                       len(_STRATEGIES), passes)).reshape(6, -1)
    m, c, e, cm, s, p = grid
    n = grid.shape[1]
    executor = np.array([x[0] for x in _STRATEGIES])[s]
    scale = np.array([x[3] for x in _STRATEGIES])[s] * (1 + 0.1 * e) * np.where(cm == 1, 0.9, 1)
    t_group = scale * rng.lognormal(0.0, 0.1, n)
    k = 3 + e % 5
    status = np.where(rng.random(n) < 0.02, "failed", "ok")
    frame = pd.DataFrame({
        "group_id": [f"{x}_{i:08x}" for x, i in zip(executor, range(n))],
        "exp_id": np.char.add("E", np.char.zfill((e + 1).astype(str), 2)),
        "executor": executor,
        "compile": np.where(cm == 1, "True", "False"),
        "mode": "ensemble",
        "K": k.astype(str),
        "scheduler": np.array([x[1] for x in _STRATEGIES])[s],
        "features": np.array([x[2] for x in _STRATEGIES])[s],
        "T_group": np.char.mod("%.6f", t_group),
        "total_samples": (k * 10_000).astype(str),
        "throughput_group": np.char.mod("%.3f", k * 10_000 / t_group),
        "energy_group": np.char.mod("%.3f", 150.0 * t_group),
        "vram_peak_mb": np.char.mod("%.1f", 500.0 + 100 * k),
        "gpu_name": np.where(m == 0, "NVIDIA L4", "Tesla T4"),
        "torch_version": "2.5.1+cu124",
        "cuda_version": "12.4",
        "cpu_model": "Synthetic CPU",
        "cpu_cores": "8",
        "campaign_id": np.char.add("campaign-", c.astype(str)),
        "cell_key": [f"{i:016x}" for i in range(n)],
        "pass": (p + 1).astype(str),
        "attempt": "1",
        "status": status,
        "compile_mode": np.array(compile_modes)[cm],
        "energy_method": "nvml_energy_counter",
        "host": np.where(m == 0, "host-l4", "host-t4"),
        "campaign_hash": np.char.add("hash", c.astype(str)),
    })
    frame["T_group"] = frame["T_group"].where(status == "ok", "")
    for column in GROUP_COLUMNS:
        if column not in frame.columns:
            frame[column] = ""
    return frame[list(GROUP_COLUMNS)].astype(str)


def _figures():
    from bench.results import Figure

    load = Figure("load", "s", note="engine.analysis.load_runs of the synthetic "
                  "master_groups.csv: pandas CSV parse (dtype=str) + normalisation")
    speed = Figure("speedups", "s", baseline="no_ci",
                   note="engine.analysis.speedups on the loaded rows; no_ci: n_boot=0 "
                        "(groupby aggregation, baseline choice, ratios); bootstrap: the "
                        "default n_boot=2000 percentile intervals on every cell with >= 5 "
                        "rows on both sides (748 of 816 cells); bootstrap_by_campaign: the "
                        "same per campaign file (8160 cells, 7480 intervals). Requirement: "
                        "well under 1 s at 100 000 rows")
    machine = Figure("load_1min", "load", note="1-minute load average after each "
                     "repetition (other processes competing for the 2 cores)")
    return load, speed, machine


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.results_scale", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=100_000, help="group rows (default 100000)")
    parser.add_argument("--reps", type=int, default=10, help="repetitions (default 10)")
    parser.add_argument("--no-write", action="store_true",
                        help="print the numbers only; do not append the CSV or render")
    parser.add_argument("--results-dir", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.rows < 1 or args.reps < 1:
        parser.error("--rows and --reps must be >= 1")

    from bench import results as bench_results
    from engine.analysis import load_runs

    with tempfile.TemporaryDirectory(prefix="bench-scale-") as tmp:
        frame = synthetic_groups(args.rows)
        frame.to_csv(Path(tmp) / "master_groups.csv", index=False)
        n = len(frame)
        command = f"python -m bench.{PART} --rows {args.rows} --reps {args.reps}"
        print(f"{n} synthetic group rows; {args.reps} repetitions", flush=True)
        runs = load_runs(tmp)  # warm-up: one untimed call of each
        for variant in VARIANTS:
            _speedups(runs, variant)
        loads: dict[str, list[float]] = {"load_runs": []}
        speed: dict[str, list[float]] = {v: [] for v in VARIANTS}
        machine: dict[str, list[float]] = {"machine": []}
        for rep in range(args.reps):
            gc.collect()
            t0 = time.perf_counter()
            runs = load_runs(tmp)
            loads["load_runs"].append(time.perf_counter() - t0)
            order = VARIANTS[rep % len(VARIANTS):] + VARIANTS[:rep % len(VARIANTS)]
            cells = {}
            for variant in order:
                gc.collect()
                t0 = time.perf_counter()
                out = _speedups(runs, variant)
                speed[variant].append(time.perf_counter() - t0)
                cells[variant] = (len(out), int((out["ci"] != "n/a").sum()))
            machine["machine"].append(os.getloadavg()[0])
            print(f"rep {rep + 1}/{args.reps}: load {loads['load_runs'][-1]:.3f} s; speedups "
                  + ", ".join(f"{v} {speed[v][-1]:.3f} s ({cells[v][0]} cells, {cells[v][1]} "
                              f"intervals)" for v in VARIANTS)
                  + f"; load {machine['machine'][-1]:.2f}", flush=True)

    load_fig, speed_fig, machine_fig = _figures()
    if args.no_write:
        for name, series in (("load", loads), ("speedups", speed), ("load_1min", machine)):
            for variant, values in series.items():
                print(f"{name} {variant}: median {statistics.median(values):.4g} "
                      f"(min {min(values):.4g}, max {max(values):.4g})")
        return 0
    run_id = bench_results.new_run_id()
    prov = bench_results.provenance(command, torch_version="")
    rows = (bench_results.figure_rows(PART, load_fig, loads, run_id, prov)
            + bench_results.figure_rows(PART, speed_fig, speed, run_id, prov)
            + bench_results.figure_rows(PART, machine_fig, machine, run_id, prov))
    bench_results.publish(PART, rows, args.results_dir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
