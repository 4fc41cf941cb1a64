"""fugue-tui's benchmark suite: measurements of the engine itself (``bench/README.md``).

Each part (``python -m bench.<part>``) appends raw per-repetition rows to
``bench/results/<part>.csv`` and re-renders ``bench/RESULTS.md`` from the CSV files
(:mod:`bench.results`).
"""

#: The parts of the suite, in the order of the issue that defines it: name → what it
#: measures. ``fugue-tui bench PART`` runs ``python -m bench.<name>``.
PARTS: dict[str, str] = {
    "strategies": "the four strategies on the offline family, and the ablation ladder",
    "unified_scaling": "unified_model against bare stacked and sequential loops, K = 1..64",
    "seq_overhead": "the seq executor against a bare sequential loop",
    "fixed_cost": "a cell's fixed cost per executor, broken down",
    "monitor_overhead": "the monitor's CPU share and T_group with the monitor on and off",
    "dashboard_cost": "the dashboard's CPU share and keypress latency",
    "results_scale": "load, aggregate and chart results files of 1k-100k group rows",
    "precision": "fp32, amp-bf16 and bf16 for seq and unified_model on D_ens at K = 32 (CPU)",
    "capacity": "the K sweep's knee: seq and unified_model vs the bare stacked loop, K = 1..64",
    "peers": "seq and unified_model against chorus and the fugue harness, one torch build",
    "hpo": "time to best and T_group of hpo cells per strategy, fifo and sha (D_hpo, a "
           "sampled 16-trial space)",
    "profile_estimate": "memory estimate from profiles: per-member RSS prediction error "
                        "K <= 32, max_parallel = \"auto\" within its RAM budget",
    "cluster_overhead": "a cell's fixed cost through a Ray cluster (a node agent) against "
                        "the same cell spawned on the runner's host",
    "dashboard_tab": "a Tab between the plan form's fields against j in the catalogue, in "
                     "process (key to screen)",
    "streams": "every strategy that serves streams on one Poisson stream of the offline "
               "mix at 0.3, 0.6 and 0.9 of seq's measured capacity: JCT p50/p95, throughput",
}


def prog(part: str) -> str:
    """The name a part's ``--help`` shows in its usage line: ``fugue-tui bench PART`` when
    run through ``fugue-tui bench`` (which sets ``FUGUE_BENCH_PROG``), else
    ``python -m bench.PART``."""
    import os

    return os.environ.get("FUGUE_BENCH_PROG") or f"python -m bench.{part}"
