"""Part ``capacity``: the K sweep's knee on this machine (issue 23) — the D_ens ensemble run
at K = 1 … 64 under ``seq`` and ``unified_model`` through the product itself (a campaign
with ``k_sweep``, run by ``fugue-tui --batch`` into a temporary runs folder, analysed by
:mod:`engine.results.knee`), and the bare stacked ``torch.func`` loop's own curve measured
in the same run, by the same knee rule.

``python -m bench.capacity [--passes N] [--epochs E] [--ks 1,2,4,8,16,32,64]
[--executors seq,unified_model] [--threads T] [--fraction F]``

* the product: a campaign (D_ens with ``epochs = E`` through an experiments file,
  ``k_sweep = KS``, ``passes = N``, ``threads = T``) run as a user runs it; each cell is
  its own process under the runner, and its ``train_throughput_sps`` (samples trained ÷
  the wall time during which a job was training) is the curve's measure;
* the bare loop (:func:`bare_loop_throughput`, the only call into it): in this process,
  after the campaign, N repetitions of every K (order rotated each repetition), samples
  trained ÷ the timed epoch loops (the same members, seeds and per-member batch order).

Figures: ``train_throughput K=k`` per K (variants ``seq``, ``unified_model``,
``bare_stacked``; ratios over ``bare_stacked``), ``knee at F`` (the knee K of each
variant; absent where the sweep never reached one), ``knee: unified_model vs bare
stacked`` (how many doublings of K apart the two knees are; target ``<=1``: they should
agree within one doubling), and the 1-minute load average. The product's and the bare
loop's measurements are taken one after the other, not interleaved: a change of load
between them moves one curve and not the other (the load figure shows it).
"""

from __future__ import annotations

import argparse
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

PART = "capacity"
EXPERIMENT = "D_ens"
REPO = Path(__file__).resolve().parents[1]
DEFAULT_KS = (1, 2, 4, 8, 16, 32, 64)


def campaign_text(ks: list[int], executors: list[str], passes: int, threads: int,
                  runs_dir: Path) -> str:
    """The campaign the product runs (an experiments file ``mine.toml`` beside it sets
    the epochs)."""
    names = ", ".join(f'"{e}"' for e in executors)
    return (f'name = "capacity"\nexperiments = "{EXPERIMENT}"\nexecutors = [{names}]\n'
            f"k_sweep = [{', '.join(map(str, ks))}]\npasses = {passes}\nthreads = {threads}\n"
            f'runs_dir = "{runs_dir}"\nexperiments_file = "mine.toml"\n')


def doublings_apart(a: int | None, b: int | None, largest: int) -> float:
    """How many doublings of K separate two knees (``|log2(a / b)|``); a knee not reached
    inside the sweep counts as one doubling beyond its largest K."""
    a_k = 2 * largest if a is None else a
    b_k = 2 * largest if b is None else b
    return abs(math.log2(a_k / b_k))


def bare_loop_throughput(k: int, epochs: int, data, device) -> float:
    """Samples/s of the bare stacked loop training D_ens at ``k`` members for ``epochs``
    (the one call into the reference loop, so that it can be swapped for a frozen copy)."""
    from bench.unified_scaling import load_jobs, run_bare_stacked

    out = run_bare_stacked(load_jobs(k, epochs), data, device)
    return out["samples"] / out["train_s"]


def run_product(ks: list[int], executors: list[str], passes: int, epochs: int, threads: int,
                tmp: Path) -> Any:
    """Run the sweep through ``fugue-tui --batch`` and return the loaded rows."""
    from engine.results.load import load_runs

    (tmp / "mine.toml").write_text(f"[experiments.{EXPERIMENT}]\nepochs = {epochs}\n")
    path = tmp / "capacity.toml"
    path.write_text(campaign_text(ks, executors, passes, threads, tmp / "runs"))
    env = {**os.environ, "PYTHONUNBUFFERED": "1",  # progress lines as they come
           "PYTHONPATH": os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH"))
                                         if p)}
    log = tmp / "batch.log"
    with log.open("w") as handle:
        proc = subprocess.Popen([sys.executable, "-m", "fugue_tui", "--batch", str(path)],
                                cwd=tmp, env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)
        assert proc.stdout is not None
        for line in proc.stdout:
            handle.write(line)
            if line.startswith("["):  # one line per cell: the progress
                print("  " + line.rstrip(), flush=True)
        status = proc.wait()
    if status != 0:
        tail = log.read_text().splitlines()[-15:]
        raise SystemExit(f"capacity: the sweep failed (exit {status}):\n" + "\n".join(tail))
    return load_runs(tmp / "runs")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.capacity", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--passes", type=int, default=3,
                        help="passes of the sweep and repetitions of the bare loop (default 3)")
    parser.add_argument("--epochs", type=int, default=15,
                        help="epochs per job (default 15, the catalogue's)")
    parser.add_argument("--ks", default=",".join(map(str, DEFAULT_KS)),
                        help="the K sweep (increasing; default 1,2,4,8,16,32,64)")
    parser.add_argument("--executors", default="seq,unified_model",
                        help="executors of the sweep (default seq,unified_model)")
    parser.add_argument("--threads", type=int, default=1,
                        help="torch threads per cell and in the bare loop (default 1)")
    parser.add_argument("--fraction", type=float, default=0.10,
                        help="the knee rule's fraction per doubling (default 0.1)")
    parser.add_argument("--no-write", action="store_true",
                        help="print the numbers only; do not append the CSV or render")
    parser.add_argument("--results-dir", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    try:
        ks = [int(k) for k in args.ks.split(",") if k.strip()]
    except ValueError as exc:
        parser.error(f"--ks: {exc}")
    executors = [e.strip() for e in args.executors.split(",") if e.strip()]
    if len(ks) < 2 or ks != sorted(set(ks)) or ks[0] < 1:
        parser.error("--ks: at least two sizes, increasing, each >= 1")
    if args.passes < 1 or args.threads < 1 or args.epochs < 1:
        parser.error("--passes, --threads and --epochs must be >= 1")
    if not 0 < args.fraction < 1:
        parser.error("--fraction must be strictly between 0 and 1")

    import statistics

    import torch

    from bench import results as bench_results
    from engine.parts import datasets as dataset_lib
    from engine.plugins import load_builtins
    from engine.results.knee import curves, find_knee
    from engine.train.backend import apply_backend_flags
    from engine.train.data import to_device

    load_builtins()
    command = (f"python -m bench.{PART} --passes {args.passes} --epochs {args.epochs} "
               f"--ks {','.join(map(str, ks))} --executors {','.join(executors)} "
               f"--threads {args.threads} --fraction {args.fraction}")
    loads: list[float] = []
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="bench-capacity-") as tmp:
        print(f"the sweep through fugue-tui --batch ({len(ks) * len(executors) * args.passes} "
              f"cells); load {os.getloadavg()[0]:.2f}", flush=True)
        runs = run_product(ks, executors, args.passes, args.epochs, args.threads, Path(tmp))
    loads.append(os.getloadavg()[0])
    found = {c.executor: c for c in curves(runs, fraction=args.fraction)
             if c.exp_id == EXPERIMENT}
    missing = [e for e in executors if e not in found]
    if missing:
        raise SystemExit(f"capacity: no curve for {', '.join(missing)} (cells failed?)")
    print(f"sweep done in {time.perf_counter() - t0:.0f} s; load {loads[-1]:.2f}", flush=True)

    torch.set_num_threads(args.threads)
    apply_backend_flags()
    device = torch.device("cpu")
    data = to_device(dataset_lib.load_dataset("digits"), device)
    bare_loop_throughput(ks[0], 1, data, device)  # untimed warm-up
    bare: dict[int, list[float]] = {k: [] for k in ks}
    for rep in range(args.passes):
        for k in ks[rep % len(ks):] + ks[:rep % len(ks)]:
            bare[k].append(bare_loop_throughput(k, args.epochs, data, device))
        loads.append(os.getloadavg()[0])
        print(f"bare stacked loop rep {rep + 1}/{args.passes}: " + ", ".join(
            f"K={k} {bare[k][-1]:.0f}" for k in ks) + f" samples/s; load {loads[-1]:.2f}",
            flush=True)
    bare_means = [statistics.mean(bare[k]) for k in ks]
    bare_knee = find_knee(ks, bare_means, args.fraction)

    run_id = bench_results.new_run_id()
    prov = bench_results.provenance(command, torch.__version__)
    rows: list[dict[str, Any]] = []
    note = ("samples trained ÷ training wall time: the product's train_throughput_sps (each "
            "cell a process under the runner), the bare loop's timed epoch loops")
    for k in ks:
        values = {e: [float(v) for v in _per_pass(runs, e, k)] for e in executors}
        values["bare_stacked"] = bare[k]
        fig = bench_results.Figure(f"train_throughput K={k}", "samples/s",
                                   baseline="bare_stacked", note=note)
        rows += bench_results.figure_rows(PART, fig, values, run_id, prov)
    knees = {e: found[e].knee for e in executors} | {"bare_stacked": bare_knee}
    knee_fig = bench_results.Figure(
        f"knee at {args.fraction:.0%} per doubling", "K",
        note=f"the smallest K beyond which doubling K gains < {args.fraction:.0%} "
             "throughput (engine.results.knee); a variant without a knee inside the sweep "
             "is left out")
    rows += bench_results.figure_rows(PART, knee_fig, {v: [k] for v, k in knees.items()
                                                      if k is not None}, run_id, prov)
    print("\nK      " + "".join(f"{v:>16}" for v in [*executors, "bare_stacked"]))
    for i, k in enumerate(ks):
        line = f"{k:<7}" + "".join(f"{found[e].point(k).throughput:>16,.0f}"
                                   for e in executors) + f"{bare_means[i]:>16,.0f}"
        print(line)
    print("knee   " + "".join(f"{str(knees[v]):>16}" for v in [*executors, "bare_stacked"]))
    if "unified_model" in found:
        apart = doublings_apart(found["unified_model"].knee, bare_knee, ks[-1])
        agree = bench_results.Figure(
            "knee: unified_model vs bare stacked", "doublings", target="<=1",
            note="|log2(knee_unified / knee_bare)| (a knee beyond the sweep counts as twice "
                 "its largest K); the two should agree within one doubling")
        rows += bench_results.figure_rows(PART, agree, {"unified_model": [apart]}, run_id,
                                          prov)
        print(f"unified_model's knee vs the bare loop's: {apart:.0f} doubling(s) apart "
              f"({'agree' if apart <= 1 else 'DISAGREE'} within one doubling)")
        # One pooled knee is one number: nothing to judge its spread by. Pass i of the
        # sweep against repetition i of the bare loop gives a knee pair per pass.
        per_pass = per_pass_apart(runs, ks, bare, args.fraction)
        if per_pass:
            by_pass = bench_results.Figure(
                "knee per pass: unified_model vs bare stacked", "doublings", target="<=1",
                note="the knee of each pass of the sweep against the knee of the bare loop's "
                     "repetition of the same index, |log2| as above; judged on their IQR")
            rows += bench_results.figure_rows(PART, by_pass, {"unified_model": per_pass},
                                              run_id, prov)
            print("per pass: " + ", ".join(f"{a:.0f}" for a in per_pass) + " doubling(s)")
    load_fig = bench_results.Figure(
        "load_1min", "load", note="1-minute load average after the sweep and after each bare "
        "repetition; above ~1.5 on a 2-core host other work competed for the CPUs")
    rows += bench_results.figure_rows(PART, load_fig, {"machine": loads}, run_id, prov)
    if args.no_write:
        return 0
    bench_results.publish(PART, rows, args.results_dir)
    return 0


def per_pass_apart(runs: Any, ks: list[int], bare: dict[int, list[float]],
                   fraction: float) -> list[float]:
    """Per pass i: how many doublings apart unified_model's knee (its pass-i cells) and the
    bare loop's knee (its repetition i) are; passes missing a K are skipped."""
    from engine.results.knee import find_knee

    g = runs.groups
    sel = g[(g["status"] == "ok") & (g["executor"] == "unified_model")
            & (g["exp_id"] == EXPERIMENT)]
    out = []
    for i, (_, cells) in enumerate(sorted(sel.groupby("pass"), key=lambda kv: kv[0])):
        by_k = dict(zip(cells["K"].astype(int), cells["train_throughput_sps"], strict=False))
        if i >= min(len(v) for v in bare.values()) or any(k not in by_k for k in ks):
            continue
        unified_knee = find_knee(ks, [float(by_k[k]) for k in ks], fraction)
        bare_knee = find_knee(ks, [bare[k][i] for k in ks], fraction)
        out.append(doublings_apart(unified_knee, bare_knee, ks[-1]))
    return out


def _per_pass(runs: Any, executor: str, k: int) -> list[float]:
    """The sweep's ok per-pass throughputs of ``executor`` at ``k``."""
    g = runs.groups
    sel = g[(g["status"] == "ok") & (g["executor"] == executor) & (g["K"] == k)
            & (g["exp_id"] == EXPERIMENT)]
    return sel["train_throughput_sps"].dropna().tolist()


if __name__ == "__main__":
    sys.exit(main())
