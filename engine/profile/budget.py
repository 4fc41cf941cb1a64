"""Budgets for the concurrency estimate: device memory, host RAM and cores.

A budget is given (``simulate --ram-budget 6GiB``, a campaign's ``[budget]`` table) or
measured on this machine. Measured values are the machine's totals, not what is free right
now: ``max_parallel = "auto"`` is resolved into a number that enters the cell key, and a
key that moved with the page cache would turn every ``--resume`` into a rerun. Inside a
container the RAM total is its cgroup's limit where that is lower (fixed while it runs, so
as stable a key as ``MemTotal``; :mod:`engine.cgroup_memory`). ``simulate`` prints what is
available now beside it.

Sizes are MiB inside the engine. Text forms: a plain number is MiB; suffixes ``K``, ``M``,
``G``, ``T`` with an optional ``iB``/``B`` (``6G``, ``6GiB``, ``512MB``, ``1.5TiB``) are
binary multiples, as ``free -m`` and NVML report them.

Torch-free.
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass
from typing import Any

from engine.errors import ConfigError

#: The share of every memory budget kept free: allocator fragmentation, the monitor and
#: what the profile's brief run did not reach (a longer run's validation, Python's heap
#: growth). Stated in every ``simulate`` table and recorded with each resolved
#: ``max_parallel`` (``executor_info``).
SAFETY_MARGIN = 0.10

_SIZE = re.compile(r"^\s*(-?[0-9]+(?:\.[0-9]+)?)\s*([kmgt]?)(i?b)?\s*$", re.IGNORECASE)
_POWER = {"k": 1, "m": 2, "g": 3, "t": 4}  # as a power of 1024 bytes (plain = MiB)


def parse_size(value: Any, what: str) -> float:
    """A size in MiB from ``6GiB``, ``6G``, ``512MB``, ``512`` (MiB) or a number.

    Raises:
        ConfigError: ``"<what>: not a size: 'six' (e.g. 6GiB, 512MiB or a number of MiB)"``,
            or a size that is not > 0.
    """
    if isinstance(value, bool):
        raise ConfigError(f"{what}: not a size: {value!r} (e.g. 6GiB, 512MiB or a number "
                          "of MiB)")
    if isinstance(value, (int, float)):
        mib = float(value)
    else:
        m = _SIZE.match(str(value))
        if not m:
            raise ConfigError(f"{what}: not a size: {value!r} (e.g. 6GiB, 512MiB or a "
                              "number of MiB)")
        number, unit = float(m.group(1)), m.group(2).lower()
        if unit == "" and m.group(3):  # "512B": bytes
            mib = number / 2**20
        else:
            mib = number * 1024 ** _POWER[unit] / 2**20 if unit else number
    if not (math.isfinite(mib) and mib > 0):
        raise ConfigError(f"{what}: must be > 0, got {value!r}")
    return mib


def parse_cores(value: Any, what: str) -> int:
    """A core count >= 1.

    Raises:
        ConfigError: not an integer, or < 1.
    """
    try:
        if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
            raise ValueError
        cores = int(value)
    except (TypeError, ValueError):
        raise ConfigError(f"{what}: not an integer: {value!r}") from None
    if cores < 1:
        raise ConfigError(f"{what}: must be >= 1, got {value!r}")
    return cores


@dataclass(frozen=True)
class Budget:
    """What the jobs of one cell may use at once. ``device_mb`` None: a CPU device (no
    device memory to share). ``sources``: per resource, ``given`` or how it was measured."""

    ram_mb: float
    cores: int
    device_mb: float | None = None
    sources: tuple[tuple[str, str], ...] = ()
    margin: float = SAFETY_MARGIN

    def usable(self, resource: str) -> float | None:
        """The budget of ``ram`` or ``device`` after the safety margin (MiB)."""
        total = self.ram_mb if resource == "ram" else self.device_mb
        return None if total is None else total * (1.0 - self.margin)

    def source(self, resource: str) -> str:
        return dict(self.sources).get(resource, "")


def host_ram_mb() -> float:
    """The RAM this process may use in all (``MemTotal``, capped by its cgroup's limit
    inside a container: :mod:`engine.cgroup_memory`), MiB."""
    from engine.cgroup_memory import total_mib

    return total_mib()[0]


def host_ram_source() -> str:
    """Where :func:`host_ram_mb` comes from: ``MemTotal`` or the cgroup's limit file
    (``cgroup v2 memory.max``)."""
    from engine.cgroup_memory import total_mib

    return total_mib()[1]


def host_available_mb() -> float:
    """RAM available now (``MemAvailable``, or less where the cgroup's limit leaves less:
    :mod:`engine.cgroup_memory`), MiB: shown beside the budget, never keyed."""
    from engine.cgroup_memory import available_mib

    return available_mib()


def device_total_mb(gpu_uuid: str | None) -> float | None:
    """The device's total memory from NVML (MiB), None on CPU or without NVML."""
    if not gpu_uuid:
        return None
    from engine.measure.nvml import open_gpu

    try:
        total = open_gpu(gpu_uuid).facts.get("gpu_vram_total_mb")
    except RuntimeError:
        return None
    return float(total) if total else None


def make_budget(*, ram: Any = None, device: Any = None, cores: Any = None,
                gpu_uuid: str | None = None, where: str = "budget") -> Budget:
    """The budget: each given value parsed, each missing one measured here.

    Raises:
        ConfigError: a given value that is not a size (or core count), or <= 0; naming
            ``where`` and the key.
    """
    sources = []
    if ram is not None:
        ram_mb = parse_size(ram, f"{where}: ram")
        sources.append(("ram", "given"))
    else:
        ram_mb = host_ram_mb()
        sources.append(("ram", host_ram_source()))
    if cores is not None:
        n_cores = parse_cores(cores, f"{where}: cores")
        sources.append(("cores", "given"))
    else:
        n_cores = os.cpu_count() or 1
        sources.append(("cores", "os.cpu_count"))
    if device is not None:
        device_mb: float | None = parse_size(device, f"{where}: device")
        sources.append(("device", "given"))
    else:
        device_mb = device_total_mb(gpu_uuid)
        sources.append(("device", "NVML total" if device_mb else "none (CPU)"))
    return Budget(ram_mb=ram_mb, cores=n_cores, device_mb=device_mb, sources=tuple(sources))
