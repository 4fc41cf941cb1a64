"""The campaign's ``[watchdog]`` table as the runner's watchdog (:mod:`engine.runner.watchdog`)
reads it: declared here, with the rest of what a campaign defines. Torch-free."""

from __future__ import annotations

from dataclasses import dataclass

ACTIONS = ("kill", "flag")


@dataclass(frozen=True)
class WatchdogSettings:
    """Campaign table ``[watchdog]``; ``action`` kill (batch default) or flag (dashboard)."""

    interval_s: float = 10.0
    suspect_after: int = 3
    hung_after: int = 6
    cpu_fraction: float = 0.05
    gpu_busy_pct: float = 5.0
    action: str = "kill"
