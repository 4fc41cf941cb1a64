"""Part 2, ``results_scale``: how long the analysis takes on large results files.

``python -m bench.results_scale [--sizes N ...] [--reps R]`` builds synthetic
``master_groups.csv`` files (:func:`synthetic_groups`; default sizes 1 000, 10 000 and
100 000 group rows), then times, in ONE process, what ``fugue-tui report`` does with a
runs folder, step by step:

* ``load``: :func:`engine.results.load.load_runs` (Arrow CSV parse + numeric conversion and
  normalisation);
* ``aggregate``: :func:`engine.results.analysis.speedups` with its defaults (the groupby, the
  baseline choice, the ratios and the 2000-replicate bootstrap intervals);
* ``chart``: :func:`fugue_tui.report.charts.speedup_chart` of that table, 120 columns, no colour
  (at most ``charts.MAX_BARS`` bars are drawn; the rest are counted on a line);
* ``total``: the sum of the three, the figure with the target (≤ 1 s at 100 000 rows);

and, on the largest file only, ``speedups`` with three variants: ``no_ci`` (``n_boot=0``),
``bootstrap`` (the default ``n_boot=2000`` percentile bootstrap on every cell with >= 5 rows
on both sides: every non-seq cell of this file, 748) and ``bootstrap_by_campaign``
(``by_campaign=True``: ten times as many cells, 7480 intervals);
``load_1min``: the machine's load average after each repetition.

Protocol (bench/README.md): one untimed warm-up of everything, then ``--reps`` (default
10) repetitions; within a repetition the sizes, and the speedups variants, run in an
order rotating from one repetition to the next.

The synthetic file: 2 machines × 10 campaigns × 17 experiments × 2 compile modes ×
12 strategy cells (seq, mp, 4 ray schedulers, 6 unified-model rungs) × 12 passes = 97 920
rows at 100 000 (the pass count scales with the size, at least 1: the 1 000 and 10 000
files have fewer experiments' worth of passes, see :func:`synthetic_groups`); 2 % of the
rows are ``failed``. T_group is log-normal around an executor-specific mean.
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

from engine.executors.ray.options import TUNE_SCHEDULERS

PART = "results_scale"
#: speedups() variants: no interval; intervals (default n_boot); intervals per campaign file.
VARIANTS = ("no_ci", "bootstrap", "bootstrap_by_campaign")


def _speedups(runs, variant: str):
    from engine.results.analysis import speedups

    if variant == "no_ci":
        return speedups(runs, n_boot=0)
    return speedups(runs, by_campaign=variant == "bootstrap_by_campaign")

_SCHEDULERS = TUNE_SCHEDULERS  # Ray Tune's (engine.executors.ray.options)
_RUNGS = ("vf:0,s:0,fl:0", "vf:1,s:0,fl:0", "vf:1,s:1,fl:0", "vf:1,s:1,fl:1",
          "vf:1,s:0,fl:1", "vf:0,s:1,fl:0")
#: (executor, scheduler, features, relative T_group) of the 12 strategy cells.
_STRATEGIES = ([("seq", "", "", 1.0), ("mp", "", "", 0.8)]
               + [("ray", s, "", 0.7 + 0.05 * i) for i, s in enumerate(_SCHEDULERS)]
               + [("unified_model", "", f, 0.5 + 0.05 * i) for i, f in enumerate(_RUNGS)])


def synthetic_groups(n_rows: int = 100_000, seed: int = 0) -> pd.DataFrame:
    """About ``n_rows`` group rows in our CSV columns, as strings (what a CSV read gives)."""
    from engine.results.columns import GROUP_COLUMNS

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
        "group_id": [f"{x}_{i:08x}" for x, i in zip(executor, range(n), strict=False)],
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


SIZES = (1_000, 10_000, 100_000)
STEPS = ("load", "aggregate", "chart")
TARGET_ROWS = 100_000   # the size the published target (<= 1 s) applies to


def _figures(sizes: list[int]):
    from bench.results import Figure

    steps = {n: Figure(f"report_path:{n}", "s",
                       note=f"{n}-row file: load = engine.results.load.load_runs; aggregate = "
                            "engine.results.analysis.speedups (defaults: n_boot=2000); chart = "
                            "fugue_tui.report.charts.speedup_chart (120 columns, no colour)")
             for n in sizes}
    totals = {n: Figure(f"report_path_total:{n}", "s",
                        target="<=1" if n >= TARGET_ROWS else "",
                        note=f"load + aggregate + chart of the {n}-row file"
                             + ("; target <= 1 s at 100 000 rows" if n >= TARGET_ROWS else ""))
              for n in sizes}
    speed = Figure("speedups", "s", baseline="no_ci",
                   note=f"engine.results.analysis.speedups on the {max(sizes)}-row file; no_ci: "
                        "n_boot=0 (groupby aggregation, baseline choice, ratios); bootstrap: "
                        "the default n_boot=2000 percentile intervals on every cell with >= 5 "
                        "rows on both sides; bootstrap_by_campaign: the same per campaign "
                        "file (ten times the cells)")
    machine = Figure("load_1min", "load", note="1-minute load average after each "
                     "repetition (other processes competing for the 2 cores)")
    return steps, totals, speed, machine


def _report_path(folder: Path) -> dict[str, float]:
    """Seconds of each step of what ``fugue-tui report`` does with ``folder``."""
    from engine.results.analysis import speedups
    from engine.results.load import load_runs
    from fugue_tui.report.charts import speedup_chart

    times = {}
    gc.collect()
    t0 = time.perf_counter()
    runs = load_runs(folder)
    t1 = time.perf_counter()
    table = speedups(runs)
    t2 = time.perf_counter()
    chart = speedup_chart(table, width=120, color=False)
    t3 = time.perf_counter()
    if not chart:
        raise RuntimeError(f"{folder}: empty chart")
    times.update(load=t1 - t0, aggregate=t2 - t1, chart=t3 - t2)
    return times


def main(argv: list[str] | None = None) -> int:
    from bench import prog

    parser = argparse.ArgumentParser(prog=prog("results_scale"), description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=list(SIZES),
                        help="group rows of each synthetic file (default 1000 10000 100000)")
    parser.add_argument("--reps", type=int, default=10, help="repetitions (default 10)")
    parser.add_argument("--no-write", action="store_true",
                        help="print the numbers only; do not append the CSV or render")
    parser.add_argument("--results-dir", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if min(args.sizes) < 1 or args.reps < 1:
        parser.error("--sizes and --reps must be >= 1")
    sizes = sorted(set(args.sizes))

    from bench import results as bench_results
    from engine.results.columns import GROUPS_FILE
    from engine.results.load import load_runs

    with tempfile.TemporaryDirectory(prefix="bench-scale-") as tmp:
        folders = {}
        for n in sizes:
            folders[n] = Path(tmp) / str(n)
            folders[n].mkdir()
            synthetic_groups(n).to_csv(folders[n] / GROUPS_FILE, index=False)
        command = (f"python -m bench.{PART} --sizes {' '.join(map(str, sizes))} "
                   f"--reps {args.reps}")
        print(f"synthetic files of {', '.join(map(str, sizes))} group rows; "
              f"{args.reps} repetitions", flush=True)
        largest = folders[sizes[-1]]
        for n in sizes:  # warm-up: one untimed call of each
            _report_path(folders[n])
        big = load_runs(largest)
        for variant in VARIANTS:
            _speedups(big, variant)
        steps = {n: {s: [] for s in STEPS} for n in sizes}
        totals = {n: {"total": []} for n in sizes}
        speed: dict[str, list[float]] = {v: [] for v in VARIANTS}
        machine: dict[str, list[float]] = {"machine": []}
        for rep in range(args.reps):
            for n in sizes[rep % len(sizes):] + sizes[:rep % len(sizes)]:
                times = _report_path(folders[n])
                for step in STEPS:
                    steps[n][step].append(times[step])
                totals[n]["total"].append(sum(times.values()))
            big = load_runs(largest)
            order = VARIANTS[rep % len(VARIANTS):] + VARIANTS[:rep % len(VARIANTS)]
            for variant in order:
                gc.collect()
                t0 = time.perf_counter()
                _speedups(big, variant)
                speed[variant].append(time.perf_counter() - t0)
            machine["machine"].append(os.getloadavg()[0])
            print(f"rep {rep + 1}/{args.reps}: "
                  + "; ".join(f"{n} rows {totals[n]['total'][-1]:.3f} s ("
                              + ", ".join(f"{s} {steps[n][s][-1]:.3f}" for s in STEPS) + ")"
                              for n in sizes)
                  + f"; load {machine['machine'][-1]:.2f}", flush=True)

    step_figs, total_figs, speed_fig, machine_fig = _figures(sizes)
    if args.no_write:
        named = ([(step_figs[n].name, steps[n]) for n in sizes]
                 + [(total_figs[n].name, totals[n]) for n in sizes]
                 + [("speedups", speed), ("load_1min", machine)])
        for name, series in named:
            for variant, values in series.items():
                print(f"{name} {variant}: median {statistics.median(values):.4g} "
                      f"(min {min(values):.4g}, max {max(values):.4g})")
        return 0
    run_id = bench_results.new_run_id()
    prov = bench_results.provenance(command, torch_version="")
    rows = []
    for n in sizes:
        rows += bench_results.figure_rows(PART, step_figs[n], steps[n], run_id, prov)
        rows += bench_results.figure_rows(PART, total_figs[n], totals[n], run_id, prov)
    rows += (bench_results.figure_rows(PART, speed_fig, speed, run_id, prov)
             + bench_results.figure_rows(PART, machine_fig, machine, run_id, prov))
    bench_results.publish(PART, rows, args.results_dir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
