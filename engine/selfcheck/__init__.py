"""``fugue-tui selfcheck``: the parity contract (``engine.executors.unified.contract``,
docs/fidelity.md) proven on this machine.

* :mod:`.cases`: the paths checked, as data (torch-free);
* :mod:`.verdict`: a path's verdict from its comparisons, the counts and the exit status
  (torch-free);
* :mod:`.machine`: the CPU, ISA, BLAS, torch/CUDA, NVML, MPS and Ray facts of a verdict;
* :mod:`.run`: trains each path under seq and unified_model and compares (torch);
* :mod:`.store`: the last verdict per machine, beside the profiles (torch-free);
* ``python -m engine.selfcheck``: the one process that imports torch and runs it all.
"""
