"""The ``parity_contract`` group column: what a row promises about training what ``seq``
trains, in one parseable word (docs/fidelity.md, "A row's parity_contract").

Values:

* ``exact``: bit for bit what ``seq`` trains — by construction (the contract table,
  ``engine.executors.unified.contract.PATHS``), or, for a unified_model bucket whose
  kernels are not identical by construction, because its float32 one-step probe found the
  stack bit-identical to K solo steps on this machine;
* ``bound:<name>(<arguments>)``: within the documented bound ``name`` of the contract, with
  its arguments as the contract writes them (a formula's variables, or numbers):
  :data:`BOUNDS`, weakest last;
* empty: nothing promised or nothing known (another executor, a row written before the
  column existed). Never ``0``.

A group of several buckets carries the weakest of its buckets' values (:func:`weakest`);
the report pools a cell's rows the same way. Torch-free: the runner side and the report
read it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

EXACT = "exact"
PREFIX = "bound:"

#: The bounds a value may name, from the tightest promise to the weakest (a cell or group
#: of several carries the last one present). ``pass_bound``: one pass's reported values
#: only (the fused loss); ``rounding_bound``: training, SGD family; ``adam_bound``: Adam's
#: scale-invariant step; ``half_precision``: HALF_PRECISION_BOUNDS of the precision named;
#: ``compile_probe``: compiled buckets (checked on the probe batch); ``accuracy_band``:
#: statistical only (CUDA dropout masks).
BOUNDS = ("pass_bound", "rounding_bound", "adam_bound", "half_precision", "compile_probe",
          "accuracy_band")

#: Executors whose every row is ``exact`` (the contract's first row, "seq, mp, ray (one job
#: per model)": the same solo kernels on the same shapes; seq is the reference itself).
#: unified_model decides per bucket; any other executor (a plugin's) leaves it empty.
BY_CONSTRUCTION_EXECUTORS = ("seq", "mp", "ray")

#: A well-formed value (the column's grammar).
PATTERN = re.compile(r"^(?:exact|bound:(?:%s)\([^()\s]*\))$" % "|".join(BOUNDS))


def bound(name: str, *args: Any) -> str:
    """``bound:name(arg1,arg2)``.

    Raises:
        ValueError: ``name`` is not one of :data:`BOUNDS`, or an argument has a space or
            a parenthesis (the value must stay parseable).
    """
    if name not in BOUNDS:
        raise ValueError(f"unknown bound {name!r}: one of {', '.join(BOUNDS)}")
    value = f"{PREFIX}{name}({','.join(str(a) for a in args)})"
    if not PATTERN.match(value):
        raise ValueError(f"not a parseable parity_contract value: {value!r}")
    return value


def _rank(value: str) -> int:
    if value == EXACT:
        return -1
    name = value[len(PREFIX):].split("(", 1)[0]
    return BOUNDS.index(name)


def is_value(value: Any) -> bool:
    """True for a well-formed non-empty value."""
    return isinstance(value, str) and bool(PATTERN.match(value))


def weakest(values: Iterable[Any]) -> str | None:
    """The weakest promise among ``values`` (empty, None and NaN ignored): ``exact`` only
    when every value is; otherwise the bound of highest rank in :data:`BOUNDS` (the first
    seen among equals). None when no value is given.

    Raises:
        ValueError: a value that is not in the column's grammar.
    """
    best: str | None = None
    for value in values:
        if value is None or value == "" or (isinstance(value, float) and value != value):
            continue
        if not is_value(value):
            raise ValueError(f"not a parity_contract value: {value!r}")
        if best is None or _rank(value) > _rank(best):
            best = value
    return best


def wording(value: Any) -> str:
    """How the report says a value: ``bit for bit`` only for ``exact``; ``within
    <bound>`` for a bound; ``""`` for nothing known."""
    if value == EXACT:
        return "bit for bit"
    if is_value(value):
        return "within " + str(value)[len(PREFIX):]
    return ""
