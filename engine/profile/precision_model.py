"""How a cell's precision changes the memory estimate (issue 24), when no profile of that
precision was measured and the fp32 profile of the same key stands in for it.

What is modelled (``docs/profiles.md``, "Precision"):

- ``bf16`` (the model's parameters, gradients and optimizer state held in bfloat16, 2 bytes
  instead of 4; activations follow): everything that scales with one member — the
  measured per-member increment of the stacked line (host and device), one job's own part
  of RSS(1), of the reserved device memory at K = 1 and of a forked mp worker's private
  memory — is multiplied by :data:`SCALE` ``["bf16"] = 0.5``. What does not scale with a
  member stays: the interpreter, torch, the dataset copy, the CUDA context, the stacked
  line's intercept. One job's own part is taken to be the per-member increment (what one
  more member adds is what one member costs).
- ``amp-fp16`` / ``amp-bf16`` (autocast): the master weights, gradients and optimizer
  state stay float32, autocast adds half-precision copies of weights beside half-precision
  activations: no credit is taken (factor 1), which errs on the safe side.
- ``tf32``: the same float32 bytes (a tensor-core math mode): factor 1.
- ``fp32``: the profile itself.

A profile measured at the cell's own precision is always used as measured; the model only
fills in for a missing one, and says so in the estimate's notes. Torch-free.
"""

from __future__ import annotations

#: Factor on what scales with one member, per precision (module doc).
SCALE: dict[str, float] = {"fp32": 1.0, "tf32": 1.0, "amp-fp16": 1.0, "amp-bf16": 1.0,
                           "bf16": 0.5}
#: Why, in a few words, for the estimate's note.
WHY: dict[str, str] = {
    "tf32": "tf32 keeps float32 bytes",
    "amp-fp16": "autocast keeps float32 master weights, gradients and optimizer state (no "
                "credit taken for half-precision activations)",
    "amp-bf16": "autocast keeps float32 master weights, gradients and optimizer state (no "
                "credit taken for half-precision activations)",
    "bf16": "bf16 holds parameters, gradients, optimizer state and activations in 2 bytes: "
            "the per-member part halved",
}


def effective(requested: str | None, device: str, legacy_amp: bool) -> str:
    """The precision a cell's jobs run on ``device`` (``cpu``, ``cuda``, ``cuda:1``):
    ``requested`` as :func:`engine.precision.applied` resolves it; None (no precision
    asked) is the legacy amp flag, which applies on CUDA only."""
    kind = device.split(":")[0]
    if requested is None:
        return "amp-fp16" if legacy_amp and kind == "cuda" else "fp32"
    from engine.precision import applied

    return applied(requested, kind, True)[0]


def scale(precision: str) -> float:
    """The factor of ``precision`` (1 for an unknown one: no credit taken)."""
    return SCALE.get(precision, 1.0)
