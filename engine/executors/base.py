"""What an executor receives and returns. Imported inside cell processes only.

An executor runs the jobs of one cell. It never sees the runner or the CSV: it gets a
:class:`CellContext` and returns one :class:`~engine.train.loop.JobResult` per job, in job
order. The cell times ``setup`` (reported as ``setup_s``), the group window around
``run`` (``T_group``) and ``teardown`` (outside both), identically for every executor.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.bounds import DEFAULT_SEED
from engine.define.workloads import JobSpec
from engine.executors.step_observer import StepObserver
from engine.models.hand_back import HandBack
from engine.results.rows import GroupRow
from engine.train.loop import JobResult, TrainSettings


@dataclass
class CellContext:
    """Everything a cell hands its executor.

    ``datasets(name)`` returns the ``DeviceData`` of a dataset for this process (loaded
    on the host once per cell before the group window, copied to the device on first use
    inside it); ``emit(type, **fields)`` writes an event; ``options`` are the executor's
    campaign options; ``threads`` the torch intra-op thread count set for this process.
    """

    settings: TrainSettings
    datasets: Callable[[str], Any]
    emit: Callable[..., Any]
    threads: int
    options: dict[str, Any] = field(default_factory=dict)
    seed: int = DEFAULT_SEED
    #: Matrix axes of the cell: the Ray Tune scheduler (hpo cells under ray, else None),
    #: the unified ablation rung and feature string, and the cell's max_parallel request.
    scheduler: str | None = None
    rung: str | None = None
    features: str | None = None
    max_parallel: int | None = None
    #: The attempt folder in the run folder (events file, cleanup records, executor logs).
    attempt_dir: Path | None = None
    #: Extra environment for worker processes the executor starts.
    job_env: dict[str, str] = field(default_factory=dict)
    #: NVML UUID of the device under test (None on CPU): inside a cell ``cuda:0`` is that
    #: device, and NVML must be asked by UUID, never by index.
    gpu_uuid: str | None = None
    #: Group-row columns the executor decided or measured (scheduler, max_parallel,
    #: executor_info, ...); they override the cell's generic values. A dict that checks each
    #: name as it is set (``ctx.group["max_paralel"] = 2`` fails at that line, naming
    #: ``max_parallel``): the columns are :mod:`engine.results.columns`. A plain dict given
    #: here is wrapped (and checked).
    group: GroupRow = field(default_factory=GroupRow)
    #: Called around each training step by the executors that declare it
    #: (:mod:`engine.executors.step_observer`: unified_model); None: not observed. The
    #: profile probe times steps and reads memory peaks through it; a cell sets none.
    step_observer: StepObserver | None = None
    #: ``(start, end)`` intervals on ``time.perf_counter`` that the executor spent inside
    #: ``run`` on work the window rule keeps out of ``T_group`` (unified_model's parity
    #: probe: docs/measurement.md); the cell subtracts their total from the window.
    outside_window: list[tuple[float, float]] = field(default_factory=list)
    #: Which jobs' final weights are written after the group window (issue 50):
    #: ``"false"``, ``"true"`` or ``"best"`` (:data:`engine.models.save.SAVE_MODES`).
    save_models: str = "false"
    #: A stream cell's arrival times (issue 51): seconds after ``stream_origin``, one per
    #: job in job order; None: a batch cell (every job known at the start).
    arrivals: list[float] | None = None
    #: ``time.perf_counter`` when the group window opened: the stream's time 0 (the cell
    #: sets it just before ``run``).
    stream_origin: float | None = None
    #: Per job id, ``(admitted, completed)`` on ``time.perf_counter`` as the executor's
    #: online scheduler saw them (engine.results.streams); a job missing here falls back
    #: to its result's ``start`` and ``end``.
    stream_marks: dict[str, tuple[float, float]] = field(default_factory=dict)
    #: Per job id, ``time.perf_counter`` when the job joined a running stack
    #: (unified_model's dynamic stacking, issue 52: the ``joined_s`` column); a job
    #: missing here did not join one.
    stream_joins: dict[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.group, GroupRow):
            self.group = GroupRow(self.group)


class Executor(ABC):
    """A concurrency strategy. Subclasses are registered by ``engine.executors``."""

    def setup(self, jobs: list[JobSpec], ctx: CellContext) -> None:  # noqa: B027 - optional hook
        """Start what the strategy needs (daemons, pools, actors): outside ``T_group``."""

    @abstractmethod
    def run(self, jobs: list[JobSpec], ctx: CellContext) -> list[JobResult]:
        """Train every job; return their results in job order. This is the group window."""

    def final_states(self, jobs: list[JobSpec], results: list[JobResult], ctx: CellContext
                     ) -> Iterator[tuple[JobSpec, Mapping[str, Any]]]:
        """Each job's final weights (name → tensor, the user's key names), one at a time,
        when they live in the cell's process: what the default :meth:`hand_back` digests.
        Default: none (an executor that trains elsewhere overrides :meth:`hand_back`)."""
        return iter(())

    def hand_back(self, jobs: list[JobSpec], results: list[JobResult], ctx: CellContext,
                  save: set[str], executor: str) -> dict[str, HandBack]:
        """After the group window, before teardown: digest every ok job's final weights and
        write those in ``save`` (job ids), in the process that holds them, one job at a time
        (:mod:`engine.models.hand_back`). Returns the hand-backs by job id; a job missing
        from it gets an empty ``weights_sha256``."""
        from engine.models.hand_back import hand_back

        return hand_back(self.final_states(jobs, results, ctx), results, executor, save,
                         ctx.attempt_dir)

    def teardown(self, ctx: CellContext) -> None:  # noqa: B027 - optional hook
        """Stop what ``setup`` started; always called, even after a failure."""
