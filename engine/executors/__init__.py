"""Executor registry: each concurrency strategy is declared once, by slug, with the flags
that the runner, the CSV and the figures ask about (instead of ``if executor == "ray"``).

Torch-free: the implementation class is named by ``target`` (``module:Class``) and imported
only inside the cell process.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field

from engine.registry import EXECUTORS


@dataclass(frozen=True)
class ExecutorSpec:
    """An executor's declaration.

    ``baseline``: the denominator of speedups (seq). ``supports_scheduler``: the matrix
    expands campaign schedulers for it (ray). ``concurrent``: jobs share the device at the
    same time, so per-job GPU energy/utilisation/VRAM cannot be separated (those job cells
    stay empty). ``options``: campaign keys under ``[options.<slug>]`` with their types
    (``fugue-tui run --option <slug>.<key>=<value>``); ``option_help``: one line per option,
    shown by ``fugue-tui run --help``.
    """

    name: str
    label: str
    color: str
    target: str
    baseline: bool = False
    supports_scheduler: bool = False
    concurrent: bool = False
    options: dict[str, tuple[type, ...]] = field(default_factory=dict)
    description: str = ""
    option_help: dict[str, str] = field(default_factory=dict)
    #: Allowed values of string options (a list value must hold only these).
    choices: dict[str, tuple[str, ...]] = field(default_factory=dict)
    #: Smallest allowed value of numeric options.
    minimum: dict[str, float] = field(default_factory=dict)
    #: Options that expand into matrix axes (``engine.define.axes``): ``scheduler``, ``sweep``.
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


register_executor(ExecutorSpec(
    name="seq", label="Sequential", color="#4C72B0", target="engine.executors.seq:SeqExecutor",
    baseline=True,
    description="one job after another in the cell's process: the denominator of speedups"))

_PARALLEL_HELP = "most jobs running at once (default: all jobs of the cell)"

register_executor(ExecutorSpec(
    name="mp", label="Multiprocess (MPS)", color="#DD8452", target="engine.executors.mp.executor:MPExecutor",
    concurrent=True, trains_in_workers=True,
    options={"max_parallel": (int,), "mps": (str,)},
    option_help={"max_parallel": _PARALLEL_HELP,
                 "mps": "auto (a private CUDA MPS daemon on a CUDA device when "
                        "nvidia-cuda-mps-control is found, else plain processes), on (MPS "
                        "required: refuse when it cannot run) or off (plain concurrent "
                        "processes)"},
    choices={"mps": ("auto", "on", "off")}, minimum={"max_parallel": 1},
    description="one fresh process per job sharing the GPU through a private CUDA MPS daemon"))

register_executor(ExecutorSpec(
    name="ray", label="Ray", color="#55A868", target="engine.executors.ray.actors:RayExecutor",
    concurrent=True, supports_scheduler=True, trains_in_workers=True, idle_cpu_fraction=0.10,
    options={"max_parallel": (int,), "scheduler": (str, list), "address": (str,),
             "grace_period": (int,), "reduction_factor": (int,)},
    option_help={"max_parallel": "actors (or concurrent Tune trials); default: all jobs",
                 "scheduler": "Ray Tune trial scheduler for hpo experiments: fifo, asha, "
                              "median or hyperband (asynchronous) on the per-epoch "
                              "val_loss (a list expands into one cell each)",
                 "address": "an existing Ray cluster (default: a private local runtime)",
                 "grace_period": "epochs before a trial may be stopped (default 1)",
                 "reduction_factor": "asha/hyperband reduction factor (default 2)"},
    choices={"scheduler": ("fifo", "asha", "median", "hyperband")},
    minimum={"max_parallel": 1, "grace_period": 1, "reduction_factor": 2},
    axes=("scheduler",), options_check="engine.executors.ray.options:campaign_check",
    description="Ray actors (ensemble, cv, multi_model) or Ray Tune trials (hpo)"))

register_executor(ExecutorSpec(
    name="unified_model", label="Unified model", color="#C44E52",
    target="engine.executors.unified.executor:UnifiedExecutor", concurrent=True,
    options={"max_parallel": (int,), "sweep": (str,), "features": (str,), "verify": (bool,),
             "data_order": (str,), "kernels": (str,), "baseline": (bool,), "retire": (str,),
             "compile_backend": (str,)},
    option_help={"max_parallel": "jobs trained at once (a chunk; its buckets interleave step "
                                 "by step); more jobs run in chunks one after another "
                                 "(default: all)",
                 "sweep": "none, or ablation: the six rungs of the ablation ladder",
                 "features": "extensions vf (vectorised forward), s (one CUDA stream per "
                             "bucket), fl (fused loss), e.g. 'vf:1,s:1,fl:0' (default); "
                             "compile is the campaign's compile setting, probed per bucket; "
                             "what ran is recorded in features/features_reason/compile_mode",
                 "baseline": "true: every extension and compile off (the paper's model, "
                             "rung A; default false)",
                 "retire": "remove (finished members leave their stack, the survivors are "
                           "re-stacked; default) or mask (kept in the stack, frozen)",
                 "compile_backend": "torch.compile backend for the probed buckets: inductor "
                                    "(default) or e.g. eager/aot_eager (debugging)",
                 "verify": "check each bucket's vectorised step against eager before "
                           "training (default true)",
                 "data_order": "per_member (each job's own seeded batch order, as seq; "
                               "default) or shared (one order per bucket when the members' "
                               "training sets are identical)",
                 "kernels": "batched (vmap's batching rules; default) or exact (BatchNorm "
                            "and convolutions run per member with their native kernels: "
                            "bit-identical to seq, slower)"},
    choices={"sweep": ("none", "ablation"), "data_order": ("per_member", "shared"),
             "kernels": ("batched", "exact"), "retire": ("remove", "mask")},
    minimum={"max_parallel": 1},
    axes=("sweep",),
    description="all jobs in one process, identical models stacked into one vectorised "
                "module (torch.func vmap)"))
