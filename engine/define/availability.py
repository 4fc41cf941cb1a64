"""Can this machine run an experiment? Torch-free: registries, ``find_spec`` and file checks.

An experiment is available when, for every job it expands into (members of a
multi_model, points of an hpo grid, whose ``search_space`` may name models, datasets or
optimizers too), the model, dataset, task and optimizer are registered, the model's
required module is installed (checked without importing it), and the dataset's files are
present. The first failure is the reason shown by ``fugue-tui list`` and the plan screen.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from engine import registry
from engine.bounds import DEFAULT_SEED
from engine.define.catalogue import Catalogue, Experiment
from engine.define.validate import check_experiment
from engine.define.workloads import expand
from engine.errors import FugueError

_PLUGIN_HINT = "a plugin must provide it: FUGUE_PLUGINS"


def _unregistered(kind: str, name: str) -> str:
    return f"{kind} '{name}' is not registered ({_PLUGIN_HINT})"


def requires_hint(module: str) -> str:
    """How to install a part's optional module: ``pip install ...``."""
    return ("pip install 'fugue-tui[vision]'" if module == "torchvision"
            else f"pip install {module}")


def experiment_availability(exp: Experiment, data_root: str | Path | None = None
                            ) -> tuple[bool, str]:
    """``(True, "")``, or ``(False, reason)`` with the first thing missing, e.g.
    ``"model 'transformer' is not registered (a plugin must provide it: FUGUE_PLUGINS)"``
    or ``"CIFAR-10 not found: missing /data/cifar-10-batches-py (...)"``.

    ``data_root`` defaults to ``engine.parts.datasets.data_root()`` ($FUGUE_DATA_DIR). Never
    raises for a missing or unknown name: that is the answer, not an error.
    """
    if importlib.util.find_spec("torch") is None:
        return False, "torch is not installed"
    seen: set[tuple[str, str, str | None, str]] = set()
    checked_datasets: dict[str, tuple[bool, str]] = {}
    for job in expand(exp):
        key = (job.model, job.dataset, job.task, job.optimizer)
        if key in seen:
            continue
        seen.add(key)
        if job.model not in registry.MODELS:
            return False, _unregistered("model", job.model)
        requires = registry.MODELS.get(job.model).requires
        if requires and importlib.util.find_spec(requires) is None:
            return False, f"model '{job.model}' needs {requires}: {requires_hint(requires)}"
        if job.dataset not in registry.DATASETS:
            return False, _unregistered("dataset", job.dataset)
        dataset = registry.DATASETS.get(job.dataset)
        task = job.task or dataset.task
        if task not in registry.TASKS:
            return False, _unregistered("task", task)
        if job.optimizer not in registry.OPTIMIZERS:
            return False, _unregistered("optimizer", job.optimizer)
        if job.dataset not in checked_datasets:
            try:
                checked_datasets[job.dataset] = dataset.available(data_root)
            except Exception as exc:  # a plugin's check must not break the listing
                checked_datasets[job.dataset] = (
                    False, f"dataset '{job.dataset}': availability check failed: {exc}")
        ok, reason = checked_datasets[job.dataset]
        if not ok:
            return False, reason or f"dataset '{job.dataset}' is not available"
    return True, ""


def catalogue_availability(catalogue: Catalogue, ids: list[str] | None = None,
                           check: bool = False) -> list[tuple[Experiment, bool, str]]:
    """Every experiment of ``catalogue`` (or those of ``ids``, in that order) with
    :func:`experiment_availability`'s answer: what ``fugue-tui list``, ``fugue-tui validate``
    and the plan screen show. ``check``: first check each experiment as a campaign would
    (:func:`~engine.define.validate.check_experiment`); an invalid one, or one whose
    availability raises :class:`~engine.errors.FugueError`, is ``(False, "invalid: ...")``."""
    out = []
    for exp in (catalogue.get(i) for i in ids) if ids is not None else \
            catalogue.experiments.values():
        if not check:
            out.append((exp, *experiment_availability(exp)))
            continue
        try:
            check_experiment(exp, DEFAULT_SEED, f"experiment {exp.id}")
            ok, reason = experiment_availability(exp)
        except FugueError as exc:
            ok, reason = False, f"invalid: {exc}"
        out.append((exp, ok, reason))
    return out
