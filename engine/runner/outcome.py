"""What the runner tells its callers about a campaign: each cell's plan before it runs,
each cell's end, the campaign's end with its exit status. Torch-free; plain data.

Re-exported by :mod:`engine.runner.supervisor`, where front ends import them from.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from engine.define.matrix import CellSpec


@dataclass
class PlannedCell:
    cell: CellSpec
    skip: str = ""          # why it will not run: "already ok in campaign 'c' (resume)", …
    #: The ok row a resumed cell is skipped for: its ``campaign_id``, ``attempt`` and
    #: ``timestamp`` (None when the cell is not skipped for a row).
    reused: dict[str, str] | None = None


@dataclass
class CellOutcome:
    """How a cell ended, as the runner saw it."""

    cell: CellSpec
    status: str                 # ok | failed | killed | skipped
    attempts: int
    error: str = ""
    log: Path | None = None


@dataclass
class CampaignOutcome:
    campaign_id: str
    run_dir: Path
    outcomes: list[CellOutcome] = field(default_factory=list)
    interrupted: bool = False
    aborted: bool = False

    @property
    def exit_code(self) -> int:
        """130 interrupted, 3 aborted, 0 every cell ok, else 1."""
        if self.interrupted:
            return 130
        if self.aborted:
            return 3
        return 0 if all(o.status == "ok" for o in self.outcomes) else 1
