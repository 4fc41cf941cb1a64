"""Saving one trained job's weights (issue 50): ``<attempt>/models/<job_id>.safetensors``
(an ordinary state_dict: the user's key names, no leading member index) beside
``<job_id>.json`` (what the model is and how it was trained, its digest and metrics).

The interface the executors call after the group window, one job at a time, in the
process that holds the weights (the cell, an mp worker, a Ray actor).

The weights file is the safetensors format, written here tensor by tensor rather than
through ``safetensors.torch.save_file`` (which turns every tensor into ``bytes`` first: a
member's whole size again in host memory, twice for a device tensor): an 8-byte
little-endian header length, the JSON header (each tensor's ``dtype``, ``shape`` and
``data_offsets`` into the data that follows; ``__metadata__``: ``format = "pt"``), padded
with spaces to a multiple of 8, then each tensor's bytes in row-major order. Tensors are
laid out by element size, largest first, then by name (the library's own order), so each
starts at a multiple of its element size. Saving a member so holds at most one tensor's
host copy at a time (none for a contiguous CPU tensor); any safetensors reader
(``safe_open``, :func:`engine.models.load`) reads the file.

Torch is imported only by the functions that touch tensors: a reader of run folders
(:mod:`engine.models.listing`) imports this module for :func:`models_dir` without it.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import IO, Any

# The values of the ``save_models`` key (campaign, experiment, ``run --save-models``),
# declared with the key and re-exported here, where the executors look for them.
from engine.define.save_models import SAVE_MODES

#: torch dtype name (without ``torch.``) → safetensors dtype name.
SAFETENSORS_DTYPES = {
    "float64": "F64", "float32": "F32", "float16": "F16", "bfloat16": "BF16",
    "int64": "I64", "int32": "I32", "int16": "I16", "int8": "I8", "uint8": "U8",
    "bool": "BOOL", "complex64": "C64", "uint64": "U64", "uint32": "U32", "uint16": "U16",
    "float8_e4m3fn": "F8_E4M3", "float8_e5m2": "F8_E5M2",
}


def models_dir(attempt_dir: Path) -> Path:
    """The folder of an attempt's saved models."""
    return Path(attempt_dir) / "models"


def _open_for_writing(path: Path) -> IO[bytes]:
    """The temporary file a member is written to (a seam: tests make it fail mid-way)."""
    return open(path, "wb")


def _layout(state: Mapping[str, Any]) -> tuple[bytes, list[tuple[str, Any]]]:
    """The file's first bytes (length and padded JSON header) and the tensors in the order
    their bytes follow.

    Raises:
        TypeError: an entry that is not a strided tensor of a dtype safetensors names.
    """
    import torch

    entries = []
    for key, value in state.items():
        if not isinstance(value, torch.Tensor):
            raise TypeError(f"save_models: state_dict entry {key!r} is a "
                            f"{type(value).__name__}, not a tensor")
        if value.is_quantized or value.layout != torch.strided:
            raise TypeError(f"save_models: entry {key!r}: layout {value.layout} is not supported")
        name = str(value.dtype).removeprefix("torch.")
        if name not in SAFETENSORS_DTYPES:
            raise TypeError(f"save_models: entry {key!r}: dtype {name} has no safetensors name")
        entries.append((str(key), value))
    # the library's order: larger elements first, then by name, so every tensor is aligned
    entries.sort(key=lambda kv: (-kv[1].element_size(), kv[0]))
    header: dict[str, Any] = {"__metadata__": {"format": "pt"}}
    offset = 0
    for key, value in entries:
        size = value.numel() * value.element_size()
        header[key] = {"dtype": SAFETENSORS_DTYPES[str(value.dtype).removeprefix("torch.")],
                       "shape": [int(s) for s in value.shape],
                       "data_offsets": [offset, offset + size]}
        offset += size
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * (-len(text) % 8)
    return len(text).to_bytes(8, "little") + text, entries


def _write_tensor(out: IO[bytes], tensor: Any) -> None:
    """One tensor's bytes, little-endian and row-major, through at most one host copy."""
    import torch

    t = tensor.detach()
    if t.numel() == 0:
        return
    if t.device.type != "cpu":
        t = t.cpu()  # the one host copy of this tensor, freed before the next
    t = t.contiguous()
    raw = t.reshape(-1).view(torch.uint8).numpy()
    if sys.byteorder != "little" and t.element_size() > 1:  # pragma: no cover - big-endian
        raw = t.reshape(-1).numpy().byteswap().view("uint8")
    out.write(memoryview(raw))


def write_weights(path: Path, state: Mapping[str, Any]) -> int:
    """Write ``state`` (name → tensor, any device) to ``path`` in the safetensors format,
    header first, then tensor by tensor (see the module doc). Returns the bytes written.

    Raises:
        TypeError: an entry that is not a tensor safetensors can hold.
        OSError: the file cannot be written (the caller removes what is left).
    """
    head, entries = _layout(state)
    with _open_for_writing(path) as out:
        out.write(head)
        for _, tensor in entries:
            _write_tensor(out, tensor)
    return path.stat().st_size


def write_member(attempt_dir: Path, job_id: str, state: Mapping[str, Any],
                 meta: Mapping[str, Any]) -> int:
    """Write one job's ``state`` (name → tensor, any device) and its ``meta`` JSON.

    Returns the weights file's size in bytes. Both files are written to temporary names and
    renamed, the weights first and the JSON last (a reader lists models by their JSON), so
    a crash or a full disk never leaves a truncated model, nor a JSON describing a model
    that is not there: on any failure both files of the job are removed. Host memory: at
    most one tensor's copy at a time (:func:`write_weights`).

    Raises:
        OSError: unwritable folder, disk full.
        TypeError: an entry that is not a tensor safetensors can hold.
    """
    folder = models_dir(attempt_dir)
    folder.mkdir(parents=True, exist_ok=True)
    weights = folder / f"{job_id}.safetensors"
    doc = folder / f"{job_id}.json"
    tmp, tmp_doc = (folder / f"{job_id}.safetensors.tmp", folder / f"{job_id}.json.tmp")
    done = False
    try:
        size = write_weights(tmp, state)
        with _open_for_writing(tmp_doc) as out:
            out.write((json.dumps(dict(meta), indent=2, sort_keys=True, default=str)
                       + "\n").encode("utf-8"))
        os.replace(tmp, weights)
        os.replace(tmp_doc, doc)
        done = True
    finally:
        for leftover in (tmp, tmp_doc) if done else (tmp, tmp_doc, weights, doc):
            leftover.unlink(missing_ok=True)
    return size


__all__ = ["SAFETENSORS_DTYPES", "SAVE_MODES", "models_dir", "write_member", "write_weights"]
