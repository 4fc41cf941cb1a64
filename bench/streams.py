"""Part ``streams``: the strategies serving the same arrival stream at 0.3, 0.6 and 0.9 of
seq's measured capacity (issue 52, item 3).

``python -m bench.streams [--passes N] [--count C] [--loads 0.3 0.6 0.9] [--epochs E]
[--executors ...] [--max-parallel M] [--seed S]`` runs real stream campaigns (campaign key
``arrivals``, README "Jobs that arrive over time") through the runner, in this process as
``python -m engine.runner`` runs them, in a temporary runs folder, on the CPU:

1. **seq's capacity, in the same run** (campaign ``streams-capacity``, one seq cell): a
   trace in which every job arrives at 0, so seq serves them back to back: first a warm-up
   (one job of each template, in the mix's order: imports, data loads, first calls), then
   the stream's own templates in the stream's order (each the next job of its template:
   the same configuration, another seed). Capacity = the measured jobs ÷ the time from the
   warm-up's last completion to the last job's completion (:func:`capacity_of`), jobs/s.
2. **One Poisson stream per load** ρ (campaign ``streams-<ρ>``): ``rate = ρ × capacity``,
   ``count`` jobs over the offline mix (D_ens, D_cv, D_hpo, D_mm, D_reg, weight 1 each),
   a fixed ``seed``: the same stream for every strategy and pass, and the same jobs at
   every load (the draws of a Poisson stream do not depend on its rate: only the arrival
   times scale by 1/rate). Every executor that serves streams
   (``ExecutorSpec.serves_streams``, :func:`stream_executors`: discovered, not listed)
   serves it once per pass, in the runner's order (pass outermost). Executors whose jobs
   train in worker processes (``trains_in_workers``: mp, ray) get ``max_parallel`` =
   ``--max-parallel`` (default: this machine's cores), one worker per core: with their
   default (every job at once) ray would start an actor per job, 30 s of torch imports on
   2 cores; unified_model keeps its default (every member of a stack at once).

Figures (one repetition = one pass; variants: the executors, baseline seq):

* ``capacity`` (jobs/s): seq's back-to-back service rate (one value);
* per load ``ρ``: ``jct_p50 @ρ`` and ``jct_p95 @ρ`` (s: the group rows' ``jct_p50_s`` /
  ``jct_p95_s``, arrival → completion; ratio to seq: below 1 = shorter), ``throughput @ρ``
  (jobs/s: ``throughput_jps``, completed jobs ÷ the busy period) and ``offered_load @ρ``
  (``offered_load``: the rate × the strategy's own mean service time, no ratio); each
  figure's note names the rate;
* ``load_1min``: per pass, the highest 1-minute load average any of its groups saw.

Budget (the defaults, 2-core Xeon, measured in issue 52's session): seq serves a job of the
offline mix at catalogue epochs in 0.38 s on average (16 jobs in 6.0 s; capacity ≈ 2.6
jobs/s). A stream of ``count`` jobs at load ρ lasts about ``count / (ρ × capacity)``, so
the three loads take ``count / capacity × (1/0.3 + 1/0.6 + 1/0.9)`` = 6.1 × 16 / 2.6 ≈
38 s per executor and pass, 150 s for four executors; each cell adds ~5 s (its process,
imports and setup; ray's runtime with 2 actors ~8 s): 12 cells, ~60 s; so ~210 s a pass,
3 passes 630 s, plus the capacity cell (~15 s): about 11 minutes, inside the 15 the issue
allows. Measured: 9 min 41 s for the whole part with the defaults (capacity 2.62 jobs/s,
host load ≤ 1.3). A strategy that cannot keep up at 0.9 (its capacity below the rate) runs longer:
its queue drains at its own rate. ``--count``, ``--passes`` and ``--epochs`` scale it
(``--passes 1 --count 6 --epochs 2 --no-write`` is a smoke of about a minute).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from bench.strategies import OFFLINE  # the offline family: each template weight 1

PART = "streams"
LOADS = (0.3, 0.6, 0.9)
DEFAULT_COUNT = 16
DEFAULT_PASSES = 3
#: The stream's generator seed (the jobs' seeds come from the campaign seed, 42).
STREAM_SEED = 7
CAMPAIGN_SEED = 42
CAPACITY_CAMPAIGN = "streams-capacity"
#: Group-row column → figure name, unit, note (per load).
FIGURES: tuple[tuple[str, str, str, str], ...] = (
    ("jct_p50_s", "jct_p50", "s", "median job completion time (arrival → done)"),
    ("jct_p95_s", "jct_p95", "s", "p95 job completion time (arrival → done)"),
    ("throughput_jps", "throughput", "jobs/s", "completed jobs ÷ the busy period"),
    ("offered_load", "offered_load", "load", "the rate × this strategy's mean service time"),
)


def stream_executors() -> list[str]:
    """Every registered executor that serves streams, seq first (the baseline), then the
    registry's order. Call after :func:`engine.plugins.load_plugins`."""
    from engine.registry import EXECUTORS

    names = [n for n in EXECUTORS.names() if EXECUTORS.get(n).serves_streams]
    return sorted(names, key=lambda n: n != "seq")


def worker_options(executors: Sequence[str], max_parallel: int) -> dict[str, dict[str, int]]:
    """``[options.<executor>]`` for the executors whose jobs train in worker processes and
    that have a ``max_parallel`` option: one worker per core (module docstring)."""
    from engine.registry import EXECUTORS

    out = {}
    for name in executors:
        spec = EXECUTORS.get(name)
        if spec.trains_in_workers and "max_parallel" in spec.option_fields:
            out[name] = {"max_parallel": max_parallel}
    return out


def load_label(load: float) -> str:
    """``0.3`` → ``"0.3"`` (the campaign and figure suffix)."""
    return f"{load:g}"


def poisson(rate: float, count: int, seed: int = STREAM_SEED,
            mix: Sequence[str] = OFFLINE) -> dict[str, Any]:
    """The ``arrivals`` table of the stream at ``rate`` jobs/s."""
    return {"process": "poisson", "rate": rate, "count": count, "seed": seed,
            "mix": {exp: 1 for exp in mix}}


def capacity_trace(templates: Sequence[str], warmup: Sequence[str]) -> str:
    """The capacity trace (CSV text): the warm-up templates, then ``templates``, all at 0."""
    return "time_s,experiment\n" + "".join(f"0,{t}\n" for t in [*warmup, *templates])


def capacity_of(jobs: Sequence[Mapping[str, Any]], warmup: int) -> float:
    """Jobs/s served back to back after the warm-up: the jobs after the first ``warmup``
    completions ÷ the time from the ``warmup``-th completion to the last (``completed_s``,
    seconds after the window opened; with no warm-up, from the window's opening).

    Raises:
        ValueError: a job not ok or without ``completed_s``, or nothing left to measure.
    """
    bad = [j.get("job_id", "?") for j in jobs
           if j.get("status") != "ok" or j.get("completed_s") in (None, "")]
    if bad:
        raise ValueError(f"capacity: jobs not completed: {', '.join(map(str, bad))}")
    done = sorted(float(j["completed_s"]) for j in jobs)
    measured = len(done) - warmup
    start = done[warmup - 1] if warmup > 0 else 0.0
    if measured < 1 or done[-1] <= start:
        raise ValueError(f"capacity: {len(done)} jobs, {warmup} of them warm-up: nothing to "
                         "measure")
    return measured / (done[-1] - start)


def rates(capacity: float, loads: Sequence[float]) -> dict[float, float]:
    """Load → arrival rate (jobs/s): ``load × capacity``."""
    return {load: load * capacity for load in loads}


def figure_values(groups: Sequence[Mapping[str, str]], loads: Sequence[float],
                  executors: Sequence[str]
                  ) -> dict[tuple[float, str], dict[str, dict[int, float]]]:
    """``{(load, column): {executor: {pass: value}}}`` from the ok group rows of the load
    campaigns (an empty value is left out: missing, never 0)."""
    out: dict[tuple[float, str], dict[str, dict[int, float]]] = {}
    for load in loads:
        campaign = f"streams-{load_label(load)}"
        for column, *_ in FIGURES:
            by: dict[str, dict[int, float]] = {}
            for g in groups:
                if (g.get("campaign_id") == campaign and g.get("status") == "ok"
                        and g.get("executor") in executors and g.get(column) not in ("", None)):
                    by.setdefault(g["executor"], {})[int(g["pass"])] = float(g[column])
            out[load, column] = {e: by[e] for e in executors if e in by}
    return out


def load_by_pass(groups: Sequence[Mapping[str, str]]) -> dict[int, float]:
    """Per pass, the highest ``host_load_start``/``host_load_end`` of the load campaigns."""
    out: dict[int, float] = {}
    for g in groups:
        if not str(g.get("campaign_id", "")).startswith("streams-") or not g.get("pass") \
                or g.get("campaign_id") == CAPACITY_CAMPAIGN:
            continue
        for column in ("host_load_start", "host_load_end"):
            if g.get(column) not in ("", None):
                p = int(g["pass"])
                out[p] = max(out.get(p, 0.0), float(g[column]))
    return out


def _run(doc: dict[str, Any], tmp: Path) -> None:
    """Run one campaign to its end, one line per cell; every cell must end ok."""
    from engine.define.campaign import parse_campaign
    from engine.runner.supervisor import Runner

    labels: dict[str, str] = {}
    t0 = time.monotonic()

    def progress(event: Mapping[str, Any]) -> None:
        cell = event.get("cell")
        if event.get("type") == "cell_started" and cell:
            labels[cell] = str(event.get("label") or cell)
        elif (event.get("type") in ("done", "failed", "killed") and cell in labels
              and "exit_code" in event):  # the runner's (a cell's own done has none)
            print(f"  {labels[cell]}: {event['type']} at {time.monotonic() - t0:.0f} s",
                  flush=True)

    outcome = Runner(parse_campaign(doc, "bench", base_dir=tmp), on_event=progress).run()
    if outcome.exit_code != 0:
        raise SystemExit(f"{PART}: campaign {doc['name']}: " + "; ".join(
            f"{o.cell.label}: {o.status} {o.error}" for o in outcome.outcomes
            if o.status != "ok"))


def _doc(name: str, executors: Sequence[str], arrivals: dict[str, Any], passes: int,
         tmp: Path, options: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "executors": list(executors), "arrivals": arrivals,
            "passes": passes, "threads": 1, "device": "cpu", "seed": CAMPAIGN_SEED,
            "runs_dir": str(tmp / "runs"), "experiments_file": str(tmp / "exps.toml"),
            **({"options": options} if options else {})}


def main(argv: list[str] | None = None) -> int:
    from bench import prog

    parser = argparse.ArgumentParser(prog=prog(PART), description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--passes", type=int, default=DEFAULT_PASSES,
                        help=f"passes of each load's campaign (default {DEFAULT_PASSES})")
    parser.add_argument("--count", type=int, default=DEFAULT_COUNT,
                        help=f"jobs in the stream (default {DEFAULT_COUNT})")
    parser.add_argument("--loads", type=float, nargs="+", default=list(LOADS),
                        help="offered loads as fractions of seq's capacity (default 0.3 0.6 "
                             "0.9)")
    parser.add_argument("--epochs", type=int, default=None,
                        help="epochs of every offline template (default: the catalogue's)")
    parser.add_argument("--executors", nargs="+", default=None,
                        help="default: every executor that serves streams")
    parser.add_argument("--max-parallel", type=int, default=os.cpu_count() or 1,
                        help="max_parallel of the executors that train in worker processes "
                             "(default: this machine's cores)")
    parser.add_argument("--seed", type=int, default=STREAM_SEED,
                        help=f"the stream's seed (default {STREAM_SEED})")
    parser.add_argument("--no-write", action="store_true", help="print only")
    parser.add_argument("--results-dir", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    loads = sorted(dict.fromkeys(args.loads))
    if args.passes < 1 or args.count < 1 or args.max_parallel < 1:
        parser.error("--passes, --count and --max-parallel must be >= 1")
    if any(not 0 < load for load in loads):
        parser.error("--loads must be > 0")
    if args.epochs is not None and args.epochs < 1:
        parser.error("--epochs must be >= 1")
    from bench import results as bench_results
    from bench.strategies import offline_epochs
    from engine.define.arrivals import StreamSpec, generate
    from engine.define.catalogue import load_catalogue
    from engine.plugins import load_plugins
    from engine.results.columns import GROUPS_FILE, INDIVIDUAL_FILE
    from engine.results.read import read_rows

    load_plugins()  # this process is an entry: the registries a campaign names
    serving = stream_executors()
    executors = args.executors or serving
    unknown = [e for e in executors if e not in serving]
    if unknown:
        parser.error(f"--executors: {', '.join(unknown)} do not serve streams; ones that do: "
                     f"{', '.join(serving)}")
    if "seq" not in executors:
        executors = ["seq", *executors]  # the baseline
    options = worker_options(executors, args.max_parallel)
    command = (f"python -m bench.{PART} --passes {args.passes} --count {args.count} --loads "
               + " ".join(map(load_label, loads))
               + (f" --epochs {args.epochs}" if args.epochs else "")
               + f" --executors {' '.join(executors)} --max-parallel {args.max_parallel}"
               + f" --seed {args.seed}")
    t_start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="bench-streams-") as tmp_name:
        tmp = Path(tmp_name)
        (tmp / "exps.toml").write_text(offline_epochs(args.epochs))
        catalogue = load_catalogue(tmp / "exps.toml")
        stream = generate(StreamSpec("poisson", rate=1.0, count=args.count, seed=args.seed,
                                     mix=tuple((e, 1.0) for e in OFFLINE)),
                          catalogue, CAMPAIGN_SEED)
        (tmp / "capacity.csv").write_text(
            capacity_trace([a.experiment for a in stream], OFFLINE))
        print(f"{PART}: seq's capacity: {len(OFFLINE)} warm-up + {args.count} jobs back to "
              f"back; host load average {os.getloadavg()[0]:.2f}", flush=True)
        _run(_doc(CAPACITY_CAMPAIGN, ["seq"], {"trace": str(tmp / "capacity.csv")}, 1, tmp,
                  {}), tmp)
        jobs = read_rows(tmp / "runs" / INDIVIDUAL_FILE)
        capacity = capacity_of(jobs, len(OFFLINE))
        chosen = rates(capacity, loads)
        print(f"capacity {capacity:.3f} jobs/s; rates " + ", ".join(
            f"{load_label(ld)}: {r:.3f}/s" for ld, r in chosen.items()), flush=True)
        for load, rate in chosen.items():
            print(f"offered load {load_label(load)} ({rate:.3f} jobs/s), {args.passes} "
                  f"pass(es) of {', '.join(executors)}; host load average "
                  f"{os.getloadavg()[0]:.2f}", flush=True)
            _run(_doc(f"streams-{load_label(load)}", executors,
                      poisson(rate, args.count, args.seed), args.passes, tmp, options), tmp)
        groups = read_rows(tmp / "runs" / GROUPS_FILE)
    print(f"{PART}: done in {time.monotonic() - t_start:.0f} s", flush=True)

    Figure = bench_results.Figure
    run_id = bench_results.new_run_id()
    prov = bench_results.provenance(command)
    rows: list[dict[str, Any]] = bench_results.figure_rows(
        PART, Figure("capacity", "jobs/s",
                     note=f"seq serving the offline mix back to back after a {len(OFFLINE)}-"
                          f"job warm-up: {args.count} jobs ÷ their span"),
        {"seq": [capacity]}, run_id, prov)
    values = figure_values(groups, loads, executors)
    for load in loads:
        for column, name, unit, what in FIGURES:
            series = values[load, column]
            if not series:
                continue
            baseline = "seq" if column != "offered_load" and "seq" in series else ""
            rows += bench_results.figure_rows(
                PART, Figure(f"{name} @{load_label(load)}", unit, baseline=baseline,
                             note=f"{what}; Poisson stream of {args.count} jobs at "
                                  f"{load_label(load)} × seq's capacity = "
                                  f"{chosen[load]:.3f} jobs/s, one value per pass"),
                bench_results.aligned(series), run_id, prov)
    host = load_by_pass(groups)
    if host:
        rows += bench_results.figure_rows(
            PART, Figure("load_1min", "load", note="per pass, the highest 1-minute load "
                         "average any of its stream groups saw when its window opened or "
                         "closed"), {"machine": [host[p] for p in sorted(host)]}, run_id, prov)
    if args.no_write:
        print("figure | variant | pass | value (unit)")
        for r in rows:
            print(f"{r['figure']} | {r['variant']} | {r['repetition']} | "
                  f"{r['value']:.4g} {r.get('unit', '')}".rstrip())
        return 0
    bench_results.publish(PART, rows, args.results_dir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
