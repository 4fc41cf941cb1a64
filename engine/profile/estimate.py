"""How many jobs of one cell fit at once, per executor, from a measured profile and a
budget (``engine.profile.budget``). Every figure is the profile's measurement; how they add
up is the executor's own, declared with it (``ExecutorSpec.memory_model``, a
:class:`~engine.profile.memory_model.MemoryModel`; the built-ins' in
``engine.executors.memory_models``, tabled in ``docs/profiles.md``). This module reads the
profile into :class:`~engine.profile.memory_model.Figures` (scaled for the cell's
precision), asks the model, and searches K against the budget.

An executor that declares no memory model (a plugin's) is estimated as one job at a time
(:data:`~engine.profile.memory_model.ONE_AT_A_TIME`; a note names it); an executor that is
not registered is refused (``ConfigError``: the registries are filled at each process's
entry, ``engine.plugins.load_builtins``).

Processes executors (``concurrency = "processes"``: mp, ray) also run at most one process
per core (``cores``): more time-slice the cores and measure the scheduler, not the
strategy. What the profile does not measure is named in the estimate's ``notes`` (the MPS
server's and Ray runtime's own memory): the safety margin (``SAFETY_MARGIN``) is what
covers them.

Torch-free.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from engine.profile.budget import Budget
from engine.profile.memory_model import ONE_AT_A_TIME, Figures, MemoryModel
from engine.profile.store import Profile
from engine.registry import EXECUTORS


@dataclass
class Estimate:
    """``k``: jobs at once (1..n_jobs); ``limiting``: ``jobs`` (all fit), ``ram``,
    ``device``, ``cores``, or ``executor`` (one job at a time: seq); ``ram_mb`` / ``device_mb``: predicted
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


def memory_model(executor: str) -> tuple[MemoryModel, bool]:
    """``executor``'s declared memory model, and whether it declared one (False: the
    default, :data:`~engine.profile.memory_model.ONE_AT_A_TIME`).

    Raises:
        ConfigError: ``executor`` is not registered (with the nearest name and the known
            ones).
    """
    model = EXECUTORS.get(executor).memory_model
    return (ONE_AT_A_TIME, False) if model is None else (model, True)


#: The note of an estimate made with the default model (``{executor}``: its name).
UNDECLARED_NOTE = ("executor '{executor}' declares no memory model: estimated as one job at a "
                   "time (docs/executors.md, \"Memory model\")")


def figures(profile: Profile, member_scale: float = 1.0) -> Figures:
    """The figures of ``profile`` a memory model reads, for a precision whose per-member
    part is ``member_scale`` times the profile's (:mod:`engine.profile.precision_model`):
    the per-member increments, and one job's own part (taken as one increment) of RSS(1),
    of reserved device memory at K = 1 and of a forked worker's private memory."""
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
    return Figures(
        rss1_mb=rss1, rss_per_member_mb=inc,
        rss_stack_base_mb=profile.num("rss_stack_base_mb"),
        rss_setup_base_mb=profile.num("rss_setup_base_mb"),
        rss_setup_per_member_mb=profile.num("rss_setup_per_member_mb"),
        parent_rss_mb=profile.num("parent_rss_mb"), private1_mb=private1,
        ray_import_mb=profile.num("ray_import_mb"), device_context_mb=ctx,
        device_reserved1_mb=reserved1, device_per_member_mb=dinc,
        device_stack_base_mb=profile.num("device_stack_base_mb"), member_scale=member_scale)


def predict(profile: Profile, executor: str, k: int, *, mp_start: str = "forkserver",
            member_scale: float = 1.0) -> tuple[float | None, float | None, list[str]]:
    """Predicted peak host RAM and device memory (MiB) of ``k`` jobs at once under
    ``executor`` (its declared memory model, :func:`memory_model`), and the notes on what
    the prediction leaves out. ``member_scale``: the factor on what scales with one
    member, for a precision other than the profile's (:func:`figures`).

    Raises:
        ConfigError: ``executor`` is not registered.
    """
    model, declared = memory_model(executor)
    ram, dev, notes = model.predict(figures(profile, member_scale), k, mp_start)
    if not declared:
        notes = [*notes, UNDECLARED_NOTE.format(executor=executor)]
    return ram, dev, notes


def fits(profile: Profile, executor: str, n_jobs: int, budget: Budget, *,
         mp_start: str = "forkserver", member_scale: float = 1.0) -> Estimate:
    """The most jobs of a cell of ``n_jobs`` that fit at once under ``executor``.

    An executor whose memory model runs one job at a time (``concurrency = "one"``: seq,
    and any executor that declares no model): always 1 (``limiting = executor``).
    Otherwise the largest K in 1..n_jobs whose predicted RAM and device memory stay within
    the budget less its margin (and, for a process per job, ``concurrency = "processes"``:
    mp, ray, K <= cores). K = 1 even when one job does not fit (a note says so: there is
    nothing smaller to run). ``member_scale``: see :func:`predict`.

    Raises:
        ConfigError: ``executor`` is not registered.
    """
    concurrency = memory_model(executor)[0].concurrency
    if concurrency == "one":
        ram, dev, notes = predict(profile, executor, 1, member_scale=member_scale)
        return Estimate(executor, 1, n_jobs, "executor", ram, dev, notes)
    ram_cap, dev_cap = budget.usable("ram"), budget.usable("device")

    def failing(k: int) -> str | None:
        ram, dev, _ = predict(profile, executor, k, mp_start=mp_start,
                              member_scale=member_scale)
        if concurrency == "processes" and k > budget.cores:
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
