"""The paths ``fugue-tui selfcheck`` trains, as data: which model, optimizer, kernels and
precision, how many steps, and the row of the parity contract each one checks.

The matrix: three models (a plain MLP, a BatchNorm+Dropout MLP, a small CNN) × three
optimizers (SGD with momentum, SGD with a learning rate per member, Adam) × both kernel
settings of unified_model, in fp32, for :data:`STEPS` steps; then each further precision
the device runs on a reduced set (the MLP, SGD, one step: the half precisions' one-step
bounds are the tightest the contract states). Torch-free.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from engine.executors.unified.contract import HALF_PRECISION_BOUNDS, path

#: Members stacked per path, steps per fp32 path (one epoch: ``STEPS`` full batches),
#: batch size. Small: the whole check must take well under a minute on a 2-core CPU.
MEMBERS, STEPS, BATCH = 3, 4, 32
#: Models: name → model_kwargs (CPU). On CUDA, mlp_bn trains without dropout: its masks
#: differ from seq's there by design (the contract's "nn.Dropout masks on CUDA" row is
#: statistical, with no per-value bound to check).
MODELS: dict[str, dict[str, Any]] = {
    "mlp": {"hidden": 32},
    "mlp_bn": {"hidden": 32, "dropout": 0.2},
    "simplecnn": {},
}
#: Optimizers: label → (optimizer, kwargs, the members' learning rates).
OPTIMIZERS: dict[str, tuple[str, dict[str, Any], tuple[float, ...]]] = {
    "sgd": ("sgd", {"momentum": 0.9}, (0.05,) * MEMBERS),
    "sgd-lrs": ("sgd", {"momentum": 0.9}, (0.05, 0.02, 0.08)),
    "adam": ("adam", {}, (1e-3,) * MEMBERS),
}
KERNELS = ("exact", "batched")
#: The half precisions, on the reduced set.
HALF = tuple(HALF_PRECISION_BOUNDS)


@dataclass(frozen=True)
class Case:
    """One path to train under seq and unified_model and compare."""

    model: str
    optimizer: str          # a label of OPTIMIZERS
    kernels: str
    precision: str
    steps: int
    model_kwargs: dict[str, Any] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return f"{self.model} · {self.optimizer} · {self.kernels} · {self.precision}"

    @property
    def contract(self) -> str:
        """The row of the contract (``contract.PATHS``) this path checks."""
        if self.precision == "amp-fp16":
            name = "precision amp-fp16"
        elif self.precision in ("amp-bf16", "bf16"):
            name = "precision amp-bf16, bf16"
        elif self.kernels == "exact":
            name = 'unified_model, kernels = "exact"'
        elif self.precision == "tf32":
            name = "precision fp32, tf32 (fp32 on a CPU)"
        elif OPTIMIZERS[self.optimizer][0] == "adam":
            name = "batched, Adam/AdamW"
        elif self.model == "simplecnn":
            name = "batched: convolutions"
        elif self.model == "mlp_bn":
            name = "batched: BatchNorm"
        else:
            name = 'unified_model, kernels = "batched" (default): Linear'
        return path(name).name

    @property
    def holds(self) -> str:
        """``construction`` where the contract promises bit for bit, else ``bound``. The
        precision rows say "within a bound" for fp32/tf32 as a whole: their exact kernels
        are by construction (the row's own words), so the kernels decide there."""
        if self.precision in ("fp32", "tf32"):
            return "construction" if self.kernels == "exact" else "bound"
        return path(self.contract).holds


def cases(device: str = "cpu", precisions: tuple[str, ...] = ("fp32",)) -> list[Case]:
    """The paths to check on ``device`` (``cpu`` or ``cuda``) for ``precisions`` (those
    the device runs: fp32 first; tf32 and the half precisions on the reduced set)."""
    out = []
    for model, kwargs in MODELS.items():
        kwargs = dict(kwargs)
        if device != "cpu" and "dropout" in kwargs:
            kwargs["dropout"] = 0.0
        for optimizer in OPTIMIZERS:
            for kernels in KERNELS:
                out.append(Case(model, optimizer, kernels, "fp32", STEPS, kwargs))
    for precision in precisions:
        if precision == "fp32":
            continue
        kernels = KERNELS if precision == "tf32" else ("batched",)  # exact adds nothing
        for k in kernels:                                            # to a half's bound
            out.append(Case("mlp", "sgd", k, precision, 1 if precision in HALF else STEPS,
                            dict(MODELS["mlp"])))
    return out
