"""The campaign's ``[watchdog]`` table as the runner's watchdog (:mod:`engine.runner.watchdog`)
reads it: declared here, with the rest of what a campaign defines; its keys, defaults and
bounds are those of ``engine.define.campaign_schema``. Torch-free."""

from __future__ import annotations

from dataclasses import dataclass

from engine.define.campaign_schema import WATCHDOG_ACTIONS as ACTIONS
from engine.define.campaign_schema import default


@dataclass(frozen=True)
class WatchdogSettings:
    """Campaign table ``[watchdog]``; ``action`` kill (batch default) or flag (dashboard)."""

    interval_s: float = default("watchdog.interval_s")
    suspect_after: int = default("watchdog.suspect_after")
    hung_after: int = default("watchdog.hung_after")
    cpu_fraction: float = default("watchdog.cpu_fraction")
    gpu_busy_pct: float = default("watchdog.gpu_busy_pct")
    action: str = default("watchdog.action")


__all__ = ["ACTIONS", "WatchdogSettings"]
