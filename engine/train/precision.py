"""Applying a job's precision inside a cell or worker (the names and the planning rules:
``engine.precision``). Every executor goes through here, so seq, mp, ray and the
unified model train one job in the same numeric regime:

* ``amp-fp16``: float32 weights, the forward and loss under ``torch.autocast(float16)``, a
  ``torch.amp.GradScaler`` for the device type (``"cuda"`` or ``"cpu"``; torch >= 2.3 has
  the CPU one), and the steps it skipped (an inf/NaN gradient) counted per job;
* ``amp-bf16``: the same under ``torch.autocast(bfloat16)``, no scaler (bfloat16 has
  float32's range, so gradients do not underflow);
* ``bf16``: the model's floating parameters and buffers cast to bfloat16 after it is built
  (initial weights are seq's float32 ones, rounded), floating inputs cast on the way in,
  the optimizer (and its state) on those bfloat16 parameters; the loss is computed in
  float32 from the upcast output, as under AMP;
* ``tf32``: float32 everything, TF32 matmuls and convolutions through the backend flags
  (:func:`engine.measure.provenance.backend_flags`), set once per process;
* ``fp32``: nothing.

Imports torch at module level: only inside cell and worker processes.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any

import torch

from engine.precision import AMP_PRECISIONS, applied, legacy_request


@dataclass(frozen=True)
class JobPrecision:
    """What one job asked for and what it runs (recorded in its row)."""

    requested: str
    applied: str
    reason: str = ""

    @property
    def amp(self) -> bool:
        """True under autocast (the rows' ``amp`` column)."""
        return self.applied in AMP_PRECISIONS

    @property
    def autocast_dtype(self) -> torch.dtype | None:
        return {"amp-fp16": torch.float16, "amp-bf16": torch.bfloat16}.get(self.applied)

    @property
    def param_dtype(self) -> torch.dtype:
        """The dtype of the model's floating parameters (and of its optimizer state)."""
        return torch.bfloat16 if self.applied == "bf16" else torch.float32

    @property
    def scaled(self) -> bool:
        """Whether the job trains through a GradScaler (float16 autocast only)."""
        return self.applied == "amp-fp16"


FP32 = JobPrecision("fp32", "fp32")


def job_precision(job_amp: bool, requested: str | None, device: torch.device,
                  amp_allowed: bool) -> JobPrecision:
    """The precision one job runs in. ``requested``: the cell's (campaign or experiment
    ``precision``), None for the legacy per-job ``amp`` flag, which applies only where the
    cell allows it (``amp_allowed``: on CUDA), as before the precision axis existed."""
    if requested is None:
        want = legacy_request(job_amp)
        if want == "amp-fp16" and amp_allowed:
            return JobPrecision(want, want)
        runs, reason = applied(want, device.type, explicit=False)
        if runs == want == "amp-fp16":  # a legacy request where the cell does not allow it
            return JobPrecision(want, "fp32", "AMP is not allowed in this cell")
        return JobPrecision(want, runs, reason)
    runs, reason = applied(requested, device.type, explicit=True)
    return JobPrecision(requested, runs, reason)


def autocast(device: torch.device, precision: JobPrecision | bool):
    """``torch.autocast`` in the job's autocast dtype; a no-op context without one. A bool
    is the legacy form (float16 on CUDA when True)."""
    if isinstance(precision, bool):
        precision = (JobPrecision("amp-fp16", "amp-fp16") if precision and device.type == "cuda"
                     else FP32)
    dtype = precision.autocast_dtype
    if dtype is None:
        return contextlib.nullcontext()
    return torch.autocast(device.type, dtype=dtype)


def make_scaler(device: torch.device, precision: JobPrecision) -> Any:
    """A GradScaler for the device type under float16 autocast, else None."""
    return torch.amp.GradScaler(device.type) if precision.scaled else None


def cast_model(model: torch.nn.Module, precision: JobPrecision) -> torch.nn.Module:
    """``bf16``: the model's floating parameters and buffers in bfloat16 (in place; what the
    optimizer is then built on). Other precisions keep float32 weights."""
    if precision.param_dtype != torch.float32:
        model.to(precision.param_dtype)
    return model


def cast_input(x: torch.Tensor, precision: JobPrecision) -> torch.Tensor:
    """Floating inputs in the parameters' dtype (``bf16``); token ids and float32 jobs
    unchanged."""
    dtype = precision.param_dtype
    if dtype != torch.float32 and x.is_floating_point() and x.dtype != dtype:
        return x.to(dtype)
    return x


class SkipCounter:
    """Optimizer steps a GradScaler skipped (inf/NaN gradients), summed on the device and
    read once at the end (no host sync per step). ``None`` for a job without a scaler."""

    def __init__(self, device: torch.device):
        self.total = torch.zeros((), device=device)

    def after_step(self, scaler: Any, optimizer: Any) -> None:
        """Call between ``scaler.step(optimizer)`` and ``scaler.update()``."""
        # GradScaler's per-optimizer record of this step (1.0 where it found inf/NaN and
        # skipped optimizer.step); torch keeps it until update().
        for found in scaler._found_inf_per_device(optimizer).values():
            self.total += found.to(self.total.device)

    def value(self) -> int:
        return int(self.total.item())
