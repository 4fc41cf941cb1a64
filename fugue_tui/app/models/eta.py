"""The campaign's ETA on the run screen: how long until its last cell ends, and how sure
that is. Textual-free; a pure function of the campaign state and the clock.

The rule (README, Dashboard, *Run*):

* **Recomputed at each cell end** from the cells measured so far (their current attempt's
  wall time, start to end): each cell left costs the mean of its executor's measured cells
  (of all measured cells while its executor has none); a cell running at that moment costs
  that less what it had run. The engine has no per-cell duration estimate to start from
  (its profiles hold memory and step times, not a cell's wall time), so there is no ETA
  before the first cell ends.
* **Counts down between cell ends**: the estimate made at the last cell end, less the
  seconds since. It never freezes: a cell that overruns its mean no longer stops the clock
  (issue 47, item 8: ``ETA 1:04`` at 0:33 and at 0:42); once the estimate is used up
  before the campaign ends, it reads ``overdue by`` and counts up until the next cell end.
* **Its uncertainty while it has little to go on**: a spread for the cells left — per
  executor, ``m σ² + m² σ² / n`` for its ``m`` cells left and ``n`` measured (each cell's
  own scatter plus the error of the mean it is costed at), with ``σ`` the standard
  deviation of the executor's measured durations, half its mean while only one was
  measured and the whole mean while none was (it borrowed another executor's) — summed
  and square-rooted. It is shown, with how many cells were measured, while it is at least
  :data:`SHOWN_FROM` of the time left: ``ETA ~3:10 (±1:20, 2 of 20 cells measured)``.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

from engine.observe.state import CampaignState
from fugue_tui.format import fmt_duration

#: The spread is shown while it is at least this share of the time left.
SHOWN_FROM = 0.1


@dataclass(frozen=True)
class Eta:
    """The campaign's ETA at one instant (:func:`campaign_eta`)."""

    #: Seconds until the last cell ends; negative once the estimate is overdue.
    left_s: float
    #: The spread of the estimate made at the last cell end (± seconds; see the module).
    spread_s: float
    #: Cells measured (ended, with a start and an end) and cells in the campaign.
    measured: int
    total: int

    @property
    def uncertain(self) -> bool:
        """Whether the spread is worth showing: at least :data:`SHOWN_FROM` of the time
        left (of a second when none is left)."""
        return self.spread_s >= SHOWN_FROM * max(abs(self.left_s), 1.0)

    def text(self, long: bool = True) -> str:
        """``ETA 3:10``, ``ETA ~3:10 ±1:20`` or ``ETA overdue by 0:12``; ``long`` adds how
        many cells it rests on: ``ETA ~3:10 (±1:20, 2 of 20 cells measured)``."""
        when = (f"overdue by {fmt_duration(-self.left_s)}" if self.left_s < -0.5
                else ("~" if self.uncertain else "") + fmt_duration(self.left_s))
        spread = f"±{fmt_duration(self.spread_s)}" if self.uncertain else ""
        if not long:
            return " ".join(p for p in ("ETA", when, spread) if p)
        basis = f"{self.measured} of {self.total} cells measured"
        return f"ETA {when} ({spread + ', ' if spread else ''}{basis})"


def campaign_eta(state: CampaignState, now: float, total: int = 0) -> Eta | None:
    """The ETA of the campaign in ``state`` at ``now`` (Unix seconds), by the module's
    rule; ``total``: the campaign's cell count (0: the cells known). None before any cell
    ended with a start and an end."""
    from fugue_tui.app.models.cells import split_label

    took: dict[str, list[float]] = {}
    last_end = -math.inf
    for cell in state.cells.values():
        if cell.ended and cell.started_ts is not None and cell.ended_ts is not None:
            took.setdefault(split_label(cell.label)[1], []).append(
                max(0.0, cell.ended_ts - cell.started_ts))
            last_end = max(last_end, cell.ended_ts)
    every = [t for times in took.values() for t in times]
    if not every:
        return None
    left_then = 0.0
    #: executor → (cells left, the mean each costs, cells measured, their deviation)
    groups: dict[str, tuple[int, float, int, float]] = {}
    for cell in state.cells.values():
        if cell.state != "queued" and not cell.active:
            continue
        executor = split_label(cell.label)[1]
        times = took.get(executor) or []
        mean = statistics.fmean(times or every)
        cost = mean
        if cell.active and cell.started_ts is not None and cell.started_ts < last_end:
            cost = max(0.0, cost - (last_end - cell.started_ts))  # what it had run then
        left_then += cost
        if len(times) >= 2:
            sigma = statistics.stdev(times)
        else:  # one measurement says nothing of the scatter; none: a borrowed mean
            sigma = mean / 2 if times else mean
        m, _, _, _ = groups.get(executor, (0, mean, len(times), sigma))
        groups[executor] = (m + 1, mean, len(times), sigma)
    variance = sum(m * s * s + (m * s) ** 2 / max(n, 1) for m, _, n, s in groups.values())
    return Eta(left_s=left_then - max(0.0, now - last_end), spread_s=math.sqrt(variance),
               measured=len(every), total=max(total, len(state.cells)))
