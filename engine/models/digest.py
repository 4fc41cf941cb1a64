"""The canonical digest of a model's weights: ``weights_sha256`` in every job row.

One definition, written out in docs/fidelity.md ("The weights digest"), so that anyone
can recompute it from a saved state_dict with hashlib alone and every executor, the
saved models and the self-check agree on what "the same weights" means:

    sha256 over, for each key of the state_dict in sorted (code point) order:
        the key (UTF-8), 0x00,
        the dtype's name without ``torch.`` (``float32``, ``bfloat16``, ``int64``), 0x00,
        the shape as decimal sizes joined by ``,`` (empty for a 0-d tensor), 0x00,
        the number of data bytes, 8 bytes little-endian,
        the tensor's data: its elements in row-major (C contiguous) order, each in
        little-endian byte order.

The key names are the user's own (``net.0.weight``, no leading member index), so a
stacked member's digest equals the digest of the same weights trained alone. Buffers
count (batch-norm running statistics are part of what a model computes); a state_dict
entry that is not a tensor (``_extra_state`` objects) is refused, not skipped, since two
models differing only there would read as equal.

Cost: one pass over the bytes (sha256 runs at ~1–2 GB/s on one core), plus a copy to the
host for a device tensor. Callers compute it after the group window closes, never inside
``T_group``, and record the time (``digest_s``).
"""

from __future__ import annotations

import hashlib
import sys
from collections.abc import Mapping
from typing import Any

#: hex digits of a full sha256; ``weights_sha256`` keeps all 64.
DIGEST_HEX = 64


def tensor_record(key: str, dtype: str, shape: tuple[int, ...], data: bytes) -> bytes:
    """The bytes one state_dict entry contributes, before its data (see the module doc).

    ``dtype`` without ``torch.``; ``shape`` as sizes; ``data`` the little-endian,
    row-major element bytes (only its length is used here)."""
    head = "\0".join((key, dtype, ",".join(str(int(s)) for s in shape))) + "\0"
    return head.encode("utf-8") + len(data).to_bytes(8, "little")


def _tensor_bytes(tensor: Any) -> bytes:
    """A tensor's elements as little-endian, row-major bytes (on the host)."""
    import torch  # the digest is computed in a cell, where torch is loaded anyway

    t = tensor.detach()
    if t.device.type != "cpu":
        t = t.cpu()
    t = t.contiguous()
    if t.is_quantized or t.layout != torch.strided:
        raise TypeError(f"weights digest: tensor layout {t.layout} is not supported")
    if t.numel() == 0:
        return b""
    raw = t.reshape(-1).view(torch.uint8).numpy().tobytes()
    if sys.byteorder != "little" and t.element_size() > 1:  # pragma: no cover - big-endian hosts
        size = t.element_size()
        raw = b"".join(raw[i:i + size][::-1] for i in range(0, len(raw), size))
    return raw


def weights_sha256(state: Mapping[str, Any]) -> str:
    """The canonical sha256 (64 hex digits) of a state_dict: key name → tensor.

    Args:
        state: parameters and buffers by the user's key names (``module.state_dict()``,
            or one stacked member's ``member_state``: views are fine, any device).

    Raises:
        TypeError: an entry is not a strided tensor (``_extra_state``, sparse, quantized).
    """
    import torch

    h = hashlib.sha256()
    for key in sorted(state):
        value = state[key]
        if not isinstance(value, torch.Tensor):
            raise TypeError(f"weights digest: state_dict entry {key!r} is a "
                            f"{type(value).__name__}, not a tensor")
        data = _tensor_bytes(value)
        h.update(tensor_record(key, str(value.dtype).removeprefix("torch."),
                               tuple(value.shape), data))
        h.update(data)
    return h.hexdigest()
