"""A path's verdict from its comparisons: what ``fugue-tui selfcheck`` says about each
training path of the parity contract (``engine.executors.unified.contract``) on this machine.

A path is one way of training the same jobs (model, optimizer, kernels, precision); it is
compared value by value with ``seq`` (every parameter and buffer, the training loss). Its
verdict is one of :data:`VERDICTS`:

* ``bit for bit``: every value compared is identical. Required where the contract says
  *by construction*: anything else there is a defect;
* ``within bound``: some values differ, none by more than its documented bound;
* ``outside bound``: a value differs by more than its bound (0 for a path by
  construction), or the path did not run as it should (a failed job, the stacked route
  not taken): a defect of fugue-tui, to be reported.

Torch-free: the front end (``fugue-tui selfcheck``, the dashboard) reads the verdicts back.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

BIT_FOR_BIT = "bit for bit"
WITHIN = "within bound"
OUTSIDE = "outside bound"
#: Every verdict, best first.
VERDICTS = (BIT_FOR_BIT, WITHIN, OUTSIDE)
#: The exit status of a self-check: every path at or inside its bound, or not.
EXIT_OK, EXIT_OUTSIDE = 0, 1


@dataclass(frozen=True)
class Comparison:
    """One value compared with seq's.

    Attributes:
        name: what was compared (``j1 0.weight``, ``j0 train loss``).
        diff: ``max|got - want|`` (absolute), or that over ``max|want|`` (``relative``);
            ``inf`` for values that cannot be compared (NaN, another shape).
        bound: the largest ``diff`` the contract allows (0: bit for bit required).
        identical: the values are bit for bit the same.
        relative: ``diff`` and ``bound`` are relative to the reference's magnitude.
    """

    name: str
    diff: float
    bound: float
    identical: bool
    relative: bool = True

    @property
    def inside(self) -> bool:
        return self.identical or self.diff <= self.bound

    @property
    def ratio(self) -> float:
        """How much of its bound the difference uses (``inf`` above a bound of 0)."""
        if self.identical or self.diff == 0.0:
            return 0.0
        return self.diff / self.bound if self.bound > 0 else math.inf


@dataclass
class PathResult:
    """One path of the self-check and its verdict (a row of the table, an entry of the
    JSON document's ``paths``).

    Attributes:
        name: ``model · optimizer · kernels · precision``.
        contract: the contract row it checks (``contract.PATHS``' name).
        holds: ``construction`` (bit for bit required) or ``bound``.
        bound_rule: how its bound was derived (``rounding_bound(4, 160)``, ...).
        verdict: one of :data:`VERDICTS`.
        max_diff, bound, relative: the comparison that used most of its bound (None: none
            compared); ``worst`` names it.
        compared: how many values were compared.
        note: what the path leaves out or why it failed ("" when nothing).
        seconds: its wall time (both sides).
    """

    name: str
    model: str
    optimizer: str
    kernels: str
    precision: str
    contract: str
    holds: str
    bound_rule: str
    steps: int
    members: int
    verdict: str = OUTSIDE
    max_diff: float | None = None
    bound: float | None = None
    relative: bool = True
    worst: str = ""
    compared: int = 0
    note: str = ""
    seconds: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def text(self) -> str:
        """The verdict as the table says it."""
        return verdict_text(self.verdict, self.max_diff, self.bound, self.relative)

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out.pop("extra")
        out["text"] = self.text
        return out


def judge(holds: str, comparisons: Sequence[Comparison], error: str = ""
          ) -> tuple[str, Comparison | None]:
    """The verdict of a path (``holds``: ``construction`` or ``bound``) from its
    comparisons, and the comparison that decided it (the one using most of its bound;
    under construction, the first that is not identical).

    ``error``: the path did not run as it should (a failed job, the stacked route not
    taken): outside, whatever was compared. No comparison at all is outside too (nothing
    was shown).

    Raises:
        ValueError: ``holds`` is neither ``construction`` nor ``bound``.
    """
    if holds not in ("construction", "bound"):
        raise ValueError(f"holds must be 'construction' or 'bound', got {holds!r}")
    if error or not comparisons:
        return OUTSIDE, None
    if all(c.identical for c in comparisons):
        return BIT_FOR_BIT, None
    if holds == "construction":
        first = next(c for c in comparisons if not c.identical)
        return OUTSIDE, Comparison(first.name, first.diff, 0.0, False, first.relative)
    worst = max(comparisons, key=lambda c: c.ratio)
    return (WITHIN if all(c.inside for c in comparisons) else OUTSIDE), worst


def apply(result: PathResult, comparisons: Sequence[Comparison], error: str = "") -> PathResult:
    """``result`` with its verdict, worst comparison and count filled from ``comparisons``
    (:func:`judge`); ``error`` becomes its note."""
    verdict, worst = judge(result.holds, comparisons, error)
    result.verdict, result.compared = verdict, len(comparisons)
    if error:
        result.note = error
    if worst is not None:
        result.max_diff, result.bound = worst.diff, worst.bound
        result.relative, result.worst = worst.relative, worst.name
    return result


def verdict_text(verdict: str, max_diff: float | None, bound: float | None,
                 relative: bool = True) -> str:
    """``bit for bit``, ``within bound (max |Δ| = 1.2e-07 relative, bound 4.4e-06)`` or
    ``outside bound — a defect, please report it (max |Δ| = …, bound …)``."""
    if verdict == BIT_FOR_BIT:
        return BIT_FOR_BIT
    numbers = ""
    if max_diff is not None and bound is not None:
        unit = " relative" if relative else ""
        numbers = f" (max |Δ| = {max_diff:.3g}{unit}, bound {bound:.3g})"
    if verdict == WITHIN:
        return f"{WITHIN}{numbers}"
    return f"{OUTSIDE} — a defect, please report it{numbers}"


def counts(verdicts: Iterable[str]) -> dict[str, int]:
    """``{"bit_for_bit": n, "within_bound": n, "outside_bound": n}``."""
    seen = list(verdicts)
    unknown = set(seen) - set(VERDICTS)
    if unknown:
        raise ValueError(f"unknown verdicts {sorted(unknown)}: one of {list(VERDICTS)}")
    return {key(v): seen.count(v) for v in VERDICTS}


def key(verdict: str) -> str:
    """A verdict as a JSON key / CSV column: ``bit_for_bit``, ``within_bound``,
    ``outside_bound``."""
    return verdict.replace(" ", "_")


def exit_status(verdicts: Iterable[str]) -> int:
    """0 when every path is at or inside its bound (and there is at least one), else 1."""
    seen = list(verdicts)
    return EXIT_OK if seen and OUTSIDE not in seen else EXIT_OUTSIDE


def summary(counted: dict[str, int]) -> str:
    """``18 bit for bit, 3 within bound, 0 outside bound``."""
    return ", ".join(f"{counted.get(key(v), 0)} {v}" for v in VERDICTS)
