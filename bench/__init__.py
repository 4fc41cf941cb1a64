"""fugue-tui's benchmark suite: measurements of the engine itself (``bench/README.md``).

Each part (``python -m bench.<part>``) appends raw per-repetition rows to
``bench/results/<part>.csv`` and re-renders ``bench/RESULTS.md`` from the CSV files
(:mod:`bench.results`).
"""
