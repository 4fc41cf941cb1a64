"""What an executor declares about its memory: how its peak host RAM and device memory add
up from a profile's figures when K jobs run at once (``docs/executors.md``, "Memory model";
``docs/profiles.md``, "The estimate").

The estimate (:mod:`engine.profile.estimate`) reads one profile row into :class:`Figures`
(already scaled for the cell's precision) and asks the executor's declared
:class:`MemoryModel` for a :class:`Prediction` at each K; the model only composes figures,
it never reads the profiles file. An executor declares its model beside its name and
options (``ExecutorSpec(memory_model=...)``, ``engine.executors``); the built-ins' are in
``engine.executors.memory_models``. An executor that declares none is estimated as one job
at a time (:data:`ONE_AT_A_TIME`, with a note saying so).

Torch-free and free of the engine's other packages: the executors' declarations import it,
so it must not import them back (``engine.executors`` → ``engine.profile`` only).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, NamedTuple

#: How many jobs an executor holds in memory at once, for the estimate's search over K:
#: ``one``: one job at a time (the estimate answers K = 1, ``limiting = executor``);
#: ``shared``: K jobs in one process (K bounded by RAM and device memory);
#: ``processes``: one process per job (K bounded by RAM, device memory and the cores:
#: more processes than cores time-slice them).
Concurrency = Literal["one", "shared", "processes"]
CONCURRENCIES: tuple[str, ...] = ("one", "shared", "processes")


@dataclass(frozen=True)
class Figures:
    """One profile's measurements (MiB; None: not measured), as a memory model reads them.

    The figures that scale with one member are already scaled for the cell's precision
    (``member_scale``, :mod:`engine.profile.precision_model`): ``rss1_mb``,
    ``rss_per_member_mb``, ``private1_mb``, ``device_reserved1_mb`` and
    ``device_per_member_mb``; ``rss_setup_per_member_mb`` is as measured
    (:meth:`stack_ram_mb` scales it). ``rss_per_member_mb`` is clamped at >= 0 (a noisy
    negative slope would let K grow without bound); ``device_per_member_mb`` is not (the
    stacked lines clamp it). Column meanings: ``engine.profile.store.COLUMNS``.
    """

    #: Peak RSS of one job trained alone (K = 1, unstacked).
    rss1_mb: float | None
    #: The stacked training line's slope (what one more member adds), >= 0.
    rss_per_member_mb: float
    #: The stacked training line's intercept (None: an older profile without it).
    rss_stack_base_mb: float | None
    #: The stacked set-up line (verification's probe step): intercept and slope.
    rss_setup_base_mb: float | None
    rss_setup_per_member_mb: float | None
    #: RSS of a parent that imported torch, the engine and the dataset (mp's forkserver).
    parent_rss_mb: float | None
    #: Private memory of one forked worker training one job.
    private1_mb: float | None
    #: RSS that importing ray adds to a process (each Ray actor carries it).
    ray_import_mb: float | None
    #: Device memory of one CUDA context (None on CPU).
    device_context_mb: float | None
    #: Peak reserved device memory of one job (K = 1); None on CPU.
    device_reserved1_mb: float | None
    #: The stacked device line's slope and intercept.
    device_per_member_mb: float | None
    device_stack_base_mb: float | None
    #: The precision factor already applied (1.0: the profile's own precision).
    member_scale: float = 1.0

    @property
    def on_gpu(self) -> bool:
        """Whether the profile measured device memory (a CUDA profile)."""
        return self.device_reserved1_mb is not None

    @property
    def process_device_mb(self) -> float | None:
        """Device memory of one process training one job: its context and its reserved
        memory (a dataset copy included). None on CPU."""
        if self.device_reserved1_mb is None:
            return None
        return (self.device_context_mb or 0.0) + self.device_reserved1_mb

    def stack_ram_mb(self, k: int) -> float | None:
        """Peak RSS of one process training K jobs stacked: the higher of the training
        line (:func:`stacked`) and, where measured, the set-up line (verification's probe
        step before training, nearly constant in K). None without RSS(1)."""
        ram = stacked(self.rss1_mb, self.rss_stack_base_mb, self.rss_per_member_mb, k)
        setup_base, setup_inc = self.rss_setup_base_mb, self.rss_setup_per_member_mb
        if ram is not None and k >= 2 and setup_base is not None and setup_inc is not None:
            # Two peaks, one after the other: before training (verification's probe step
            # holds a constant part) and during it (grows with K the fastest).
            ram = max(ram, setup_base + k * max(setup_inc, 0.0) * self.member_scale)
        return ram

    def stack_device_mb(self, k: int) -> float | None:
        """Device memory of one process training K jobs stacked: one context plus the
        stacked line over reserved memory. None on CPU."""
        reserved = stacked(self.device_reserved1_mb, self.device_stack_base_mb,
                           max(self.device_per_member_mb or 0.0, 0.0), k)
        if reserved is None:
            return None
        return (self.device_context_mb or 0.0) + reserved


def stacked(one: float | None, base: float | None, inc: float, k: int) -> float | None:
    """A K-stack's peak: K = 1 is measured (a bucket of one trains unstacked); K >= 2 is on
    the stacked line ``base + K x inc`` (never below the measured K = 1), or, for a
    profile without the line's intercept, ``one + (K - 1) x inc``. None when ``one`` is."""
    if one is None:
        return None
    if k == 1:
        return one
    if base is None:
        return one + (k - 1) * inc
    return max(base + k * inc, one)


class Prediction(NamedTuple):
    """A memory model's answer for K jobs at once: peak host RAM and device memory (MiB;
    None: not predictable from the profile, or on CPU for the device) and notes naming
    what the prediction leaves out (shown by ``fugue-tui simulate``)."""

    ram_mb: float | None
    device_mb: float | None
    notes: list[str]


#: ``predict(figures, k, mp_start) -> Prediction``: the peak of ``k`` (>= 1) jobs at once.
#: ``mp_start`` is the cell's mp start method (``forkserver`` or ``spawn``): only mp's model
#: reads it, the others ignore it. Return a new ``notes`` list on every call.
PredictFn = Callable[[Figures, int, str], Prediction]


@dataclass(frozen=True)
class MemoryModel:
    """An executor's memory model (``ExecutorSpec(memory_model=...)``).

    ``predict``: see :data:`PredictFn`; it must grow (never shrink) with K, as the
    estimate takes the first K over a budget as the bound. ``concurrency``: see
    :data:`Concurrency`. ``summary``: one line, host RAM then device memory, for the docs.

    Raises:
        TypeError: ``predict`` is not callable or ``concurrency`` is not one of
            :data:`CONCURRENCIES` (when the declaration is made, i.e. when its module is
            imported).
    """

    predict: PredictFn
    concurrency: Concurrency = "shared"
    summary: str = ""

    def __post_init__(self) -> None:
        if not callable(self.predict):
            raise TypeError(f"MemoryModel.predict must be callable, got {self.predict!r}")
        if self.concurrency not in CONCURRENCIES:
            raise TypeError(f"MemoryModel.concurrency must be one of "
                            f"{', '.join(CONCURRENCIES)}, got {self.concurrency!r}")


def _one_at_a_time(figures: Figures, k: int, mp_start: str) -> Prediction:
    return Prediction(figures.rss1_mb, figures.process_device_mb, [])


#: One job at a time in the cell's process: RSS(1), and one context plus the reserved
#: device memory of one job. ``seq``'s model, and the estimate's default for an executor
#: that declares none (with a note naming it: K = 1 is safe, never more than it runs).
ONE_AT_A_TIME = MemoryModel(_one_at_a_time, "one",
                            "RSS(1): one job at a time | context + reserved(1)")
