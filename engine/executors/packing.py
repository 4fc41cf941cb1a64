"""Packing one cell's jobs onto several GPUs (issue 27, "the seeds' recipe"): the
``devices`` and ``jobs_per_device`` options of ``mp``.

The recipe: job ``i`` of the cell goes to device ``i mod n`` (round-robin, in job order,
so the placement is deterministic and recorded), at most ``jobs_per_device`` jobs run on
one device at once, and each worker process is pinned to its device by
``CUDA_VISIBLE_DEVICES=<GPU UUID>`` set in its environment *before* CUDA initialises there
(the driver reads the variable once, at its initialisation; a process that already
initialised CUDA keeps the devices it saw, so it is refused rather than mis-pinned:
:func:`check_repin`).

Torch-free and cheap: the campaign check (:func:`campaign_check`) runs in the runner before
anything is written, and resolves every entry through NVML in the runner's environment:

- ``"cuda:N"``: the N-th device this process may see (an outer ``CUDA_VISIBLE_DEVICES``,
  e.g. a scheduler's allocation, is indexed into, never overwritten:
  ``engine.measure.nvml.resolve_gpu``);
- ``"GPU-..."``/``"MIG-..."``: a device UUID (or a unique prefix) NVML knows, and which the
  outer ``CUDA_VISIBLE_DEVICES`` lets this process use;
- ``"auto"``: every device this process may see.

Cell keys (docs/measurement.md, "Cell keys"): ``devices`` absent is not hashed (rule 1);
when set, it is hashed by what it resolves to (rule 3), the GPU models in placement order
(:func:`key_value`): a packing over two H200s is the same configuration whichever two, and
``"auto"`` on a two-H200 host keys like ``["cuda:0", "cuda:1"]``. The UUIDs are columns
(``job_device``, ``devices``), never key material.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from engine.measure.gpu_pool import (
    AUTO,
    PIN_ENV,
    Device,
    check_devices,
    key_value,
    resolve,
)

__all__ = ["AUTO", "PIN_ENV", "Device", "assign", "campaign_check", "check_devices",
           "check_jobs_per_device", "check_repin", "key_value", "resolve", "Slots"]


def check_jobs_per_device(value: Any) -> None:
    """Option check of ``jobs_per_device``: an integer >= 1.

    Raises:
        ValueError: anything else (a float, a bool, a string, 0).
    """
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"must be an integer >= 1, got {value!r}")


def campaign_check(options: Mapping[str, Any]) -> tuple[str, str] | None:
    """:attr:`ExecutorSpec.options_check` part of ``devices``: ``(key, reason)`` when a
    device cannot be resolved here, ``jobs_per_device`` is set without ``devices``, or
    ``mps = "on"`` is asked together with ``devices``; else None."""
    devices = options.get("devices")
    if devices is None:
        if "jobs_per_device" in options:
            return ("jobs_per_device", "needs devices (the GPUs to pack the jobs onto)")
        return None
    if options.get("mps") == "on":
        return ("mps", "\"on\" cannot be combined with devices: the private MPS daemon "
                       "serves one device (use mps = \"auto\" or \"off\")")
    try:
        resolve(devices)
    except ValueError as exc:
        return ("devices", str(exc))
    return None


def assign(n_jobs: int, n_devices: int) -> list[int]:
    """Round-robin placement: the device index of each job (job ``i`` → ``i mod n``)."""
    if n_devices < 1:
        raise ValueError("no device to assign jobs to")
    return [i % n_devices for i in range(n_jobs)]


class Slots:
    """Which job may start next under packing: jobs wait in job order on their own
    device (:func:`assign`), and a device runs at most ``per_device`` at once. Pure
    bookkeeping, so the concurrency bound is testable without processes."""

    def __init__(self, n_jobs: int, n_devices: int, per_device: int | None,
                 total: int | None = None) -> None:
        self.placement = assign(n_jobs, n_devices)
        self.per_device = per_device or n_jobs or 1
        self.total = total or n_jobs or 1
        self.queues: list[list[int]] = [[i for i, d in enumerate(self.placement) if d == k]
                                        for k in range(n_devices)]
        self.running = [0] * n_devices

    def next(self) -> int | None:
        """The lowest-numbered waiting job whose device has a free slot, or None."""
        if sum(self.running) >= self.total:
            return None
        ready = [q[0] for k, q in enumerate(self.queues)
                 if q and self.running[k] < self.per_device]
        if not ready:
            return None
        job = min(ready)
        device = self.placement[job]
        self.queues[device].pop(0)
        self.running[device] += 1
        return job

    def done(self, job: int) -> None:
        self.running[self.placement[job]] -= 1

    def waiting(self) -> bool:
        return any(self.queues)


def check_repin(wanted: str, environ: Mapping[str, str], cuda_initialized: bool) -> None:
    """Refuse a worker that cannot be pinned: CUDA was initialised in this process already
    with another ``CUDA_VISIBLE_DEVICES`` (the driver read it then and never again).

    Raises:
        RuntimeError: one line naming both values.
    """
    current = environ.get(PIN_ENV)
    if cuda_initialized and current != wanted:
        raise RuntimeError(f"cannot pin this worker to {wanted}: CUDA is already initialised "
                           f"in it with CUDA_VISIBLE_DEVICES={current!r} (a process keeps "
                           "the devices it saw at CUDA's initialisation)")


#: Group columns that describe the one device the cell's monitor watches: empty for a
#: packing over other or several devices (never one device's reading as the group's).
MONITOR_GPU_COLUMNS = ("energy_group", "gpu_util_mean", "gpu_util_max", "vram_peak_mb",
                       "gpu_power_mean_w", "gpu_sm_clock_mean_mhz", "gpu_temp_max_c",
                       "power_method")


def group_columns(group: Any, devices: list[str], per_device: int, on_gpu: bool,
                  gpu_uuid: str | None) -> str | None:
    """Set a packed cell's group columns (``packed_devices``, ``jobs_per_device``) on
    ``group`` (the cell's ``ctx.group``); on a GPU cell packed onto anything but its own
    device, empty the monitor's GPU columns (:data:`MONITOR_GPU_COLUMNS`, energy method
    ``none``). Returns the reason when it emptied them, else None."""
    group.update(packed_devices=",".join(devices), jobs_per_device=per_device)
    if on_gpu and devices != [gpu_uuid]:
        group.update({name: None for name in MONITOR_GPU_COLUMNS}, energy_method="none")
        return "empty: the cell's monitor watches one device of the packing"
    return None
