"""The run screen's cell filter, Textual-free: which cells the cell table shows (by status,
executor, experiment), the title that says how many it shows of how many, and the choices
the filter picker (``F``) offers with their counts.

A filter never hides a count: the cell pane's title says "cells · status:failed · 3 of 40
cells", and a running cell that does not match stays in the table (the one the cursor
follows, ``f``, must stay reachable), counted apart ("+ 1 running")."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, fields, replace

from engine.observe.state import CellState
from fugue_tui.app.models.cells import split_label

#: The filter's fields, as the title and the picker name them.
FIELD_NAMES = {"status": "status", "executor": "executor", "experiment": "exp"}
#: The cell states in the picker's order (the lifecycle's), any other after them.
STATUS_ORDER = ("queued", "running", "suspect", "hung", "done", "failed", "killed", "skipped")


def cell_fields(cell: CellState) -> dict[str, str]:
    """The values of ``cell`` the filter can select on: its state, executor, experiment."""
    experiment, executor, _, _ = split_label(cell.label)
    return {"status": cell.state, "executor": executor, "experiment": experiment}


@dataclass(frozen=True)
class CellFilter:
    """One value per field ("" for any); every set field must match."""

    status: str = ""
    executor: str = ""
    experiment: str = ""

    @property
    def active(self) -> bool:
        return any(getattr(self, f.name) for f in fields(self))

    def matches(self, cell: CellState) -> bool:
        """Whether ``cell`` has every value the filter asks for."""
        if not self.active:
            return True
        values = cell_fields(cell)
        return all(not want or values[name] == want for name, want in self.items())

    def keeps(self, cell: CellState) -> bool:
        """Whether the table shows ``cell``: it matches, or it runs (always reachable)."""
        return cell.active or self.matches(cell)

    def items(self) -> list[tuple[str, str]]:
        """The set fields as ``(field, value)``, in the order of :data:`FIELD_NAMES`."""
        return [(name, getattr(self, name)) for name in FIELD_NAMES if getattr(self, name)]

    def toggled(self, name: str, value: str) -> CellFilter:
        """This filter with ``name`` set to ``value``, or unset when it already was."""
        if name not in FIELD_NAMES:
            raise KeyError(name)
        return replace(self, **{name: "" if getattr(self, name) == value else value})

    def describe(self) -> str:
        """``"status:failed exp:D_ens"`` ("" when nothing is set)."""
        return " ".join(f"{FIELD_NAMES[name]}:{value}" for name, value in self.items())

    def title(self, cells: Iterable[CellState]) -> str:
        """The cell pane's title: "cells" without a filter, else what it selects and how
        many cells it shows of how many ("cells · status:failed · 3 of 40 cells + 1
        running": a running cell it does not match is shown too)."""
        if not self.active:
            return "cells"
        total = matching = extra = 0
        for cell in cells:
            total += 1
            if self.matches(cell):
                matching += 1
            elif cell.active:
                extra += 1
        kept = f" + {extra} running" if extra else ""
        return f"cells · {self.describe()} · {matching} of {total} cells{kept}"


def choices(cells: Iterable[CellState], current: CellFilter) -> list[tuple[str, str, str]]:
    """What the filter picker offers: ``(option id, label, field)`` per value present among
    ``cells`` (status in lifecycle order, then executors and experiments in campaign order),
    each with its count and a mark when the filter has it; first "clear" when the filter
    is set. An option id is ``"field=value"`` (``"clear"`` for the clearing one)."""
    cells = sorted(cells, key=lambda c: c.index)
    counts: dict[str, Counter[str]] = {name: Counter() for name in FIELD_NAMES}
    for cell in cells:
        for name, value in cell_fields(cell).items():
            if value:
                counts[name][value] += 1
    out: list[tuple[str, str, str]] = []
    if current.active:
        out.append(("clear", f"clear the filter ({current.describe()}): all {len(cells)} "
                             "cells", ""))
    for name, label in FIELD_NAMES.items():
        values = list(counts[name])  # first appearance: campaign order
        if name == "status":
            values.sort(key=lambda v: (STATUS_ORDER.index(v) if v in STATUS_ORDER
                                       else len(STATUS_ORDER), v))
        for value in values:
            mark = "✓ " if getattr(current, name) == value else "  "
            n = counts[name][value]
            out.append((f"{name}={value}",
                        f"{mark}{label}:{value}  ({n} cell{'s' if n != 1 else ''})", name))
    return out


def parse_choice(option_id: str) -> tuple[str, str] | None:
    """``"status=failed"`` → ``("status", "failed")``; ``"clear"`` → None."""
    if option_id == "clear":
        return None
    name, _, value = option_id.partition("=")
    return name, value
