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
    "profile_estimate": "memory estimate from profiles: per-member RSS prediction error "
                        "K <= 32, max_parallel = \"auto\" within its RAM budget",
}
