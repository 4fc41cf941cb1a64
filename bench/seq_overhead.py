"""Part 1, ``seq_overhead``: the ``seq`` executor against a bare sequential training loop.

``python -m bench.seq_overhead [--reps N] [--epochs E] [--threads T]`` trains the jobs of
experiment D_ens (5-member ensemble of mlp_bn on sklearn digits, the catalogue's
hyperparameters; ``--epochs`` overrides the epoch count) two ways in ONE process:

* ``bare``: for each job, ``torch.manual_seed(seed)``, the same model
  (``engine.parts.models.build_model``) and ``torch.optim.SGD`` with the same kwargs, then per
  epoch a ``randperm`` from a generator seeded with the job seed over the job's training
  samples, full batches only, forward / cross-entropy / zero_grad / backward / step.
  Nothing else: no validation, no loss bookkeeping, no progress events;
* ``seq``: the real ``SeqExecutor.run`` through a ``CellContext`` built as
  ``engine/cell/main.py`` builds it, emitting to a real ``EventWriter`` (a temporary file).

Both train the same samples in the same order from the same initial weights (the warm-up
checks that their validation accuracies agree). Figures:

* ``train_throughput``: samples trained ÷ training-step wall time (seq: the jobs'
  ``train_time_s``; bare: the epoch loops, timed the same way: the per-epoch permutation
  is drawn before the clock starts). Target: seq ≥ 90 % of bare;
* ``train_throughput_best_epoch``: samples per epoch ÷ the fastest epoch's training time
  in the repetition. Other processes only add time, so this estimates each loop's own cost
  on a shared machine (it leaves out seq's extra last-epoch scoring);
* ``group_wall``: wall time of the whole group of jobs. seq includes model builds,
  per-job validation and event writes; bare includes model builds and training only. The
  ``seq_minus_val`` variant subtracts seq's validation time from its group time.

Protocol: torch threads set once, one untimed warm-up run of each variant, then ``--reps``
(default 10) interleaved repetitions (bare first on odd repetitions, seq first on even ones). Rows are
appended to ``bench/results/seq_overhead.csv`` and ``bench/RESULTS.md`` is re-rendered.
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from engine.bounds import DEFAULT_SEED

PART = "seq_overhead"
EXPERIMENT = "D_ens"
TARGET = ">=0.9"


def _figures():
    from bench.results import Figure

    throughput = Figure(
        "train_throughput", "samples/s", baseline="bare", target=TARGET,
        note="samples trained ÷ wall time of the training steps only (batch gather, forward, "
             "loss, backward, optimizer step), summed over the group's jobs; seq = "
             "sum(samples) / sum(JobResult.train_time_s). Excludes model build, per-epoch "
             "permutation and validation for both variants.")
    group = Figure(
        "group_wall", "s", baseline="bare",
        note="wall time of the whole group of jobs, NOT like for like: seq is "
             "SeqExecutor.run (model builds, training, one validation per job, events); "
             "bare is model builds + training only (no validation); seq_minus_val is seq "
             "minus the jobs' val_time_s.")
    best = Figure(
        "train_throughput_best_epoch", "samples/s", baseline="bare", target=TARGET,
        note="samples per epoch ÷ the fastest epoch's training-step time among all the "
             "group's epochs in the repetition (seq: JobResult.history train_s). Other "
             "processes only ever add time, so the fastest epoch estimates the loop's own "
             "cost on a shared machine; it leaves out seq's extra last-epoch work (training "
             "accuracy), which train_throughput includes.")
    load = Figure(
        "load_1min", "load",
        note="the machine's 1-minute load average (os.getloadavg) at the end of each "
             "repetition; with 2 torch threads, a load above the core count means other "
             "processes competed for the CPUs during that repetition.")
    return throughput, best, group, load


def load_jobs(epochs: int | None, seed: int = DEFAULT_SEED):
    from engine.define.catalogue import load_catalogue
    from engine.define.workloads import expand

    jobs = expand(load_catalogue().get(EXPERIMENT), seed=seed)
    if epochs is not None:
        jobs = [dataclasses.replace(job, epochs=epochs) for job in jobs]
    return jobs


def run_bare(jobs, data, device, keep_models: bool = False) -> dict[str, Any]:
    """The bare sequential loop. Returns samples, summed training-loop seconds, group
    wall seconds (and the trained models when ``keep_models``)."""
    import torch
    import torch.nn.functional as F

    from engine.parts.models import build_model
    from engine.train.data import split_for

    # Data set-up outside every timer: each job's training samples, gathered once.
    prepared = []
    for job in jobs:
        split = split_for(job.split, len(data.pool_y),
                          None if data.test_y is None else len(data.test_y))
        prepared.append((job, data.pool_x[split.train_idx], data.pool_y[split.train_idx]))
    samples = 0
    train_s = 0.0
    epoch_s: list[float] = []
    models = []
    t_group = time.perf_counter()
    for job, x, y in prepared:
        torch.manual_seed(job.seed)
        model = build_model(job.model, data.in_shape, data.n_outputs, job.model_kwargs).to(device)
        opt = torch.optim.SGD(model.parameters(), lr=job.lr, **job.optimizer_kwargs)
        gen = torch.Generator().manual_seed(job.seed)
        n = len(y)
        bs = job.batch_size
        nb = n // bs
        model.train()
        for _ in range(job.epochs):
            batches = torch.randperm(n, generator=gen)[: nb * bs].view(nb, bs)
            t0 = time.perf_counter()
            for step in range(nb):
                idx = batches[step]
                loss = F.cross_entropy(model(x[idx]), y[idx])
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
            elapsed = time.perf_counter() - t0
            train_s += elapsed
            epoch_s.append(elapsed)
            samples += nb * bs
        if keep_models:
            models.append(model)
    wall = time.perf_counter() - t_group
    return {"samples": samples, "train_s": train_s, "wall_s": wall, "models": models,
            "epoch_s": epoch_s, "epoch_samples": nb * bs}


def run_seq(jobs, host_data, settings, threads: int, events_path: Path) -> dict[str, Any]:
    """``SeqExecutor.run`` through a CellContext as ``engine/cell/main.py`` builds it."""
    from engine.events import EventWriter
    from engine.executors.base import CellContext
    from engine.registry import EXECUTORS
    from engine.train.data import to_device

    device_data: dict[str, Any] = {}

    def datasets(name: str):
        if name not in device_data:  # first use, inside the group window (as in the cell)
            device_data[name] = to_device(host_data[name], settings.device)
        return device_data[name]

    events = EventWriter(events_path, cell="bench", attempt=1)
    try:
        executor = EXECUTORS.get("seq").load()()
        ctx = CellContext(settings=settings, datasets=datasets,
                          emit=lambda type, **f: events.emit(type, **f), threads=threads,
                          options={}, seed=DEFAULT_SEED)
        executor.setup(jobs, ctx)
        try:
            t0 = time.perf_counter()
            results = executor.run(jobs, ctx)
            wall = time.perf_counter() - t0
        finally:
            executor.teardown(ctx)
    finally:
        events.close()
    failed = [r for r in results if r.status != "ok"]
    if failed:
        raise RuntimeError(f"seq job {failed[0].job.job_id} failed: {failed[0].error}")
    return {"samples": sum(r.samples for r in results),
            "train_s": sum(r.train_time_s for r in results),
            "val_s": sum(r.val_time_s or 0.0 for r in results),
            "wall_s": wall, "results": results,
            "epoch_s": [h["train_s"] for r in results for h in r.history],
            "epoch_samples": results[0].samples // results[0].epochs_run}


def _check_equivalence(jobs, data, bare_models, seq_results) -> str:
    """Validation accuracy of the bare models vs seq's: equal when both trained the same."""
    from engine.train.data import split_for
    from engine.train.loop import evaluate

    worst = 0.0
    for job, model, result in zip(jobs, bare_models, seq_results, strict=False):
        split = split_for(job.split, len(data.pool_y),
                          None if data.test_y is None else len(data.test_y))
        val_x, val_y = ((data.test_x, data.test_y) if split.val_source == "test"
                        else (data.pool_x, data.pool_y))
        loss, acc = evaluate(model, val_x, val_y, split.val_idx, job.task or data.task, False)
        worst = max(worst, abs(loss - result.final_val_loss), abs(acc - result.final_val_acc))
    return f"max |bare - seq| over val loss/acc: {worst:.3g}"


def main(argv: list[str] | None = None) -> int:
    from engine.plugins import load_builtins

    load_builtins()  # this process's entry (python -m bench.<part>)
    from bench import prog

    parser = argparse.ArgumentParser(prog=prog("seq_overhead"), description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reps", type=int, default=10,
                        help="interleaved repetitions (>= 5 for the protocol; default 10)")
    parser.add_argument("--epochs", type=int, default=None,
                        help="epochs per job (default: the catalogue's)")
    parser.add_argument("--threads", type=int, default=2, help="torch threads (default 2)")
    parser.add_argument("--no-write", action="store_true",
                        help="print the numbers only; do not append the CSV or render")
    parser.add_argument("--results-dir", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.reps < 1 or args.threads < 1 or (args.epochs is not None and args.epochs < 1):
        parser.error("--reps, --threads and --epochs must be >= 1")
    if args.reps < 5:
        print(f"warning: {args.reps} repetitions (the protocol asks for >= 5)", file=sys.stderr)

    import torch

    from bench import results as bench_results
    from engine.parts import datasets as dataset_lib
    from engine.train.backend import apply_backend_flags
    from engine.train.data import to_device
    from engine.train.loop import TrainSettings

    torch.set_num_threads(args.threads)
    apply_backend_flags()
    device = torch.device("cpu")
    settings = TrainSettings(device=device, compile_mode="off", amp_allowed=False)
    jobs = load_jobs(args.epochs)
    epochs = jobs[0].epochs
    command = (f"python -m bench.{PART} --reps {args.reps} --epochs {epochs} "
               f"--threads {args.threads}"
               + ("" if args.epochs is None else " (epochs reduced from the catalogue's)"))
    host_data = {name: dataset_lib.load_dataset(name) for name in dict.fromkeys(j.dataset for j in jobs)}
    data = to_device(host_data[jobs[0].dataset], device)

    with tempfile.TemporaryDirectory(prefix="bench-seq-") as tmp:
        events = Path(tmp) / "events.jsonl"
        print(f"{EXPERIMENT}: {len(jobs)} jobs x {epochs} epochs, threads {args.threads}, "
              f"{args.reps} repetitions", flush=True)
        t_warm = time.perf_counter()
        warm_bare = run_bare(jobs, data, device, keep_models=True)
        warm_seq = run_seq(jobs, host_data, settings, args.threads, events)
        print(f"warm-up ({time.perf_counter() - t_warm:.1f} s): "
              f"{_check_equivalence(jobs, data, warm_bare['models'], warm_seq['results'])}",
              flush=True)
        if warm_bare["samples"] != warm_seq["samples"]:
            raise RuntimeError(f"bare trained {warm_bare['samples']} samples, seq "
                               f"{warm_seq['samples']}")
        del warm_bare, warm_seq

        tp: dict[str, list[float]] = {"bare": [], "seq": []}
        best: dict[str, list[float]] = {"bare": [], "seq": []}
        wall: dict[str, list[float]] = {"bare": [], "seq": [], "seq_minus_val": []}
        load: dict[str, list[float]] = {"machine": []}
        for rep in range(args.reps):
            order = ("bare", "seq") if rep % 2 == 0 else ("seq", "bare")
            for variant in order:
                gc.collect()
                if variant == "bare":
                    out = run_bare(jobs, data, device)
                else:
                    out = run_seq(jobs, host_data, settings, args.threads, events)
                    wall["seq_minus_val"].append(out["wall_s"] - out["val_s"])
                tp[variant].append(out["samples"] / out["train_s"])
                best[variant].append(out["epoch_samples"] / min(out["epoch_s"]))
                wall[variant].append(out["wall_s"])
            load["machine"].append(os.getloadavg()[0])
            print(f"rep {rep + 1}/{args.reps} ({' then '.join(order)}): "
                  f"train_throughput bare {tp['bare'][-1]:.0f} seq {tp['seq'][-1]:.0f} "
                  f"samples/s (ratio {tp['seq'][-1] / tp['bare'][-1]:.3f}; best epoch "
                  f"{best['seq'][-1] / best['bare'][-1]:.3f}); group_wall "
                  f"bare {wall['bare'][-1]:.3f} s seq {wall['seq'][-1]:.3f} s; "
                  f"load {load['machine'][-1]:.2f}", flush=True)

    throughput_fig, best_fig, group_fig, load_fig = _figures()
    run_id = bench_results.new_run_id()
    prov = bench_results.provenance(command, torch.__version__)
    rows = (bench_results.figure_rows(PART, throughput_fig, tp, run_id, prov)
            + bench_results.figure_rows(PART, best_fig, best, run_id, prov)
            + bench_results.figure_rows(PART, group_fig, wall, run_id, prov)
            + bench_results.figure_rows(PART, load_fig, load, run_id, prov))
    if args.no_write:
        import statistics

        for name, series in (("train_throughput", tp), ("best_epoch", best),
                             ("group_wall", wall), ("load", load)):
            for variant, values in series.items():
                print(f"{name} {variant}: median {statistics.median(values):.4g} "
                      f"(min {min(values):.4g}, max {max(values):.4g})")
        return 0
    bench_results.publish(PART, rows, args.results_dir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
