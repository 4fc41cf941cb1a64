"""Checks of a campaign's jobs that need the registries but no data and no torch: done when
the campaign is loaded, so an impossible job is a one-line error (exit 2) before anything
runs, not a failed cell later."""

from __future__ import annotations

from typing import Any

from engine.bounds import JOB, MAX_SEED, OPTIMIZER, check_numbers
from engine.define import search_space, tomlfile
from engine.define.experiment import OPTIMIZER_KWARGS, Experiment
from engine.define.workloads import JobSpec, SplitSpec, expand, train_size
from engine.errors import ConfigError, quoted, shown
from engine.parts.models import check_kwargs as check_model_kwargs
from engine.parts.optimizers import check_optimizer
from engine.registry import DATASETS, MODELS, OPTIMIZERS, TASKS, Registry

#: The keys of an experiment that name a registered part, and their registries.
_NAMES: dict[str, Registry] = {"model": MODELS, "dataset": DATASETS, "task": TASKS,
                               "optimizer": OPTIMIZERS}


def check_experiment(exp: Experiment, seed: int, where: str) -> None:
    """Raise :class:`ConfigError` for a job that cannot train on any machine: a name that
    a user's experiments file wrote and no registry knows, a job field or optimizer keyword
    out of its bounds (``engine.bounds``) or of the wrong type, an optimizer keyword or a
    model_kwargs key that does not exist, a batch larger than the job's training set, a
    seed out of range. Names the *catalogue* gives that are not registered here are not
    errors (a plugin, a dataset or an optional module may be missing on this machine only):
    the runner records those cells as skipped, with the reason.

    Call it after the plugins are loaded (:func:`engine.plugins.load_plugins`), as every
    process entry does: the registries then hold every name this machine knows.

    ``where`` (the campaign, or the command-line flag) is named for the seed; any other
    error names the file that defines the experiment (the catalogue or a user's
    experiments file)."""
    defined = (f"{exp.source}: experiments.{exp.id}" if exp.source
               else f"{where}: experiment {exp.id}")
    check_user_names(exp, defined)
    check_sampled_ranges(exp, defined)
    jobs = expand(exp, seed)
    if not 0 <= seed <= MAX_SEED - len(jobs):
        raise ConfigError(f"{where}: seed {seed} out of range (0 to {MAX_SEED - len(jobs)} "
                          f"for {len(jobs)} jobs)")
    for job in jobs:
        job_where = f"{defined}, job {job.job_id}"
        check_job_values(job, job_where)
        check_optimizer(job.optimizer, job.optimizer_kwargs, job_where)
        for key, value in job.optimizer_kwargs.items():
            types = OPTIMIZER_KWARGS.get(key)
            if types is not None and not tomlfile.type_ok(value, types):
                raise ConfigError(f"{job_where}: optimizer '{job.optimizer}' keyword '{key}' "
                                  f"has a value of the wrong type: {value!r}")
        check_optimizer_values(job.optimizer, job.optimizer_kwargs, job_where)
        model = MODELS.items.get(job.model)
        if model is not None:
            check_model_kwargs(job.model, model.build, job.model_kwargs, job_where,
                               model.kwarg_bounds)
        check_batch_size(job, job_where)


def check_batch_size(job: JobSpec, where: str) -> None:
    """``job``'s ``batch_size`` no larger than its training samples (when its dataset's
    sizes are registered). A stream's jobs are checked too: a trace's ``batch_size`` column
    overrides the template's (engine.define.matrix).

    Raises:
        ConfigError: ``"<where>: batch_size 100000 exceeds its 354 training samples
            (diabetes, holdout split)"``."""
    spec = DATASETS.items.get(job.dataset)
    if spec is None or spec.sizes is None:
        return
    n_pool, n_test = spec.sizes
    n_train = train_size(job.split, n_pool, n_test)
    if job.batch_size > n_train:
        # "test" means "the test split when the dataset has one, else a holdout".
        kind = "holdout" if job.split.kind == "test" and not n_test else job.split.kind
        raise ConfigError(f"{where}: batch_size {job.batch_size} "
                          f"exceeds its {n_train} training samples ({job.dataset}, "
                          f"{kind} split)")


def check_sampled_ranges(exp: Experiment, where: str) -> None:
    """Every value a sampled ``search_space`` axis can draw is one its field takes, whatever
    the seed: checked on the whole range, not on the draws this seed makes (``randint =
    [0, 10]`` for ``model_kwargs.hidden`` drew 0, below its bound, for seed 2 only). A
    range's values are both its ends (``randint``'s high end less one; ``uniform`` and
    ``loguniform`` ranges as closed, since a draw may round onto the high end) and a
    ``choice``'s every value, checked against the bounds the draws are checked against:
    ``model_kwargs`` keys against each model the experiment may train
    (:attr:`engine.registry.ModelSpec.kwarg_bounds`), optimizer keywords against
    :data:`engine.bounds.OPTIMIZER`, ``batch_size`` against the training samples. (Job
    fields' bounds and types were checked on the same values when the catalogue parsed
    the experiment.)

    Raises:
        ConfigError: ``"<where>.search_space: 'model_kwargs.hidden': randint [0, 10] can
            draw 0 to 9; model 'mlp' model_kwargs key 'hidden' takes integer >= 1 and <=
            65536 (draw 0 must be >= 1, got 0)"``.
    """
    space = exp.search_space
    for key, spec in space.items():
        if not search_space.is_sampled(spec):
            continue  # a grid's every value is some trial's, on every seed
        name, args = search_space.distribution(spec)
        drawn = (f"{name} {shown(args)} can draw "
                 + (f"{args[0]} to {args[1] - 1}" if name == "randint"
                    else "any of its values" if name == "choice"
                    else f"values from {shown(args[0])} up to {shown(args[1])}"))
        at = f"{where}.search_space: {quoted(key)}: {drawn}"
        path = search_space.field_path(key, OPTIMIZER_KWARGS)
        for value in search_space.extremes(spec):
            if path[0] == "optimizer_kwargs" and len(path) == 2:
                bound = OPTIMIZER.get(path[1])
                problem = bound.problem(value) if bound is not None else None
                if problem:
                    raise ConfigError(f"{at}; optimizer keyword '{path[1]}' takes "
                                      f"{_allowed(bound)} (a draw {problem})")
            elif path[0] == "model_kwargs" and len(path) == 2:
                for model_name in _models_of(exp):
                    model = MODELS.items.get(model_name)
                    bound = model.kwarg_bounds.get(path[1]) if model is not None else None
                    problem = bound.problem(value) if bound is not None else None
                    if problem:
                        raise ConfigError(f"{at}; model '{model_name}' model_kwargs key "
                                          f"'{path[1]}' takes {_allowed(bound)} (a draw "
                                          f"{problem})")
            elif path == ("batch_size",):
                _check_batch_range(exp, value, at)


def _allowed(bound: Any) -> str:
    """``integer >= 1 and <= 65536``: a bound as the refusal names it."""
    return ("integer " if bound.integer else "") + bound.text


def _models_of(exp: Experiment) -> list[str]:
    """The models ``exp``'s trials may train: its model, or each its search space gives."""
    spec = exp.search_space.get("model")
    named = search_space.values_of(spec) if spec is not None else [exp.model]
    return [m for m in named if isinstance(m, str)]


def _check_batch_range(exp: Experiment, batch_size: Any, at: str) -> None:
    """A drawable ``batch_size`` no larger than the training samples of each dataset the
    experiment's trials may use (where its size is known)."""
    spec = exp.search_space.get("dataset")
    names = search_space.values_of(spec) if spec is not None else [exp.dataset]
    split = SplitSpec("holdout", exp.split_seed, exp.val_fraction)  # hpo's trials' split
    for name in names:
        dataset = DATASETS.items.get(name) if isinstance(name, str) else None
        if dataset is None or dataset.sizes is None or not isinstance(batch_size, int):
            continue
        n_train = train_size(split, *dataset.sizes)
        if batch_size > n_train:
            raise ConfigError(f"{at}; a batch_size above {n_train}, the training samples "
                              f"of {name}, cannot train (a draw of {batch_size})")


def check_job_values(job: JobSpec, where: str) -> None:
    """A job's numbers inside :data:`engine.bounds.JOB`, whatever workload type made it (a
    plugin's expansion may compute them: ``batch_size * 2 ** i``).

    Raises:
        ConfigError: ``"<where>: key 'batch_size' must be <= 1048576, got 2000000"``.
    """
    check_numbers({"batch_size": job.batch_size, "epochs": job.epochs, "lr": job.lr,
                   "val_fraction": job.split.val_fraction,
                   "split_seed": job.split.split_seed}, JOB, where)


def check_optimizer_values(name: str, kwargs: dict[str, Any], where: str) -> None:
    """Optimizer keywords inside :data:`engine.bounds.OPTIMIZER` (each of ``betas``), and
    ``nesterov`` only with momentum and no dampening: torch's own rules, which it checks
    only when a job builds its optimizer, after the cell started.

    Raises:
        ConfigError: ``"<where>: optimizer 'sgd' keyword 'momentum' must be >= 0, got
            -1"``.
    """
    for key, value in kwargs.items():
        bound = OPTIMIZER.get(key)
        if bound is None:
            continue
        for item in value if key == "betas" and isinstance(value, (list, tuple)) else [value]:
            bound.check(item, where, f"optimizer '{name}' keyword '{key}'")
    if kwargs.get("nesterov") and not (kwargs.get("momentum", 0) > 0
                                       and kwargs.get("dampening", 0) == 0):
        raise ConfigError(f"{where}: optimizer '{name}': nesterov needs momentum > 0 and "
                          f"dampening 0, got momentum {kwargs.get('momentum', 0)} and dampening "
                          f"{kwargs.get('dampening', 0)}")


def check_user_names(exp: Experiment, where: str) -> None:
    """Every model, dataset, task and optimizer name that a user's experiments file wrote
    for ``exp`` (``exp.user_keys``: top-level keys, its ``members``, its ``search_space``)
    is registered. A name the catalogue gives is not checked here: a plugin may provide it
    on another machine, and the cell is ``skipped`` here, with the reason.

    Raises:
        ConfigError: ``"<file>: experiments.U: key 'model': unknown model 'mlpp' (did you
            mean 'mlp'?); known: ..."``, naming the member or the search space where it is.
    """
    keys = exp.user_keys
    found: list[tuple[str, Any, str]] = [(key, getattr(exp, key), where)
                                         for key in _NAMES if key in keys]
    if "members" in keys:
        found += [(key, member.get(key), f"{where}.members[{i}]")
                  for i, member in enumerate(exp.members) for key in _NAMES]
    if "search_space" in keys:
        found += [(key, value, f"{where}.search_space")
                  for key in _NAMES
                  for value in search_space.values_of(exp.search_space.get(key, []))]
    for key, name, at in found:
        if isinstance(name, str):
            check_user_name(key, name, at)


def check_user_name(key: str, name: str, where: str) -> None:
    """``name`` (of ``key``: model, dataset, task or optimizer) is registered.

    Raises:
        ConfigError: ``"<where>: key 'dataset': unknown dataset 'wnie' (did you mean
            'wine'?); known: ..."``, with where plugins may register more.
    """
    if name in _NAMES[key]:
        return
    try:
        _NAMES[key].get(name, f"{where}: key '{key}'")
    except ConfigError as exc:
        raise ConfigError(f"{exc} (plugins named in FUGUE_PLUGINS or installed as "
                          f"fugue_tui.plugins entry points may register more)") from None
