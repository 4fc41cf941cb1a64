"""The weights digest's definition (docs/fidelity.md, "The weights digest"), recomputed
with hashlib and numpy alone — independent of engine.models.digest — for the dtypes and
shapes a state_dict holds; a non-tensor entry is refused."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from engine.models.digest import weights_sha256  # noqa: E402


def _by_definition(entries: dict[str, tuple[str, tuple[int, ...], bytes]]) -> str:
    """The documented definition: key, dtype name, shape, byte count (8 bytes LE), data."""
    h = hashlib.sha256()
    for key in sorted(entries):
        dtype, shape, data = entries[key]
        h.update(key.encode("utf-8") + b"\0" + dtype.encode() + b"\0"
                 + ",".join(str(s) for s in shape).encode() + b"\0")
        h.update(len(data).to_bytes(8, "little"))
        h.update(data)
    return h.hexdigest()


def test_a_known_state_recomputed_from_numpy_bytes():
    w = np.arange(6, dtype="<f4").reshape(2, 3) / 7
    b = np.array([1.5, -2.0], dtype="<f4")
    steps = np.array(12, dtype="<i8")  # 0-d: an empty shape
    state = {"net.0.weight": torch.from_numpy(w.copy()), "net.0.bias": torch.from_numpy(b),
             "bn.num_batches_tracked": torch.from_numpy(steps)}
    want = _by_definition({"net.0.weight": ("float32", (2, 3), w.tobytes(order="C")),
                           "net.0.bias": ("float32", (2,), b.tobytes()),
                           "bn.num_batches_tracked": ("int64", (), steps.tobytes())})
    assert weights_sha256(state) == want
    assert len(want) == 64
    # a transposed view digests as its row-major elements, not its storage order
    t = torch.from_numpy(w.T.copy()).t()
    assert not t.is_contiguous()
    assert weights_sha256({**state, "net.0.weight": t}) == want


def test_bfloat16_buffers_and_scalars():
    x = torch.tensor([1.0, -0.5, 3.25], dtype=torch.bfloat16)
    raw = x.view(torch.int16).numpy().astype("<i2").tobytes()  # bf16's bits, little-endian
    model = torch.nn.BatchNorm1d(3)
    buffers = {k: v for k, v in model.state_dict().items() if k.startswith("running")}
    entries = {"w": ("bfloat16", (3,), raw)}
    for k, v in buffers.items():
        entries[k] = ("float32", tuple(v.shape), v.numpy().astype("<f4").tobytes())
    entries["s"] = ("float64", (), np.array(2.5, dtype="<f8").tobytes())
    state = {"w": x, **buffers, "s": torch.tensor(2.5, dtype=torch.float64)}
    assert weights_sha256(state) == _by_definition(entries)
    # a buffer counts: another running mean, another digest
    moved = dict(state, running_mean=buffers["running_mean"] + 1)
    assert weights_sha256(moved) != weights_sha256(state)


def test_an_entry_that_is_not_a_tensor_is_refused():
    with pytest.raises(TypeError, match="'_extra_state' is a dict"):
        weights_sha256({"w": torch.zeros(2), "_extra_state": {"v": 1}})
