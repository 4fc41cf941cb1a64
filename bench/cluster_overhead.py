"""Part ``cluster_overhead``: what a cell costs through a Ray cluster (issue 28) beside the
same cell on the runner's own host.

``python -m bench.cluster_overhead [--reps N]`` starts a real Ray cluster on this host
(``ray.cluster_utils.Cluster``: a head node without CPUs and one worker node with one CPU)
and runs, per repetition, the fixed cell of :mod:`bench.fixed_cost` (one job, one training
step, the monitor on) twice through the real runner (in this process): once on this host
with a fresh interpreter (``spawn``, the like-for-like start: a node starts its cells the
same way) and once on the cluster (``cluster = "<address>"``, ``cpus_per_cell = 1``).
Figures, each from the runner's decision to start the cell until its rows are durable
(:func:`bench.fixed_cost.split`):

* ``fixed_cost`` per variant (``spawn``, ``cluster``);
* ``cluster_overhead``: per repetition, cluster minus spawn. Target ≤ 2 s: the agent's
  placement and start, the streaming of events and rows, the head's appends.

The cluster's own start (seconds) and the planning probe are paid once per campaign and are
in no cell's figure. The two variants alternate order between repetitions.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench.fixed_cost import EXPERIMENTS, split

PART = "cluster_overhead"
VARIANTS = ("spawn", "cluster")


def run_campaign(tmp: Path, name: str, address: str | None) -> dict[str, float]:
    """The fixed cell's components in a campaign of its own (on ``address``'s cluster when
    given, else on this host with a fresh interpreter).

    Raises:
        RuntimeError: the cell did not end ok.
    """
    from engine.define.campaign import parse_campaign
    from engine.events import is_runner_event
    from engine.runner.supervisor import Runner

    doc: dict[str, Any] = {"name": name, "experiments": "X_fixed", "executors": ["seq"],
                           "runs_dir": str(tmp / "runs"), "device": "cpu", "threads": 1,
                           "experiments_file": str(tmp / "exps.toml")}
    if address:
        doc.update(cluster=address, cpus_per_cell=1)
    events: list[dict[str, Any]] = []
    outcome = Runner(parse_campaign(doc, "bench"), on_event=events.append,
                     cell_start="spawn").run()
    if outcome.exit_code != 0:
        raise RuntimeError(f"campaign {name}: " + "; ".join(
            f"{o.cell.label}: {o.status} {o.error}" for o in outcome.outcomes))
    started = next(e for e in events if e["type"] == "cell_started")
    own = [e for e in events if e.get("cell") == started["cell"]
           and e.get("attempt") == started["attempt"] and not is_runner_event(e)]
    verdict = next(e for e in events if is_runner_event(e) and e["type"] == "done")
    return split(started, own, verdict)


def main(argv: list[str] | None = None) -> int:
    from bench import prog

    parser = argparse.ArgumentParser(prog=prog(PART), description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reps", type=int, default=5, help="repetitions (default 5)")
    parser.add_argument("--note", default="", help="a remark added to the target's note")
    parser.add_argument("--no-write", action="store_true", help="print only")
    parser.add_argument("--results-dir", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    from ray.cluster_utils import Cluster

    from bench import results as bench_results
    from engine.plugins import load_plugins

    load_plugins()
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    command = f"python -m bench.{PART} --reps {args.reps}" + (
        f" --note {args.note!r}" if args.note else "")
    cost: dict[str, list[float]] = {v: [] for v in VARIANTS}
    load: dict[str, list[float]] = {"machine": []}
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 0,
                                                            "include_dashboard": False})
    try:
        cluster.add_node(num_cpus=1)
        cluster.wait_for_nodes()
        with tempfile.TemporaryDirectory(prefix="bench-cluster-") as tmp_name:
            tmp = Path(tmp_name)
            (tmp / "exps.toml").write_text(EXPERIMENTS)
            for variant in VARIANTS:  # warm-up: caches, the node's first worker
                run_campaign(tmp, f"warm-{variant}", cluster.address if variant == "cluster"
                             else None)
            for rep in range(args.reps):
                for variant in (VARIANTS if rep % 2 == 0 else VARIANTS[::-1]):
                    parts = run_campaign(tmp, f"rep{rep + 1}-{variant}",
                                         cluster.address if variant == "cluster" else None)
                    cost[variant].append(parts["fixed_cost"])
                load["machine"].append(os.getloadavg()[0])
                print(f"rep {rep + 1}/{args.reps}: spawn {cost['spawn'][-1]:.2f} s, cluster "
                      f"{cost['cluster'][-1]:.2f} s; load {load['machine'][-1]:.2f}", flush=True)
    finally:
        cluster.shutdown()
    overhead = [c - s for c, s in zip(cost["cluster"], cost["spawn"], strict=True)]
    print(f"median fixed cost: spawn {statistics.median(cost['spawn']):.2f} s, cluster "
          f"{statistics.median(cost['cluster']):.2f} s; overhead "
          f"{statistics.median(overhead):.2f} s")
    if args.no_write:
        return 0
    Figure = bench_results.Figure
    run_id = bench_results.new_run_id()
    prov = bench_results.provenance(command)
    remark = f" ({args.note})" if args.note else ""
    rows = bench_results.figure_rows(
        PART, Figure("fixed_cost", "s", note="the fixed cell's wall time from the runner's "
                     "decision to start it until its rows are durable (bench.fixed_cost)"),
        cost, run_id, prov)
    rows += bench_results.figure_rows(
        PART, Figure("cluster_overhead", "s", target="<=2",
                     note="per repetition: the cell through a 1-worker Ray cluster on this "
                          "host minus the same cell spawned on the runner's host" + remark),
        {"cluster - spawn": overhead}, run_id, prov)
    rows += bench_results.figure_rows(PART, Figure("load_1min", "load"), load, run_id, prov)
    bench_results.publish(PART, rows, args.results_dir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
