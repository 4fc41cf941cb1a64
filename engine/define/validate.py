"""Checks of a campaign's jobs that need the registries but no data and no torch: done when
the campaign is loaded, so an impossible job is a one-line error (exit 2) before anything
runs, not a failed cell later."""

from __future__ import annotations

from engine.define import tomlfile
from engine.define.experiment import OPTIMIZER_KWARGS, Experiment
from engine.define.workloads import expand, train_size
from engine.errors import ConfigError
from engine.parts.models import check_kwargs as check_model_kwargs
from engine.parts.optimizers import check_optimizer
from engine.registry import DATASETS, MODELS

#: Job seeds are ``seed + i`` and must fit torch's 64-bit generator seed.
MAX_SEED = 2**63 - 1


def check_experiment(exp: Experiment, seed: int, where: str) -> None:
    """Raise :class:`ConfigError` for a job that cannot train on any machine: an optimizer
    keyword that does not exist or has a value of the wrong type, a model_kwargs key that a
    registered model does not take, a batch larger than the job's training set, a seed out
    of range. Unregistered models or datasets are not errors here (a plugin may be missing on
    this machine only): the runner records those cells as skipped, with the reason.

    ``where`` (the campaign, or the command-line flag) is named for the seed; any other
    error names the file that defines the experiment (the catalogue or a user's
    experiments file)."""
    jobs = expand(exp, seed)
    if not 0 <= seed <= MAX_SEED - len(jobs):
        raise ConfigError(f"{where}: seed {seed} out of range (0 to {MAX_SEED - len(jobs)} "
                          f"for {len(jobs)} jobs)")
    defined = (f"{exp.source}: experiments.{exp.id}" if exp.source
               else f"{where}: experiment {exp.id}")
    for job in jobs:
        job_where = f"{defined}, job {job.job_id}"
        check_optimizer(job.optimizer, job.optimizer_kwargs, job_where)
        for key, value in job.optimizer_kwargs.items():
            types = OPTIMIZER_KWARGS.get(key)
            if types is not None and not tomlfile.type_ok(value, types):
                raise ConfigError(f"{job_where}: optimizer '{job.optimizer}' keyword '{key}' "
                                  f"has a value of the wrong type: {value!r}")
        model = MODELS.items.get(job.model)
        if model is not None:
            check_model_kwargs(job.model, model.build, job.model_kwargs, job_where)
        spec = DATASETS.items.get(job.dataset)
        if spec is None or spec.sizes is None:
            continue
        n_pool, n_test = spec.sizes
        n_train = train_size(job.split, n_pool, n_test)
        if job.batch_size > n_train:
            # "test" means "the test split when the dataset has one, else a holdout".
            kind = "holdout" if job.split.kind == "test" and not n_test else job.split.kind
            raise ConfigError(f"{job_where}: batch_size {job.batch_size} "
                              f"exceeds its {n_train} training samples ({job.dataset}, "
                              f"{kind} split)")
