"""Executor registry: each concurrency strategy is declared once, by slug, with the flags
that the runner, the CSV and the figures ask about (instead of ``if executor == "ray"``),
and its options as one dataclass (``MPOptions``, ``RayOptions``, ``UnifiedOptions``): each
field's default, type, choices, bound and help (``engine.define.executor_options.option``)
are what campaign validation, ``fugue-tui run --help``, the dashboard's option fields and
``docs/executors.md`` show. Adding an option is adding a field here.

Torch-free: the implementation class is named by ``target`` (``module:Class``) and imported
only inside the cell process.
"""

from __future__ import annotations

import dataclasses
import importlib
from dataclasses import dataclass, field
from typing import Any

from engine.define.axes import DEFAULT_FEATURES, parse_features
from engine.define.executor_options import (
    OptionField,
    fields_from_dicts,
    fields_of,
    option,
)
from engine.executors import memory_models
from engine.executors.ray.options import RAY_SCHEDULERS, TUNE_SCHEDULERS
from engine.profile.memory_model import MemoryModel
from engine.registry import EXECUTORS


@dataclass(frozen=True)
class ExecutorSpec:
    """An executor's declaration.

    ``concurrent``: jobs share the device at the same time, so per-job GPU
    energy/utilisation/VRAM cannot be separated (those job cells stay empty). ``options``:
    the campaign keys under ``[options.<slug>]`` (``fugue-tui run --option
    <slug>.<key>=<value>``), as a dataclass of :func:`~engine.define.executor_options.option`
    fields, or, as plugins declared them before, a dict of key → types with ``option_help``,
    ``choices``, ``minimum`` and ``axes`` beside it. Every reader goes through
    :attr:`option_fields`.

    Deprecated and ignored (still accepted, so that older plugins load): ``color`` (the
    charts colour executors by their order), ``baseline`` (speedups are over ``seq``, the
    measurement contract's denominator: ``engine.results.analysis.BASELINE_EXECUTOR``),
    ``supports_scheduler`` (the matrix expands the options declared as axes).
    """

    name: str
    label: str
    color: str = ""
    target: str = ""
    baseline: bool = False
    supports_scheduler: bool = False
    concurrent: bool = False
    options: Any = field(default_factory=dict)
    description: str = ""
    #: Dict-declared options only (plugins): one line per option, shown by ``run --help``.
    option_help: dict[str, str] = field(default_factory=dict)
    #: Dict-declared options only: allowed values of string options.
    choices: dict[str, tuple[str, ...]] = field(default_factory=dict)
    #: Dict-declared options only: smallest allowed value of numeric options.
    minimum: dict[str, float] = field(default_factory=dict)
    #: Dict-declared options only: options that expand into matrix axes
    #: (``engine.define.axes``): ``scheduler``, ``sweep``.
    axes: tuple[str, ...] = ()
    #: Jobs train in worker processes that load their own data (mp, ray): the cell then
    #: neither loads datasets nor touches the device (no CUDA context in the parent, which
    #: under EXCLUSIVE_PROCESS would take the GPU MPS needs, and costs VRAM otherwise).
    trains_in_workers: bool = False
    #: Share of one core the strategy's own runtime uses while every job is stuck (Ray's
    #: raylet and GCS: about 6 % here). The watchdog adds it to ``cpu_fraction``, so that a
    #: hung job under this executor still looks idle.
    idle_cpu_fraction: float = 0.0
    #: ``module:function`` of a campaign-time check of this executor's options table beyond
    #: types and bounds (torch-free, cheap): ``check(options) -> None | (key, reason)``.
    options_check: str | None = None
    #: How this executor's peak host RAM and device memory add up from a memory profile
    #: (``fugue-tui simulate``, ``max_parallel = "auto"``): a torch-free
    #: :class:`~engine.profile.memory_model.MemoryModel` (``docs/executors.md``, "Memory
    #: model"). None: the estimate takes one job at a time and says so in a note.
    memory_model: MemoryModel | None = None
    #: Serves a stream (issue 51, campaign key ``arrivals``): its ``run`` admits each job
    #: no earlier than ``ctx.arrivals`` says (an online scheduler). False: a stream
    #: campaign refuses the executor (it would run the stream as a batch).
    serves_streams: bool = False
    #: Every option, read from ``options`` (see the class docstring), in declaration order.
    option_fields: dict[str, OptionField] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not self.target:
            raise TypeError(f"ExecutorSpec {self.name!r}: target ('module:Class') is required")
        if self.memory_model is not None and not isinstance(self.memory_model, MemoryModel):
            raise TypeError(f"ExecutorSpec {self.name!r}: memory_model must be an "
                            f"engine.profile.memory_model.MemoryModel, got "
                            f"{type(self.memory_model).__name__}")
        if isinstance(self.options, type) and dataclasses.is_dataclass(self.options):
            found = fields_of(self.options)
        else:
            found = fields_from_dicts(self.options, self.option_help, self.choices,
                                      self.minimum, self.axes)
        object.__setattr__(self, "option_fields", found)

    @property
    def option_axes(self) -> tuple[str, ...]:
        """Options that expand into matrix axes (``scheduler``, ``sweep``)."""
        return tuple(dict.fromkeys([*self.axes, *(n for n, f in self.option_fields.items()
                                                  if f.axis)]))

    def load(self):
        module, _, cls = self.target.partition(":")
        return getattr(importlib.import_module(module), cls)

    def check_options(self, options: dict) -> tuple[str, str] | None:
        """Run :attr:`options_check` on a campaign's ``[options.<name>]`` table: None, or the
        key at fault and a one-line reason.

        Raises:
            FugueError: a malformed value the check cannot even try (e.g. an address).
        """
        if not self.options_check:
            return None
        module, _, func = self.options_check.partition(":")
        return getattr(importlib.import_module(module), func)(options)


def register_executor(spec: ExecutorSpec) -> ExecutorSpec:
    return EXECUTORS.add(spec)


#: Early-stopping schedulers of executors other than ray (``engine.train.early_stop``):
#: ``sha`` synchronous, the others asynchronous (the rules Ray Tune's schedulers of the same
#: names follow). ``fifo`` (no early stopping) is the legacy. ``engine.train.early_stop.
#: SCHEDULERS`` lists the same (the training side may not import this package: a test pins
#: the two equal).
SCHEDULER_CHOICES = ("fifo", "sha", *(s for s in TUNE_SCHEDULERS if s != "fifo"))
_SCHEDULER_HELP = ("hpo: early stopping on the per-epoch validation metric (val_loss, or R² "
                   "for regression): sha rung-synchronous successive halving (the same "
                   "decisions under every executor), asha/median/hyperband asynchronous "
                   "(decisions recorded per trial); a list expands into one cell each")
_GRACE_HELP = "hpo: epochs before a trial may be stopped (the first rung)"
_FACTOR_HELP = "hpo: sha/asha/hyperband reduction factor (1/factor of a rung continue)"


@dataclass(frozen=True)
class SeqOptions:
    """``[options.seq]``."""

    scheduler: str | list[str] = option(
        "fifo", choices=SCHEDULER_CHOICES, axis=True, legacy="fifo", workloads=("hpo",),
        help=_SCHEDULER_HELP + "; sha runs the trials rung by rung (every live trial's "
             "model and optimizer stay in memory between rungs)")
    grace_period: int = option(1, minimum=1, help=_GRACE_HELP)
    reduction_factor: int = option(2, minimum=2, help=_FACTOR_HELP)


register_executor(ExecutorSpec(
    name="seq", label="Sequential", target="engine.executors.seq:SeqExecutor",
    serves_streams=True,
    options=SeqOptions, memory_model=memory_models.SEQ,
    description="one job after another in the cell's process: the denominator of speedups"))

def check_max_parallel(value: Any) -> None:
    """``max_parallel``: an integer >= 1 or ``"auto"`` (``engine.profile.auto``).

    Raises:
        ValueError: anything else, with the reason.
    """
    if value == "auto":
        return
    if isinstance(value, bool) or not isinstance(value, int):
        from engine.errors import nearest

        hint = nearest(value, ["auto"]) if isinstance(value, str) else ""
        raise ValueError(f"must be an integer >= 1 or \"auto\", got {value!r}{hint}")
    if value < 1:
        raise ValueError(f"must be an integer >= 1 or \"auto\", got {value!r}")


#: ``auto``: how ``max_parallel`` is estimated (docs/profiles.md); said once per executor.
_AUTO_HELP = ("; auto: as many as this machine's memory profiles say fit (fugue-tui profile, "
              "fugue-tui simulate; without a profile all jobs, with a warning)")
_PARALLEL_HELP = "most jobs running at once (default: all jobs of the cell)" + _AUTO_HELP

def _check_devices(value: Any) -> None:
    from engine.executors.packing import check_devices

    check_devices(value)


def _check_jobs_per_device(value: Any) -> None:
    from engine.executors.packing import check_jobs_per_device

    check_jobs_per_device(value)


#: How mp starts its workers when a campaign does not say (bench/RESULTS.md, part
#: strategies, compares both). Keyed when not the legacy "spawn" (docs/measurement.md).
MP_START_DEFAULT = "forkserver"


@dataclass(frozen=True)
class MPOptions:
    """``[options.mp]``."""

    max_parallel: int | str | None = option(minimum=1, check=check_max_parallel,
                                            help=_PARALLEL_HELP)
    mps: str = option("auto", choices=("auto", "on", "off"), help=(
        "auto: a private CUDA MPS daemon on a CUDA device when nvidia-cuda-mps-control is "
        "found, else plain processes; on: MPS required (refuse when it cannot run); off: "
        "plain concurrent processes"))
    start: str | list[str] = option(
        MP_START_DEFAULT, choices=("forkserver", "spawn"), axis=True, legacy="spawn",
        help="forkserver: each job's worker is forked from a parent that imported torch, the "
             "engine and the plugins in setup (setup_s); spawn: a fresh interpreter per job, "
             "imports inside T_group (the form before this option); a list runs one cell each")
    scheduler: str | list[str] = option(
        "fifo", choices=SCHEDULER_CHOICES, axis=True, legacy="fifo", workloads=("hpo",),
        help=_SCHEDULER_HELP + "; under sha each worker waits at each rung for the cell's "
             "decision (needs max_parallel >= the trials); asha/median/hyperband: a worker waits for the verdict after each epoch it may be judged at; a stopped worker holds its weights for the hand-back, then ends")
    grace_period: int = option(1, minimum=1, help=_GRACE_HELP)
    reduction_factor: int = option(2, minimum=2, help=_FACTOR_HELP)
    # Packing (issue 27, engine.executors.packing). No default: absent is the legacy
    # one-device cell and is not hashed; set, it keys by the GPU models it resolves to.
    devices: str | list[str] | None = option(
        check=_check_devices,
        help="pack the cell's jobs onto several GPUs: \"auto\" (every GPU this process may "
             "see) or a list of \"cuda:N\" / GPU-... / MIG-... UUIDs; job i runs on device "
             "i mod n, each worker pinned by CUDA_VISIBLE_DEVICES=<uuid> before CUDA starts")
    jobs_per_device: int | None = option(
        minimum=1, check=_check_jobs_per_device,
        help="with devices: most jobs running at once on one device (default: all of the "
             "device's jobs)")


register_executor(ExecutorSpec(
    name="mp", label="Multiprocess (MPS)", target="engine.executors.mp.executor:MPExecutor",
    concurrent=True, trains_in_workers=True, options=MPOptions, memory_model=memory_models.MP,
    options_check="engine.executors.packing:campaign_check", serves_streams=True,
    description="one process per job (forked from a pre-warmed parent, or spawned) sharing "
                "the GPU through a private CUDA MPS daemon"))


#: Whether Ray Tune reuses trial actors when a campaign does not say: true, because the bench
#: (bench/RESULTS.md, part strategies, both side by side) measured D_hpo under ray at about
#: 0.9x seq with reuse against 0.03-0.05x with a fresh process per trial. Keyed in hpo cells
#: when not the legacy false (docs/measurement.md, "Cell keys" and its re-pin table).
RAY_REUSE_DEFAULT = True


@dataclass(frozen=True)
class RayOptions:
    """``[options.ray]``."""

    max_parallel: int | str | None = option(
        minimum=1, check=check_max_parallel,
        help="actors (or concurrent Tune trials); default: all jobs" + _AUTO_HELP)
    scheduler: str | list[str] = option(
        "fifo", choices=RAY_SCHEDULERS, axis=True,
        help="Ray Tune trial scheduler for hpo experiments (asha and hyperband asynchronous) "
             "on the task's per-epoch validation metric (val_loss; regression: the R²); "
             "sha: rung-synchronous successive halving decided by the cell (trials wait at "
             "each rung; needs max_parallel >= the trials); a list expands into one cell each")
    address: str | None = option(
        help="an existing Ray cluster, host:port or ray://host:port (default: a private "
             "local runtime)")
    grace_period: int = option(1, minimum=1, help="epochs before a trial may be stopped")
    reduction_factor: int = option(2, minimum=2, help="asha/hyperband reduction factor")
    reuse_actors: bool | list[bool] = option(
        RAY_REUSE_DEFAULT, axis=True, legacy=False, workloads=("hpo",),
        help="hpo: true: Ray Tune runs each trial in a reused actor; the actors start in "
             "setup (setup_s) and each trial gets a fresh model, optimizer, RNG seed and batch "
             "order; false: a fresh process per trial, started inside T_group (the form "
             "before this option); a list runs one cell each")
    # Packing (issue 27, engine.executors.packing): as mp's; absent is not hashed.
    devices: str | list[str] | None = option(
        check=_check_devices,
        help="pack the cell's jobs onto several GPUs of the private runtime: \"auto\" or a "
             "list of \"cuda:N\" / GPU-... / MIG-... UUIDs; job i runs on device i mod n, "
             "on an actor Ray pinned there (a 1/jobs_per_device GPU share); actor pools "
             "only (not hpo's Tune trials), not with address")
    jobs_per_device: int | None = option(
        minimum=1, check=_check_jobs_per_device,
        help="with devices: most jobs running at once on one device, the actors per device "
             "(default: all of the device's jobs)")


register_executor(ExecutorSpec(
    name="ray", label="Ray", target="engine.executors.ray.actors:RayExecutor",
    concurrent=True, trains_in_workers=True, idle_cpu_fraction=0.10, options=RayOptions,
    memory_model=memory_models.RAY,
    options_check="engine.executors.ray.options:campaign_check", serves_streams=True,
    description="Ray actors (ensemble, cv, multi_model) or Ray Tune trials (hpo)"))


@dataclass(frozen=True)
class UnifiedOptions:
    """``[options.unified_model]``."""

    max_parallel: int | str | None = option(
        minimum=1, check=check_max_parallel,
        help="jobs trained at once (a chunk; its buckets interleave step by step); more jobs "
             "run in chunks one after another (default: all)" + _AUTO_HELP)
    sweep: str = option("none", choices=("none", "ablation"), axis=True,
                        help="ablation: the six rungs of the ablation ladder, one cell each "
                             "(none: one cell per compile mode)")
    features: str = option(
        DEFAULT_FEATURES, check=parse_features,
        help="extensions vf (vectorised forward), s (one CUDA stream per bucket), fl (fused "
             "loss), e.g. 'vf:1,s:0,fl:0'; compile is the campaign's compile setting, probed "
             "per bucket; what ran is recorded in features/features_reason/compile_mode")
    verify: bool = option(True, help="check each bucket's vectorised step against eager "
                                     "before training")
    data_order: str = option(
        "per_member", choices=("per_member", "shared"),
        help="per_member: each job's own seeded batch order, as seq; shared: one order per "
             "bucket when the members' training sets are identical")
    kernels: str = option(
        "batched", choices=("batched", "exact"),
        help="batched: vmap's batching rules; exact: Linear, convolutions, BatchNorm, "
             "LayerNorm and GroupNorm run per member with their native kernels (bit-identical "
             "to seq on any host; other layers with parameters are named in the plan; slower)")
    baseline: bool = option(False, help="true: every extension and compile off (the paper's "
                                        "model, rung A)")
    retire: str = option(
        "remove", choices=("remove", "mask"),
        help="remove: finished members leave their stack and the survivors are re-stacked; "
             "mask: kept in the stack, frozen")
    compile_backend: str = option(
        "inductor", help="torch.compile backend for the probed buckets (e.g. eager or "
                         "aot_eager for debugging)")
    scheduler: str | list[str] = option(
        "fifo", choices=SCHEDULER_CHOICES, axis=True, legacy="fifo", workloads=("hpo",),
        help=_SCHEDULER_HELP + "; a stopped member retires from its stack (retire); under "
             "sha a member waits, frozen, at each rung until every trial reached it (sha "
             "needs every trial in one chunk)")
    grace_period: int = option(1, minimum=1, help=_GRACE_HELP)
    reduction_factor: int = option(2, minimum=2, help=_FACTOR_HELP)


register_executor(ExecutorSpec(
    name="unified_model", label="Unified model",
    target="engine.executors.unified.executor:UnifiedExecutor", concurrent=True,
    options=UnifiedOptions, memory_model=memory_models.UNIFIED, serves_streams=True,
    description="all jobs in one process, identical models stacked into one vectorised "
                "module (torch.func vmap)"))
