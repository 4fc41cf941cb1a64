"""The float32 one-step parity probe: is this bucket's stack, on this machine, bit for bit
what K solo steps compute? (docs/fidelity.md, "A row's parity_contract".)

Run by :class:`~engine.executors.unified.bucket_build.BucketBuild` once per vectorised
float32 bucket whose kernels are not identical by construction, after the stack that
trains was built and before training, on **copies** (the members, their dropout
generators and the global RNG are left as they were). Its wall time is kept out of
``T_group`` (the cell subtracts it: ``CellContext.outside_window``) and recorded in the
plan (``parity_probe_s``, ``parity_probe``).

The stacked side is a twin of the stack that trains: the same ``Stack`` constructor with
the same arguments (exact kernels, the gradient-layout probe for the same input form, so
the same relaid parameters) on copies of the members, the bucket's stacked loss, one
``backward`` of the summed losses and the stacked optimizer — the code
:class:`~engine.executors.unified.routes.VectorRoute` steps. The solo side is each of the K
members alone, as ``engine.train.loop`` trains it (its module, the task's criterion, the
registry's torch optimizer, the global generator at the member's state for dropout).
Compared with ``torch.equal`` (NaN-aware): outputs, gradients, updated parameters and
every buffer. Unlike verification's float64 probe (``verify.probe``, which asks whether the
routes are the same computation, within rounding), this one asks what rounding does here.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from engine.errors import failure_line
from engine.executors.unified.losses import upcast_half
from engine.executors.unified.parity import IDENTICAL
from engine.executors.unified.verify import _clone_generator, member_input
from engine.parts import tasks as task_lib


@dataclass
class ParityProbe:
    """The probe's outcome.

    Attributes:
        outcome: ``identical`` (every compared tensor bit for bit), ``differs`` or
            ``raised`` (the probe could not run: no promise beyond the bound).
        max_abs: the largest absolute difference over every compared tensor (0.0 when
            identical; None when it raised).
        detail: the first tensor that differed, or the error.
        seconds: the probe's wall time (``time.perf_counter``).
        started: when it started, on ``time.perf_counter``.
    """

    outcome: str
    max_abs: float | None
    detail: str
    seconds: float
    started: float

    def info(self) -> dict[str, Any]:
        return {"outcome": self.outcome, "max_abs": self.max_abs, "detail": self.detail or None}


def _diff(a: torch.Tensor | None, b: torch.Tensor | None) -> float:
    """max |a - b| (0.0 for two bit-identical tensors, NaN in the same places included;
    inf where the shapes, presence or NaN positions differ)."""
    if a is None or b is None:
        return 0.0 if a is None and b is None else float("inf")
    if a.shape != b.shape:
        return float("inf")
    if torch.equal(a, b):
        return 0.0
    a, b = a.detach().double(), b.detach().double()
    if not torch.equal(a.isnan(), b.isnan()):
        return float("inf")
    d = (a - b).abs().nan_to_num(0.0)
    worst = float(d.max()) if d.numel() else 0.0
    # torch.equal is False but no difference is seen (-0.0 vs 0.0): the bits differ
    return worst if worst > 0 else float.fromhex("0x1p-149")


def _stacked_step(stack, x: torch.Tensor, y: torch.Tensor, shared: bool,
                  loss_fn: Callable, optimizer: str, lrs: Sequence[float],
                  optimizer_kwargs: Sequence[dict[str, Any]]):
    from engine.executors.unified.optim import build_stacked

    opt = build_stacked(optimizer, stack.params, lrs, optimizer_kwargs)
    out = stack(x[0] if shared else x, shared_input=shared)
    losses = loss_fn(out, y)
    opt.zero_grad()
    losses.sum().backward()
    stack.settle()
    grads = {n: (p.grad.clone() if p.grad is not None else None)
             for n, p in stack.params.items()}
    opt.step()
    return out.detach(), grads


def probe(members: Sequence[nn.Module], generators: Sequence[torch.Generator] | None,
          x: torch.Tensor, y: torch.Tensor, *, task: Any, optimizer: str,
          lrs: Sequence[float], optimizer_kwargs: Sequence[dict[str, Any]],
          stacked_loss: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
          sample_shape: tuple[int, ...], exact_kernels: bool, shared: bool,
          perturb: Callable[[dict[str, torch.Tensor]], None] | None = None) -> ParityProbe:
    """One float32 training step of a twin of the stack against K solo steps.

    Args:
        members: the K float32 member modules (not modified), in bucket order.
        generators: their dropout generators (cloned, not advanced), or None.
        x: (K, B, *sample_shape) one batch per member (with ``shared``, every member's
            batch is member 0's: ``x[0]`` goes to the stack once); y: (K, B[, ...]).
        task: the ``TaskSpec``; optimizer: registry name; lrs, optimizer_kwargs: per member;
        stacked_loss: the (K,) loss the bucket trains with; exact_kernels: as the stack
            that trains; shared: the input form it trains with (its layout probe's form).
        perturb: called with the twin's stacked parameters after its step (tests: a
            difference forced honestly into the compared values).

    Returns:
        A :class:`ParityProbe`; never raises (an exception is the ``raised`` outcome).
    """
    from engine.executors.unified.stack import Stack
    from engine.parts.optimizers import build_optimizer

    t0 = time.perf_counter()
    label = "outputs"
    try:
        x = member_input(members, x)
        with torch.random.fork_rng(devices=[]):  # nothing outside the probe moves
            a = [copy.deepcopy(m).train() for m in members]
            b = [copy.deepcopy(m).train() for m in members]
            gens_a = [_clone_generator(g) for g in generators] if generators else None
            gens_b = [_clone_generator(g) for g in generators] if generators else None
            stack = Stack(a, gens_a, sample_shape, x.shape[1], exact_kernels=exact_kernels,
                          shared_input=shared)
            out, grads = _stacked_step(stack, x, y, shared, stacked_loss, optimizer, lrs,
                                       optimizer_kwargs)
            if perturb is not None:
                with torch.no_grad():
                    perturb(stack.params)
            criterion = task.criterion()
            worst, first = 0.0, ""
            for k, m in enumerate(b):
                solo_opt = build_optimizer(optimizer, m.parameters(), lrs[k],
                                           optimizer_kwargs[k])
                if gens_b is not None and gens_b[k].device.type == "cpu":
                    # seq's masks: the global generator at the member's state (CUDA
                    # dropout is never probed: statistical by the contract)
                    torch.set_rng_state(gens_b[k].get_state())
                xk = x[0] if shared else x[k]
                o = m(xk)
                o2, t = task_lib.prepare(task, o, y[k])
                loss = criterion(upcast_half(o2), t)
                solo_opt.zero_grad(set_to_none=True)
                loss.backward()
                pairs = [("outputs", out[k], o.detach())]
                pairs += [(f"gradient of {n}", None if grads.get(n) is None else grads[n][k],
                           None if p.grad is None else p.grad.clone())
                          for n, p in m.named_parameters()]
                solo_opt.step()
                pairs += [(f"parameter {n}", stack.params[n][k].detach(), p.detach())
                          for n, p in m.named_parameters()]
                pairs += [(f"buffer {n}", stack.buffers[n][k] if n in stack.buffers
                           else None, buf) for n, buf in m.named_buffers()]
                for label, s, t_ in pairs:
                    d = _diff(s, t_)
                    if d > 0 and not first:
                        first = f"member {k}: {label} (max |Δ| {d:.3g})"
                    worst = max(worst, d)
        outcome = IDENTICAL if worst == 0.0 else "differs"
        return ParityProbe(outcome, worst, first, time.perf_counter() - t0, t0)
    except Exception as exc:  # noqa: BLE001 - no promise beyond the bound, said in the plan
        return ParityProbe("raised", None, f"{label}: {failure_line(exc, 300)}",
                           time.perf_counter() - t0, t0)
