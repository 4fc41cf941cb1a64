"""A unified_model bucket's ``parity_contract`` (docs/fidelity.md, "A row's
parity_contract"): read off the contract table (:mod:`engine.executors.unified.contract`)
where the bucket's path is bit for bit by construction or only within a documented bound
whatever this machine does, else left to the float32 one-step probe
(:mod:`engine.executors.unified.parity_probe`), which only a bit-identical result turns
into ``exact``. Torch-free: the decision is data; the probe is the one measurement.
"""

from __future__ import annotations

from engine.executors.unified import contract
from engine.results.parity_contract import EXACT, bound, weakest

#: What the probe's outcome stands in for: only this spelling says "bit-identical".
IDENTICAL = "identical"

#: The bound of a compiled bucket (contract: "compiled buckets", 1e-4 relative, probe).
COMPILED = bound("compile_probe", "1e-4")
#: CUDA dropout masks differ from seq's by design: statistical only (the accuracy band).
CUDA_DROPOUT = bound("accuracy_band", "0.05")
#: The fused loss's reported values (contract: "fused loss (fl:1): reported values").
FUSED = bound("pass_bound", "B")
#: Another kernel than the solo one, training (SGD family, fp32/tf32).
ROUNDING = bound("rounding_bound", "T", "n")
#: Another kernel than the solo one under Adam/AdamW (scale-invariant step).
ADAM = bound("adam_bound", "T", "lr", "betas")
#: The optimizers whose batched path the contract bounds with adam_bound.
ADAM_FAMILY = ("adam", "adamw")


def half_precision(precision: str) -> str:
    """The bound of a half precision (``HALF_PRECISION_BOUNDS``' key as the argument)."""
    if precision not in contract.HALF_PRECISION_BOUNDS:
        raise ValueError(f"no half-precision bound for {precision!r}")
    return bound("half_precision", precision)


def kernel_bound(optimizer: str) -> str:
    """The documented bound of a path whose kernels are not the solo ones."""
    return ADAM if optimizer in ADAM_FAMILY else ROUNDING


def before_probe(*, route: str, precision: str, exact_kernels: bool,
                 skipped_layers: list[str] | None, fused: bool, device_type: str,
                 dropout: bool, optimizer: str,
                 shared_state: bool = False) -> tuple[str | None, bool]:
    """What the contract decides for a bucket before any probe.

    Returns ``(value, probe)``: the bucket's value when it is decided here (``probe``
    False), or the bound that stands if the probe finds a difference (``probe`` True: a
    vectorised float32 bucket whose kernels are not identical by construction). A value
    with ``fl:1`` is never tighter than ``pass_bound(B)``; compile is added by the
    executor once the compile probe has spoken (:data:`COMPILED`).

    Args:
        route: ``vectorised`` or ``eager`` (each member's own module and torch optimizer:
            the solo kernels, by construction).
        precision: what the bucket trains in (fp32, tf32, amp-fp16, amp-bf16, bf16).
        exact_kernels: ``kernels = "exact"``; skipped_layers: the layers with parameters
            that kept vmap's rule under it (``plan.exact_kernels_skipped``).
        fused: the ``fl`` feature; device_type: ``cpu``, ``cuda``, ...; dropout: the
            model has an ``nn.Dropout``; optimizer: its registry name.
        shared_state: the checks' forwards changed state every member shares (a class
            attribute, a plugin global; ``BucketPlan.shared_state``): eager members
            interleaved step by step move it in another order than seq's jobs, so
            nothing is promised (None), not ``exact``.
    """
    if route != "vectorised":
        return (None if shared_state else EXACT), False
    fused_bound = [FUSED] if fused else []
    if precision in contract.HALF_PRECISION_BOUNDS:
        return weakest([half_precision(precision), *fused_bound]), False
    if device_type == "cuda" and dropout:
        return CUDA_DROPOUT, False
    if exact_kernels and not skipped_layers:
        return weakest([EXACT, *fused_bound]), False
    if precision not in ("fp32",):  # tf32 on a GPU: other math than the probe's fp32
        return weakest([kernel_bound(optimizer), *fused_bound]), False
    return weakest([kernel_bound(optimizer), *fused_bound]), True


def after_probe(standing: str, outcome: str, fused: bool) -> str:
    """The bucket's value once its probe ran: ``exact`` (or ``pass_bound`` under fl:1)
    when ``outcome`` is :data:`IDENTICAL`, else ``standing`` (the bound
    :func:`before_probe` returned)."""
    if outcome != IDENTICAL:
        return standing
    return weakest([EXACT, *([FUSED] if fused else [])]) or EXACT
