"""The precision axis: what numeric precision a cell's jobs train in. Torch-free (the
runner plans with it; ``engine.train.precision`` applies it inside a cell or worker).

Five values (``docs/measurement.md``, "Precision"):

========== ==================================================================== ==========
value      what runs                                                            GradScaler
========== ==================================================================== ==========
fp32       float32 weights and math, TF32 off (the legacy behaviour)            no
tf32       float32 weights, matmuls/convolutions on TF32 tensor cores (CUDA     no
           compute capability >= 8.0; on the CPU it runs as fp32, with a reason)
amp-fp16   float32 weights, ``torch.autocast(float16)``; GradScaler             yes
amp-bf16   float32 weights, ``torch.autocast(bfloat16)``                        no
bf16       weights, activations and optimizer state in bfloat16 (no autocast)   no
========== ==================================================================== ==========

Where it comes from, most specific first: the campaign's ``precision`` (one value or a
list, one cell per value; ``amp = true`` in a campaign is the same as ``"amp-fp16"``), the
experiment's ``precision`` (its default), else the legacy per-job ``amp`` flag of the
catalogue (``amp = true`` requests ``amp-fp16``). The legacy flag keeps its old meaning on
the CPU (not applied: rows record why), so cells whose keys were pinned before the axis
existed still measure what they measured; an explicit ``precision`` applies on every device.
"""

from __future__ import annotations

from typing import Any

from engine.errors import ConfigError, nearest

#: Every precision, in the order tables and reports list them.
PRECISIONS = ("fp32", "tf32", "amp-fp16", "amp-bf16", "bf16")
#: Precisions that run under ``torch.autocast`` (the ``amp`` column is True for these).
AMP_PRECISIONS = ("amp-fp16", "amp-bf16")
#: Precisions that need bfloat16 / TF32 hardware on a CUDA device: compute capability 8.0+
#: (Ampere). Older GPUs are refused at planning time (:func:`device_refusal`).
NEEDS_AMPERE = ("tf32", "amp-bf16", "bf16")
MIN_CC = (8, 0)


def legacy_request(amp: bool) -> str:
    """The precision the legacy ``amp`` flag requests."""
    return "amp-fp16" if amp else "fp32"


def check_value(value: Any, where: str, key: str = "precision") -> str:
    """One precision name, checked.

    Raises:
        ConfigError: ``"<where>: key 'precision': unknown precision 'fp8'; known: ..."``.
    """
    if not isinstance(value, str) or value not in PRECISIONS:
        hint = nearest(value, PRECISIONS) if isinstance(value, str) else ""
        raise ConfigError(f"{where}: key '{key}': unknown precision {value!r}{hint}; "
                          f"known: {', '.join(PRECISIONS)}")
    return value


def parse_axis(doc: dict[str, Any], where: str) -> list[str] | None:
    """A campaign's precision axis from its ``precision`` and ``amp`` keys: the values in
    the order written (duplicates dropped), or None when the campaign sets neither (then
    each experiment's default, or its legacy ``amp`` flag, decides).

    Raises:
        ConfigError: both keys set, an empty list, an unknown value, ``amp`` not a boolean.
    """
    has_p, has_amp = "precision" in doc, "amp" in doc
    if has_p and has_amp:
        raise ConfigError(f"{where}: keys 'amp' and 'precision' are both set; keep one "
                          "('amp = true' means precision = \"amp-fp16\")")
    if has_amp:
        if not isinstance(doc["amp"], bool):
            raise ConfigError(f"{where}: key 'amp' must be true or false, got {doc['amp']!r}")
        return [legacy_request(doc["amp"])]
    if not has_p:
        return None
    value = doc["precision"]
    values = value if isinstance(value, list) else [value]
    if not values:
        raise ConfigError(f"{where}: key 'precision' is an empty list; name at least one of "
                          f"{', '.join(PRECISIONS)}")
    return list(dict.fromkeys(check_value(v, where) for v in values))


def hashed(requested: str | None, jobs_amp: list[bool], default: str | None) -> bool:
    """Whether a campaign's requested precision enters the cell key (rule 1 of "Cell
    keys"): not when it is exactly what runs without it — the experiment's own
    ``default`` (already hashed in its definition), or ``fp32`` for jobs that never asked
    for AMP — so every key pinned before the axis stays. ``amp-fp16`` on jobs with the
    legacy ``amp`` flag *is* hashed: the legacy flag did not apply on the CPU, the explicit
    request does."""
    if requested is None:
        return False
    if default is not None:
        return requested != default
    return not (requested == "fp32" and not any(jobs_amp))


def applied(requested: str, device_type: str, explicit: bool) -> tuple[str, str]:
    """``(precision that runs, reason)`` for one job: the reason is empty when it is the
    requested one. ``explicit``: the request came from a ``precision`` key or flag (not the
    legacy ``amp`` flag)."""
    if device_type == "cuda" or requested == "fp32":
        return requested, ""
    if requested == "tf32":
        return "fp32", ("TF32 is a CUDA tensor-core mode (compute capability 8.0+); on "
                        f"{device_type} float32 math runs in full fp32")
    if not explicit:
        return "fp32", ("the legacy 'amp = true' applies on CUDA only (cell keys pinned "
                        "before the precision axis measured fp32 here); precision = "
                        "\"amp-fp16\" runs autocast on this device too")
    return requested, ""


def compute_capability(gpu: dict[str, Any] | None) -> tuple[int, int] | None:
    """``(major, minor)`` from the runner's resolved GPU (``engine.measure.nvml``), or None
    when NVML did not say."""
    cc = (gpu or {}).get("compute_capability")
    if not cc:
        return None
    major, _, minor = str(cc).partition(".")
    return int(major), int(minor or 0)


def device_refusal(precisions: list[str], gpu: dict[str, Any] | None) -> str | None:
    """Why the device under test cannot run one of ``precisions`` (bfloat16 and TF32 need
    compute capability 8.0+), else None. Unknown capability (NVML silent) refuses nothing:
    the cell records what ran."""
    cc = compute_capability(gpu)
    if cc is None or cc >= MIN_CC:
        return None
    bad = [p for p in precisions if p in NEEDS_AMPERE]
    if not bad:
        return None
    name = (gpu or {}).get("name") or "the GPU"
    return (f"precision {bad[0]!r} needs a GPU with compute capability "
            f"{MIN_CC[0]}.{MIN_CC[1]}+ (bfloat16/TF32); {name} has {cc[0]}.{cc[1]}: "
            "use fp32 or amp-fp16")
