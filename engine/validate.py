"""Checks of a campaign's jobs that need the registries but no data and no torch: done when
the campaign is loaded, so an impossible job is a one-line error (exit 2) before anything
runs, not a failed cell later."""

from __future__ import annotations

from engine.catalogue import Experiment
from engine.errors import ConfigError
from engine.optimizers import check_optimizer
from engine.registry import DATASETS
from engine.workloads import expand, train_size

#: Job seeds are ``seed + i`` and must fit torch's 64-bit generator seed.
MAX_SEED = 2**63 - 1


def check_experiment(exp: Experiment, seed: int, where: str) -> None:
    """Raise :class:`ConfigError` for a job that cannot train on any machine: an optimizer
    keyword that does not exist, a batch larger than the job's training set, a seed out of
    range. Unregistered models or datasets are not errors here (a plugin may be missing on
    this machine only): the runner records those cells as skipped, with the reason."""
    jobs = expand(exp, seed)
    if not 0 <= seed <= MAX_SEED - len(jobs):
        raise ConfigError(f"{where}: seed {seed} out of range (0 to {MAX_SEED - len(jobs)} "
                          f"for {len(jobs)} jobs)")
    for job in jobs:
        check_optimizer(job.optimizer, job.optimizer_kwargs,
                        f"{where}: experiment {exp.id}, job {job.job_id}")
        spec = DATASETS.items.get(job.dataset)
        if spec is None or spec.sizes is None:
            continue
        n_train = train_size(job.split, *spec.sizes)
        if job.batch_size > n_train:
            raise ConfigError(f"{where}: experiment {exp.id}, job {job.job_id}: batch_size "
                              f"{job.batch_size} exceeds its {n_train} training samples "
                              f"({job.dataset}, {job.split.kind} split)")
