"""The pure arithmetic of the progress views (``--batch``'s live view, the dashboard's run
screen and replay): the completed fraction of a job and its ETA from its own rate. How
durations and numbers are shown: :mod:`fugue_tui.format`. No Rich, no Textual, no state."""

from __future__ import annotations


def fraction_done(epoch: int | None, epochs: int | None, step: int | None,
                  steps: int | None) -> float | None:
    """Completed fraction of a job's ``epochs × steps`` training steps, from its last
    progress report (``epoch`` is the current 1-based epoch, ``step`` the steps done in
    it). None when the job has not said how long it is."""
    if not epochs or not steps or epoch is None or epoch < 1:
        return None
    done = (epoch - 1) * steps + min(max(step or 0, 0), steps)
    return min(1.0, max(0.0, done / (epochs * steps)))


def eta_seconds(fraction: float | None, elapsed: float | None, observed_at: float | None,
                now: float) -> float | None:
    """Seconds left for a job, from its own rate.

    The job had done ``fraction`` of its steps after ``elapsed`` seconds of its own time,
    as reported at wall-clock ``observed_at``; at constant rate it needs
    ``elapsed × (1 − fraction) / fraction`` more from then, less the time since
    (``now − observed_at``), never below 0. Finished (``fraction`` ≥ 1): 0. Unknown rate
    (nothing done yet, no elapsed time, no fraction): None.
    """
    if fraction is not None and fraction >= 1.0:
        return 0.0
    if fraction is None or elapsed is None or fraction <= 0 or elapsed <= 0:
        return None
    remaining = elapsed * (1.0 - fraction) / fraction
    if observed_at is not None:
        remaining -= max(0.0, now - observed_at)
    return max(0.0, remaining)

