"""Part ``strategies``: the four strategies side by side on the offline family, and the
unified model's ablation ladder.

``python -m bench.strategies [--passes N] [--epochs E] [--threads T] [--executors ...]
[--mp-start forkserver spawn] [--ray-reuse true false] [--experiments ...]
[--no-ablation]`` runs ONE real campaign
through the runner (``python -m engine.runner``, exactly what ``fugue-tui --batch`` runs),
in a temporary runs folder:

* the offline family (D_ens, D_cv, D_hpo, D_mm, D_reg; ``--experiments`` for fewer) × the
  executors (default: every registered one) × ``--passes`` passes (default 5; passes
  outermost, so every pass runs every strategy minutes apart), ``--threads`` torch threads
  per process (default 1);
* mp once per ``--mp-start`` (default both: ``[options.mp] start = ["forkserver",
  "spawn"]``, one cell each, side by side in every pass), as variants ``mp:forkserver`` and
  ``mp:spawn``;
* ray's hpo cells (D_hpo) once per ``--ray-reuse`` (default both: ``[options.ray]
  reuse_actors = [true, false]``, one cell each, side by side in every pass), as variants
  ``ray:reused`` (Tune trials in reused actors started in setup) and ``ray:fresh`` (a new
  process per trial, inside ``T_group``); ray's other cells run once, as ``ray``;
* unless ``--no-ablation``: D_ens under ``unified_model`` with ``sweep = "ablation"`` (the
  six rungs of fugue-compat.md), same passes.

Figures (one repetition = one pass):

* ``T_group:<exp>``: the makespan of each strategy; ratio to seq = 1 / speedup
  (fugue-compat.md: speedup = mean seq T_group ÷ mean strategy T_group; here the medians
  and per-pass ratios);
* ``throughput:ablation``: ``throughput_group`` of each rung of the ladder, baseline rung A;
* ``worker_start_s``: per mp start, the median over the pass's mp jobs of ``worker_start_s``
  (request for the job's worker → ready to train), baseline ``mp:spawn``; and
  ``worker_start_s:forkserver``, the same for ``mp:forkserver`` against the bound of
  issue 20 (≤ 1 s);
* ``setup_s:mp``: per mp start, the median over the pass's mp cells of ``setup_s`` (the
  pre-warmed parent's start is there, outside ``T_group``: the report shows both);
* ``T_group:D_hpo:ray_reused``: D_hpo's makespan under seq and ``ray:reused``, against
  issue 20's bound (ray with reused actors at least 0.5x seq's speed: ratio ``<=2``);
* ``setup_s:ray_hpo``: per ray mode, D_hpo's ``setup_s`` (the reused actors' start is
  there, outside ``T_group``);
* ``load_1min``: per pass, the highest 1-minute load average any of its groups saw
  (``host_load_start``/``host_load_end``), so a busy machine is on the record.

``--epochs`` shortens every experiment (a user experiments file merged over the catalogue,
as users do); the command line in the table records it.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

PART = "strategies"
OFFLINE = ("D_ens", "D_cv", "D_hpo", "D_mm", "D_reg")
MP_STARTS = ("forkserver", "spawn")
#: The bound of issue 20 on the pre-warmed start's median worker start, seconds.
WORKER_START_TARGET = "<=1"
#: ray's Tune modes: ``--ray-reuse`` value → the group rows' ``tune_actors``.
RAY_REUSE = {"true": "reused", "false": "fresh"}
#: The bound of issue 20 on ray with reused actors on D_hpo: at least 0.5x seq's speed,
#: i.e. its T_group at most twice seq's.
RAY_REUSED_TARGET = "<=2"


def main(argv: list[str] | None = None) -> int:
    from bench import prog

    parser = argparse.ArgumentParser(prog=prog(PART), description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--passes", type=int, default=5, help="passes (default 5)")
    parser.add_argument("--epochs", type=int, default=None,
                        help="epochs of every offline experiment (default: the catalogue's)")
    parser.add_argument("--threads", type=int, default=1,
                        help="torch threads per process (default 1)")
    parser.add_argument("--executors", nargs="+", default=None)
    parser.add_argument("--experiments", nargs="+", default=list(OFFLINE), choices=OFFLINE,
                        help="offline experiments to run (default: all five)")
    parser.add_argument("--mp-start", nargs="+", default=list(MP_STARTS), choices=MP_STARTS,
                        help="mp's start methods, one cell each (default: both)")
    parser.add_argument("--ray-reuse", nargs="+", default=list(RAY_REUSE), choices=RAY_REUSE,
                        help="ray's Tune actor modes for hpo cells, one cell each (default: "
                             "both)")
    parser.add_argument("--no-ablation", action="store_true")
    parser.add_argument("--keep", metavar="DIR", help="keep the runs folder here")
    parser.add_argument("--no-write", action="store_true", help="print only")
    parser.add_argument("--results-dir", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.passes < 1:
        parser.error("--passes must be >= 1")
    if args.passes < 5:
        print(f"warning: {args.passes} passes (the protocol asks for >= 5)", file=sys.stderr)
    from bench import results as bench_results
    from engine.plugins import load_plugins
    from engine.processes import engine_env
    from engine.registry import EXECUTORS
    from engine.results.columns import GROUPS_FILE, INDIVIDUAL_FILE
    from engine.results.read import read_rows

    load_plugins()  # this part's process is an entry: the default executors are the registered
    executors = args.executors or [e for e in ("seq", "mp", "ray", "unified_model")
                                   if e in EXECUTORS]
    exps_run = [e for e in OFFLINE if e in args.experiments]
    command = (f"python -m bench.{PART} --passes {args.passes}"
               + (f" --epochs {args.epochs}" if args.epochs else "")
               + f" --threads {args.threads} --executors {' '.join(executors)}"
               + (f" --mp-start {' '.join(args.mp_start)}" if "mp" in executors else "")
               + (f" --ray-reuse {' '.join(args.ray_reuse)}" if "ray" in executors else "")
               + (f" --experiments {' '.join(exps_run)}" if exps_run != list(OFFLINE) else "")
               + (" --no-ablation" if args.no_ablation else ""))
    tmp = Path(tempfile.mkdtemp(prefix="bench-strategies-"))
    try:
        (tmp / "exps.toml").write_text(offline_epochs(args.epochs))
        body = f'experiments = {exps_run!r}\nexecutors = {executors!r}\n'
        if "mp" in executors:
            body += f'[options.mp]\nstart = {list(dict.fromkeys(args.mp_start))!r}\n'
        if "ray" in executors:
            reuse = ", ".join(dict.fromkeys(args.ray_reuse))
            body += f'[options.ray]\nreuse_actors = [{reuse}]\n'
        campaigns = [("strategies", body)]
        if not args.no_ablation and "unified_model" in EXECUTORS:
            campaigns.append(("ablation", 'experiments = "D_ens"\nexecutors = ["unified_model"]\n'
                                          '[options.unified_model]\nsweep = "ablation"\n'))
        for name, body in campaigns:
            head = (f'name = "{name}"\npasses = {args.passes}\nthreads = {args.threads}\n'
                    'device = "auto"\n'
                    f'runs_dir = "{tmp / "runs"}"\nexperiments_file = "exps.toml"\n')
            top, _, tables = body.partition("[")
            (tmp / f"{name}.toml").write_text(head + top + ("[" + tables if tables else ""))
            proc = subprocess.run([sys.executable, "-m", "engine.runner", str(tmp / f"{name}.toml")],
                                  env=engine_env(), stdin=subprocess.DEVNULL)
            if proc.returncode not in (0, 1):
                print(f"campaign {name} ended with status {proc.returncode}", file=sys.stderr)
                return proc.returncode
        rows = [r for r in read_rows(tmp / "runs" / GROUPS_FILE) if r["status"] == "ok"]
        all_rows = read_rows(tmp / "runs" / GROUPS_FILE)
        jobs = read_rows(tmp / "runs" / INDIVIDUAL_FILE)
        if args.keep:
            shutil.copytree(tmp / "runs", args.keep, dirs_exist_ok=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    Figure = bench_results.Figure
    run_id = bench_results.new_run_id()
    prov = bench_results.provenance(command)
    out = []
    variants = sorted({_variant(r) for r in rows if r["campaign_id"] == "strategies"},
                      key=lambda v: (executors.index(v.split(":")[0]), v))
    for exp in exps_run:
        values = {v: _by_pass(rows, exp, v, "strategies", "T_group") for v in variants}
        values = {v: p for v, p in values.items() if p}
        if "seq" in values:
            out += bench_results.figure_rows(
                PART, Figure(f"T_group:{exp}", "s", baseline="seq",
                             note="makespan per strategy, one value per pass; ratio = 1/speedup"),
                bench_results.aligned(values), run_id, prov)
    out += _mp_figures(rows, jobs, run_id, prov)
    out += _ray_figures(rows, run_id, prov)
    load = _load_by_pass(all_rows)
    if load:
        out += bench_results.figure_rows(
            PART, Figure("load_1min", "load", note="per pass, the highest 1-minute load "
                         "average any of its groups saw when its window opened or closed"),
            {"machine": [load[p] for p in sorted(load)]}, run_id, prov)
    ladder = {}
    for r in rows:
        if r["campaign_id"] == "ablation" and r.get("rung"):
            ladder.setdefault(r["rung"], {})[int(r["pass"])] = float(r["throughput_group"])
    if "A" in ladder:
        out += bench_results.figure_rows(
            PART, Figure("throughput:ablation", "samples/s", baseline="A",
                         note="D_ens throughput_group of each rung (fugue-compat.md ladder); "
                              "on CPU there are no streams, so rungs C and B run the same code"),
            bench_results.aligned({k: v for k, v in ladder.items()}), run_id, prov)
    if args.no_write or not out:
        for r in out:
            print(r["figure"], r["variant"], r["repetition"], r["value"])
        return 0 if out else 1
    bench_results.publish(PART, out, args.results_dir)
    return 0


def offline_epochs(epochs: int | None) -> str:
    """An experiments file setting every offline experiment's epochs (empty: the
    catalogue's); D_mm's members carry their own epochs and are shortened too."""
    if not epochs:
        return ""
    import tomli_w

    from engine.define.catalogue import load_catalogue

    table: dict[str, dict] = {e: {"epochs": epochs} for e in OFFLINE}
    members = load_catalogue().get("D_mm").to_dict().get("members") or []
    if members:
        table["D_mm"] = {"members": [{k: (epochs if k == "epochs" else v)
                                      for k, v in m.items() if v is not None}
                                     for m in members]}
    return tomli_w.dumps({"experiments": table})


def _variant(row: dict) -> str:
    """A group row's variant: its executor, for mp its start (``mp:forkserver``), for ray's
    hpo cells its Tune actors (``ray:reused``)."""
    mode = row.get("mp_start") or row.get("tune_actors")
    return row["executor"] + (f":{mode}" if mode else "")


def _by_pass(rows, exp: str, variant: str, campaign: str, column: str) -> dict[int, float]:
    return {int(r["pass"]): float(r[column]) for r in rows
            if r["campaign_id"] == campaign and r["exp_id"] == exp and _variant(r) == variant
            and r[column] != ""}


def _mp_figures(rows, jobs, run_id: str, prov: dict) -> list[dict]:
    """``worker_start_s`` and ``setup_s:mp`` per mp start (see the module docstring)."""
    import statistics

    from bench import results as bench_results

    Figure = bench_results.Figure
    groups = {r["cell_key"]: r for r in rows
              if r["campaign_id"] == "strategies" and r["executor"] == "mp"}
    starts: dict[str, dict[int, list[float]]] = {}
    setups: dict[str, dict[int, list[float]]] = {}
    for job in jobs:
        group = groups.get(job["cell_key"])
        if group is not None and job["worker_start_s"] != "":
            starts.setdefault(_variant(group), {}).setdefault(int(group["pass"]), []).append(
                float(job["worker_start_s"]))
    for group in groups.values():
        setups.setdefault(_variant(group), {}).setdefault(int(group["pass"]), []).append(
            float(group["setup_s"]))
    median = {v: {p: statistics.median(x) for p, x in by.items()} for v, by in starts.items()}
    out = []
    if len(median) > 1 and "mp:spawn" in median:
        out += bench_results.figure_rows(
            PART, Figure("worker_start_s", "s", baseline="mp:spawn",
                         note="per pass, the median over all mp jobs of the request for a job's "
                              "worker → the worker ready to train (inside T_group)"),
            bench_results.aligned(median), run_id, prov)
    if "mp:forkserver" in median:
        by = median["mp:forkserver"]
        out += bench_results.figure_rows(
            PART, Figure("worker_start_s:forkserver", "s", target=WORKER_START_TARGET,
                         note="the same, pre-warmed start only, against issue 20's bound"),
            {"mp:forkserver": [by[p] for p in sorted(by)]}, run_id, prov)
    if setups:
        out += bench_results.figure_rows(
            PART, Figure("setup_s:mp", "s", note="per pass, the median over the mp cells of "
                         "setup_s (forkserver: the pre-warmed parent's start; outside T_group)"),
            bench_results.aligned({v: {p: statistics.median(x) for p, x in by.items()}
                      for v, by in setups.items()}), run_id, prov)
    return out


def _ray_figures(rows, run_id: str, prov: dict) -> list[dict]:
    """``T_group:D_hpo:ray_reused`` and ``setup_s:ray_hpo`` (see the module docstring)."""
    from bench import results as bench_results

    Figure = bench_results.Figure
    out = []
    reused = _by_pass(rows, "D_hpo", "ray:reused", "strategies", "T_group")
    seq = _by_pass(rows, "D_hpo", "seq", "strategies", "T_group")
    if reused and seq:
        out += bench_results.figure_rows(
            PART, Figure("T_group:D_hpo:ray_reused", "s", baseline="seq",
                         target=RAY_REUSED_TARGET,
                         note="D_hpo makespan, Tune trials in reused actors started in setup, "
                              "against issue 20's bound (>= 0.5x seq's speed)"),
            bench_results.aligned({"seq": seq, "ray:reused": reused}), run_id, prov)
    setups = {v: _by_pass(rows, "D_hpo", v, "strategies", "setup_s")
              for v in ("ray:reused", "ray:fresh")}
    setups = {v: by for v, by in setups.items() if by}
    if setups:
        out += bench_results.figure_rows(
            PART, Figure("setup_s:ray_hpo", "s", note="D_hpo setup_s per Tune actor mode "
                         "(reused: ray.init and the actors' start; fresh: ray.init only, "
                         "each trial starts inside T_group)"),
            bench_results.aligned(setups), run_id, prov)
    return out


def _load_by_pass(rows) -> dict[int, float]:
    out: dict[int, float] = {}
    for r in rows:
        if r.get("campaign_id") != "strategies" or not r.get("pass"):
            continue
        for column in ("host_load_start", "host_load_end"):
            if r.get(column) not in ("", None):
                p = int(r["pass"])
                out[p] = max(out.get(p, 0.0), float(r[column]))
    return out


if __name__ == "__main__":
    sys.exit(main())
