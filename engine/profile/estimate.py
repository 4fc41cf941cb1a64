"""How many jobs of one cell fit at once, per executor, from a measured profile and a
budget (``engine.profile.budget``). Every figure is the profile's measurement; the model of
how they add up is per executor (``docs/profiles.md``):

============== =========================================================================
executor       host RAM (MiB)                        device memory (MiB; GPU only)
============== =========================================================================
unified_model  K = 1: RSS(1); K >= 2: the stacked      context + the same for
               line base + K x per-member increment  reserved device memory
               (one process, one dataset copy)
mp             forkserver: parent + P x private      MPS server + P x (context
               memory of one forked job; spawn:      + reserved(1)): a context and a
               P x RSS(1)                            dataset copy per process
ray            P x (RSS(1) + ray import) (each       P x (context + reserved(1))
               actor is a process of its own)
seq            RSS(1): one job at a time             context + reserved(1)
============== =========================================================================

mp and ray also run at most one process per core (``cores``): more time-slice the cores and
measure the scheduler, not the strategy. What the profile does not measure is named in the
estimate's ``notes`` (the MPS server's and Ray runtime's own memory): the safety margin
(``SAFETY_MARGIN``) is what covers them.

Torch-free.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from engine.profile.budget import Budget
from engine.profile.store import Profile

#: Executors whose jobs run as processes of their own (one per core at most).
PROCESS_EXECUTORS = ("mp", "ray")


@dataclass
class Estimate:
    """``k``: jobs at once (1..n_jobs); ``limiting``: ``jobs`` (all fit), ``ram``,
    ``device``, ``cores``, or ``executor`` (seq); ``ram_mb`` / ``device_mb``: predicted
    peak at ``k`` (device None on CPU or unmeasured)."""

    executor: str
    k: int
    n_jobs: int
    limiting: str
    ram_mb: float | None
    device_mb: float | None
    notes: list[str] = field(default_factory=list)

    def info(self) -> dict:
        """What a group row's ``executor_info.max_parallel_estimate`` records."""
        return {"k": self.k, "n_jobs": self.n_jobs, "limiting": self.limiting,
                "ram_mb": _r(self.ram_mb), "device_mb": _r(self.device_mb),
                "notes": self.notes}


def _r(x: float | None) -> float | None:
    return None if x is None else round(x, 1)


def _less(value: float | None, part: float) -> float | None:
    """``value`` less ``part`` (never below half of it: a guard against a noisy slope)."""
    return None if value is None else max(value - part, value / 2)


def predict(profile: Profile, executor: str, k: int, *, mp_start: str = "forkserver",
            member_scale: float = 1.0) -> tuple[float | None, float | None, list[str]]:
    """Predicted peak host RAM and device memory (MiB) of ``k`` jobs at once under
    ``executor``, and the notes on what the prediction leaves out. ``member_scale``: the
    factor on what scales with one member, for a precision other than the profile's
    (:mod:`engine.profile.precision_model`): the per-member increments, and one job's own
    part (taken as one increment) of RSS(1), of reserved device memory at K = 1 and of a
    forked worker's private memory."""
    notes: list[str] = []
    rss1 = profile.num("rss1_mb")
    inc = max(profile.num("rss_per_member_mb") or 0.0, 0.0)
    ctx, dinc = profile.num("device_context_mb"), profile.num("device_per_member_mb")
    reserved1 = profile.by_k("device_reserved_mb").get(1)
    private1 = profile.num("private1_mb")
    if member_scale != 1.0:
        saved, dsaved = (1.0 - member_scale) * inc, (1.0 - member_scale) * max(dinc or 0.0, 0.0)
        rss1, private1 = _less(rss1, saved), _less(private1, saved)
        reserved1 = _less(reserved1, dsaved)
        inc *= member_scale
        dinc = None if dinc is None else dinc * member_scale
    base, dbase = profile.num("rss_stack_base_mb"), profile.num("device_stack_base_mb")
    on_gpu = reserved1 is not None
    per_process_dev = (ctx or 0.0) + reserved1 if on_gpu else None
    ram: float | None
    dev: float | None = None
    if executor == "unified_model":
        ram = _stacked(rss1, base, inc, k)
        setup_base = profile.num("rss_setup_base_mb")
        setup_inc = profile.num("rss_setup_per_member_mb")
        if ram is not None and k >= 2 and setup_base is not None and setup_inc is not None:
            # Two peaks, one after the other: before training (verification's probe step
            # holds a constant part) and during it (grows with K the fastest).
            ram = max(ram, setup_base + k * max(setup_inc, 0.0) * member_scale)
        if on_gpu:
            dev = (ctx or 0.0) + _stacked(reserved1, dbase, max(dinc or 0.0, 0.0), k)
    elif executor == "mp":
        parent, private = profile.num("parent_rss_mb"), private1
        if mp_start == "forkserver" and parent is not None and private is not None:
            ram = parent + k * private
        else:
            ram = None if rss1 is None else k * rss1
        if on_gpu:
            dev = k * per_process_dev
            notes.append("the MPS server's own device memory is not measured (the margin "
                         "covers it)")
    elif executor == "ray":
        extra = profile.num("ray_import_mb")
        if extra is None:
            notes.append("ray's import cost per actor not measured (ray not installed "
                         "where profiled)")
        ram = None if rss1 is None else k * (rss1 + (extra or 0.0))
        notes.append("the Ray runtime's own processes (raylet, GCS) are not in the profile "
                     "(the margin covers them)")
        if on_gpu:
            dev = k * per_process_dev
    else:  # seq and any executor that runs one job at a time
        ram = rss1
        dev = per_process_dev
    return ram, dev, notes


def _stacked(one: float | None, base: float | None, inc: float, k: int) -> float | None:
    """A K-stack's peak: K = 1 is measured (a bucket of one trains unstacked); K >= 2 is on
    the stacked line ``base + K x inc`` (never below the measured K = 1), or, for a
    profile without the line's intercept, ``one + (K - 1) x inc``."""
    if one is None:
        return None
    if k == 1:
        return one
    if base is None:
        return one + (k - 1) * inc
    return max(base + k * inc, one)


def fits(profile: Profile, executor: str, n_jobs: int, budget: Budget, *,
         mp_start: str = "forkserver", member_scale: float = 1.0) -> Estimate:
    """The most jobs of a cell of ``n_jobs`` that fit at once under ``executor``.

    ``seq``: always 1 (``limiting = executor``). Otherwise the largest K in 1..n_jobs whose
    predicted RAM and device memory stay within the budget less its margin (and, for mp
    and ray, K <= cores). K = 1 even when one job does not fit (a note says so: there is
    nothing smaller to run). ``member_scale``: see :func:`predict`.
    """
    if executor not in ("unified_model", *PROCESS_EXECUTORS):
        ram, dev, notes = predict(profile, executor, 1, member_scale=member_scale)
        return Estimate(executor, 1, n_jobs, "executor", ram, dev, notes)
    ram_cap, dev_cap = budget.usable("ram"), budget.usable("device")

    def failing(k: int) -> str | None:
        ram, dev, _ = predict(profile, executor, k, mp_start=mp_start,
                              member_scale=member_scale)
        if executor in PROCESS_EXECUTORS and k > budget.cores:
            return "cores"
        if ram is not None and ram_cap is not None and ram > ram_cap:
            return "ram"
        if dev is not None and dev_cap is not None and dev > dev_cap:
            return "device"
        return None

    # Predictions grow with k (every increment is clamped >= 0): the first k that fails
    # bounds the answer.
    k, limiting = n_jobs, "jobs"
    for candidate in range(1, n_jobs + 1):
        why = failing(candidate)
        if why:
            k, limiting = max(candidate - 1, 1), why
            break
    ram, dev, notes = predict(profile, executor, k, mp_start=mp_start,
                              member_scale=member_scale)
    if limiting != "jobs" and failing(1):
        notes.insert(0, f"even one job is predicted over the {limiting} budget")
    return Estimate(executor, k, n_jobs, limiting, ram, dev, notes)
