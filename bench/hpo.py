"""Part ``hpo``: time to best and ``T_group`` of hpo cells per strategy and scheduler.

``python -m bench.hpo [--passes N] [--executors seq unified_model ray] [--schedulers fifo sha]
[--experiments D_hpo S16]`` runs one real campaign through the runner (in this process, as
``python -m engine.runner`` runs them) on CPU or the machine's device:

* ``D_hpo``: the catalogue's grid (mlp on digits, 3 lr × 2 batch sizes, 12 epochs);
* ``S16``: a sampled 16-trial space over the same model and data (``lr`` log-uniform on
  [1e-4, 1e-1], ``batch_size`` in {32, 128}, ``num_samples = 8``; the same 16 trials under
  every executor, a pure function of the campaign seed).

Each executor runs each scheduler asked for, ``--passes`` passes (default 5), the cells in
the runner's order. ``--max-parallel N`` caps the trials at once of mp, ray and unified_model
under fifo and the asynchronous schedulers (ray: N Tune trial actors, each a process that
imports torch — on a small machine the actors' start, not the training, is ray's cost;
reused from trial to trial); ``sha`` cells always run every trial at once (a trial waits at
each rung for the others), so they run as a second campaign without the cap. Figures, one
variant per ``<experiment> <executor> <scheduler>``:

* ``T_group``: the group window (s);
* ``time_to_best``: ``time_to_best_s`` — from the window's start until some trial came
  within 1 % of the group's best validation metric;
* ``trials_stopped``: early stops per cell (0 under fifo).

The analysis's rules (``engine.results.analysis``) say which ratios mean something:
``T_group`` against seq fifo; time to best against seq under the same scheduler. ``--note``
adds a remark to the figures' notes (say, "indicative: a loaded machine").
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

PART = "hpo"
EXPERIMENTS = """
[experiments.S16]
type = "hpo"
family = "offline"
description = "a sampled 16-trial space over D_hpo's model and data"
model = "mlp"
dataset = "digits"
epochs = 12
optimizer = "adam"
search_space = { lr = { loguniform = [1e-4, 1e-1] }, batch_size = [32, 128] }
num_samples = 8
"""
TAKES_SHA = ("seq", "unified_model", "mp", "ray")


#: Executors with a ``max_parallel`` option (``--max-parallel``).
SLOTTED = ("mp", "ray", "unified_model")


def campaigns(executors: list[str], schedulers: list[str], max_parallel: int | None
              ) -> list[tuple[str, dict[str, dict[str, object]]]]:
    """``(campaign name, options)`` of each campaign to run: one for every scheduler when no
    cap is asked for; with ``max_parallel``, the capped schedulers in one and ``sha`` (every
    trial at once: no cap) in a second."""
    def options(names: list[str], cap: int | None) -> dict[str, dict[str, object]]:
        out: dict[str, dict[str, object]] = {}
        for e in executors:
            chosen = [s for s in names if s != "sha" or e in TAKES_SHA]
            if chosen:
                out[e] = {"scheduler": chosen,
                          **({"max_parallel": cap} if cap and e in SLOTTED else {})}
        return out

    if max_parallel is None or "sha" not in schedulers:
        return [("bench-hpo", options(schedulers, max_parallel))]
    capped = [s for s in schedulers if s != "sha"]
    return ([("bench-hpo", options(capped, max_parallel))] if capped else []) + \
        [("bench-hpo-sha", options(["sha"], None))]


def run_campaign(tmp: Path, experiments: list[str], executors: list[str],
                 schedulers: list[str], passes: int, device: str,
                 max_parallel: int | None = None) -> list[dict[str, str]]:
    """The campaigns' group rows (every cell must end ok; :func:`campaigns`).

    Raises:
        RuntimeError: naming the cells that did not end ok.
    """
    from engine.define.campaign import parse_campaign
    from engine.results.read import read_rows
    from engine.runner.supervisor import Runner

    for name, options in campaigns(executors, schedulers, max_parallel):
        ran = [e for e in executors if e in options]
        doc = {"name": name, "experiments": ",".join(experiments), "executors": ran,
               "runs_dir": str(tmp / "runs"), "device": device, "threads": 1,
               "passes": passes, "experiments_file": str(tmp / "exps.toml"),
               "options": options}
        outcome = Runner(parse_campaign(doc, "bench"), on_event=lambda e: None).run()
        if outcome.exit_code != 0:
            raise RuntimeError("; ".join(f"{o.cell.label}: {o.status} {o.error}"
                                         for o in outcome.outcomes if o.status != "ok"))
    return read_rows(tmp / "runs" / "master_groups.csv")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=f"python -m bench.{PART}", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--passes", type=int, default=5, help="passes (default 5)")
    parser.add_argument("--executors", nargs="+", default=["seq", "unified_model", "ray"])
    parser.add_argument("--schedulers", nargs="+", default=["fifo", "sha"])
    parser.add_argument("--experiments", nargs="+", default=["D_hpo", "S16"])
    parser.add_argument("--device", default="auto", help="cpu, cuda, auto (default)")
    parser.add_argument("--max-parallel", type=int, default=None, metavar="N",
                        help="trials at once for mp, ray and unified_model under fifo and "
                             "the asynchronous schedulers (default: every trial; sha cells "
                             "always run every trial at once)")
    parser.add_argument("--note", default="", help="a remark added to every figure's note")
    parser.add_argument("--no-write", action="store_true", help="print only")
    parser.add_argument("--results-dir", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    from bench import results as bench_results
    from engine.plugins import load_plugins

    load_plugins()  # the registries a campaign names (executors, models, datasets)

    command = (f"python -m bench.{PART} --passes {args.passes} --executors "
               f"{' '.join(args.executors)} --schedulers {' '.join(args.schedulers)} "
               f"--experiments {' '.join(args.experiments)} --device {args.device}"
               + (f" --max-parallel {args.max_parallel}" if args.max_parallel else "")
               + (f" --note {args.note!r}" if args.note else ""))
    load_start = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="bench-hpo-") as tmp_name:
        tmp = Path(tmp_name)
        (tmp / "exps.toml").write_text(EXPERIMENTS)
        groups = run_campaign(tmp, args.experiments, args.executors, args.schedulers,
                              args.passes, args.device, args.max_parallel)
    load_end = os.getloadavg()[0]
    values: dict[str, dict[str, list[float]]] = {"T_group": {}, "time_to_best": {},
                                                 "trials_stopped": {}}
    for g in groups:
        variant = f"{g['exp_id']} {g['executor']} {g['scheduler'] or 'fifo'}"
        for figure, column in (("T_group", "T_group"), ("time_to_best", "time_to_best_s"),
                               ("trials_stopped", "trials_stopped")):
            text = g.get(column) or ("0" if column == "trials_stopped" else "")
            if text:
                values[figure].setdefault(variant, []).append(float(text))
    for variant in sorted(values["T_group"]):
        t = values["T_group"][variant]
        ttb = values["time_to_best"].get(variant, [])
        print(f"{variant}: T_group median {sorted(t)[len(t) // 2]:.2f} s, time to best "
              f"median {sorted(ttb)[len(ttb) // 2]:.2f} s" if ttb else
              f"{variant}: T_group median {sorted(t)[len(t) // 2]:.2f} s")
    print(f"load {load_start:.2f} -> {load_end:.2f}")
    if args.no_write:
        return 0
    Figure = bench_results.Figure
    run_id = bench_results.new_run_id()
    prov = bench_results.provenance(command)
    remark = f" ({args.note})" if args.note else ""
    notes = {
        "T_group": "the hpo group window; compare with seq fifo",
        "time_to_best": "window start to the first validation within 1 % of the group's "
                        "best; compare with seq under the same scheduler",
        "trials_stopped": "trials stopped early per cell",
    }
    units = {"T_group": "s", "time_to_best": "s", "trials_stopped": "trials"}
    rows: list[dict[str, Any]] = []
    for figure, series in values.items():
        rows += bench_results.figure_rows(
            PART, Figure(figure, units[figure], note=notes[figure] + remark), series, run_id,
            prov)
    rows += bench_results.figure_rows(PART, Figure("load_1min", "load"),
                                      {"start": [load_start], "end": [load_end]}, run_id, prov)
    bench_results.publish(PART, rows, args.results_dir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
