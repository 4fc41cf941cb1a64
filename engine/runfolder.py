"""The run folder of a campaign, ``<runs_dir>/<campaign id>/``, written down once. Torch-free.

The runner owns it (one at a time: ``runner.lock``); front ends and the next runner read it::

    runner.lock, runner.pid     held by the running runner
    campaign.toml               the campaign as last run
    runner.jsonl                lifecycle events of every runner session, appended
    control/                    command files (engine.runner.control)
    cells/<NNN-exp-executor-pP>-<key8>/attempt-<a>/
        spec.json, events.jsonl, cell.log, cell.pid (while it runs), cell.reason,
        cleanup/ (engine.cleanup), stacks/ (stack dumps of a hung cell: engine.stacks)

Names are part of the on-disk contract (old run folders must stay readable): change none.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

LOCK = "runner.lock"
RUNNER_PID = "runner.pid"
CAMPAIGN_FILE = "campaign.toml"
RUNNER_LOG = "runner.jsonl"
CONTROL = "control"
CELLS = "cells"
SPEC = "spec.json"
EVENTS = "events.jsonl"
CELL_LOG = "cell.log"
CELL_PID = "cell.pid"
REASON = "cell.reason"
STACKS = "stacks"


@dataclass(frozen=True)
class AttemptFolder:
    """``cells/<cell>/attempt-<n>/``: one attempt of one cell."""

    path: Path

    @property
    def number(self) -> int:
        return int(self.path.name.split("-")[1])

    @property
    def spec(self) -> Path:
        return self.path / SPEC

    @property
    def events(self) -> Path:
        return self.path / EVENTS

    @property
    def log(self) -> Path:
        return self.path / CELL_LOG

    @property
    def pid(self) -> Path:
        return self.path / CELL_PID

    @property
    def reason(self) -> Path:
        return self.path / REASON

    @property
    def stacks(self) -> Path:
        return self.path / STACKS


@dataclass(frozen=True)
class RunFolder:
    """``<runs_dir>/<campaign id>/`` (see the module docstring)."""

    path: Path

    @classmethod
    def of(cls, runs_dir: str | Path, campaign_id: str) -> RunFolder:
        return cls(Path(runs_dir) / campaign_id)

    @property
    def lock(self) -> Path:
        return self.path / LOCK

    @property
    def runner_pid(self) -> Path:
        return self.path / RUNNER_PID

    @property
    def campaign_file(self) -> Path:
        return self.path / CAMPAIGN_FILE

    @property
    def runner_log(self) -> Path:
        return self.path / RUNNER_LOG

    @property
    def control(self) -> Path:
        return self.path / CONTROL

    def cell_dir(self, slug: str, key: str) -> Path:
        """A cell's folder: its slug and the first 8 hex digits of its key."""
        return self.path / CELLS / f"{slug}-{key[:8]}"

    def attempt(self, slug: str, key: str, number: int) -> AttemptFolder:
        return AttemptFolder(self.cell_dir(slug, key) / f"attempt-{number}")

    def attempts(self, slug: str, key: str) -> list[AttemptFolder]:
        """The cell's attempt folders on disk, in attempt order."""
        found = [AttemptFolder(p) for p in self.cell_dir(slug, key).glob("attempt-*")]
        return sorted(found, key=lambda a: a.number)

    def all_attempts(self) -> list[AttemptFolder]:
        """Every attempt folder of every cell (for a runner cleaning up after earlier ones)."""
        return [AttemptFolder(p) for p in sorted(self.path.glob(f"{CELLS}/*/attempt-*"))]
