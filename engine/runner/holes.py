"""``--resume --remeasure-holes`` (issue 43): an ``ok`` row whose monitor columns are
missing for a reason other than "no device" is a hole in the measurements (its monitor
was killed mid-cell, it could not start, ...); with the flag, ``--resume`` does not count
such a row, so the cell runs again (a new attempt; the old row stays, as every row does).

A row is a hole when the campaign's monitor is on (``monitor = false`` would leave the
same hole again) and either

- the columns the monitor fills on every host are empty: ``monitor_samples`` (empty or 0)
  or ``cpu_util_mean`` (the cell's process tree, no device needed); or
- the row names a device (``gpu_uuid``) but has none of its sampled metrics
  (``gpu_util_mean``, ``vram_peak_mb``, ``gpu_power_mean_w``) and no reason the device
  gave for that (``gpu_metrics_missing`` empty).

A CPU cell's empty GPU columns are "no device", and a device that reported why it could
not give a metric (MIG's utilisation: NotSupported) is not a hole: running again would not
fill them. Torch-free.
"""

from __future__ import annotations

from collections.abc import Mapping

#: Filled by the monitor on every host, with or without a device.
HOST_COLUMNS = ("monitor_samples", "cpu_util_mean")
#: Sampled from the device under test.
DEVICE_COLUMNS = ("gpu_util_mean", "vram_peak_mb", "gpu_power_mean_w")


def is_hole(row: Mapping[str, str]) -> bool:
    """Whether the ``ok`` group row ``row`` (CSV text) has a monitor hole (module doc)."""
    if row.get("monitor_samples", "") in ("", "0"):
        return True
    if any(not row.get(c, "") for c in HOST_COLUMNS):
        return True
    device = bool(row.get("gpu_uuid", ""))
    return (device and not any(row.get(c, "") for c in DEVICE_COLUMNS)
            and not row.get("gpu_metrics_missing", ""))
