"""A state_dict as plain data, to carry a job's final weights out of a process that ends
before the hand-back (issue 50: Ray Tune trials, ``engine.executors.ray.worker.trial``).

:func:`to_records` turns a state_dict into a list of ``(key, dtype, shape, data)`` tuples —
``dtype`` torch's name without ``torch.`` (``float32``, ``bfloat16``), ``shape`` a tuple of
ints, ``data`` a ``bytearray`` of the tensor's elements in row-major order and this host's
byte order — which pickles without torch (the Ray hub that passes it on never imports
torch); :func:`from_records` rebuilds CPU tensors from them in another process. The
records carry exactly what the weights digest reads (docs/fidelity.md "The weights
digest"), so ``weights_sha256(from_records(to_records(s))) == weights_sha256(s)``.

Cost: one host copy of every tensor on each side (``to_records``: device → host and into
the bytearray; ``from_records``: none beyond the bytearray, whose buffer the tensors share).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

#: One state_dict entry as plain data: key, dtype name, shape, element bytes.
Record = tuple[str, str, tuple[int, ...], bytearray]


def to_records(state: Mapping[str, Any]) -> list[Record]:
    """``state`` (key → tensor, any device) as records, in key order.

    Raises:
        TypeError: an entry is not a strided tensor (as the digest refuses it).
    """
    import torch

    out: list[Record] = []
    for key in sorted(state):
        value = state[key]
        if not isinstance(value, torch.Tensor) or value.layout != torch.strided \
                or value.is_quantized:
            raise TypeError(f"weights hand-off: state_dict entry {key!r} is not a plain "
                            f"tensor ({type(value).__name__})")
        t = value.detach()
        if t.device.type != "cpu":
            t = t.cpu()
        t = t.contiguous()
        data = bytearray(t.reshape(-1).view(torch.uint8).numpy().tobytes()) \
            if t.numel() else bytearray()
        out.append((key, str(t.dtype).removeprefix("torch."), tuple(int(s) for s in t.shape),
                    data))
    return out


def from_records(records: list[Record]) -> dict[str, Any]:
    """The state_dict the records describe: CPU tensors sharing the records' buffers.

    Raises:
        ValueError: a record whose data does not fit its dtype and shape.
    """
    import math

    import torch

    state: dict[str, Any] = {}
    for key, dtype_name, shape, data in records:
        dtype = getattr(torch, dtype_name, None)
        if not isinstance(dtype, torch.dtype):
            raise ValueError(f"weights hand-off: {key!r} has an unknown dtype {dtype_name!r}")
        numel = math.prod(shape)
        size = torch.empty((), dtype=dtype).element_size()
        if len(data) != numel * size:
            raise ValueError(f"weights hand-off: {key!r} has {len(data)} bytes, its dtype "
                             f"{dtype_name} and shape {tuple(shape)} need {numel * size}")
        if numel == 0:
            state[key] = torch.empty(tuple(shape), dtype=dtype)
            continue
        flat = torch.frombuffer(data, dtype=torch.uint8)
        state[key] = flat.view(dtype).reshape(tuple(shape))
    return state
