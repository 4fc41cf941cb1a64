"""The campaign's ``devices`` (issue 27): which devices one campaign may run cells on at
once, as written (``"auto"``, ``"cpu"`` or a list of ``cuda:N`` / ``GPU-…`` / ``MIG-…``
entries). Checked here without NVML (syntax, duplicates, ``device`` and ``devices``
together); whether each entry exists on this host is decided when the runner plans
(:func:`engine.measure.nvml.resolve_gpus`), before anything is written. Torch-free.
"""

from __future__ import annotations

import re
from typing import Any

from engine.errors import ConfigError

#: One device entry: a CUDA ordinal (an index into an outer ``CUDA_VISIBLE_DEVICES`` when
#: set), a GPU UUID or a MIG slice UUID (``MIG-<uuid>`` or the older ``MIG-GPU-…/g/c``).
ENTRY = re.compile(r"^(cuda:\d+|GPU-[0-9A-Za-z-]+|MIG-[0-9A-Za-z/-]+)$")
#: The whole-value words.
WORDS = ("auto", "cpu")


def parse_devices(value: Any, where: str) -> tuple[str, ...]:
    """``devices`` as written → a tuple of entries (``("auto",)``, ``("cpu",)`` or the
    listed devices in order). A string may be a comma list (``--devices cuda:0,cuda:1``).

    Raises:
        ConfigError: an empty list, an entry that is none of the forms above, a duplicate,
            ``auto``/``cpu`` mixed with other entries.
    """
    if isinstance(value, str):
        items = [v.strip() for v in value.split(",")] if value.strip() else []
    elif isinstance(value, (list, tuple)):
        items = list(value)
    else:
        raise ConfigError(f"{where}: key 'devices' must be \"auto\", \"cpu\" or a list of "
                          f"devices, got {value!r}")
    if not items:
        raise ConfigError(f"{where}: key 'devices' is empty: give \"auto\", \"cpu\" or a list "
                          "such as [\"cuda:0\", \"cuda:1\"]")
    seen: list[str] = []
    for item in items:
        if not isinstance(item, str) or not (item in WORDS or ENTRY.match(item)):
            raise ConfigError(f"{where}: key 'devices': {item!r} is not a device (auto, cpu, "
                              "cuda:N, a GPU-… or MIG-… UUID)")
        if item in seen:
            raise ConfigError(f"{where}: key 'devices': {item!r} is listed twice (one cell "
                              "per device at a time: a device listed twice would run two)")
        seen.append(item)
    if len(seen) > 1 and any(item in WORDS for item in seen):
        word = next(item for item in seen if item in WORDS)
        raise ConfigError(f"{where}: key 'devices': {word!r} stands alone (devices = "
                          f"\"{word}\"), not in a list with other devices")
    return tuple(seen)


def check_device_pair(doc: dict[str, Any], given: dict[str, Any], where: str) -> dict[str, Any]:
    """``device`` and ``devices`` are one setting: the file may set one of them, the command
    line may set one of them (a command-line value replaces the file's, whichever of the
    two keys the file used). Returns ``doc`` with the replaced key removed.

    Raises:
        ConfigError: both in the file, or both on the command line.
    """
    if "device" in given and "devices" in given:
        raise ConfigError("arguments --device and --devices: give one of them (--device D is "
                          "--devices D with one device)")
    if "device" in given or "devices" in given:
        drop = "devices" if "device" in given else "device"
        return {k: v for k, v in doc.items() if k != drop}
    if "device" in doc and "devices" in doc:
        raise ConfigError(f"{where}: keys 'device' and 'devices' are both set: keep one "
                          f"(device = {doc['device']!r} is devices = [{doc['device']!r}])")
    return doc
