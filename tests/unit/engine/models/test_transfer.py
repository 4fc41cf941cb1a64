"""The plain-data form of a state_dict a Ray Tune trial hands off (engine.models.transfer):
it pickles without torch types and rebuilds the same tensors, so the digest after the trip
is the digest before it — dtypes of every size, a 0-d and an empty tensor, a
non-contiguous view — and a record that does not fit its shape is refused."""

from __future__ import annotations

import pickle

import pytest
import torch

from engine.models.digest import weights_sha256
from engine.models.transfer import from_records, to_records


def _state() -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    w = torch.randn(4, 6, generator=g)
    return {"net.0.weight": w.t(),  # a non-contiguous view
            "net.0.bias": torch.randn(4, generator=g).to(torch.bfloat16),
            "bn.num_batches_tracked": torch.tensor(7),
            "bn.running_mean": torch.randn(3, generator=g, dtype=torch.float64),
            "mask": torch.tensor([True, False, True]),
            "half": torch.randn(2, 2, generator=g).half(),
            "empty": torch.empty(0, 5)}


def test_the_round_trip_keeps_the_digest_and_needs_no_torch_types():
    state = _state()
    records = to_records(state)
    blob = pickle.dumps(records)
    assert b"torch" not in blob  # the hub unpickles it without importing torch
    back = from_records(pickle.loads(blob))
    assert weights_sha256(back) == weights_sha256(state)
    for key, value in state.items():
        assert back[key].dtype == value.dtype and back[key].shape == value.shape
        assert torch.equal(back[key], value), key


def test_bad_records_and_entries_are_refused():
    (key, dtype, shape, data), = to_records({"w": torch.ones(2, 3)})
    with pytest.raises(ValueError, match="'w' has 20 bytes"):
        from_records([(key, dtype, shape, data[:20])])
    with pytest.raises(ValueError, match="unknown dtype 'float7'"):
        from_records([(key, "float7", shape, data)])
    with pytest.raises(TypeError, match="'extra' is not a plain tensor"):
        to_records({"extra": {"state": 1}})
