"""Jobs are independent: what a job's model sees of shared state, compared with what a
fresh process shows it (docs/measurement.md, "Jobs are independent").

A process that trains several jobs (seq's cell, a ray pool actor, a reused Ray Tune actor,
unified_model's members built one after another) keeps whatever a plugin keeps outside its
models: a class attribute its ``__init__`` counts up, a module-level cache. The next job
then builds and trains from other state than it would in a fresh process (mp's workers),
and the executors train different models. Watched, shallowly, per model name:

- the plugin module: the module of the model's registered builder; its global values;
- the classes that module names (defined there or in its package, or any ``nn.Module``
  subclass from outside torch) and the model's own class with its bases once a build has
  shown it (a class the module does not name is watched from its first build on); each
  class's own attributes (``vars(cls)``, not inherited ones).

A value is seen if it is a number, string, bytes, bool or None (as its ``repr``; a string
over 200 characters by length and hash), a tuple of those, or by its length a list, dict,
set, frozenset, bytearray or deque. Dunder names and everything else (modules,
functions, classes as values, descriptors, tensors, objects) are left out: state kept
there, or deeper than one level, is not seen.

Each job is judged at two points, around its build: right before it (:func:`job_start`)
and right after it (:func:`job_built`). Per process, what the first job that used a module or
class saw at each point is that point's *baseline* (what a fresh process shows a job; a
class first shown by a build has only the after-build one). The job reads ``ok`` when every
watched value equals its baseline at both points, else ``shared state changed:
Net.counter, ...`` naming the first changed values (the after-build point catches a counter
in the ``__init__`` of a class the first build created). A process that trains one job
(mp's workers, fresh Tune trials) always reads ``ok``; what a job changes during its own
build and training is its own, and shows in the next job of the same process. A one-time
fill (a cache the first build fills) is a change too: the next job starts from the filled
cache, not from what a fresh process has.

Ray Tune asks before its trials reuse actors (:func:`reuse_refusal`, :func:`build_changes`:
the model built twice in the driver, in setup). When the *second* build changes the state
(a counter: every build moves it), every reused trial would build from other state than
the one before, so the executor runs fresh actors instead. A one-time fill leaves the
second build unchanged and keeps reuse (its trials after the first still read
``shared state changed``); state that only training changes is not seen before Tune starts
(the trials' rows still say it).

Torch-free at import (pure Python over ``vars()``; only :func:`reuse_refusal` builds models):
the cell's row code imports it too.
"""

from __future__ import annotations

import collections
import functools
import sys
from collections.abc import Callable, Iterable
from typing import Any

#: The verdict of a job whose start state equals the baseline.
OK = "ok"
#: How many changed values a verdict names before "and N more".
NAMED = 3
#: Longer strings and bytes are seen by length and hash, not by their whole repr.
LONG = 200
#: Containers seen by their length.
_SIZED = (list, dict, set, frozenset, bytearray, collections.deque)
_SCALARS = (bool, int, float, complex, str, bytes, type(None))
#: Libraries whose classes are never plugin state (their caches are their business).
_FOREIGN_ROOTS = frozenset({"torch", "torchvision", "numpy", "sklearn", "ray", "builtins"})

#: Per process: watched unit (a module name, or a class) -> label -> value its first job saw
#: right before its build, and right after it.
_AT_START: dict[Any, dict[str, str]] = {}
_AFTER_BUILD: dict[Any, dict[str, str]] = {}
#: Per process: model name -> classes its built models showed (type(model) and its bases).
_LEARNED: dict[str, list[type]] = {}


def shallow(value: Any) -> str | None:
    """The text a value is compared by, or None when it is not watched (module doc)."""
    if isinstance(value, str | bytes) and len(value) > LONG:
        return f"{type(value).__name__} len={len(value)} hash={hash(value)}"
    if isinstance(value, _SCALARS):
        return repr(value)
    if isinstance(value, tuple):
        if all(isinstance(v, _SCALARS) for v in value):
            text = repr(value)
            return text if len(text) <= LONG else f"tuple len={len(value)} hash={hash(value)}"
        return f"tuple len={len(value)}"
    if isinstance(value, _SIZED):
        return f"{type(value).__name__} len={len(value)}"
    return None


def state(names: Iterable[tuple[str, Any]], prefix: str) -> dict[str, str]:
    """``{prefix.name: shallow text}`` of the watched values among ``names``."""
    out = {}
    for name, value in names:
        if name.startswith("__") and name.endswith("__"):
            continue
        text = shallow(value)
        if text is not None:
            out[f"{prefix}.{name}"] = text
    return out


def _root(name: str) -> str:
    return name.split(".", 1)[0]


def _is_module_class(cls: type) -> bool:
    """A torch ``nn.Module`` subclass, found by name (this module imports no torch)."""
    return any(b.__name__ == "Module" and b.__module__ == "torch.nn.modules.module"
               for b in cls.__mro__)


def _plugin_class(cls: Any, module_name: str) -> bool:
    """A class that is the plugin's: defined in its module or package (a class a builder
    or factory defines inside itself too), or a model class from another library (not
    torch's own)."""
    if not isinstance(cls, type):
        return False
    home = getattr(cls, "__module__", "") or ""
    if _root(home) in _FOREIGN_ROOTS or _root(home) in sys.stdlib_module_names:
        return False
    return home == module_name or _root(home) == _root(module_name) or _is_module_class(cls)


def _builder_module(model: str) -> Any:
    from engine.registry import MODELS

    return sys.modules.get(getattr(MODELS.get(model).build, "__module__", "") or "")


def units(model: str) -> list[Any]:
    """The watched units of ``model``: its builder's module, then its classes (those the
    module names, then those its built models showed), each once."""
    module = _builder_module(model)
    found: list[Any] = []
    if module is not None:
        found.append(module)
        found += [v for v in list(vars(module).values()) if _plugin_class(v, module.__name__)]
    found += [c for c in _LEARNED.get(model, []) if c not in found]
    return list(dict.fromkeys(found))


def _name(cls: type) -> str:
    """``Net`` for a class, also one defined inside a function (``build.<locals>.Net``)."""
    return f"{cls.__module__}:{cls.__qualname__.rsplit('<locals>.', 1)[-1]}"


def unit_state(unit: Any) -> dict[str, str]:
    """A module's globals or a class's own attributes, shallow (module doc)."""
    if isinstance(unit, type):
        return state(list(vars(unit).items()), _name(unit).split(":", 1)[1])
    return state(list(vars(unit).items()), unit.__name__.rsplit(".", 1)[-1])


def _key(unit: Any) -> Any:
    return unit if isinstance(unit, type) else ("module", unit.__name__)


def differences(before: dict[str, str], after: dict[str, str]) -> list[str]:
    """Labels whose value differs, appeared or went, in ``before``'s order then new ones."""
    return ([k for k, v in before.items() if after.get(k) != v]
            + [k for k in after if k not in before])


def verdict(changed: list[str]) -> str:
    """``ok``, or ``shared state changed: A.x, B.y`` (the first :data:`NAMED` labels, then
    ``and N more``)."""
    if not changed:
        return OK
    named = ", ".join(changed[:NAMED])
    more = f" and {len(changed) - NAMED} more" if len(changed) > NAMED else ""
    return f"shared state changed: {named}{more}"


def _compare(model: str, baseline: dict[Any, dict[str, str]]) -> list[str]:
    """Labels of ``model``'s units that differ from ``baseline`` (a unit seen for the first
    time sets its baseline)."""
    changed: list[str] = []
    for unit in units(model):
        now = unit_state(unit)
        changed += differences(baseline.setdefault(_key(unit), now), now)
    return changed


def job_start(model: str) -> list[str]:
    """Right before a job builds ``model``: the watched values that differ from what this
    process showed its first job at the same point (the first sight of a unit is its
    baseline). Never raises: state that cannot be read is not judged."""
    try:
        return _compare(model, _AT_START)
    except Exception:  # noqa: BLE001 - the check must never fail a job
        return []


def _learn(model: str, instance: Any) -> None:
    """Watch the built model's class and its plugin bases from now on."""
    module = _builder_module(model)
    name = module.__name__ if module is not None else ""
    seen = _LEARNED.setdefault(model, [])
    for cls in type(instance).__mro__:
        if cls in seen or not _plugin_class(cls, name):
            continue
        # A class statement a builder runs per build makes a new class each time, which no
        # later build can reach: the newer replaces it (and its baselines), so the watch
        # stays one class per name.
        for old in [c for c in seen if _name(c) == _name(cls)]:
            seen.remove(old)
            _AT_START.pop(old, None)
            _AFTER_BUILD.pop(old, None)
        seen.append(cls)


def job_built(model: str, instance: Any, changed: list[str]) -> str:
    """Right after the job's build: remember the built model's class and its plugin bases
    (watched from now on: a class its module does not name, created by the first build),
    compare the state with what the first build in this process left, and return the
    job's verdict over ``changed`` (:func:`job_start`'s) and these. Never raises."""
    try:
        _learn(model, instance)
        after = _compare(model, _AFTER_BUILD)
    except Exception:  # noqa: BLE001 - the check must never fail a job
        after = []
    return verdict(list(dict.fromkeys(changed + after)))


def build_changes(model: str, build: Callable[[], Any]) -> list[str]:
    """What a *second* build of ``model`` changes in its watched state: ``build()`` called
    twice (the first shows the model's class and fills one-time caches), the state compared
    around the second. Non-empty: every build changes the state (a counter), so each job in
    one process would build from other state than the one before. Exceptions of ``build``
    propagate (the caller decides)."""
    _learn(model, build())
    before = shared_snapshot(model)
    _learn(model, build())
    return shared_changes(model, before)


def shared_snapshot(model: str) -> dict[Any, dict[str, str]]:
    """``model``'s watched state now (its builder module's globals, its classes' own
    attributes; shallow), for :func:`shared_changes`. Never raises ({} when unreadable)."""
    try:
        return {_key(u): unit_state(u) for u in units(model)}
    except Exception:  # noqa: BLE001 - a check must never fail a job
        return {}


def shared_changes(model: str, before: dict[Any, dict[str, str]]) -> list[str]:
    """Labels of ``model``'s watched state that differ from ``before`` (units not in it
    are not judged): e.g. what a forward changed in a class attribute or a global, which
    every member sharing that class sees. Never raises."""
    changed: list[str] = []
    try:
        for unit in units(model):
            if _key(unit) in before:
                changed += differences(before[_key(unit)], unit_state(unit))
    except Exception:  # noqa: BLE001 - a check must never fail a job
        return []
    return changed


def reuse_refusal(jobs: Iterable[Any]) -> str | None:
    """Ray Tune's question before its trials reuse actors: for each distinct model of
    ``jobs`` (:class:`~engine.define.workloads.JobSpec`), :func:`build_changes` with the
    model built on the CPU for its dataset's declared shape, the global RNG put back.
    Returns ``"<model>: shared state changed: Net.counter"`` for the first model whose
    second build changed its state, else None. A model that cannot be built here is
    skipped: its trials fail with the reason where they build it."""
    import torch

    from engine.parts.models import build_model
    from engine.registry import DATASETS

    seen: set[str] = set()
    for job in jobs:
        if job.model in seen:
            continue
        seen.add(job.model)
        try:
            spec = DATASETS.get(job.dataset)
            shape, outputs = tuple(spec.in_shape), int(spec.n_outputs)
            with torch.random.fork_rng(devices=[]):
                changed = build_changes(job.model, functools.partial(
                    build_model, job.model, shape, outputs, job.model_kwargs,
                    where=job.job_id))
        except Exception:  # noqa: BLE001 - judged where the trial builds it
            continue
        if changed:
            return f"{job.model}: {verdict(changed)}"
    return None


def warning(jobs: list[tuple[str, str | None]]) -> str | None:
    """The cell's warning for ``(job_id, job_isolation)`` pairs, or None when no job read
    other than ``ok``/empty."""
    bad = [(job_id, value) for job_id, value in jobs if value and value != OK]
    if not bad:
        return None
    first_id, first = bad[0]
    return (f"job isolation: {len(bad)} of {len(jobs)} jobs started from shared state an "
            f"earlier job in their process changed (first: {first_id}, "
            f"{first.removeprefix('shared state changed: ')}); a fresh process's job would "
            f"not see it, so these may train differently (job_isolation column; "
            f"docs/measurement.md, Jobs are independent)")


def forget() -> None:
    """Forget this process's baselines and learned classes (tests that run several cells
    in one process; a cell is a fresh process and never needs it)."""
    _AT_START.clear()
    _AFTER_BUILD.clear()
    _LEARNED.clear()
