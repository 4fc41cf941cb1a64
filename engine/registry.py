"""Name → implementation registries for models, datasets, tasks, optimizers and executors.

Torch-free: builders import torch inside themselves, so the runner and the dashboard can
list what exists (and why something is unavailable) without creating a CUDA context.
Plugins (``engine.plugins``) register into the same tables with the same decorators the
built-ins use.

This module imports nothing of the engine but its errors and bounds: the built-ins register
themselves when their modules are imported, which each process does once at its entry
(``engine.plugins.load_builtins``, also called by ``load_plugins``), so a lookup never
imports modules behind the caller's back.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from engine.bounds import Bound
from engine.errors import ConfigError, known, nearest


@dataclass(frozen=True)
class ModelSpec:
    """A model family.

    ``build(in_shape, n_outputs, **model_kwargs) -> torch.nn.Module`` where ``in_shape`` is
    one sample's shape without the batch dimension (e.g. ``(3, 32, 32)``) and ``n_outputs``
    the number of classes (classification) or targets (regression).
    ``requires`` names an importable module the builder needs (``"torchvision"``).
    ``kwarg_bounds``: the ranges of its ``model_kwargs`` (``{"hidden": count(1, 65536,
    ...)}``, :mod:`engine.bounds`), checked when a campaign loads; any other number a
    builder takes must at least be finite.
    """

    name: str
    build: Callable[..., Any]
    requires: str | None = None
    description: str = ""
    kwarg_bounds: dict[str, Bound] = field(default_factory=dict)


@dataclass(frozen=True)
class DatasetSpec:
    """A dataset held in memory as tensors.

    ``load(root) -> DatasetBundle`` (see ``engine.parts.datasets``); ``available(root) ->
    (bool, reason)`` answers without loading; ``in_shape`` and ``n_outputs`` describe one
    sample so that models can be built (and tested) without the data.
    """

    name: str
    load: Callable[..., Any]
    task: str
    in_shape: tuple[int, ...]
    n_outputs: int
    available: Callable[..., tuple[bool, str]]
    source: str = ""
    #: (samples in the train pool, samples in the test split or None), when known without
    #: loading: lets a campaign refuse a batch size larger than a job's training set up front.
    sizes: tuple[int, int | None] | None = None


@dataclass(frozen=True)
class TaskSpec:
    """How a task trains and what it reports as "accuracy".

    ``criterion()`` returns a loss module with mean reduction; ``prepare(output, target)``
    shapes both for it; ``score(output, target) -> (correct-like sum, count)`` gives the
    numerator and denominator of the reported accuracy (hit rate; R² is computed from sums,
    see ``engine.parts.tasks``).
    """

    name: str
    criterion: Callable[[], Any]
    target_dtype: str  # "long" (class indices) or "float" (regression targets)
    metric: str        # "accuracy" or "r2"
    #: ``module:function`` of the task's vectorised (stacked, K-member) loss for the unified
    #: model; without one the unified model refuses the task by name rather than guessing.
    stacked_target: str | None = None


@dataclass(frozen=True)
class OptimizerSpec:
    """An optimizer, built twice: per job (``build(params, lr, **kwargs)``) and, where
    ``stacked_target`` names ``module:function``, stacked over K members for the unified
    model. Without a stacked form the unified model refuses it by name."""

    name: str
    build: Callable[..., Any]
    kwargs: tuple[str, ...] = ()
    stacked_target: str | None = None


@dataclass
class Registry:
    """One name → spec table with a decorator-free ``add`` and a helpful ``get``."""

    kind: str
    items: dict[str, Any] = field(default_factory=dict)

    def add(self, spec: Any, replace: bool = False) -> Any:
        """Register ``spec`` under ``spec.name``.

        Raises:
            ConfigError: the name is taken and ``replace`` is not set. A plugin that means to
                override a built-in says so (``replace=True``); silently training another
                model under a known name would make its rows look like the built-in's.
        """
        old = self.items.get(spec.name)
        if old is not None and old is not spec and not replace:
            raise ConfigError(f"{self.kind} '{spec.name}' is already registered"
                              f"{_origin(old)}; register with replace=True to override it")
        self.items[spec.name] = spec
        return spec

    def get(self, name: str, where: str = "") -> Any:
        """Return the spec called ``name``.

        Raises:
            ConfigError: unknown name, with the nearest valid one and the known ones.
        """
        try:
            return self.items[name]
        except KeyError:
            prefix = f"{where}: " if where else ""
            raise ConfigError(
                f"{prefix}unknown {self.kind} '{name}'{nearest(name, self.items)}; "
                f"{known(self.items)}") from None

    def __contains__(self, name: object) -> bool:
        return name in self.items

    def names(self) -> list[str]:
        return list(self.items)


MODELS = Registry("model")
DATASETS = Registry("dataset")
TASKS = Registry("task")
OPTIMIZERS = Registry("optimizer")
EXECUTORS = Registry("executor")


def _origin(spec: Any) -> str:
    for attr in ("build", "load", "criterion"):
        func = getattr(spec, attr, None)
        if func is not None and getattr(func, "__module__", None):
            return f" by {func.__module__}"
    return ""


def register_model(name: str, *, requires: str | None = None, description: str = "",
                   replace: bool = False, kwarg_bounds: dict[str, Bound] | None = None):
    """Decorator: ``@register_model("my_net")`` over ``build(in_shape, n_outputs, **kw)``;
    ``kwarg_bounds`` declares the ranges of its keyword arguments (see :class:`ModelSpec`)."""

    def wrap(build: Callable[..., Any]) -> Callable[..., Any]:
        MODELS.add(ModelSpec(name, build, requires, description or (build.__doc__ or "").strip(),
                             dict(kwarg_bounds or {})),
                   replace=replace)
        return build

    return wrap


def register_dataset(spec: DatasetSpec, replace: bool = False) -> DatasetSpec:
    return DATASETS.add(spec, replace=replace)


def register_task(spec: TaskSpec, replace: bool = False) -> TaskSpec:
    return TASKS.add(spec, replace=replace)


def register_optimizer(spec: OptimizerSpec, replace: bool = False) -> OptimizerSpec:
    return OPTIMIZERS.add(spec, replace=replace)

