"""Part ``unified_scaling``: ``unified_model`` against a bare stacked torch.func loop over
K = 1 … 64 (the scaling curve and its ceiling), and ``seq`` against a bare sequential loop
at K = 8 and 32, on the digits ensemble.

``python -m bench.unified_scaling [--reps N] [--epochs E] [--ks 1,2,4,8,16,32,64]
[--seq-ks 8,32] [--threads T]`` trains the D_ens ensemble (mlp_bn on sklearn digits, the
catalogue's hyperparameters, K members instead of 5; default 15 epochs, the catalogue's)
four ways in ONE process (the sequential two only at the ``--seq-ks`` sizes: their
throughput does not depend on K, and at K = 64 they would take most of the run):

* ``bare_seq``: per job, ``torch.manual_seed(seed)``, ``build_model``, ``torch.optim.SGD``,
  per epoch a ``randperm`` from a generator seeded with the job seed, full batches only,
  forward / cross-entropy / zero_grad / backward / step (as ``bench.seq_overhead``);
* ``seq``: the real ``SeqExecutor.run`` through a ``CellContext`` (events to a temp file);
* ``bare_stacked``: the frozen reference ``bench/reference/bare_stacked_v1.py`` (today's
  bare loop, copied there with a checksum test so it cannot move with the code it
  judges): the same K members (same seeds, so the same initial weights) stacked
  with ``torch.func.stack_module_state``, one ``functional_call`` under
  ``vmap(randomness="different")`` per step on (K, B) batches gathered with each member's
  own per-epoch permutation (exactly the unified model's feed), the summed per-member
  cross-entropy, ``backward``, ``torch.optim.SGD`` over the stacked tensors (every member
  has the same lr here). Nothing else: no validation, no events, no per-member dropout
  generators (vmap draws the masks);
* ``unified``: the real ``UnifiedExecutor.run`` (verification, per-member dropout
  generators that reproduce seq's masks, stacked optimizer, events, validation).

Figures (per K): ``train_throughput``: samples trained ÷ training-step wall time (bare:
the timed epoch loops, permutations drawn before the clock; seq: Σ ``train_time_s``;
unified: Σ of its buckets' training-step clock). Ratios: unified ÷ bare_stacked (target ≥
0.95, judged on the per-repetition ratios: their IQR must lie above it), unified ÷ seq
(target ≥ 3 at K = 32), seq ÷ bare_seq (target ≥ 0.9). Plus ``reference_spread`` (the
frozen reference's IQR ÷ median at each K: a miss smaller than it is within its noise),
``group_wall`` (whole runs, not like for like). Across K: ``scaling:<variant>``, the
throughput at each K ÷ the throughput at the smallest K (the curve: K× would be perfect
stacking; where it flattens is this machine's concurrency ceiling), and ``peak_memory``
(MiB): on CUDA ``torch.cuda.max_memory_allocated`` of the run, on CPU the growth of the
process's resident set during the run over its level before it (sampled every 2 ms by a
thread, after ``gc.collect`` and glibc's ``malloc_trim``), measured in a separate 2-epoch
pass after the warm-up so that the sampling never overlaps a timed repetition. The
1-minute load average closes the table.

Protocol: torch threads set once (default 1, the stable choice on a shared 2-core host),
one untimed warm-up of each variant, then ``--reps`` (default 5) repetitions with the
variant order rotated every repetition. Rows go to ``bench/results/unified_scaling.csv``
and ``bench/RESULTS.md`` is re-rendered.
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

PART = "unified_scaling"
EXPERIMENT = "D_ens"
VARIANTS = ("bare_seq", "seq", "bare_stacked", "unified")
STACKED = ("bare_stacked", "unified")
#: unified ÷ the frozen bare loop, per repetition (issue 22: "at the limit")
TARGET = ">=0.95"


def _figures(k: int):
    from bench.results import Figure

    note = ("samples trained ÷ wall time of the training steps only (batch gather, forward, "
            "loss, backward, optimizer step); bare: timed epoch loops; seq: Σ "
            "JobResult.train_time_s; unified: Σ of its buckets' training-step clock "
            "(BucketRun.train_clock_s). Excludes model build, verification, permutations "
            "and validation.")
    return [
        Figure(f"train_throughput K={k}: unified vs bare stacked", "samples/s",
               baseline="bare_stacked", target=TARGET, note=note),
        Figure(f"train_throughput K={k}: vs seq", "samples/s", baseline="seq",
               target=">=3" if k >= 32 else "", note="the same measurements, as speedups "
               "over seq (target ≥ 3 for unified at K = 32)"),
        Figure(f"train_throughput K={k}: seq vs bare sequential", "samples/s",
               baseline="bare_seq", target=">=0.9", note="the same measurements: seq's "
               "harness overhead over the bare sequential loop"),
        Figure(f"group_wall K={k}", "s", baseline="seq", note="wall time of each whole run, "
               "NOT like for like: seq and unified include model builds, validation and "
               "events (unified also its verification probe); bare loops include model "
               "builds and training only"),
    ]


def load_jobs(k: int, epochs: int, seed: int = DEFAULT_SEED):
    from engine.define.catalogue import load_catalogue
    from engine.define.workloads import expand

    exp = dataclasses.replace(load_catalogue().get(EXPERIMENT), k=k, epochs=epochs)
    return expand(exp, seed=seed)


def _prepared(jobs, data):
    from engine.train.data import split_for

    out = []
    for job in jobs:
        split = split_for(job.split, len(data.pool_y),
                          None if data.test_y is None else len(data.test_y))
        out.append((job, split.train_idx))
    return out


def run_bare_seq(jobs, data, device) -> dict[str, Any]:
    import torch
    import torch.nn.functional as F

    from engine.parts.models import build_model

    prepared = [(job, data.pool_x[idx], data.pool_y[idx]) for job, idx in _prepared(jobs, data)]
    samples, train_s = 0, 0.0
    t_group = time.perf_counter()
    for job, x, y in prepared:
        torch.manual_seed(job.seed)
        model = build_model(job.model, data.in_shape, data.n_outputs, job.model_kwargs).to(device)
        opt = torch.optim.SGD(model.parameters(), lr=job.lr, **job.optimizer_kwargs)
        gen = torch.Generator().manual_seed(job.seed)
        n, bs = len(y), job.batch_size
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
            train_s += time.perf_counter() - t0
            samples += nb * bs
    return {"samples": samples, "train_s": train_s, "wall_s": time.perf_counter() - t_group}


def run_bare_stacked(jobs, data, device) -> dict[str, Any]:
    """The bare torch.func loop, fed like unified_model: the frozen reference
    ``bench/reference/bare_stacked_v1.py`` (checksum-pinned, so the target cannot move with
    the code it judges)."""
    from bench.reference import bare_stacked_v1

    return bare_stacked_v1.run(jobs, data, device)


def run_executor(name, jobs, host_data, settings, threads: int, events_path: Path,
                 options: dict[str, Any] | None = None):
    from engine.events import EventWriter
    from engine.executors.base import CellContext
    from engine.registry import EXECUTORS
    from engine.train.data import to_device

    device_data: dict[str, Any] = {}

    def datasets(ds: str):
        if ds not in device_data:
            device_data[ds] = to_device(host_data[ds], settings.device)
        return device_data[ds]

    events = EventWriter(events_path, cell="bench", attempt=1)
    try:
        executor = EXECUTORS.get(name).load()()
        ctx = CellContext(settings=settings, datasets=datasets,
                          emit=lambda type, **f: events.emit(type, **f), threads=threads,
                          options=dict(options or {}), seed=DEFAULT_SEED,
                          features="vf:1,s:0,fl:0" if name == "unified_model" else None)
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
        raise RuntimeError(f"{name} job {failed[0].job.job_id} failed: {failed[0].error}")
    samples = sum(r.samples for r in results)
    if name == "unified_model":
        runs = executor.runs
        # One member has nothing to stack: unified_model trains it as a single model.
        expected = "eager" if len(jobs) == 1 else "vectorised"
        if any(r.plan.route != expected for r in runs):
            raise RuntimeError(f"unified_model did not vectorise: {[r.plan.line() for r in runs]}")
        train_s = sum(r.train_clock_s for r in runs)
    else:
        train_s = sum(r.train_time_s for r in results)
    return {"samples": samples, "train_s": train_s, "wall_s": wall}


def reference_spread(values: list[float]) -> float:
    """(Q3 − Q1) ÷ median of ``values`` (a relative spread; 0 with one value)."""
    import statistics

    from bench.results import iqr

    q1, q3 = iqr(values)
    return (q3 - q1) / statistics.median(values)


def peak_memory_mb(fn, device) -> float:
    """Peak memory of ``fn()`` in MiB: CUDA — ``torch.cuda.max_memory_allocated`` after a
    reset; CPU — the highest resident set seen by a 2 ms sampling thread minus the resident
    set just before (freed memory returned to the OS first: ``gc.collect`` and glibc's
    ``malloc_trim(0)``, where there is one). The CPU figure misses allocations that reuse
    memory the process already held, so it is a lower bound; the allocations that grow
    with K (the stacked parameters, gradients, momentum and activations) are large enough
    to be fresh ``mmap``s, which it does see."""
    import threading

    import torch

    gc.collect()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
        base = torch.cuda.memory_allocated(device)
        fn()
        torch.cuda.synchronize(device)
        return (torch.cuda.max_memory_allocated(device) - base) / 2**20
    import ctypes

    import psutil

    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass
    proc = psutil.Process()
    base = proc.memory_info().rss
    peak = [base]
    done = threading.Event()

    def sample():
        while not done.wait(0.002):
            peak[0] = max(peak[0], proc.memory_info().rss)

    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    try:
        fn()
    finally:
        done.set()
        thread.join()
    peak[0] = max(peak[0], proc.memory_info().rss)
    return (peak[0] - base) / 2**20


def main(argv: list[str] | None = None) -> int:
    from engine.plugins import load_builtins

    load_builtins()  # this process's entry (python -m bench.<part>)
    from bench import prog

    parser = argparse.ArgumentParser(prog=prog("unified_scaling"), description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reps", type=int, default=5, help="repetitions (>= 5; default 5)")
    parser.add_argument("--epochs", type=int, default=15,
                        help="epochs per job (default 15, the catalogue's)")
    parser.add_argument("--ks", default="1,2,4,8,16,32,64",
                        help="ensemble sizes of the stacked variants (default 1,2,4,8,16,32,64)")
    parser.add_argument("--seq-ks", default="8,32",
                        help="sizes at which seq and bare_seq run too (default 8,32; each "
                             "must be one of --ks)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    parser.add_argument("--no-write", action="store_true",
                        help="print the numbers only; do not append the CSV or render")
    parser.add_argument("--results-dir", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    try:
        ks = sorted({int(k) for k in args.ks.split(",") if k.strip()})
        seq_ks = sorted({int(k) for k in args.seq_ks.split(",") if k.strip()})
    except ValueError as exc:
        parser.error(f"--ks/--seq-ks: {exc}")
    if args.reps < 1 or args.threads < 1 or args.epochs < 1 or not ks or min(ks) < 1:
        parser.error("--reps, --threads, --epochs and every K must be >= 1")
    if not set(seq_ks) <= set(ks):
        parser.error(f"--seq-ks {args.seq_ks}: every size must be one of --ks {args.ks}")
    if args.reps < 5:
        print(f"warning: {args.reps} repetitions (the protocol asks for >= 5)", file=sys.stderr)

    import statistics

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
    command = (f"python -m bench.{PART} --reps {args.reps} --epochs {args.epochs} "
               f"--ks {','.join(map(str, ks))} --seq-ks {','.join(map(str, seq_ks))} "
               f"--threads {args.threads}")
    host_data = {"digits": dataset_lib.load_dataset("digits")}
    data = to_device(host_data["digits"], device)
    run_id = bench_results.new_run_id()
    prov = bench_results.provenance(command, torch.__version__)
    rows: list[dict[str, Any]] = []
    load_fig = bench_results.Figure(
        "load_1min", "load", note="1-minute load average at the end of each repetition "
        "(all K); above ~1.5 on this 2-core host other work competed for the CPUs")
    loads: list[float] = []

    with tempfile.TemporaryDirectory(prefix="bench-unified-") as tmp:
        events = Path(tmp) / "events.jsonl"

        def run(variant: str, jobs) -> dict[str, Any]:
            gc.collect()
            if variant == "bare_seq":
                return run_bare_seq(jobs, data, device)
            if variant == "bare_stacked":
                return run_bare_stacked(jobs, data, device)
            return run_executor("seq" if variant == "seq" else "unified_model", jobs,
                                host_data, settings, args.threads, events)

        all_jobs = {k: load_jobs(k, args.epochs) for k in ks}
        variants = {k: VARIANTS if k in seq_ks else STACKED for k in ks}
        # The warm-up and the memory pass are short: 2 epochs, or the run's own when fewer
        # (a 1-epoch smoke run need not warm up longer than it measures).
        short_epochs = min(2, args.epochs)
        t_warm = time.perf_counter()
        for k in ks:  # one untimed warm-up of every variant
            for variant in variants[k]:
                run(variant, [dataclasses.replace(j, epochs=short_epochs) for j in all_jobs[k]])
        print(f"warm-up {time.perf_counter() - t_warm:.1f} s; load "
              f"{os.getloadavg()[0]:.2f}", flush=True)
        memory = {v: {} for v in STACKED}
        for k in ks:  # peak memory: its own 2-epoch pass, never during a timed repetition
            for variant in STACKED:
                short = [dataclasses.replace(j, epochs=short_epochs) for j in all_jobs[k]]
                memory[variant][k] = peak_memory_mb(lambda v=variant, s=short: run(v, s), device)
            print(f"peak memory K={k}: " + ", ".join(f"{v} {memory[v][k]:.1f} MiB"
                                                      for v in STACKED), flush=True)
        tp = {k: {v: [] for v in variants[k]} for k in ks}
        wall = {k: {v: [] for v in variants[k]} for k in ks}
        for rep in range(args.reps):
            for k in ks[rep % len(ks):] + ks[:rep % len(ks)]:
                names = variants[k]
                order = names[rep % len(names):] + names[:rep % len(names)]
                for variant in order:
                    out = run(variant, all_jobs[k])
                    tp[k][variant].append(out["samples"] / out["train_s"])
                    wall[k][variant].append(out["wall_s"])
                t = tp[k]
                line = (f"rep {rep + 1}/{args.reps} K={k} ({', '.join(order)}): "
                        + ", ".join(f"{v} {t[v][-1]:.0f}" for v in names)
                        + f" samples/s; unified/bare_stacked "
                        f"{t['unified'][-1] / t['bare_stacked'][-1]:.3f}")
                if "seq" in t:
                    line += (f", unified/seq {t['unified'][-1] / t['seq'][-1]:.2f}, seq/bare_seq "
                             f"{t['seq'][-1] / t['bare_seq'][-1]:.3f}")
                print(line, flush=True)
            loads.append(os.getloadavg()[0])
            print(f"  load {loads[-1]:.2f}", flush=True)

    for k in ks:
        vs_stacked, vs_seq, vs_bare_seq, group = _figures(k)
        t = tp[k]
        rows += bench_results.figure_rows(PART, vs_stacked, {v: t[v] for v in STACKED},
                                          run_id, prov)
        if k in seq_ks:
            rows += bench_results.figure_rows(PART, vs_seq, {v: t[v] for v in
                                                             ("seq", "unified", "bare_stacked")},
                                              run_id, prov)
            rows += bench_results.figure_rows(PART, vs_bare_seq, {v: t[v] for v in
                                                                  ("bare_seq", "seq")},
                                              run_id, prov)
        rows += bench_results.figure_rows(PART, group, wall[k], run_id, prov)
        for v in variants[k]:
            print(f"K={k} train_throughput {v}: median {statistics.median(t[v]):.0f} samples/s")
        per_rep = [u / b for u, b in zip(t["unified"], t["bare_stacked"], strict=True)]
        q1, q3 = bench_results.iqr(per_rep)
        print(f"K={k} unified/bare_stacked per repetition: IQR {q1:.3f}–{q3:.3f} (target "
              f"{TARGET}); reference spread {reference_spread(t['bare_stacked']):.3f}")
    for variant in STACKED:
        curve = bench_results.Figure(
            f"scaling:{variant}", "samples/s", baseline=f"K={ks[0]}",
            note=f"{variant}'s train_throughput at each K (the same measurements); ratio to "
                 f"K={ks[0]} = what stacking K members buys over {ks[0]} (K/{ks[0]} would be "
                 "perfect); where the ratio stops growing is the concurrency ceiling here")
        rows += bench_results.figure_rows(PART, curve, {f"K={k}": tp[k][variant] for k in ks},
                                          run_id, prov)
    spread = bench_results.Figure(
        "reference_spread", "fraction of the median",
        note="the frozen reference's own spread at each K: the IQR of bare_stacked's "
             "train_throughput ÷ its median. A K whose unified ÷ bare_stacked misses the "
             f"target ({TARGET}) by less than this is within the reference's own noise")
    rows += bench_results.figure_rows(PART, spread, {f"K={k}": [reference_spread(
        tp[k]["bare_stacked"])] for k in ks}, run_id, prov)
    short = "a 2-epoch run (fewer when --epochs is)"
    mem = bench_results.Figure(
        "peak_memory", "MiB", note=(f"torch.cuda.max_memory_allocated of {short}" if
                                    device.type == "cuda" else "growth of the resident set "
                                    f"during {short} (2 ms sampling; a lower bound, see "
                                    "peak_memory_mb)") + "; one measurement per K and variant")
    rows += bench_results.figure_rows(PART, mem, {f"{v} K={k}": [memory[v][k]]
                                                  for k in ks for v in STACKED}, run_id, prov)
    rows += bench_results.figure_rows(PART, load_fig, {"machine": loads}, run_id, prov)
    if args.no_write:
        return 0
    bench_results.publish(PART, rows, args.results_dir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
