"""The range of every count and number a user gives, in one table: checked when a campaign
loads (``engine.define``), again by a cell reading its spec (``engine.cell.protocol``), and
printed into README's "Bounds" paragraph (:func:`markdown_table`; after a change, paste
``python -c "from engine.bounds import markdown_table; print(markdown_table())"`` there:
``tests/unit/engine/test_value_bounds.py`` compares them).

A bound protects the machine, not taste: K = 10,000,000 made even ``--dry-run`` run for
minutes at gigabytes, 100,000 torch threads killed the cell with SIGSEGV, ``lr = inf`` and
``momentum = -1`` failed only after training started. The upper ends are far above any real
campaign (E16 trains 120 epochs; the catalogue's largest K is 15) and low enough that the
largest legal plan is listed in seconds.

Every value must be finite (TOML writes ``inf`` and ``nan``); a count is an integer with both
ends. Torch-free; imports nothing of the engine but its errors, so that the registries
(models declare their ``model_kwargs`` bounds here) and the definitions can both use it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from engine.errors import ConfigError, shown

#: The most jobs one experiment expands into (K: ensemble members, cv folds, hpo grid
#: points, multi_model members), and so the most jobs in one cell.
MAX_JOBS = 4096
#: The most cells one campaign plans (experiments x executors x variants x passes).
MAX_CELLS = 10_000
#: The most trainings one campaign plans (the jobs of all its cells).
MAX_PLANNED_JOBS = 1_000_000
#: Job seeds are ``seed + i`` and must fit torch's 64-bit generator seed.
MAX_SEED = 2**63 - 1
#: A campaign's ``seed`` when it sets none (job i gets ``seed + i``), and so the seed of
#: every tool that expands an experiment outside a campaign (``profile``, ``simulate``,
#: ``validate``): written here once, read everywhere.
DEFAULT_SEED = 42


@dataclass(frozen=True)
class Bound:
    """The allowed values of one key: ``low``/``high`` (None: unbounded on that side; an
    open end excludes the value itself), ``integer`` (a count: an int, not a bool), and
    ``why`` (the README's one-line reason)."""

    low: float | None = None
    high: float | None = None
    integer: bool = False
    low_open: bool = False
    high_open: bool = False
    why: str = ""

    @property
    def text(self) -> str:
        """``>= 1 and <= 4096``, ``> 0 and finite``, ``>= 0 and < 1``."""
        parts = []
        if self.low is not None:
            parts.append(f"{'>' if self.low_open else '>='} {_number(self.low)}")
        if self.high is not None:
            parts.append(f"{'<' if self.high_open else '<='} {_number(self.high)}")
        elif not self.integer:
            parts.append("finite")
        return " and ".join(parts)

    def problem(self, value: Any) -> str | None:
        """Why ``value`` is out of bounds, naming the end it crosses (``must be >= 1, got
        0``, ``must be <= 4096, got 10000000``, ``must be finite, got inf``, ``must be an
        integer, got 2.5``), or None when it is in."""
        if isinstance(value, bool) or not isinstance(value, (int, float)) or (
                self.integer and not isinstance(value, int)):
            return f"must be {'an integer' if self.integer else 'a number'}, got {shown(value)}"
        if not math.isfinite(value):
            return f"must be finite, got {shown(value)}"
        if self.low is not None and (value < self.low or (self.low_open and value == self.low)):
            return f"must be {'>' if self.low_open else '>='} {_number(self.low)}, got {shown(value)}"
        if self.high is not None and (value > self.high
                                      or (self.high_open and value == self.high)):
            return f"must be {'<' if self.high_open else '<='} {_number(self.high)}, got {shown(value)}"
        return None

    def check(self, value: Any, where: str, name: str) -> None:
        """Raise :class:`ConfigError` ``"<where>: <name> must be ..., got ..."`` when
        ``value`` is out of bounds (``name``: ``key 'epochs'``, ``model 'mlp' ...``)."""
        problem = self.problem(value)
        if problem is not None:
            raise ConfigError(f"{where}: {name} {problem}")


def _number(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:g}"


def count(low: int, high: int, why: str) -> Bound:
    return Bound(low, high, integer=True, why=why)


#: Job fields: an experiment's, a multi_model member's, an hpo search-space value, and every
#: job a workload type expands (a plugin's too), checked again in a cell's spec.
JOB: dict[str, Bound] = {
    "k": count(1, MAX_JOBS, "each job is a row, a process or a stacked member; the planner "
                            "holds every job of every cell"),
    "batch_size": count(1, 2**20, "also at most the job's training samples, where the "
                                  "dataset's size is known"),
    "epochs": count(1, 100_000, "E16 trains 120; 10^12 is a typo that never ends"),
    "lr": Bound(0, None, low_open=True, why="inf trained to nan after the cell started"),
    "val_fraction": Bound(0, 1, low_open=True, high_open=True,
                          why="both the training and the validation part hold samples"),
    "split_seed": count(0, MAX_SEED, "torch's generator seed"),
}
#: Optimizer keywords (``optimizer_kwargs``, hpo ``search_space``), torch's own ranges, which
#: torch checks only when a job builds its optimizer. ``betas``: each of the two.
OPTIMIZER: dict[str, Bound] = {
    "momentum": Bound(0, 1, why="sgd; momentum above 1 diverges"),
    "dampening": Bound(0, 1, why="sgd"),
    "weight_decay": Bound(0, None, why="torch refuses a negative one"),
    "eps": Bound(0, 1, why="adam, adamw"),
    "betas": Bound(0, 1, high_open=True, why="adam, adamw: each of the two"),
}
#: A campaign's own counts and numbers (command-line overrides included; a table's key
#: dotted: ``watchdog.interval_s``). ``engine.define.campaign_schema`` names each key's bound.
CAMPAIGN: dict[str, Bound] = {
    "passes": count(1, 1000, "repeats of the whole matrix"),
    "threads": count(0, 1024, "torch threads per cell (0 = all cores); 100,000 crashed the "
                              "cell"),
    "retries": count(0, 100, "automatic retries of one failed or hung cell"),
    "seed": count(0, MAX_SEED, "job i's seed, seed + i, must fit too"),
    "monitor_interval_s": Bound(0.05, 60, why="seconds between monitor samples: faster "
                                              "loads the machine it measures"),
    "watchdog.interval_s": Bound(0, None, low_open=True,
                                 why="seconds between hung-cell checks"),
    "watchdog.cpu_fraction": Bound(0, 1, high_open=True,
                                   why="a share of one core: a cell training on one core stays above it"),
    "watchdog.gpu_busy_pct": Bound(0, 100, why="a percentage of GPU utilisation"),
}
#: The size of a campaign's plan, checked before any cell is built.
PLAN: dict[str, Bound] = {
    "cells": count(1, MAX_CELLS, "a cell is a process of several seconds at least; the plan "
                                 "lists them all"),
    "planned jobs": count(1, MAX_PLANNED_JOBS, "the jobs of all cells: each one a training "
                                               "and a row"),
}
#: Every count: each has both ends (issue 18: a count without an upper bound blew up).
COUNTS: dict[str, Bound] = {f"{table}.{key}": bound
                            for table, keys in (("job", JOB), ("campaign", CAMPAIGN),
                                                ("plan", PLAN))
                            for key, bound in keys.items() if bound.integer}


def check_numbers(values: dict[str, Any], table: dict[str, Bound], where: str) -> None:
    """Check each key of ``values`` that ``table`` bounds (None values are absent).

    Raises:
        ConfigError: ``"<where>: key 'epochs' must be <= 100000, got 1000000000000"``.
    """
    for key, bound in table.items():
        value = values.get(key)
        if value is not None:
            bound.check(value, where, f"key '{key}'")


def finite_problem(value: Any) -> str | None:
    """``"must be finite, got inf"`` when ``value`` (or a number inside a list or table) is
    not finite, else None: what an unbounded number (a ``model_kwargs`` value a builder
    passes on, say) must at least be. Non-numbers pass: their type is the builder's
    business."""
    if isinstance(value, float) and not math.isfinite(value):
        return f"must be finite, got {shown(value)}"
    items = value if isinstance(value, (list, tuple)) else (
        value.values() if isinstance(value, dict) else ())
    for item in items:
        problem = finite_problem(item)
        if problem:
            return problem
    return None


def markdown_table() -> str:
    """README's "Bounds" table: one row per bounded key, generated from this module."""
    rows = ["| where | key | allowed | why |", "|---|---|---|---|"]
    for where, table in (("job field", JOB),
                         ("`optimizer_kwargs`", OPTIMIZER), ("campaign", CAMPAIGN),
                         ("the plan", PLAN)):
        for key, bound in table.items():
            kind = "integer " if bound.integer else ""
            rows.append(f"| {where} | `{key}` | {kind}{bound.text} | {bound.why} |")
    return "\n".join(rows) + "\n"
