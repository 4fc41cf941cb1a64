"""hpo search spaces: grid axes, sampled axes and ``num_samples``, with Ray Tune's semantics,
and trial i's configuration as a pure function of the campaign seed and i. Torch-free.

A ``search_space`` maps an axis to either

- a **list**: a grid axis, every value tried (``lr = [1e-3, 1e-2]``), or
- a **one-key table**: a sampled axis, one draw per trial:
  ``{ loguniform = [lo, hi] }`` (``lo > 0``; log-uniform on ``[lo, hi)``),
  ``{ uniform = [lo, hi] }`` (uniform on ``[lo, hi)``),
  ``{ randint = [lo, hi] }`` (an integer in ``lo .. hi-1``: ``hi`` is exclusive, as
  ``ray.tune.randint``) or ``{ choice = [v1, v2, ...] }`` (one of the values, equally likely).

An axis is a job field (``lr``, ``batch_size``, ``model``, ...), an optimizer keyword
(``weight_decay``: short for ``optimizer_kwargs.weight_decay``), or a dotted key into a
nested job field (``"model_kwargs.hidden"``, ``"optimizer_kwargs.momentum"``).

**Trials** (``ray.tune``'s ``num_samples`` with grid search): the grid (Cartesian product
of the list axes, in the order written, the last axis fastest) is repeated ``num_samples``
times (default 1), so there are ``num_samples × grid points`` trials; trial ``i`` is grid
point ``i mod G`` of repeat ``i // G`` (G grid points). Without sampled axes and without
``num_samples`` this is exactly the legacy grid.

**Draws** are a pure function of the campaign ``seed``, the trial index ``i`` and the axis
name, independent of any library's random generator (so every executor, every machine and
every version trains the same trials): ``u = int(sha256("fugue-hpo/<seed>/<i>/<axis>")[:8])
>> 11) / 2**53``, uniform on ``[0, 1)``; then ``uniform``: ``lo + u (hi - lo)``;
``loguniform``: ``exp(ln lo + u (ln hi - ln lo))``; ``randint``: ``lo + floor(u (hi - lo))``;
``choice``: ``values[floor(u n)]``. Adding or removing another axis never changes an
axis's draws.
"""

from __future__ import annotations

import hashlib
import itertools
import math
from typing import Any

from engine.errors import ConfigError, nearest, quoted

#: Sampled-axis distributions: name → what its list holds (for messages).
DISTRIBUTIONS: dict[str, str] = {
    "loguniform": "[low, high] with 0 < low < high",
    "uniform": "[low, high] with low < high",
    "randint": "[low, high] integers with low < high (high exclusive)",
    "choice": "a non-empty list of values",
}
#: The job fields that are tables and so may be reached with a dotted key.
NESTED_FIELDS = ("model_kwargs", "optimizer_kwargs")


def is_sampled(spec: Any) -> bool:
    """Whether an axis's value is a sampled distribution (a table), not a grid (a list)."""
    return isinstance(spec, dict)


def distribution(spec: dict[str, Any]) -> tuple[str, list[Any]]:
    """``{"loguniform": [1e-4, 1e-1]}`` → ``("loguniform", [1e-4, 1e-1])`` (checked by
    :func:`check_axis` first)."""
    (name, args), = spec.items()
    return name, list(args)


def values_of(spec: Any) -> list[Any]:
    """The values an axis can take when they are finite: a grid's list, a ``choice``'s
    values; [] for a continuous or integer range."""
    if not is_sampled(spec):
        return list(spec) if isinstance(spec, list) else []
    name, args = distribution(spec)
    return args if name == "choice" else []


def field_path(key: str, optimizer_kwargs: dict[str, Any] | tuple[str, ...] = ()
               ) -> tuple[str, ...]:
    """An axis's place in a job's fields: ``"lr"`` → ``("lr",)``, ``"weight_decay"`` (an
    optimizer keyword) → ``("optimizer_kwargs", "weight_decay")``, ``"model_kwargs.hidden"``
    → ``("model_kwargs", "hidden")``."""
    if "." in key:
        return tuple(key.split("."))
    if key in optimizer_kwargs:
        return ("optimizer_kwargs", key)
    return (key,)


def check_axis(key: str, spec: Any, where: str) -> None:
    """One sampled axis's distribution is well formed (the grid form is checked by the
    workload's parser).

    Raises:
        ConfigError: ``"<where>: 'lr': unknown distribution 'logunifrom' (did you mean
            'loguniform'?)"``, reversed bounds, a non-positive loguniform bound, ...
    """
    if len(spec) != 1:
        raise ConfigError(f"{where}: {quoted(key)}' must be a list (a grid axis) or a table with one "
                          f"distribution ({', '.join(DISTRIBUTIONS)}), got keys "
                          f"{', '.join(map(repr, spec)) or 'none'}")
    (name, args), = spec.items()
    if name not in DISTRIBUTIONS:
        raise ConfigError(f"{where}: {quoted(key)}: unknown distribution {quoted(name)}"
                          f"{nearest(name, DISTRIBUTIONS)}; known: {', '.join(DISTRIBUTIONS)}")
    if not isinstance(args, list) or not args:
        raise ConfigError(f"{where}: {quoted(key)}: {name} needs {DISTRIBUTIONS[name]}, got {args!r}")
    if name == "choice":
        return
    numeric = all(isinstance(a, (int, float)) and not isinstance(a, bool) for a in args)
    if len(args) != 2 or not numeric or not all(math.isfinite(a) for a in args):
        raise ConfigError(f"{where}: {quoted(key)}: {name} needs {DISTRIBUTIONS[name]}, got {args!r}")
    low, high = args
    if name == "randint" and not all(isinstance(a, int) for a in args):
        raise ConfigError(f"{where}: {quoted(key)}: randint needs integer bounds, got {args!r}")
    if low >= high:
        raise ConfigError(f"{where}: {quoted(key)}: {name} bounds reversed or empty: low {low!r} "
                          f"must be below high {high!r}")
    if name == "loguniform" and low <= 0:
        raise ConfigError(f"{where}: {quoted(key)}: loguniform needs a positive low bound, got "
                          f"{low!r}")


def extremes(spec: Any) -> list[Any]:
    """Values that bound what a sampled axis can produce (both ends of a range, each
    choice), for the field's type and range checks."""
    name, args = distribution(spec)
    if name == "choice":
        return args
    if name == "randint":
        return [args[0], args[1] - 1]
    return [float(args[0]), float(args[1])]


def grid_size(space: dict[str, Any]) -> int:
    """Points of the grid axes (1 without any)."""
    return math.prod(len(v) for v in space.values() if not is_sampled(v))


def trial_count(space: dict[str, Any], num_samples: int | None) -> int:
    """Trials of a search space: ``num_samples`` (default 1) × grid points."""
    return (num_samples or 1) * grid_size(space)


def unit_draw(seed: int, index: int, axis: str) -> float:
    """The documented uniform draw on ``[0, 1)`` for ``axis`` of trial ``index``."""
    digest = hashlib.sha256(f"fugue-hpo/{seed}/{index}/{axis}".encode()).digest()
    return (int.from_bytes(digest[:8], "big") >> 11) / float(1 << 53)


def draw(spec: dict[str, Any], seed: int, index: int, axis: str) -> Any:
    """Trial ``index``'s value of a sampled axis (module docstring, "Draws")."""
    name, args = distribution(spec)
    u = unit_draw(seed, index, axis)
    if name == "choice":
        return args[min(int(u * len(args)), len(args) - 1)]
    low, high = args
    if name == "randint":
        return int(low) + min(int(u * (high - low)), high - low - 1)
    if name == "uniform":
        return float(low) + u * (float(high) - float(low))
    value = math.exp(math.log(low) + u * (math.log(high) - math.log(low)))
    return min(max(value, float(low)), float(high))  # rounding never leaves the range


def trial_config(space: dict[str, Any], num_samples: int | None, seed: int,
                 index: int) -> dict[str, Any]:
    """Trial ``index``'s configuration: each axis (in the order written) → its value. A pure
    function of the space, ``num_samples``, the campaign ``seed`` and ``index``.

    Raises:
        IndexError: ``index`` is not below :func:`trial_count`.
    """
    if not 0 <= index < trial_count(space, num_samples):
        raise IndexError(f"trial {index} of {trial_count(space, num_samples)}")
    grid_keys = [k for k, v in space.items() if not is_sampled(v)]
    points = list(itertools.product(*(space[k] for k in grid_keys)))
    point = dict(zip(grid_keys, points[index % len(points)], strict=True))
    return {key: point[key] if key in point else draw(spec, seed, index, key)
            for key, spec in space.items()}


def apply(fields: dict[str, Any], config: dict[str, Any],
          optimizer_kwargs: dict[str, Any] | tuple[str, ...]) -> dict[str, Any]:
    """``fields`` (a job's, as ``base_fields`` returns) with a trial's ``config`` set,
    axes in order; nested tables are copied, never shared with the experiment (whose
    definition is hashed into cell keys)."""
    out = dict(fields)
    for nested in NESTED_FIELDS:
        out[nested] = dict(out.get(nested) or {})
    for key, value in config.items():
        path = field_path(key, optimizer_kwargs)
        value = dict(value) if isinstance(value, dict) else value
        if len(path) == 1:
            out[path[0]] = value
            continue
        table = out
        for part in path[:-1]:
            inner = table.get(part)
            table[part] = dict(inner) if isinstance(inner, dict) else {}
            table = table[part]
        table[path[-1]] = value
    return out


def space_text(space: dict[str, Any], num_samples: int | None) -> str:
    """A short description for listings: ``grid lr(3)×batch_size(2)``, ``lr~loguniform ×
    16 samples``."""
    grid = "×".join(f"{k}({len(v)})" for k, v in space.items() if not is_sampled(v))
    sampled = ", ".join(f"{k}~{distribution(v)[0]}" for k, v in space.items() if is_sampled(v))
    parts = [f"grid {grid}"] if grid else []
    if sampled or num_samples:
        parts.append(f"{sampled or 'the grid'} × {num_samples or 1} samples")
    return " ".join(parts)
