"""What an experiment is: its keys and their types, the per-job hyperparameters, defaults,
and the :class:`Experiment` the catalogue parses a table into. Torch-free.

Shared by the catalogue (which parses tables), the workload types (which check the keys
that are their own and expand experiments into jobs) and validation; it imports neither.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from engine.bounds import JOB, MAX_JOBS, check_numbers
from engine.errors import ConfigError

#: Per-job hyperparameters: what an hpo search space and a multi_model member may set.
JOB_FIELDS: dict[str, tuple[type, ...]] = {
    "model": (str,), "dataset": (str,), "task": (str,), "batch_size": (int,),
    "epochs": (int,), "lr": (float,), "optimizer": (str,), "optimizer_kwargs": (dict,),
    "amp": (bool,), "model_kwargs": (dict,),
}
#: Optimizer keyword arguments that an hpo search space may sweep directly (``momentum = [...]``).
OPTIMIZER_KWARGS: dict[str, tuple[type, ...]] = {
    "momentum": (float,), "weight_decay": (float,), "dampening": (float,), "eps": (float,),
    "betas": (list,), "nesterov": (bool,), "amsgrad": (bool,),
}
EXPERIMENT_KEYS: dict[str, tuple[type, ...]] = {
    **JOB_FIELDS, "type": (str,), "family": (str,), "k": (int,), "size": (str,),
    "search_space": (dict,), "members": (list,), "description": (str,),
    "val_fraction": (float,), "split_seed": (int,), "precision": (str,),
    "num_samples": (int,), "save_models": (bool, str),
}
#: Other spellings of job fields, suggested for an unknown key (difflib finds none of these).
ALIASES: dict[str, str] = {
    "learning_rate": "lr", "learningrate": "lr", "learning-rate": "lr", "batch": "batch_size",
    "batchsize": "batch_size", "bs": "batch_size", "epoch": "epochs", "num_epochs": "epochs",
    "n_epochs": "epochs", "optim": "optimizer", "folds": "k", "n_jobs": "k",
}
DEFAULTS: dict[str, Any] = {
    "task": None, "optimizer": "adamw", "optimizer_kwargs": {}, "amp": False,
    "model_kwargs": {}, "family": "", "size": "", "description": "",
    "val_fraction": 0.2, "split_seed": 0,
}


@dataclass(frozen=True)
class Experiment:
    """One catalogue entry.

    ``k`` is the number of jobs: members of an ensemble, folds of a cv, points of an hpo
    trials (derived: ``num_samples`` × grid points) or entries of a multi_model (derived).
    ``search_space`` keeps the order written in the file: grid axes (lists) are crossed in
    that key order, sampled axes (one-key tables) drawn per trial
    (``engine.define.search_space``).
    ``split_seed`` draws validation holdouts and cv folds, independent of job seeds.
    ``user_keys``: the keys a user's experiments file wrote for this id (empty for a
    catalogue entry as shipped); a name among them that no registry knows is an error while
    loading, where an inherited one makes the cell ``skipped`` (``engine.define.validate``).
    Neither it nor ``source`` is part of the definition (:meth:`to_dict`, cell keys).
    """

    id: str
    type: str
    k: int
    model: str | None = None
    dataset: str | None = None
    task: str | None = None
    batch_size: int | None = None
    epochs: int | None = None
    lr: float | None = None
    optimizer: str = "adamw"
    optimizer_kwargs: dict[str, Any] = field(default_factory=dict)
    amp: bool = False
    model_kwargs: dict[str, Any] = field(default_factory=dict)
    search_space: dict[str, Any] = field(default_factory=dict)
    members: tuple[dict[str, Any], ...] = ()
    family: str = ""
    size: str = ""
    description: str = ""
    val_fraction: float = 0.2
    split_seed: int = 0
    #: The experiment's default precision (``engine.precision``); None: its jobs'
    #: legacy ``amp`` flags decide. Left out of :meth:`to_dict` while None, so that keys
    #: pinned before the precision axis existed stay (docs/measurement.md, "Cell keys").
    precision: str | None = None
    source: str = ""
    #: hpo: draws of the sampled axes per grid point (``engine.define.search_space``);
    #: None (absent) is the legacy grid and is left out of :meth:`to_dict` (cell keys).
    num_samples: int | None = None
    user_keys: frozenset[str] = field(default=frozenset(), compare=False)
    #: ``save_models`` for this experiment's cells (issue 50: ``"false"``, ``"true"``,
    #: ``"best"``); None: the campaign's. Which models are kept after the group window
    #: changes nothing measured: no part of :meth:`to_dict` (cell keys).
    save_models: str | None = None

    def models(self) -> list[str]:
        return [m["model"] for m in self.members] if self.members else [str(self.model)]

    def datasets(self) -> list[str]:
        return [m["dataset"] for m in self.members] if self.members else [str(self.dataset)]

    def to_dict(self) -> dict[str, Any]:
        """The resolved definition (JSON-able), as written into cell specs and hashed into keys."""
        out = {k: v for k, v in self.__dict__.items()
               if k not in ("source", "user_keys", "save_models")}
        if out["precision"] is None:
            del out["precision"]
        if self.num_samples is None:  # absent: the legacy grid, whose keys never change
            del out["num_samples"]
        out["members"] = [dict(m) for m in self.members]
        return out


def check_counts(values: dict[str, Any], where: str) -> None:
    """The job fields among ``values`` (top level, a member or a search-space point) inside
    their bounds (``engine.bounds.JOB``: ``batch_size``, ``epochs``, ``lr``, ``val_fraction``,
    ``split_seed``, ``k``): finite, ``batch_size`` and ``epochs`` >= 1, ``lr`` > 0.

    Raises:
        ConfigError: ``"<where>: key 'epochs' must be <= 100000, got 1000000000000"``.
    """
    check_numbers(values, JOB, where)


def check_job_count(k: int, where: str, what: str) -> None:
    """An experiment expands into at most :data:`~engine.bounds.MAX_JOBS` jobs; ``what``
    says where K came from (``the search_space grid has 4608 points``), checked before
    anything is expanded.

    Raises:
        ConfigError: ``"<where>: <what>: at most 4096 jobs per experiment"``.
    """
    if k > MAX_JOBS:
        raise ConfigError(f"{where}: {what}: at most {MAX_JOBS} jobs per experiment "
                          f"(README, \"Bounds\")")
