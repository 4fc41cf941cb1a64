"""Experiment → jobs, with the harness's job ids and seeds.

* ensemble: K jobs ``{exp}_ens_s{i}``, identical but for the seed; validated on the
  dataset's test split when it has one, else on a held-out ``val_fraction`` of the data.
* cv: K jobs ``{exp}_fold{i}``: fold i is the i-th contiguous block of a permutation drawn
  with ``split_seed``; the first ``n mod K`` folds get one extra sample. Job i validates on
  fold i and trains on the rest.
* hpo: one job ``{exp}_t{i}`` per trial: the Cartesian product of the grid axes of
  ``search_space`` in the order written, repeated ``num_samples`` times, each trial's
  sampled axes drawn from the campaign seed and i (``engine.define.search_space``); every
  trial trains on the same holdout split and validates every epoch.
* multi_model: one job ``{exp}_m{i}_{model}`` per member, each with its own hyperparameters.

Job i's seed is ``seed + i`` under every executor, whatever order it runs jobs in (fugue
compatibility, ``docs/fugue-compat.md``). Torch-free.

Workload types live in a registry, declared with a decorator under the value an
experiment's ``type`` carries; the four above register themselves exactly as a plugin does::

    from engine.define.workloads import SplitSpec, make_job, register_workload

    @register_workload("my_sweep", description="K copies at growing batch sizes")
    def my_sweep(exp, seed):
        split = SplitSpec("holdout", exp.split_seed, exp.val_fraction)
        return [make_job(exp, f"{exp.id}_b{i}", i, seed,
                         {**base_fields(exp), "batch_size": exp.batch_size * 2 ** i}, split)
                for i in range(exp.k)]

A plugin type's experiment is declared like an ensemble (``model``, ``dataset``, ``k``,
``batch_size``, ``epochs``, ``lr``). :func:`expand` checks what every type must keep:
``exp.k`` jobs, indices ``0..k-1`` in order, seeds ``seed + i``, the experiment's id, and
distinct job ids.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from engine.bounds import DEFAULT_SEED, JOB
from engine.define import search_space, tomlfile
from engine.define.experiment import (
    ALIASES,
    JOB_FIELDS,
    OPTIMIZER_KWARGS,
    Experiment,
    check_counts,
    check_job_count,
)
from engine.errors import ConfigError, known
from engine.registry import Registry


@dataclass(frozen=True)
class SplitSpec:
    """Which samples a job trains and validates on.

    kind ``"test"``: train on the whole train pool, validate on the dataset's test split
    (falls back to ``"holdout"`` for datasets without one); ``"holdout"``: validate on a
    ``val_fraction`` of the train pool drawn with ``split_seed``; ``"fold"``: cv fold
    ``fold`` of ``folds``, drawn with ``split_seed``.
    """

    kind: str
    split_seed: int
    val_fraction: float = 0.2
    fold: int | None = None
    folds: int | None = None


@dataclass(frozen=True)
class JobSpec:
    """One training: everything needed to reproduce it, JSON-able via ``asdict``."""

    job_id: str
    exp_id: str
    index: int
    seed: int
    model: str
    dataset: str
    task: str | None
    batch_size: int
    epochs: int
    lr: float
    optimizer: str
    optimizer_kwargs: dict[str, Any] = field(default_factory=dict)
    amp: bool = False
    model_kwargs: dict[str, Any] = field(default_factory=dict)
    split: SplitSpec = field(default_factory=lambda: SplitSpec("test", 0))
    validate_every_epoch: bool = False

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "JobSpec":
        data = dict(data)
        data["split"] = SplitSpec(**data["split"])
        return cls(**data)


@dataclass(frozen=True)
class WorkloadSpec:
    """A workload type: ``expand(exp, seed) -> list[JobSpec]`` for experiments whose
    ``type`` is ``name``."""

    name: str
    expand: Callable[[Experiment, int], list[JobSpec]]
    description: str = ""
    #: ``parse(values, table, where) -> (k, members)``: checks the keys that are this type's
    #: own (``values``: the table over the defaults; ``table``: what the file wrote) and
    #: derives K. Default :func:`parse_k_jobs`, the ensemble's rules: ``model``,
    #: ``dataset``, ``k`` and the hyperparameters.
    parse: Callable[[dict[str, Any], dict[str, Any], str], tuple[int, tuple]] | None = None

    def __post_init__(self) -> None:
        if self.parse is None:
            object.__setattr__(self, "parse", parse_k_jobs)


#: Workload types by the value of an experiment's ``type`` (built-ins first, then plugins).
WORKLOADS = Registry("workload type")


def register_workload(name: str, *, description: str = "", replace: bool = False,
                      parse: Callable[..., tuple[int, tuple]] | None = None):
    """Decorator: ``@register_workload("my_sweep")`` over ``expand(exp, seed) -> [JobSpec]``.
    ``parse``: the type's own key rules (see :attr:`WorkloadSpec.parse`; default
    :func:`parse_k_jobs`).

    Raises:
        ConfigError: ``name`` is already registered and ``replace`` is not set.
    """

    def wrap(func: Callable[[Experiment, int], list[JobSpec]]):
        WORKLOADS.add(WorkloadSpec(name, func, description or (func.__doc__ or "").strip()
                                   .split("\n")[0], parse), replace=replace)
        return func

    return wrap


# -- each type's own keys (the catalogue parses the rest) -----------------------------------

def missing_keys_error(missing: list[str], where: str) -> ConfigError:
    """``<where>: missing key 'a'`` or, all at once, ``missing keys 'a', 'b'``."""
    names = ", ".join(f"'{m}'" for m in missing)
    return ConfigError(f"{where}: missing key{'s' if len(missing) > 1 else ''} {names}")


def _needs_model_and_dataset(values: dict[str, Any], where: str) -> None:
    missing = [need for need in ("model", "dataset") if not values.get(need)]
    if missing:
        raise missing_keys_error(missing, where)


def _needs_hyperparameters(values: dict[str, Any], space: dict[str, Any], where: str) -> None:
    missing = [need for need in ("batch_size", "epochs", "lr")
               if values.get(need) is None and need not in space]
    if missing:
        raise missing_keys_error(missing, where)


def parse_k_jobs(values: dict[str, Any], table: dict[str, Any], where: str, *,
                 min_k: int = 1, too_few: str = "") -> tuple[int, tuple]:
    """K jobs of one model on one dataset (ensemble, cv, and a plugin type by default): ``k``
    given and >= ``min_k``, no ``search_space``.

    Raises:
        ConfigError: naming the missing or wrong key.
    """
    _needs_model_and_dataset(values, where)
    if values.get("search_space"):
        raise ConfigError(f"{where}: 'search_space' only applies to hpo experiments")
    if "num_samples" in table:
        raise ConfigError(f"{where}: 'num_samples' only applies to hpo experiments")
    k = values.get("k")
    if k is None:
        raise ConfigError(f"{where}: missing key 'k' (the number of jobs: members of an "
                          f"ensemble, folds of a cv; e.g. k = 5)")
    if not isinstance(k, int) or k < 1:
        raise ConfigError(f"{where}: key 'k' must be an integer >= 1, got {k!r}")
    JOB["k"].check(k, where, "key 'k'")  # at most MAX_JOBS (engine.bounds)
    if k < min_k:
        raise ConfigError(f"{where}: {too_few}, got {k}")
    _needs_hyperparameters(values, {}, where)
    return k, ()


def _parse_cv(values: dict[str, Any], table: dict[str, Any], where: str) -> tuple[int, tuple]:
    return parse_k_jobs(values, table, where, min_k=2, too_few="a cv experiment needs k >= 2 folds")


def _parse_hpo(values: dict[str, Any], table: dict[str, Any], where: str) -> tuple[int, tuple]:
    """K is the number of trials: ``num_samples`` (default 1) × the points of the grid axes
    (``engine.define.search_space``). Each axis a job field, an optimizer keyword or a
    dotted key into ``model_kwargs``/``optimizer_kwargs``; a grid axis a non-empty list of
    values of that field's type, a sampled axis one distribution whose values (both ends of
    a range, each choice) are of that type and inside the field's bounds."""
    _needs_model_and_dataset(values, where)
    space = values.get("search_space") or {}
    if not space:
        raise ConfigError(f"{where}: an hpo experiment needs a non-empty 'search_space'")
    if "k" in table:
        raise ConfigError(f"{where}: key 'k' does not apply to hpo (K is the size of "
                          f"the search_space grid)")
    num_samples = values.get("num_samples")
    if num_samples is not None and num_samples < 1:
        raise ConfigError(f"{where}: key 'num_samples' must be >= 1, got {num_samples}")
    paths: dict[tuple[str, ...], str] = {}
    valid = list(JOB_FIELDS) + list(OPTIMIZER_KWARGS)
    for key, options in space.items():
        swhere = f"{where}.search_space"
        path = search_space.field_path(key, OPTIMIZER_KWARGS)
        if len(path) > 1 and (path[0] not in search_space.NESTED_FIELDS
                              or not all(path[1:])):
            nested = [f"{n}.<key>" for n in search_space.NESTED_FIELDS]
            raise ConfigError(f"{swhere}: '{key}' is not a job field: a dotted key reaches "
                              f"into {' or '.join(nested)}")
        if len(path) == 1 and key not in valid:
            raise ConfigError(f"{swhere}: '{key}' is not a job field"
                              f"{tomlfile.suggest(key, valid, ALIASES)}; {known(valid)}")
        # One field, one axis (``weight_decay`` is ``optimizer_kwargs.weight_decay``): never
        # both gridded and sampled. A whole table first and its keys after is a layering
        # (axes apply in order); a whole table after one of its keys would overwrite it.
        for other, name in paths.items():
            if path == other or other[:len(path)] == path:
                both = ("both gridded and sampled" if search_space.is_sampled(space[name])
                        != search_space.is_sampled(options) else "swept twice")
                raise ConfigError(f"{swhere}: '{key}' and '{name}' set the same field "
                                  f"({'.'.join(other)}): it is {both}; keep one axis")
        paths[path] = key
        if search_space.is_sampled(options):
            search_space.check_axis(key, options, swhere)
            name, _ = search_space.distribution(options)
            candidates = search_space.extremes(options)
        elif not isinstance(options, list) or not options:
            raise ConfigError(f"{swhere}: '{key}' must be a non-empty list (a grid axis) or a "
                              f"table with one distribution "
                              f"({', '.join(search_space.DISTRIBUTIONS)})")
        else:
            name, candidates = "", options
        types = (JOB_FIELDS.get(key) or OPTIMIZER_KWARGS.get(key)) if len(path) == 1 else None
        for option in candidates:
            if types is not None and not tomlfile.type_ok(option, types):
                what = f"{name} draws" if name else "a value of"
                raise ConfigError(f"{swhere}: '{key}' has {what} the wrong type: {option!r}"
                                  if not name else
                                  f"{swhere}: '{key}': {what} {type(option).__name__} values "
                                  f"({option!r}), the field needs "
                                  f"{' or '.join(t.__name__ for t in types)}")
            if len(path) == 1:
                check_counts({key: option}, swhere)
    k = search_space.trial_count(space, num_samples)
    check_job_count(k, where, f"the search_space has {k} trials" if num_samples
                    else f"the search_space grid has {k} points")
    _needs_hyperparameters(values, space, where)
    return k, ()


def _parse_multi_model(values: dict[str, Any], table: dict[str, Any],
                       where: str) -> tuple[int, tuple]:
    """K is the number of ``members``; each member is a table of job fields over the
    experiment's own (its defaults)."""
    members: list[dict[str, Any]] = []
    if not values.get("members"):
        raise ConfigError(f"{where}: a multi_model experiment needs a non-empty 'members' list")
    check_job_count(len(values["members"]), where,
                    f"'members' holds {len(values['members'])} members")
    for i, member in enumerate(values["members"]):
        mwhere = f"{where}.members[{i}]"
        if not isinstance(member, dict):
            raise ConfigError(f"{mwhere}: must be a table")
        tomlfile.check_keys(member, JOB_FIELDS, mwhere, ALIASES)
        merged = {key: values.get(key) for key in JOB_FIELDS} | member
        missing = [need for need in ("model", "dataset", "batch_size", "epochs", "lr")
                   if merged.get(need) is None]
        if missing:
            raise missing_keys_error(missing, mwhere)
        check_counts(merged, mwhere)
        members.append(merged)
    # A top-level job field is the members' default; when every member sets its own it
    # would be silently ignored (a user's "[experiments.D_mm] epochs = 2" did nothing).
    for key in JOB_FIELDS:
        if key in table and all(isinstance(m, dict) and key in m for m in values["members"]):
            raise ConfigError(f"{where}: key '{key}' has no effect: every member of this "
                              f"multi_model experiment sets its own {key} (set it in "
                              f"members[i] instead, or remove it there)")
    if "k" in table:
        raise ConfigError(f"{where}: key 'k' does not apply to multi_model (K is the number "
                          f"of members)")
    return len(members), tuple(members)


def base_fields(exp: Experiment) -> dict[str, Any]:
    """The experiment's job fields (model, dataset, task, batch_size, ...), a fresh dict."""
    return {key: getattr(exp, key) for key in JOB_FIELDS}


def expand(exp: Experiment, seed: int = DEFAULT_SEED) -> list[JobSpec]:
    """Expand ``exp`` into its jobs through the workload registry (see the module docstring
    for ids, seeds and splits).

    Raises:
        ConfigError: unknown type (with the nearest registered one), or a registered
            expansion that broke the job contract (count, order, seeds, ids).
    """
    spec = WORKLOADS.get(exp.type, f"experiment {exp.id}")
    jobs = list(spec.expand(exp, seed))
    _check_jobs(exp, seed, jobs, spec)
    return jobs


def _check_jobs(exp: Experiment, seed: int, jobs: list[JobSpec], spec: WorkloadSpec) -> None:
    origin = getattr(spec.expand, "__module__", "?")
    where = f"workload type '{exp.type}' ({origin}), experiment {exp.id}"
    if len(jobs) != exp.k:
        raise ConfigError(f"{where}: expanded into {len(jobs)} jobs, but K is {exp.k}")
    for i, job in enumerate(jobs):
        if not isinstance(job, JobSpec):
            raise ConfigError(f"{where}: job {i} is a {type(job).__name__}, not a JobSpec")
        if (job.index, job.seed, job.exp_id) != (i, seed + i, exp.id):
            raise ConfigError(f"{where}: job {i} ({job.job_id}) has index {job.index}, seed "
                              f"{job.seed}, exp_id {job.exp_id!r}; expected index {i}, seed "
                              f"{seed + i} (seed + index), exp_id {exp.id!r}")
    if len({job.job_id for job in jobs}) != len(jobs):
        raise ConfigError(f"{where}: job ids are not distinct")


@register_workload("ensemble", description="K identical jobs but for the seed")
def _ensemble(exp: Experiment, seed: int) -> list[JobSpec]:
    return [make_job(exp, f"{exp.id}_ens_s{i}", i, seed, base_fields(exp),
                     SplitSpec("test", exp.split_seed, exp.val_fraction))
            for i in range(exp.k)]


@register_workload("cv", description="K folds: job i validates on fold i, trains on the rest",
                   parse=_parse_cv)
def _cv(exp: Experiment, seed: int) -> list[JobSpec]:
    return [make_job(exp, f"{exp.id}_fold{i}", i, seed, base_fields(exp),
                     SplitSpec("fold", exp.split_seed, exp.val_fraction, i, exp.k))
            for i in range(exp.k)]


@register_workload("hpo", description="one trial per point of the search_space grid "
                   "× num_samples draws of its sampled axes", parse=_parse_hpo)
def _hpo(exp: Experiment, seed: int) -> list[JobSpec]:
    holdout = SplitSpec("holdout", exp.split_seed, exp.val_fraction)
    return [make_job(exp, f"{exp.id}_t{i}", i, seed,
                     search_space.apply(base_fields(exp), trial_config(exp, seed, i),
                                        OPTIMIZER_KWARGS), holdout, True)
            for i in range(exp.k)]


def trial_config(exp: Experiment, seed: int, index: int) -> dict[str, Any]:
    """hpo trial ``index``'s configuration (axis → value, in the order written) under the
    campaign ``seed``: ``engine.define.search_space.trial_config``. Every executor trains
    these, and each job row records them (``trial_config``)."""
    return search_space.trial_config(exp.search_space, exp.num_samples, seed, index)


@register_workload("multi_model", description="one job per member, each its own hyperparameters",
                   parse=_parse_multi_model)
def _multi_model(exp: Experiment, seed: int) -> list[JobSpec]:
    return [make_job(exp, f"{exp.id}_m{i}_{member['model']}", i, seed, dict(member),
                     SplitSpec("test", exp.split_seed, exp.val_fraction))
            for i, member in enumerate(exp.members)]


def make_job(exp: Experiment, job_id: str, i: int, seed: int, fields: dict[str, Any],
             split: SplitSpec, every_epoch: bool = False) -> JobSpec:
    """Job ``i`` of ``exp`` with the job fields ``fields`` (as :func:`base_fields` returns);
    its seed is ``seed + i``."""
    return JobSpec(
        job_id=job_id, exp_id=exp.id, index=i, seed=seed + i, model=fields["model"],
        dataset=fields["dataset"], task=fields.get("task"), batch_size=int(fields["batch_size"]),
        epochs=int(fields["epochs"]), lr=float(fields["lr"]), optimizer=fields["optimizer"],
        optimizer_kwargs=dict(fields.get("optimizer_kwargs") or {}), amp=bool(fields.get("amp")),
        model_kwargs=dict(fields.get("model_kwargs") or {}), split=split,
        validate_every_epoch=every_epoch)


def train_size(split: SplitSpec, n_pool: int, n_test: int | None) -> int:
    """How many samples a job trains on (the arithmetic of ``engine.train.data.split_for``)."""
    if split.kind == "test" and n_test:
        return n_pool
    if split.kind in ("test", "holdout"):
        return n_pool - max(1, round(n_pool * split.val_fraction))
    assert split.fold is not None and split.folds is not None
    base, extra = divmod(n_pool, split.folds)
    return n_pool - (base + (1 if split.fold < extra else 0))
