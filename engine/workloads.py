"""Experiment → jobs, with the harness's job ids and seeds.

* ensemble: K jobs ``{exp}_ens_s{i}``, identical but for the seed; validated on the
  dataset's test split when it has one, else on a held-out ``val_fraction`` of the data.
* cv: K jobs ``{exp}_fold{i}``: fold i is the i-th contiguous block of a permutation drawn
  with ``split_seed``; the first ``n mod K`` folds get one extra sample. Job i validates on
  fold i and trains on the rest.
* hpo: one job ``{exp}_t{i}`` per point of the Cartesian product of ``search_space`` in the
  order written; every trial trains on the same holdout split and validates every epoch.
* multi_model: one job ``{exp}_m{i}_{model}`` per member, each with its own hyperparameters.

Job i's seed is ``seed + i`` under every executor, whatever order it runs jobs in (fugue
compatibility, ``../shared/reference/fugue-compat.md``). Torch-free.
"""

from __future__ import annotations

import itertools
from dataclasses import asdict, dataclass, field
from typing import Any

from engine.catalogue import JOB_FIELDS, OPTIMIZER_KWARGS, Experiment


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


def _base(exp: Experiment) -> dict[str, Any]:
    return {key: getattr(exp, key) for key in JOB_FIELDS}


def expand(exp: Experiment, seed: int = 42) -> list[JobSpec]:
    """Expand ``exp`` into its jobs (see the module docstring for ids, seeds and splits)."""
    jobs: list[JobSpec] = []
    holdout = SplitSpec("holdout", exp.split_seed, exp.val_fraction)
    if exp.type == "ensemble":
        for i in range(exp.k):
            jobs.append(_job(exp, f"{exp.id}_ens_s{i}", i, seed, _base(exp),
                             SplitSpec("test", exp.split_seed, exp.val_fraction), False))
    elif exp.type == "cv":
        for i in range(exp.k):
            jobs.append(_job(exp, f"{exp.id}_fold{i}", i, seed, _base(exp),
                             SplitSpec("fold", exp.split_seed, exp.val_fraction, i, exp.k), False))
    elif exp.type == "hpo":
        keys = list(exp.search_space)
        for i, point in enumerate(itertools.product(*(exp.search_space[k] for k in keys))):
            fields = _base(exp)
            fields["optimizer_kwargs"] = dict(fields["optimizer_kwargs"])
            for key, value in zip(keys, point):  # applied in the order written
                if key in OPTIMIZER_KWARGS:
                    fields["optimizer_kwargs"][key] = value
                else:
                    # copy tables: the experiment (and so the cell key) must not change
                    fields[key] = dict(value) if isinstance(value, dict) else value
            jobs.append(_job(exp, f"{exp.id}_t{i}", i, seed, fields, holdout, True))
    elif exp.type == "multi_model":
        for i, member in enumerate(exp.members):
            jobs.append(_job(exp, f"{exp.id}_m{i}_{member['model']}", i, seed, dict(member),
                             SplitSpec("test", exp.split_seed, exp.val_fraction), False))
    else:  # guarded by the catalogue parser
        raise ValueError(f"unknown workload type {exp.type!r}")
    return jobs


def _job(exp: Experiment, job_id: str, i: int, seed: int, fields: dict[str, Any],
         split: SplitSpec, every_epoch: bool) -> JobSpec:
    return JobSpec(
        job_id=job_id, exp_id=exp.id, index=i, seed=seed + i, model=fields["model"],
        dataset=fields["dataset"], task=fields.get("task"), batch_size=int(fields["batch_size"]),
        epochs=int(fields["epochs"]), lr=float(fields["lr"]), optimizer=fields["optimizer"],
        optimizer_kwargs=dict(fields.get("optimizer_kwargs") or {}), amp=bool(fields.get("amp")),
        model_kwargs=dict(fields.get("model_kwargs") or {}), split=split,
        validate_every_epoch=every_epoch)


def train_size(split: SplitSpec, n_pool: int, n_test: int | None) -> int:
    """How many samples a job trains on (the arithmetic of ``engine.data.split_for``)."""
    if split.kind == "test" and n_test:
        return n_pool
    if split.kind in ("test", "holdout"):
        return n_pool - max(1, round(n_pool * split.val_fraction))
    assert split.fold is not None and split.folds is not None
    base, extra = divmod(n_pool, split.folds)
    return n_pool - (base + (1 if split.fold < extra else 0))
