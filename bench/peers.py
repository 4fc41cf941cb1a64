"""Part ``peers``: this project's ``seq`` and ``unified_model`` against the chorus library
(``chorus-torch``) and the fugue harness (``fugue-bench``) on one workload, all under one
torch build.

``python -m bench.peers --env PATH [--ks 8,32,64] [--reps 3] [--epochs 5] [--threads 1]
[--env-var NAME=VALUE ...]``

The workload (issue 22): K MLPs 64→128→64→10 (the harness's ``mlp``: Linear, ReLU,
Linear, ReLU, Linear; ours the same layers after a Flatten of the 8x8 image) on sklearn's
digits (this project's loader: pixels / 16, the ensemble's training split, the same
samples for every tool), batch 64, plain SGD lr 0.1, ``--epochs`` epochs (default 5), K
independently initialised members (an ensemble), CPU, ``--threads`` torch threads.

Variants, each tool's sequential way and its stacked way:

* ``ours_seq`` / ``ours_unified``: ``SeqExecutor.run`` / ``UnifiedExecutor.run`` (features
  ``vf:1,s:0,fl:0``, the exact default path: each member its own seeded batch order, as
  seq) in this process, through a ``CellContext`` (events to a temp file); and
  ``ours_unified_shared``: the same with ``data_order = "shared"``, chorus's feed (one
  batch order for every member of the bucket, one gather per step);
* ``chorus_eager`` / ``chorus_stacked``: ``chorus.ensemble(..., vectorize=False / True)``
  in this process (``device="cpu"``, ``num_workers=0``, no validation set);
* ``harness_seq`` / ``harness_unified``: ``fugue run --type ensemble --exec seq /
  unified_model`` as a subprocess (``FUGUE_OFFLINE=1``, a plugin file registering the same
  digits samples as dataset ``peers_digits``, runs and data under a temp folder).

Figures per K: ``time K=<k>``: seconds as each tool reports its run (ours: the wall time
of ``executor.run``, the cell's ``T_group`` less its set-up; chorus: ``Report.seconds``,
"the whole run, including bucket setup"; the harness: ``T_group`` of its
``master_groups.csv`` row), baseline ``ours_unified``, target ``>1`` for the two peers'
stacked variants (their time ÷ ours: above 1 means ours is ahead); and ``seq → stacked
K=<k>: <tool>`` (each tool's stacked time ÷ its own sequential time). The 1-minute load
average closes the table.

Protocol: one untimed warm-up of each variant at the smallest K (1 epoch), then
``--reps`` repetitions (default 3), K and variant order rotated every repetition.

**Kernel dispatch.** ``--env-var NAME=VALUE`` (repeatable; names of :data:`DISPATCH_VARS`)
runs every tool under that setting (``MKL_CBWR=COMPATIBLE``, or ``MKL_CBWR=AVX2
ATEN_CPU_CAPABILITY=avx2``): set in the measuring process's environment before torch
loads, inherited by the harness's subprocesses. The rows carry it (column ``setting``) and
``bench/RESULTS.md`` shows the latest run of each setting, the setting in its machine line:
a BLAS's code path decides, for instance, whether the stack's gradient-layout probe sees
the relaid forward's bits (issue 42), so a result holds for its setting, not for every CPU.

**The environment.** The peers pin torch 2.11 and Python 3.13, which this project's range
allows, so the part runs in one environment that holds all three (``--env``, default
``$FUGUE_PEERS_ENV``): this process re-executes itself with that environment's Python.
Create it with::

    python3.13 -m venv ENV
    ENV/bin/pip install chorus-torch==0.1.0 fugue-bench==0.1.0
    ENV/bin/pip install -e .          # this project, from the repository root

(about 6 GB: fugue-bench pulls torch 2.11 with its CUDA wheels, torchvision, ray and
transformers). Without it the part prints one line saying so and exits 0: nothing is
written. Rows go to ``bench/results/peers.csv`` and ``bench/RESULTS.md`` is re-rendered.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import gc
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from engine.bounds import DEFAULT_SEED

PART = "peers"
REPO = Path(__file__).resolve().parents[1]
ENV_VAR = "FUGUE_PEERS_ENV"
TOOLS = {"ours": ("ours_seq", "ours_unified"), "chorus": ("chorus_eager", "chorus_stacked"),
         "harness": ("harness_seq", "harness_unified")}
#: ours with chorus's feed: ``data_order = "shared"`` (one batch order for the whole
#: bucket, as chorus's shared loader; not seq's batches, recorded in the plan)
SHARED = "ours_unified_shared"
VARIANTS = tuple(v for pair in TOOLS.values() for v in pair) + (SHARED,)
MODEL = "peers_mlp"
HARNESS_DATASET = "peers_digits"
BATCH, LR = 64, 0.1
CREATE = ("python3.13 -m venv ENV && ENV/bin/pip install chorus-torch==0.1.0 "
          "fugue-bench==0.1.0 && ENV/bin/pip install -e REPO")
#: What the environment must import (the project, both peers, torch).
NEEDS = ("engine", "bench", "chorus", "fugue.core.cli", "torch")
#: The variables ``--env-var`` may set: those that change which kernels run (MKL's code
#: path, ATen's vector ISA, oneDNN's ISA), nothing that would change the workload.
DISPATCH_VARS = ("MKL_CBWR", "MKL_ENABLE_INSTRUCTIONS", "ATEN_CPU_CAPABILITY",
                 "ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA")


def parse_env_vars(items: list[str]) -> dict[str, str]:
    """``["MKL_CBWR=COMPATIBLE", ...]`` → ``{"MKL_CBWR": "COMPATIBLE"}`` (the last value of
    a name wins). Raises ``ValueError`` naming the item: no ``=``, an empty value, or a
    name outside :data:`DISPATCH_VARS`."""
    out: dict[str, str] = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not value.strip():
            raise ValueError(f"--env-var {item!r}: expected NAME=VALUE")
        if name not in DISPATCH_VARS:
            raise ValueError(f"--env-var {item!r}: {name} is not a dispatch setting; one of "
                             f"{', '.join(DISPATCH_VARS)}")
        out[name] = value.strip()
    return out


def setting_text(env_vars: dict[str, str]) -> str:
    """The ``setting`` column: ``NAME=VALUE`` pairs, sorted, joined by spaces; "" for none."""
    return " ".join(f"{k}={v}" for k, v in sorted(env_vars.items()))


# ----------------------------------------------------------------------------- the env

def env_python(env: str | None) -> Path | None:
    """The Python of peers environment ``env`` (a venv folder), or None when unset."""
    if not env:
        return None
    return Path(env).expanduser() / "bin" / "python"


def env_problem(python: Path | None) -> str | None:
    """Why ``python`` cannot run the part (one line), or None when it can."""
    if python is None:
        return f"no peers environment given (--env PATH or ${ENV_VAR})"
    if not python.is_file():
        return f"no peers environment at {python.parent.parent} (no {python})"
    probe = ("import importlib.util\n"
             f"missing = [m for m in {NEEDS!r} if importlib.util.find_spec(m.split('.')[0]) "
             "is None]\nprint(','.join(missing))")
    try:
        out = subprocess.run([str(python), "-c", probe], capture_output=True, text=True,
                             cwd=REPO, timeout=120, env={**os.environ, "PYTHONPATH": str(REPO)})
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"peers environment {python.parent.parent} does not run: {exc}"
    if out.returncode != 0:
        return (f"peers environment {python.parent.parent} does not run: "
                f"{(out.stderr.strip().splitlines() or ['?'])[-1]}")
    missing = out.stdout.strip()
    if missing:
        return f"peers environment {python.parent.parent} lacks {missing.replace(',', ', ')}"
    return None


# ----------------------------------------------------------------------------- workload

def build_peers_mlp(in_shape, n_outputs, **_: Any):
    """The harness's ``mlp`` (in→128→64→out) after a Flatten: one sample (1, 8, 8) → 64."""
    import math

    from torch import nn

    return nn.Sequential(nn.Flatten(), nn.Linear(math.prod(in_shape), 128), nn.ReLU(),
                         nn.Linear(128, 64), nn.ReLU(), nn.Linear(64, n_outputs))


def register_model() -> None:
    from engine.registry import MODELS
    from engine.registry import register_model as register

    if MODEL not in MODELS.items:
        register(MODEL, description="bench.peers: the harness's mlp 64→128→64→n")(
            build_peers_mlp)


def load_jobs(k: int, epochs: int):
    """K ensemble jobs of the peers workload (D_ens's split and seeds, the peers' model and
    optimizer)."""
    from engine.define.catalogue import load_catalogue
    from engine.define.workloads import expand

    exp = dataclasses.replace(load_catalogue().get("D_ens"), k=k, epochs=epochs, model=MODEL,
                              model_kwargs={}, lr=LR, batch_size=BATCH, optimizer="sgd",
                              optimizer_kwargs={})
    return expand(exp, seed=DEFAULT_SEED)


def training_tensors(jobs, data):
    """The samples every tool trains on: the ensemble's training split, flattened."""
    from engine.train.data import split_for

    job = jobs[0]
    split = split_for(job.split, len(data.pool_y),
                      None if data.test_y is None else len(data.test_y))
    idx = split.train_idx
    return data.pool_x[idx].reshape(len(idx), -1).contiguous(), data.pool_y[idx].contiguous()


def run_chorus(k: int, epochs: int, x, y, stacked: bool) -> dict[str, Any]:
    import chorus
    from torch.utils.data import TensorDataset

    def model_fn():
        return build_peers_mlp((x.shape[1],), 10)[1:]  # no Flatten: the tensors are flat

    t0 = time.perf_counter()
    report = chorus.ensemble(model_fn, TensorDataset(x, y), n=k, epochs=epochs,
                             batch_size=BATCH, lr=LR, optimizer="sgd", device="cpu",
                             num_workers=0, seed=DEFAULT_SEED, verbose=False, vectorize=stacked)
    wall = time.perf_counter() - t0
    samples = sum(r.samples for r in report.results)
    return {"time_s": report.seconds, "wall_s": wall, "samples": samples}


HARNESS_PLUGIN = '''\
"""bench.peers: the digits samples of this run as the harness's dataset {name!r}."""
import torch
from torch.utils.data import TensorDataset

from fugue.helpers.extensions import DatasetBundle, register_dataset

_X = torch.load({x!r})
_Y = torch.load({y!r})


@register_dataset({name!r})
def _load(root, download):
    ds = TensorDataset(_X, _Y)
    return DatasetBundle(ds, ds, 10, (_X.shape[1],))
'''


def run_harness(k: int, epochs: int, folder: Path, executor: str, threads: int,
                tag: str) -> dict[str, Any]:
    """One ``fugue run`` (subprocess) of the workload; its T_group from its CSV."""
    runs = folder / f"runs-{tag}"
    env = {**os.environ, "FUGUE_PLUGINS": str(folder / "peers_plugin.py"),
           "FUGUE_OFFLINE": "1", "FUGUE_RUNS_DIR": str(runs),
           "FUGUE_DATA_DIR": str(folder / "data"), "OMP_NUM_THREADS": str(threads),
           "MKL_NUM_THREADS": str(threads), "CUDA_VISIBLE_DEVICES": ""}
    cmd = [str(Path(sys.executable).parent / "fugue"), "run", "--model", "mlp", "--dataset",
           HARNESS_DATASET, "--type", "ensemble", "--k", str(k), "--epochs", str(epochs),
           "--batch-size", str(BATCH), "--lr", str(LR), "--optimizer", "sgd", "--exec",
           executor, "--passes", "1", "--num-workers", "0", "--name", f"peers_k{k}"]
    t0 = time.perf_counter()
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=folder,
                         timeout=3600)
    wall = time.perf_counter() - t0
    groups = runs / "master_groups.csv"
    if out.returncode != 0 or not groups.is_file():
        tail = (out.stderr.strip() or out.stdout.strip()).splitlines()[-3:]
        raise RuntimeError(f"fugue run --exec {executor} --k {k} failed "
                           f"(exit {out.returncode}): {' | '.join(tail)}")
    with groups.open(newline="") as fh:
        row = list(csv.DictReader(fh))[-1]
    return {"time_s": float(row["T_group"]), "wall_s": wall,
            "samples": None, "features": row.get("features")}


# ----------------------------------------------------------------------------- main

def _figures(k: int):
    from bench.results import Figure

    note = ("seconds as each tool reports its run of the same K models (same architecture, "
            "data, batch, optimizer, epochs): ours = wall of executor.run (T_group less the "
            "cell's set-up); chorus = Report.seconds; harness = T_group of its "
            "master_groups.csv row. Ratio = variant ÷ ours_unified: above 1, ours is ahead")
    time_fig = Figure(f"time K={k}", "s", baseline="ours_unified", note=note)
    per_tool = [Figure(f"seq → stacked K={k}: {tool}", "s", baseline=seq,
                       note=f"{tool}: stacked time ÷ its own sequential time (same "
                            "repetitions as the time figure)")
                for tool, (seq, _) in TOOLS.items()]
    return time_fig, per_tool


def _targeted(figure, values: dict[str, list[float]]):
    """Rows of the time figure with the target on the peers' stacked variants only."""
    from bench.results import Figure

    rows = {}
    for variant, series in values.items():
        target = ">1" if variant in ("chorus_stacked", "harness_unified") else ""
        rows[variant] = (Figure(figure.name, figure.unit, figure.baseline, target,
                                figure.note), series)
    return rows


def inner(args) -> int:
    """The measurements, in the peers environment's Python."""
    import torch

    from bench import results as bench_results
    from bench.unified_scaling import run_executor
    from engine.parts import datasets as dataset_lib
    from engine.plugins import load_builtins
    from engine.train.backend import apply_backend_flags
    from engine.train.data import to_device
    from engine.train.loop import TrainSettings

    unset = {k: v for k, v in args.env_vars.items() if os.environ.get(k) != v}
    if unset:  # run directly with --inner: torch has loaded without the setting
        print(f"peers: --env-var {setting_text(unset)} is not in this process's environment "
              "(it must be set before torch loads: run without --inner)", file=sys.stderr)
        return 2
    load_builtins()
    register_model()
    torch.set_num_threads(args.threads)
    apply_backend_flags()
    device = torch.device("cpu")
    settings = TrainSettings(device=device, compile_mode="off", amp_allowed=False)
    host_data = {"digits": dataset_lib.load_dataset("digits")}
    data = to_device(host_data["digits"], device)
    ks = args.ks
    setting = setting_text(args.env_vars)
    command = (f"python -m bench.{PART} --env {args.env} --ks {','.join(map(str, ks))} "
               f"--reps {args.reps} --epochs {args.epochs} --threads {args.threads}"
               + "".join(f" --env-var {pair}" for pair in setting.split()))
    import chorus
    import fugue

    versions = (f"torch {torch.__version__}, chorus-torch {getattr(chorus, '__version__', '?')}"
                f", fugue-bench {_dist_version('fugue-bench')}, Python "
                f"{sys.version.split()[0]}")
    print(f"peers: {versions}; kernel dispatch: {setting or 'default'}; "
          f"load {os.getloadavg()[0]:.2f}", flush=True)
    del fugue
    run_id = bench_results.new_run_id()
    prov = bench_results.provenance(command, torch.__version__, setting)
    times = {k: {v: [] for v in VARIANTS} for k in ks}
    loads: list[float] = []
    with tempfile.TemporaryDirectory(prefix="bench-peers-") as tmp:
        folder = Path(tmp)
        events = folder / "events.jsonl"
        tensors = {}
        for k in ks:
            x, y = training_tensors(load_jobs(k, 1), data)
            tensors[k] = (x, y)
        x0, y0 = tensors[ks[0]]
        torch.save(x0, folder / "x.pt")
        torch.save(y0, folder / "y.pt")
        (folder / "peers_plugin.py").write_text(HARNESS_PLUGIN.format(
            name=HARNESS_DATASET, x=str(folder / "x.pt"), y=str(folder / "y.pt")))
        counter = iter(range(10**6))

        def run(variant: str, k: int, epochs: int) -> float:
            gc.collect()
            if variant.startswith("ours_"):
                name = "seq" if variant == "ours_seq" else "unified_model"
                options = {"data_order": "shared"} if variant == SHARED else {}
                out = run_executor(name, load_jobs(k, epochs), host_data, settings,
                                   args.threads, events, options)
                return out["wall_s"]
            if variant.startswith("chorus_"):
                x, y = tensors[k]
                return run_chorus(k, epochs, x, y, variant == "chorus_stacked")["time_s"]
            executor = "seq" if variant == "harness_seq" else "unified_model"
            return run_harness(k, epochs, folder, executor, args.threads,
                               f"{next(counter)}")["time_s"]

        t_warm = time.perf_counter()
        for variant in VARIANTS:  # warm-up: imports, allocator, the harness's first start
            run(variant, ks[0], 1)
        print(f"warm-up {time.perf_counter() - t_warm:.1f} s", flush=True)
        for rep in range(args.reps):
            for k in ks[rep % len(ks):] + ks[:rep % len(ks)]:
                order = VARIANTS[rep % len(VARIANTS):] + VARIANTS[:rep % len(VARIANTS)]
                for variant in order:
                    times[k][variant].append(run(variant, k, args.epochs))
                t = times[k]
                print(f"rep {rep + 1}/{args.reps} K={k}: " + ", ".join(
                    f"{v} {t[v][-1]:.2f} s" for v in VARIANTS), flush=True)
            loads.append(os.getloadavg()[0])
            print(f"  load {loads[-1]:.2f}", flush=True)

    rows: list[dict[str, Any]] = []
    for k in ks:
        time_fig, per_tool = _figures(k)
        for variant, (figure, series) in _targeted(time_fig, times[k]).items():
            rows += bench_results.figure_rows(PART, figure, {variant: series}, run_id, prov)
        for figure, pair in zip(per_tool, TOOLS.values(), strict=True):
            rows += bench_results.figure_rows(PART, figure, {v: times[k][v] for v in pair},
                                              run_id, prov)
        summary = ", ".join(f"{v} {_median(times[k][v]):.2f}" for v in VARIANTS)
        print(f"K={k} median s: {summary}", flush=True)
    load_fig = bench_results.Figure(
        "load_1min", "load", note=f"1-minute load average after each repetition; {versions}")
    rows += bench_results.figure_rows(PART, load_fig, {"machine": loads}, run_id, prov)
    if args.no_write:
        return 0
    bench_results.publish(PART, rows, args.results_dir)
    return 0


def _median(values: list[float]) -> float:
    import statistics

    return statistics.median(values)


def _dist_version(name: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(name)
    except PackageNotFoundError:
        return "?"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.peers", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--env", default=os.environ.get(ENV_VAR) or None,
                        help=f"the peers environment (a venv; default ${ENV_VAR})")
    parser.add_argument("--ks", default="8,32,64", help="ensemble sizes (default 8,32,64)")
    parser.add_argument("--reps", type=int, default=3, help="repetitions (default 3)")
    parser.add_argument("--epochs", type=int, default=5, help="epochs (default 5)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    parser.add_argument("--env-var", action="append", default=[], metavar="NAME=VALUE",
                        help="run every tool under this kernel-dispatch setting (repeatable; "
                             f"{', '.join(DISPATCH_VARS)}), recorded in the results' "
                             "machine line")
    parser.add_argument("--no-write", action="store_true",
                        help="print the numbers only; do not append the CSV or render")
    parser.add_argument("--results-dir", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--inner", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    try:
        args.ks = sorted({int(k) for k in args.ks.split(",") if k.strip()})
    except ValueError as exc:
        parser.error(f"--ks: {exc}")
    if not args.ks or min(args.ks) < 1 or args.reps < 1 or args.epochs < 1 or args.threads < 1:
        parser.error("--ks, --reps, --epochs and --threads must be >= 1")
    try:
        args.env_vars = parse_env_vars(args.env_var)
    except ValueError as exc:
        parser.error(str(exc))
    if args.inner:
        return inner(args)
    python = env_python(args.env)
    problem = env_problem(python)
    if problem is not None:
        print(f"peers: skipped: {problem}; create it with: {CREATE}")
        return 0
    cmd = [str(python), "-m", "bench.peers", "--inner", "--env", str(args.env),
           "--ks", ",".join(map(str, args.ks)), "--reps", str(args.reps),
           "--epochs", str(args.epochs), "--threads", str(args.threads)]
    for pair in setting_text(args.env_vars).split():
        cmd += ["--env-var", pair]
    if args.no_write:
        cmd.append("--no-write")
    if args.results_dir:
        cmd += ["--results-dir", args.results_dir]
    # The setting goes into the environment the measuring process starts with: MKL and
    # ATen read it once, when torch loads.
    env = {**os.environ, **args.env_vars, "PYTHONPATH": str(REPO)}
    return subprocess.run(cmd, cwd=REPO, env=env).returncode


if __name__ == "__main__":
    sys.exit(main())
