"""The GPUs a ``devices`` value names (issue 27: mp's packing, ``engine.executors.packing``),
resolved through NVML in this process's environment. Torch-free: the runner resolves them
when it plans, before anything is written.

- ``"cuda:N"``: the N-th device this process may see (an outer ``CUDA_VISIBLE_DEVICES``,
  e.g. a scheduler's allocation, is indexed into, never overwritten);
- ``"GPU-..."``/``"MIG-..."``: a device UUID (or a unique prefix) NVML knows and the outer
  ``CUDA_VISIBLE_DEVICES`` lets this process use (a MIG device only when named there, as
  CUDA shows them);
- ``"auto"``: every GPU this process may see.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from engine.errors import nearest

AUTO = "auto"
_CUDA = re.compile(r"^cuda:(\d+)$")
_UUID = re.compile(r"^(GPU|MIG)-[0-9A-Za-z/_-]+$")
#: The variable that pins a process to its devices (read once, when CUDA initialises).
PIN_ENV = "CUDA_VISIBLE_DEVICES"


def check_devices(value: Any) -> None:
    """Option check of ``devices``: ``"auto"`` or a non-empty list of distinct entries,
    each ``"cuda:N"`` or a ``GPU-``/``MIG-`` UUID. NVML is not asked here (see
    :func:`campaign_check`).

    Raises:
        ValueError: the reason, naming the entry.
    """
    if value == AUTO:
        return
    if isinstance(value, str):
        hint = nearest(value, [AUTO]) if not (_CUDA.match(value) or _UUID.match(value)) else ""
        raise ValueError(f"must be \"auto\" or a list such as [\"cuda:0\", \"cuda:1\"], "
                         f"got {value!r}{hint}")
    if not isinstance(value, list) or not value:
        raise ValueError(f"must be \"auto\" or a non-empty list of devices, got {value!r}")
    seen: set[str] = set()
    for entry in value:
        if not isinstance(entry, str) or not (_CUDA.match(entry) or _UUID.match(entry)):
            raise ValueError(f"entry {entry!r} is not \"cuda:N\", a GPU-... or a MIG-... UUID")
        if entry in seen:
            raise ValueError(f"device {entry!r} is listed twice")
        seen.add(entry)


@dataclass(frozen=True)
class Device:
    """One resolved device of a packing: what was written (``entry``), its NVML UUID (what
    a worker is pinned to), its model name (None when NVML does not say) and how it was
    found."""

    entry: str
    uuid: str
    name: str | None
    how: str

    def to_dict(self) -> dict[str, Any]:
        return {"entry": self.entry, "uuid": self.uuid, "name": self.name, "how": self.how}


def _nvml_devices(nvml: Any) -> list[dict[str, Any]]:
    """Every NVML device (GPUs, then the MIG devices of GPUs in MIG mode)."""
    from engine.measure.nvml import _text

    out = []
    for i in range(nvml.nvmlDeviceGetCount()):
        handle = nvml.nvmlDeviceGetHandleByIndex(i)
        name = _text(nvml.nvmlDeviceGetName(handle))
        out.append({"uuid": _text(nvml.nvmlDeviceGetUUID(handle)), "name": name,
                    "nvml_index": i})
        try:
            count = nvml.nvmlDeviceGetMaxMigDeviceCount(handle)
        except Exception:  # no MIG support in this driver or device
            count = 0
        for m in range(count or 0):
            try:
                mig = nvml.nvmlDeviceGetMigDeviceHandleByIndex(handle, m)
            except Exception:  # an empty slot
                continue
            out.append({"uuid": _text(nvml.nvmlDeviceGetUUID(mig)),
                        "name": _text(nvml.nvmlDeviceGetName(mig)), "nvml_index": None})
    return out


def resolve(value: Any, environ: Mapping[str, str] | None = None, nvml: Any = None
            ) -> list[Device]:
    """The devices a ``devices`` value names, in its order (see the module docstring).

    Raises:
        ValueError: NVML is unavailable, an entry names no device this process may use
            (with the devices it may use), or two entries are the same device.
    """
    environ = os.environ if environ is None else environ
    check_devices(value)
    if nvml is None:
        try:
            import pynvml as nvml
        except ImportError:
            raise ValueError("needs NVML (nvidia-ml-py) to find the devices") from None
    try:
        nvml.nvmlInit()
    except Exception as exc:
        raise ValueError(f"NVML is unavailable ({type(exc).__name__}): no GPU to pack "
                         "onto") from None
    try:
        known = _nvml_devices(nvml)
    finally:
        try:
            nvml.nvmlShutdown()
        except Exception:
            pass
    allowed = _allowed(known, environ)
    if value == AUTO:
        if not allowed:
            raise ValueError("\"auto\" found no GPU this process may use")
        return [Device(d["uuid"], d["uuid"], d["name"], "auto") for d in allowed]
    out: list[Device] = []
    for entry in value:
        # A UUID may name any device (a MIG slice too) unless an outer allocation limits
        # this process; "cuda:N" indexes what CUDA would show.
        named = allowed if PIN_ENV in environ else known
        out.append(_one(entry, allowed, named, environ))
    uuids = [d.uuid for d in out]
    for i, uuid in enumerate(uuids):
        if uuid in uuids[:i]:
            first = out[uuids.index(uuid)].entry
            raise ValueError(f"{out[i].entry!r} and {first!r} are the same device ({uuid})")
    return out


def _allowed(known: list[dict[str, Any]], environ: Mapping[str, str]) -> list[dict[str, Any]]:
    """The devices this process may use, in CUDA's order: the outer
    ``CUDA_VISIBLE_DEVICES`` entries (NVML indices, UUIDs or prefixes) when set, else every
    GPU (not its MIG devices: CUDA shows a MIG device only when named)."""
    visible = environ.get(PIN_ENV)
    if visible is None:
        return [d for d in known if d["nvml_index"] is not None]
    out = []
    for entry in (e.strip() for e in visible.split(",")):
        if not entry:
            continue
        if entry.isdigit():
            match = [d for d in known if d["nvml_index"] == int(entry)]
        else:
            match = [d for d in known if d["uuid"].startswith(entry)]
        if len(match) != 1:  # CUDA itself stops at the first invalid entry
            break
        out.append(match[0])
    return out


def _one(entry: str, allowed: list[dict[str, Any]], named: list[dict[str, Any]],
         environ: Mapping[str, str]) -> Device:
    names = [d["uuid"] for d in named]
    cuda = _CUDA.match(entry)
    if cuda:
        index = int(cuda.group(1))
        if index >= len(allowed):
            where = (f"CUDA_VISIBLE_DEVICES={environ[PIN_ENV]!r} lists"
                     if PIN_ENV in environ else "NVML sees")
            raise ValueError(f"device {entry!r}: {where} {len(allowed)} usable device(s)")
        d = allowed[index]
        return Device(entry, d["uuid"], d["name"], f"CUDA index {index}")
    matches = [d for d in named if d["uuid"].startswith(entry)]
    if len(matches) != 1:
        what = "no" if not matches else f"{len(matches)}"
        hint = nearest(entry, names)
        raise ValueError(f"device {entry!r}: {what} device this process may use has that "
                         f"UUID{hint or ''} (usable: {', '.join(names) or 'none'})")
    d = matches[0]
    return Device(entry, d["uuid"], d["name"], "UUID")


def key_value(devices: list[Device]) -> list[str]:
    """What ``devices`` contributes to a cell key: the GPU models in placement order (the
    UUID where NVML gives no name). Rule 3 of the key: the resolved value, not the word."""
    return [d.name or d.uuid for d in devices]


