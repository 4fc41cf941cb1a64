"""``sha`` needs every trial of a cell running at once (issue 25): checked when the plan is
built, so an impossible cell is a one-line error (exit 2) before anything runs, not a cell
that fails after its Ray runtime or its workers started.

Why: under rung-synchronous successive halving a trial that reaches a rung *waits* there
until every other trial still alive has reached it. An executor that runs trials in slots
(``mp`` workers, ``ray`` Tune trials, ``unified_model`` chunks trained one after another)
would keep a waiting trial in a slot that a trial not yet started needs: a deadlock. ``seq``
runs the trials rung by rung in one process and has no slots. Torch-free.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from engine.errors import ConfigError

#: Executors whose sha cells need ``max_parallel`` >= the cell's trials (what each one
#: checks again at cell start: mp's and ray's slots, unified_model's chunks).
SLOTTED = ("mp", "ray", "unified_model")


def sha_slot_error(executor: str, scheduler: str | None, trials: int,
                   max_parallel: Any, method: str | None = None) -> str | None:
    """Why a cell cannot run ``sha`` (None when it can): ``max_parallel`` (the resolved
    number; None = every job at once) below the cell's ``trials``. ``method``: how
    ``max_parallel`` was decided (``auto`` is named, so the user knows the number was not
    theirs)."""
    if scheduler != "sha" or executor not in SLOTTED or max_parallel is None:
        return None
    try:
        slots = int(max_parallel)
    except (TypeError, ValueError):
        return None  # not a number yet: the executor's own check at cell start decides
    if slots >= trials:
        return None
    how = " (chosen by max_parallel = \"auto\")" if method and method != "user" else ""
    return (f"options.{executor}: scheduler 'sha' needs every trial running at once "
            f"(a trial waits at each rung for the others): {trials} trials, max_parallel "
            f"{slots}{how}; set max_parallel >= {trials}, fewer trials (num_samples, the "
            f"grid), or an asynchronous scheduler (asha, median, hyperband)")


def check_sha_slots(cells: Iterable[Any], where: str) -> None:
    """Raise for the first cell (a :class:`engine.define.matrix.CellSpec`) whose ``sha``
    cannot run: ``"<where>: experiment H: options.mp: scheduler 'sha' needs ..."``.

    Raises:
        ConfigError: as above.
    """
    for cell in cells:
        error = sha_slot_error(cell.executor, cell.scheduler, len(cell.jobs),
                               cell.max_parallel, getattr(cell, "max_parallel_method", None))
        if error:
            raise ConfigError(f"{where}: experiment {cell.exp_id}: {error}")


def check_options_sha_slots(options: dict[str, dict[str, Any]], executors: list[str],
                            experiments: list[Any], seed: int, where: str) -> None:
    """The same rule when a campaign is loaded, before any plan or file is written (what
    ``fugue-tui run`` checks before it writes its campaign): every hpo experiment against
    every slotted executor whose ``scheduler`` option names ``sha`` and whose
    ``max_parallel`` is a number (or a list of numbers; ``"auto"`` is resolved and
    checked when the plan is built, :func:`check_sha_slots`).

    Raises:
        ConfigError: ``"<where>: experiment H: options.mp: scheduler 'sha' needs ..."``.
    """
    from engine.define.workloads import expand

    def listed(value: Any) -> list[Any]:
        return list(value) if isinstance(value, list) else [value]

    for executor in dict.fromkeys(executors):
        table = options.get(executor) or {}
        if executor not in SLOTTED or "sha" not in listed(table.get("scheduler")):
            continue
        numbers = [v for v in listed(table.get("max_parallel"))
                   if isinstance(v, int) and not isinstance(v, bool)]
        if not numbers:
            continue
        for exp in experiments:
            if getattr(exp, "type", None) != "hpo":
                continue
            trials = len(expand(exp, seed))
            error = sha_slot_error(executor, "sha", trials, min(numbers))
            if error:
                raise ConfigError(f"{where}: experiment {exp.id}: {error}")
