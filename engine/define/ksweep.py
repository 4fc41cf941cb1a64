"""The K sweep (campaign key ``k_sweep``, ``fugue-tui run --k-sweep``): an ensemble run at
several sizes K, one cell per K per executor, to find where throughput stops growing
(``engine.results.knee``).

Member i is the same model at every K: an ensemble's job i is ``{exp}_ens_s{i}`` with seed
``seed + i`` and the experiment's split, whatever K is (``engine.define.workloads``), and
its batch order is drawn from its own seed (``engine.train.data.EpochOrder``). So the
sweep's K = 8 cell trains the K = 4 cell's four models plus four more, and a throughput
difference between them is the executor's, never the models'.

Only ensembles are swept: a cv experiment's folds, an hpo grid's points and a
multi_model's members *are* its jobs, so changing K would change what each job trains
(hpo sweeps come with the HPO issue). Torch-free.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from engine.bounds import JOB
from engine.errors import ConfigError

#: Workload types whose K may be swept.
SWEEPABLE = ("ensemble",)
#: Why each other built-in type is refused (the one-line error says it).
_WHY_NOT = {
    "cv": "its K is the number of folds, so every fold's data changes with K",
    "hpo": "its K is the size of the search_space grid (hpo sweeps are not supported yet)",
    "multi_model": "its K is the number of members, each its own model",
}


def check_k_sweep(value: Any, where: str, experiments: Sequence[Any]) -> tuple[int, ...]:
    """The validated ``k_sweep`` (``()`` when absent) for the selected ``experiments``
    (``engine.define.experiment.Experiment``).

    Rules: a non-empty list of integers, each >= 1 and at most the job bound
    (``engine.bounds``), strictly increasing (so no K twice), and every selected
    experiment an ensemble.

    Raises:
        ConfigError: one line naming ``where``, the key and the offending value.
    """
    if value is None:
        return ()
    key = "key 'k_sweep'"
    if not isinstance(value, list) or not value:
        raise ConfigError(f"{where}: {key} must be a non-empty list of ensemble sizes, "
                          f"e.g. k_sweep = [1, 2, 4, 8], got {value!r}")
    for k in value:
        if isinstance(k, bool) or not isinstance(k, int):
            raise ConfigError(f"{where}: {key} must hold integers (ensemble sizes K), "
                              f"got {k!r}")
        if k < 1:
            raise ConfigError(f"{where}: {key}: every K must be >= 1, got {k}")
        JOB["k"].check(k, where, key)
    for before, k in zip(value, value[1:], strict=False):
        if k == before:
            raise ConfigError(f"{where}: {key} lists K = {k} twice: give each K once, "
                              f"increasing (e.g. [1, 2, 4, 8])")
        if k < before:
            raise ConfigError(f"{where}: {key} must be increasing, got {k} after {before} "
                              f"(e.g. [1, 2, 4, 8])")
    for exp in experiments:
        if exp.type not in SWEEPABLE:
            why = _WHY_NOT.get(exp.type, "only ensembles are swept")
            raise ConfigError(f"{where}: {key} applies to ensemble experiments only: "
                              f"{exp.id} is {exp.type} ({why}); select ensembles only")
    return tuple(value)


def at_size(exp: Any, k: int) -> Any:
    """``exp`` (an ensemble ``Experiment``) with K = ``k``: the definition every cell of
    that size runs and hashes (its ``k`` is the only field that differs)."""
    return dataclasses.replace(exp, k=k)
