"""Part ``precision``: what the precision axis buys on the CPU — fp32, amp-bf16 and bf16
for seq and unified_model on D_ens at K = 32 (issue 26).

``python -m bench.precision [--passes N] [--epochs E] [--k K] [--threads T]
[--precisions fp32 amp-bf16 bf16] [--executors seq unified_model]`` runs ONE real campaign
through the runner (``python -m engine.runner``, exactly what ``fugue-tui --batch`` runs),
in a temporary runs folder: D_ens (mlp_bn on digits, SGD momentum) with ``k`` members
(default 32) and ``epochs`` epochs (default 2; a user experiments file merged over the
catalogue, as users do), the executors × ``precision = [...]`` (one cell each, passes
outermost), ``device = "cpu"``, ``threads`` torch threads per cell (default 1).

Figures (one repetition = one pass):

* ``throughput:<executor>``: ``throughput_group`` (samples/s) of each precision, baseline
  fp32 — what autocast or bfloat16 weights buy that executor;
* ``rss_peak_mb:<executor>``: the cell's peak resident memory (MiB) per precision,
  baseline fp32 (bf16 halves the weights, autocast adds casts);
* ``throughput:<precision>``: unified_model against seq in the same precision (the
  speedup, like with like);
* ``load_1min``: per pass, the highest 1-minute load average any of its groups saw.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

PART = "precision"
DEFAULT_PRECISIONS = ("fp32", "amp-bf16", "bf16")


def main(argv: list[str] | None = None) -> int:
    from engine.precision import PRECISIONS

    parser = argparse.ArgumentParser(prog=f"python -m bench.{PART}", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--passes", type=int, default=3, help="passes (default 3)")
    parser.add_argument("--epochs", type=int, default=2, help="D_ens epochs (default 2)")
    parser.add_argument("--k", type=int, default=32, help="D_ens members (default 32)")
    parser.add_argument("--threads", type=int, default=1,
                        help="torch threads per process (default 1)")
    parser.add_argument("--precisions", nargs="+", default=list(DEFAULT_PRECISIONS),
                        choices=PRECISIONS, help="default: fp32 amp-bf16 bf16")
    parser.add_argument("--executors", nargs="+", default=["seq", "unified_model"])
    parser.add_argument("--keep", metavar="DIR", help="keep the runs folder here")
    parser.add_argument("--no-write", action="store_true", help="print only")
    parser.add_argument("--results-dir", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.passes < 1 or args.epochs < 1 or args.k < 1:
        parser.error("--passes, --epochs and --k must be >= 1")
    from bench import results as bench_results
    from engine.processes import engine_env
    from engine.results.columns import GROUPS_FILE
    from engine.results.read import read_rows

    precisions = list(dict.fromkeys(args.precisions))
    executors = list(dict.fromkeys(args.executors))
    command = (f"python -m bench.{PART} --passes {args.passes} --epochs {args.epochs} "
               f"--k {args.k} --threads {args.threads} --precisions {' '.join(precisions)} "
               f"--executors {' '.join(executors)}")
    tmp = Path(tempfile.mkdtemp(prefix="bench-precision-"))
    try:
        (tmp / "exps.toml").write_text(
            f"[experiments.D_ens]\nk = {args.k}\nepochs = {args.epochs}\n")
        (tmp / "precision.toml").write_text(
            f'name = "precision"\npasses = {args.passes}\nthreads = {args.threads}\n'
            f'device = "cpu"\nruns_dir = "{tmp / "runs"}"\nexperiments_file = "exps.toml"\n'
            f'experiments = "D_ens"\nexecutors = {executors!r}\nprecision = {precisions!r}\n'
            .replace("'", '"'))
        proc = subprocess.run([sys.executable, "-m", "engine.runner",
                               str(tmp / "precision.toml")],
                              env=engine_env(), stdin=subprocess.DEVNULL)
        if proc.returncode not in (0, 1):
            print(f"campaign precision ended with status {proc.returncode}", file=sys.stderr)
            return proc.returncode
        all_rows = read_rows(tmp / "runs" / GROUPS_FILE)
        if args.keep:
            shutil.copytree(tmp / "runs", args.keep, dirs_exist_ok=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    rows = [r for r in all_rows if r["status"] == "ok"]
    out = figures(rows, all_rows, executors, precisions, bench_results.new_run_id(),
                  bench_results.provenance(command))
    if args.no_write or not out:
        for r in out:
            print(r["figure"], r["variant"], r["repetition"], r["value"])
        return 0 if out else 1
    bench_results.publish(PART, out, args.results_dir)
    return 0


def figures(rows: list[dict], all_rows: list[dict], executors: list[str],
            precisions: list[str], run_id: str, prov: dict) -> list[dict]:
    """The part's figure rows from its ok group rows (see the module docstring)."""
    from bench import results as bench_results

    Figure = bench_results.Figure
    out: list[dict] = []

    def by_pass(executor: str, precision: str, column: str) -> dict[int, float]:
        return {int(r["pass"]): float(r[column]) for r in rows
                if r["executor"] == executor and r["precision_requested"] == precision
                and r.get(column) not in ("", None)}

    for executor in executors:
        for column, unit, note in (
                ("throughput_group", "samples/s",
                 "D_ens throughput_group per precision, one value per pass"),
                ("rss_peak_mb", "MiB", "peak resident memory of the cell's process tree")):
            values = {p: by_pass(executor, p, column) for p in precisions}
            values = {p: v for p, v in values.items() if v}
            if "fp32" in values and len(values) > 1:
                name = "throughput" if column == "throughput_group" else column
                out += bench_results.figure_rows(
                    PART, Figure(f"{name}:{executor}", unit, baseline="fp32", note=note),
                    bench_results.aligned(values), run_id, prov)
    if "seq" in executors:
        for precision in precisions:
            values = {e: by_pass(e, precision, "throughput_group") for e in executors}
            values = {e: v for e, v in values.items() if v}
            if "seq" in values and len(values) > 1:
                out += bench_results.figure_rows(
                    PART, Figure(f"throughput:{precision}", "samples/s", baseline="seq",
                                 note=f"each executor against seq, both in {precision}"),
                    bench_results.aligned(values), run_id, prov)
    load: dict[int, float] = {}
    for r in all_rows:
        for column in ("host_load_start", "host_load_end"):
            if r.get("pass") and r.get(column) not in ("", None):
                p = int(r["pass"])
                load[p] = max(load.get(p, 0.0), float(r[column]))
    if load:
        out += bench_results.figure_rows(
            PART, Figure("load_1min", "load", note="per pass, the highest 1-minute load "
                         "average any of its groups saw when its window opened or closed"),
            {"machine": [load[p] for p in sorted(load)]}, run_id, prov)
    return out


if __name__ == "__main__":
    sys.exit(main())
