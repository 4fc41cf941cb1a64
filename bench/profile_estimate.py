"""Part ``profile_estimate``: does ``fugue-tui profile``'s estimate of memory hold (issue 24)?

    python -m bench.profile_estimate [--reps 3] [--hidden 4096] [--note "..."]

A model whose per-member part dominates: ``mlp`` with ``hidden = 4096`` (16.8 M parameters,
about 64 MiB of fp32 weights and as much again of gradients per member) on the wine data
(13 features: the hidden x hidden layer is almost all of it), batch 16, sgd, 32 jobs.

1. **Prediction error of the per-member part.** Per repetition, one probe process
   (``engine.cell.profile_probe``, as ``fugue-tui profile`` runs it, at most ``--max-steps``
   steps per K) measures peak RSS at K = 1, 2, 4, 8 — what a profile holds — and, in the
   same process tree, at K = 16, 32. The estimate, the stacked line fitted over K = 2, 4, 8
   (``engine.profile.estimate``: K = 1 trains unstacked and is off that line), is scored on
   the per-member part:
   ``|predicted(K) - RSS(1) - (measured(K) - RSS(1))| / (measured(K) - RSS(1))``, figure
   ``rss_increment_error_k<K>`` (%, target <= 15).
2. **The budget holds, measured.** With that profile in a runs folder and a RAM budget set
   so that ``max_parallel = "auto"`` resolves to about a quarter of the 32 jobs, a real
   campaign runs unified_model with ``max_parallel = "auto"`` (chunks of the auto K) and
   another with twice that K; the cells' measured peak RSS (``rss_peak_mb``, the cell's
   ``ru_maxrss``) is recorded against the budget: ``peak_over_budget_auto`` must be <= 1 and
   ``peak_over_budget_2k`` > 1 (figures with those targets; ``auto_k`` is recorded too).

Timing does not enter these figures, but memory does depend on what else the allocator saw:
the load (``load_1min``) is recorded; on a shared machine the numbers are indicative.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import sys
import tempfile
from pathlib import Path

PART = "profile_estimate"
PROFILED = (1, 2, 4, 8)   # what fugue-tui profile measures by default
CHECKED = (16, 32)
JOBS = 32


def experiments(hidden: int) -> str:
    return f"""
[experiments.X_wide]
type = "ensemble"
family = "offline"
description = "{JOBS} wide MLPs: the per-member part dominates memory"
model = "mlp"
model_kwargs = {{ hidden = {hidden} }}
dataset = "wine"
k = {JOBS}
batch_size = 16
epochs = 1
lr = 0.01
optimizer = "sgd"
size = "small"
"""


def _job(tmp: Path) -> dict:
    from engine.define.catalogue import load_catalogue
    from engine.define.workloads import expand

    return expand(load_catalogue(str(tmp / "exp.toml")).get("X_wide"), 42)[0].to_dict()


def probe_once(tmp: Path, threads: int, max_steps: int, rep: int) -> dict:
    from engine.profile.collect import run_probe

    return run_probe(_job(tmp), device="cpu", compile_mode="off", threads=threads,
                     ks=PROFILED + CHECKED, gpu_uuid=None, log=tmp / f"probe-{rep}.log",
                     max_steps=max_steps)


def _profile_of(figures: dict):
    """The profile a ``fugue-tui profile`` run would have written: only the PROFILED sizes
    (their whole peaks and, where the probe split them, the set-up and training peaks:
    the same :func:`~engine.cell.profile_probe.memory_lines` the probe fits)."""
    from engine.cell.profile_probe import memory_lines
    from engine.profile.store import Profile

    def by_k(column: str) -> dict[int, float]:
        text = figures.get(column) or ""
        return {int(k): v for k, v in json.loads(text).items()
                if int(k) in PROFILED} if text else {}

    rss, setup, train = by_k("rss_mb"), by_k("rss_setup_mb"), by_k("rss_train_mb")
    per_k = {k: {"rss_mb": v, "rss_setup_mb": setup.get(k), "rss_train_mb": train.get(k)}
             for k, v in rss.items()}
    row = {"rss1_mb": rss[1], "rss_mb": json.dumps({str(k): v for k, v in rss.items()}),
           **memory_lines(per_k),
           "parent_rss_mb": figures.get("parent_rss_mb"), "private1_mb": figures.get(
               "private1_mb")}
    return Profile({k: ("" if v is None else str(v)) for k, v in row.items()})


def errors(figures: dict) -> dict[int, float]:
    """Per checked K: the prediction error of the per-member part, %."""
    from engine.profile.estimate import predict

    rss = {int(k): v for k, v in json.loads(figures["rss_mb"]).items()}
    profile = _profile_of(figures)
    out = {}
    for k in CHECKED:
        if k in rss:
            predicted = predict(profile, "unified_model", k)[0] - rss[1]
            measured = rss[k] - rss[1]
            out[k] = 100 * abs(predicted - measured) / measured
    return out


def proof(tmp: Path, figures: dict, threads: int) -> dict[str, float]:
    """Write the profile (K = 1, 2, 4 only) into a runs folder, pick the budget, run the
    auto campaign and the 2K one; their peaks and the budget."""
    from engine.define.campaign import load_campaign
    from engine.profile.estimate import predict
    from engine.profile.store import append_profile, identity, job_key, profile_id
    from engine.runner.supervisor import Runner

    profile = _profile_of(figures)
    key, ident = job_key(_job(tmp), "off", "cpu"), identity("cpu")
    runs = tmp / "runs"
    append_profile(runs, {"profile_id": profile_id(key, ident), "timestamp": "0", **ident, **key,
                          **profile.row, "ks": ",".join(map(str, PROFILED))})
    target_k = JOBS // 4
    # Room for target_k members and half of the next: auto lands on target_k.
    at = [predict(profile, "unified_model", k)[0] for k in (target_k, target_k + 1)]
    budget = (at[0] + at[1]) / 2 / 0.9
    out = {"budget_mb": budget}
    for name, parallel in (("auto", '"auto"'), ("2k", None)):
        if parallel is None:
            parallel = str(2 * out["auto_k"])
        path = tmp / f"{name}.toml"
        path.write_text(f'name = "p_{name}"\nexperiments = "X_wide"\n'
                        f'executors = ["unified_model"]\nexperiments_file = "exp.toml"\n'
                        f'runs_dir = "{runs}"\ndevice = "cpu"\nthreads = {threads}\n'
                        f'[options.unified_model]\nmax_parallel = {parallel}\n'
                        f'[budget]\nram = "{budget:.1f}MiB"\n')
        campaign = load_campaign(path)
        runner = Runner(campaign)
        if name == "auto":
            cell = runner.cells[0]
            assert cell.max_parallel_method == "profile", cell
            out["auto_k"] = cell.max_parallel
        code = runner.run().exit_code
        with open(runs / "master_groups.csv", newline="") as f:
            got = [r for r in csv.DictReader(f) if r["campaign_id"] == f"p_{name}"]
        if code != 0 or not got or got[-1]["status"] != "ok":
            raise RuntimeError(f"campaign p_{name} ended {code}: {got[-1] if got else 'no row'}")
        out[f"peak_{name}_mb"] = float(got[-1]["rss_peak_mb"])
        out[f"resolved_{name}"] = float(got[-1]["max_parallel_resolved"])
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=f"python -m bench.{PART}", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reps", type=int, default=3, help="repetitions (default 3)")
    parser.add_argument("--proof-reps", type=int, default=None,
                        help="repetitions that also run the two proof campaigns (default all)")
    parser.add_argument("--hidden", type=int, default=4096, help="mlp width (default 4096)")
    parser.add_argument("--threads", type=int, default=2, help="torch threads (default 2)")
    parser.add_argument("--max-steps", type=int, default=6,
                        help="training steps per K in the probe (default 6)")
    parser.add_argument("--note", default="", help="a remark added to the figures' notes")
    parser.add_argument("--no-write", action="store_true", help="print only")
    parser.add_argument("--results-dir", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    from engine.plugins import load_plugins

    load_plugins()
    from bench import results as bench_results

    command = (f"python -m bench.{PART} --reps {args.reps} --hidden {args.hidden} "
               f"--threads {args.threads} --max-steps {args.max_steps}"
               + (f" --proof-reps {args.proof_reps}" if args.proof_reps is not None else ""))
    errs: dict[int, list[float]] = {k: [] for k in CHECKED}
    proofs: list[dict[str, float]] = []
    loads: list[float] = []
    for rep in range(1, args.reps + 1):
        with tempfile.TemporaryDirectory(prefix="fugue-bench-profile-") as name:
            tmp = Path(name)
            (tmp / "exp.toml").write_text(experiments(args.hidden))
            figures = probe_once(tmp, args.threads, args.max_steps, rep)
            for k, e in errors(figures).items():
                errs[k].append(e)
            if rep <= (args.proof_reps if args.proof_reps is not None else args.reps):
                proofs.append(proof(tmp, figures, args.threads))
            loads.append(os.getloadavg()[0])
        print(f"rep {rep}: RSS {figures['rss_mb']} MiB; errors "
              + ", ".join(f"K={k} {v[-1]:.1f} %" for k, v in errs.items() if v)
              + f"; proof {proofs[-1] if len(proofs) == rep else '-'}; load {loads[-1]:.2f}",
              flush=True)
    if args.no_write:
        return 0
    Figure = bench_results.Figure
    run_id = bench_results.new_run_id()
    prov = bench_results.provenance(command)
    remark = f" ({args.note})" if args.note else ""
    rows = []
    for k in CHECKED:
        rows += bench_results.figure_rows(
            PART, Figure(f"rss_increment_error_k{k}", "%", target="<=15",
                         note=f"mlp hidden={args.hidden} on wine, sgd, batch 16: |predicted - "
                              f"measured| of RSS(K) - RSS(1) at K = {k}, prediction from the "
                              f"profile's K = 1, 2, 4, 8 (the stacked line over 2, 4, 8), "
                              f"measured by the same probe{remark}"),
            {"unified_model": errs[k]}, run_id, prov)
    for fig, key, target, note in (
            ("peak_over_budget_auto", "peak_auto_mb", "<=1",
             "measured peak RSS of the unified_model cell run with max_parallel = \"auto\" "
             "÷ the RAM budget auto was resolved under (a chunked unified cell releases "
             "each finished chunk before the next: docs/profiles.md, Chunks)"),
            ("peak_over_budget_2k", "peak_2k_mb", ">1",
             "the same cell with twice the auto K: must exceed the budget")):
        rows += bench_results.figure_rows(
            PART, Figure(fig, "ratio", target=target, note=note + remark),
            {"unified_model": [p[key] / p["budget_mb"] for p in proofs]}, run_id, prov)
    rows += bench_results.figure_rows(
        PART, Figure("auto_k", "jobs", note=f"max_parallel \"auto\" resolved (of {JOBS} jobs)"),
        {"unified_model": [p["auto_k"] for p in proofs]}, run_id, prov)
    rows += bench_results.figure_rows(PART, Figure("budget", "MiB"),
                                      {"ram": [p["budget_mb"] for p in proofs]}, run_id, prov)
    rows += bench_results.figure_rows(PART, Figure("load_1min", "load"), {"host": loads},
                                      run_id, prov)
    bench_results.publish(PART, rows, args.results_dir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
