"""Messages from workers to screens: the only way results of blocking work reach widgets."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from textual.message import Message  # its __post_init__ lets dataclasses initialise it


@dataclass(eq=False)
class CatalogueLoaded(Message):
    """The catalogue and what can run here (``experiments``: ExperimentInfo), or ``error``."""

    experiments: list[Any]
    error: str = ""
    source: str = ""


@dataclass(eq=False)
class PreviewReady(Message):
    """The runner's dry run of the plan (``preview``: plan_model.Preview) for ``revision``."""

    preview: Any
    revision: int


@dataclass(eq=False)
class PlanLoaded(Message):
    """A campaign file read into a plan (``doc``), or the ``error`` naming file and key."""

    path: str
    doc: dict[str, Any] | None
    error: str = ""


@dataclass(eq=False)
class Launched(Message):
    """The runner was started (``handle``), or an ``error``; ``attach`` when a runner of the
    campaign was already running and the dashboard attaches to it instead."""

    run_dir: str
    handle: Any = None
    offset: int = 0
    error: str = ""
    attach: bool = False


@dataclass(eq=False)
class Followed(Message):
    """New events from the campaign's files, new log lines of the followed cell log,
    whether the runner is alive, and a host sample when idle polling is on."""

    events: list[dict[str, Any]] = field(default_factory=list)
    log_lines: list[str] = field(default_factory=list)
    log_reset: bool = False
    log_path: str | None = None
    runner_alive: bool | None = None
    host_sample: dict[str, Any] | None = None


@dataclass(eq=False)
class Notice(Message):
    """A line for the user (``severity``: information, warning, error)."""

    text: str
    severity: str = "information"
