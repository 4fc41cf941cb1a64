"""``torch.compile`` for training, and the probe that warms it up (``docs/measurement.md``,
"Compile").

Compilation happens on the first call of a compiled callable, and on a small model it costs
far more than training (a seq job's 22 s ``train_time_s`` was nearly all compilation). So
every executor compiles on a **probe** before its training clock starts: the compiled
forward and backward run once on the job's (or bucket's) real first batch, their wall time
is the compile warm-up (``compile_warmup_s``, inside ``total_time_s`` and ``T_group``,
outside ``train_time_s``), and the probe leaves no trace: no optimizer step, no
``.grad`` written (``torch.autograd.grad``), and every buffer (BatchNorm running statistics)
and the global RNG (dropout masks) restored. Training then starts from the state it would
have started from without compile; what differs is only what compiled code itself computes
differently.

The probe's output is compared with the eager forward on the same batch
(:data:`PROBE_RTOL`/:data:`PROBE_ATOL`); a probe that raises or disagrees leaves the job
eager, with the reason. A forward that draws random numbers (dropout) cannot be compared:
compiled code may draw its own (TorchInductor's dropout does not reproduce eager's masks),
so for such a forward only the output's shape is checked (:func:`probe_compiled`).

Only imported inside cell and worker processes (imports torch at module level).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from engine.errors import failure_line

#: Compile probe tolerance (compiled vs eager forward on the first batch): fusion reorders
#: floating-point accumulation, so equality is up to rounding.
PROBE_RTOL, PROBE_ATOL = 1e-4, 1e-5


def compile_callable(fn: Callable, mode: str, backend: str = "inductor") -> Callable:
    """``torch.compile(fn)`` in ``mode`` ("default" → torch's default) with ``backend``
    (inductor takes the mode; another backend, e.g. ``eager`` for debugging, ignores it)."""
    if backend and backend != "inductor":
        return torch.compile(fn, backend=backend)
    return torch.compile(fn, mode=None if mode == "default" else mode)


def rng_state(device: torch.device) -> tuple[Any, Any]:
    """The global CPU generator's state and, on CUDA, ``device``'s generator state."""
    cuda = torch.cuda.get_rng_state(device) if device.type == "cuda" else None
    return torch.get_rng_state(), cuda


def set_rng_state(device: torch.device, state: tuple[Any, Any]) -> None:
    """Put back a :func:`rng_state`."""
    torch.set_rng_state(state[0])
    if state[1] is not None:
        torch.cuda.set_rng_state(state[1], device)


def same_rng_state(a: tuple[Any, Any], b: tuple[Any, Any]) -> bool:
    """Whether two :func:`rng_state` snapshots are equal (nothing was drawn between them)."""
    return torch.equal(a[0], b[0]) and (a[1] is None or torch.equal(a[1], b[1]))


def differs(a: torch.Tensor, b: torch.Tensor, stochastic: bool = False) -> str | None:
    """None when ``a`` (compiled) equals ``b`` (eager) within the probe tolerance, else
    what differs (shape, or the largest absolute difference). ``stochastic``: the forward
    drew random numbers, which compiled code may draw differently, so only the shape is
    compared (and ``a`` must be finite where all of ``b`` is)."""
    a, b = a.detach(), b.detach()
    if a.shape != b.shape:
        return f"output shape {tuple(a.shape)} vs eager {tuple(b.shape)}"
    if stochastic:
        if bool(torch.isfinite(b).all()) and not bool(torch.isfinite(a).all()):
            return "compiled outputs are not finite where eager's are"
        return None
    a, b = a.double(), b.double()
    if torch.allclose(a, b, rtol=PROBE_RTOL, atol=PROBE_ATOL, equal_nan=True):
        return None
    return f"outputs differ from eager (max |Δ| {float((a - b).abs().max()):.3g})"


def probe_compiled(model: torch.nn.Module, compiled: Callable, device: torch.device,
                   run: Callable[[Callable], tuple[torch.Tensor, torch.Tensor]]) -> str | None:
    """Warm up ``compiled`` (``model`` under ``torch.compile``) on one batch; leave no trace.

    ``run(forward)`` computes ``(output, loss)`` of one training batch through ``forward``
    exactly as the training step does (same batch, autocast, criterion). It runs twice:
    ``run(model)`` under ``no_grad`` (the eager reference), then ``run(compiled)`` with
    its backward (``torch.autograd.grad`` over the trainable parameters, so no ``.grad`` is
    written). Buffers and the global RNG are put back after each run; the module is left
    in train mode as found. No optimizer is involved.

    Returns None when compiled code runs and agrees (or, for a forward that draws random
    numbers, has the eager output's shape), else one line saying why not (the exception,
    or what differs).
    """
    buffers = {name: b.clone() for name, b in model.named_buffers()}
    rng = rng_state(device)

    def restore() -> None:
        with torch.no_grad():
            for name, b in model.named_buffers():
                b.copy_(buffers[name])
        set_rng_state(device, rng)

    try:
        with torch.no_grad():
            ref, _ = run(model)
        stochastic = not same_rng_state(rng, rng_state(device))
        restore()
        out, loss = run(compiled)
        params = [p for p in model.parameters() if p.requires_grad]
        torch.autograd.grad(loss, params, allow_unused=True)
        return differs(out, ref, stochastic)
    except Exception as exc:  # noqa: BLE001 - any failure is a fallback, with its reason
        return failure_line(exc, 300)
    finally:
        restore()
