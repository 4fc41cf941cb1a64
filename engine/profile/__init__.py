"""Memory profiles and the concurrency estimate (``fugue-tui profile``, ``fugue-tui
simulate``, ``max_parallel = "auto"``).

* :mod:`.budget`: the budgets (device memory, host RAM, cores): parsed (``6GiB``) or
  measured on this machine; torch-free.
* :mod:`.store`: the profiles file ``<runs_dir>/profiles.csv`` (one row per profile, keyed
  by the machine identity); torch-free.
* :mod:`.estimate`: how many jobs fit at once per executor, from a profile and a budget;
  torch-free.
* :mod:`.memory_model`: what an executor declares about its memory (``MemoryModel``: how
  a profile's figures add up at K jobs at once; the built-ins' in
  ``engine.executors.memory_models``); torch-free, imports nothing of the engine.
* :mod:`.auto`: ``max_parallel = "auto"`` resolved at plan time (the number enters the cell
  key, never the word); torch-free.
* :mod:`.collect`: runs the probe for each distinct profile key and appends the rows;
  torch-free (the probe is a fresh process).
* ``engine.cell.profile_probe``: the measuring process itself (a cell of its own kind:
  it imports torch, the executors and the training loop, which this package never does).
"""
