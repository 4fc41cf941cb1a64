"""The device under test through NVML (``pynvml`` from nvidia-ml-py): resolving the
campaign's device to one GPU or MIG slice by UUID, probing each metric once, reading the
supported ones, and the device's facts for provenance. Torch-free; ``pynvml`` is imported
only when a device is opened (tests pass a fake module as ``nvml``, or shadow ``pynvml`` on
``PYTHONPATH``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

#: NVML metric → (sample field, reader). Readers take the pynvml module and a handle.
GPU_METRICS: dict[str, tuple[str, Callable[[Any, Any], float]]] = {
    "utilization": ("gpu_util_pct", lambda n, h: float(n.nvmlDeviceGetUtilizationRates(h).gpu)),
    "memory": ("mem_used_mib", lambda n, h: n.nvmlDeviceGetMemoryInfo(h).used / 2**20),
    "power": ("power_w", lambda n, h: n.nvmlDeviceGetPowerUsage(h) / 1000.0),
    "energy": ("energy_mj", lambda n, h: float(n.nvmlDeviceGetTotalEnergyConsumption(h))),
    "sm_clock": ("sm_clock_mhz",
                 lambda n, h: float(n.nvmlDeviceGetClockInfo(h, n.NVML_CLOCK_SM))),
    "temperature": ("temp_c",
                    lambda n, h: float(n.nvmlDeviceGetTemperature(h, n.NVML_TEMPERATURE_GPU))),
}

_COMPUTE_MODES = {0: "DEFAULT", 1: "EXCLUSIVE_THREAD", 2: "PROHIBITED", 3: "EXCLUSIVE_PROCESS"}


# --------------------------------------------------------------------------- power
# ``nvmlDeviceGetPowerUsage`` (GPU_METRICS["power"]) is a one-second average on Ampere and
# later (NVML's documentation): sampled every 0.5 s it smooths the curve that
# gpu_power_mean_w and the power-integral energy are made of. Where the driver offers it,
# the instantaneous reading (field NVML_FI_DEV_POWER_INSTANT through
# nvmlDeviceGetFieldValues, scope 0: the GPU) is read instead; ``GpuDevice.power_method``
# records which ("instant", "average"; None without power), and the rows say it.

#: ``nvmlValueType_t`` → the ``c_nvmlValue_t`` member that holds a field's value.
_VALUE_MEMBERS = {0: "dVal", 1: "uiVal", 2: "ulVal", 3: "ullVal", 4: "sllVal", 5: "siVal",
                  6: "usVal"}


def _instant_power_w(nvml: Any, handle: Any) -> float:
    """Instantaneous power (W) from the field values.

    Raises:
        NVMLError_*: the driver or this pynvml does not offer the field (each entry of
            ``nvmlDeviceGetFieldValues`` carries its own return code).
    """
    field_id = getattr(nvml, "NVML_FI_DEV_POWER_INSTANT", None)
    if field_id is None:  # an nvidia-ml-py older than the field
        raise AttributeError("pynvml has no NVML_FI_DEV_POWER_INSTANT")
    entry = nvml.nvmlDeviceGetFieldValues(handle, [field_id])[0]
    if entry.nvmlReturn != nvml.NVML_SUCCESS:
        raise nvml.NVMLError(entry.nvmlReturn)
    return float(getattr(entry.value, _VALUE_MEMBERS[entry.valueType])) / 1000.0


#: How power can be read, preferred first: method name → reader (W).
POWER_READERS: dict[str, Callable[[Any, Any], float]] = {
    "instant": _instant_power_w,
    "average": GPU_METRICS["power"][1],
}


def _probe_power(nvml: Any, handle: Any) -> tuple[str | None, dict[str, str]]:
    """The first power reader that works on this device, and why the others did not."""
    why: dict[str, str] = {}
    for method, reader in POWER_READERS.items():
        try:
            reader(nvml, handle)
            return method, why
        except Exception as exc:  # noqa: BLE001 - NVMLError_*, or an older pynvml
            why[method] = nvml_reason(exc)
    return None, why


def nvml_reason(exc: BaseException) -> str:
    """NVML's name for an error: ``NVMLError_NotSupported`` → ``NotSupported``."""
    name = type(exc).__name__
    return name.split("_", 1)[1] if name.startswith("NVMLError_") else f"{name}: {exc}"


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


# --------------------------------------------------------------------------- the device

@dataclass
class GpuDevice:
    """An NVML device opened by UUID, with the metrics it supports (probed once).

    ``missing`` maps metric → NVML's reason for every metric this device cannot report;
    ``facts`` holds provenance (name, uuid, driver, compute mode, total memory, power limit),
    each ``None`` when NVML cannot say.
    """

    nvml: Any
    handle: Any
    uuid: str
    supported: list[str] = field(default_factory=list)
    missing: dict[str, str] = field(default_factory=dict)
    facts: dict[str, Any] = field(default_factory=dict)
    #: How ``power_w`` is read: "instant", "average" (see POWER_READERS), None without power.
    power_method: str | None = None
    #: Why a preferred power reading is not used (e.g. {"instant": "NotSupported"}).
    power_missing: dict[str, str] = field(default_factory=dict)

    def read(self) -> tuple[dict[str, float | None], list[str]]:
        """One reading of every supported metric; returns values and per-metric errors.
        An error blanks that metric's value in this reading only."""
        values: dict[str, float | None] = {}
        errors = []
        for metric in self.supported:
            field_name, reader = GPU_METRICS[metric]
            if metric == "power" and self.power_method is not None:
                reader = POWER_READERS[self.power_method]
            try:
                values[field_name] = reader(self.nvml, self.handle)
            except Exception as exc:  # NVMLError_* or a driver hiccup: keep sampling
                values[field_name] = None
                errors.append(f"{metric}: {nvml_reason(exc)}")
        return values, errors


def open_gpu(uuid: str, nvml: Any = None) -> GpuDevice:
    """Initialise NVML and open the device ``uuid`` (``GPU-…`` or ``MIG-…``); probe each
    metric once.

    Raises:
        RuntimeError: NVML cannot be initialised or has no device with that UUID (the
            message says which).
    """
    if nvml is None:
        import pynvml as nvml
    try:
        nvml.nvmlInit()
    except Exception as exc:
        raise RuntimeError(f"NVML unavailable: {nvml_reason(exc)}") from None
    try:
        handle = nvml.nvmlDeviceGetHandleByUUID(uuid)
    except Exception as exc:
        raise RuntimeError(f"NVML has no device {uuid}: {nvml_reason(exc)}") from None
    device = GpuDevice(nvml, handle, uuid)
    for metric, (_, reader) in GPU_METRICS.items():
        if metric == "power":
            device.power_method, device.power_missing = _probe_power(nvml, handle)
            if device.power_method is not None:
                device.supported.append(metric)
            else:  # the reason of the averaged reading, the one every driver has
                device.missing[metric] = device.power_missing["average"]
            continue
        try:
            reader(nvml, handle)
            device.supported.append(metric)
        except Exception as exc:
            device.missing[metric] = nvml_reason(exc)
    device.facts = _device_facts(nvml, handle, uuid)
    return device


def _device_facts(nvml: Any, handle: Any, uuid: str) -> dict[str, Any]:
    def ask(fn: Callable[[], Any]) -> Any:
        try:
            return fn()
        except Exception:
            return None

    limit = ask(lambda: nvml.nvmlDeviceGetEnforcedPowerLimit(handle))
    total = ask(lambda: nvml.nvmlDeviceGetMemoryInfo(handle).total)
    mode = ask(lambda: nvml.nvmlDeviceGetComputeMode(handle))
    driver = ask(nvml.nvmlSystemGetDriverVersion)
    name = ask(lambda: nvml.nvmlDeviceGetName(handle))
    return {"gpu_uuid": uuid, "gpu_name": _text(name) if name is not None else None,
            "nv_driver_version": _text(driver) if driver is not None else None,
            "gpu_compute_mode": _COMPUTE_MODES.get(mode) if mode is not None else None,
            "gpu_vram_total_mb": round(total / 2**20) if total is not None else None,
            "gpu_power_limit_w": limit / 1000.0 if limit is not None else None}


def _compute_capability(nvml: Any, handle: Any) -> str | None:
    """``"8.0"``: the CUDA compute capability NVML reports (what the precision axis checks
    bfloat16 and TF32 support against), or None when the driver does not say."""
    try:
        major, minor = nvml.nvmlDeviceGetCudaComputeCapability(handle)
    except Exception:
        return None
    return f"{int(major)}.{int(minor)}"


def resolve_gpu(device: str, environ: Mapping[str, str], nvml: Any = None) -> dict[str, Any] | None:
    """The NVML identity of the device under test, or ``None`` for ``cpu``.

    ``cuda:N`` means the N-th device CUDA shows this process: the N-th entry of
    ``CUDA_VISIBLE_DEVICES`` when set (an index — an NVML index when CUDA enumerates in
    PCI bus order — or a ``GPU-``/``MIG-`` UUID or UUID prefix), otherwise NVML index N.
    An NVML index is not a CUDA index: CUDA's default order is fastest-first, so the runner
    gives every cell ``CUDA_DEVICE_ORDER=PCI_BUS_ID`` and ``CUDA_VISIBLE_DEVICES=<uuid>``.

    Returns ``{"uuid", "name", "nvml_index", "compute_capability", "how"}`` (the
    capability ``"major.minor"``, None when NVML does not say) or ``None`` when NVML is unavailable
    (the cell then reports the missing GPU itself).

    Raises:
        ValueError: ``cuda:N`` beyond the devices ``CUDA_VISIBLE_DEVICES`` lists, or an entry
            that matches no NVML device.
    """
    if not device.startswith("cuda"):
        return None
    index = int(device.split(":", 1)[1]) if ":" in device else 0
    if nvml is None:
        try:
            import pynvml as nvml
        except ImportError:
            return None
    try:
        nvml.nvmlInit()
    except Exception:
        return None
    try:
        return _resolve_one(device, index, environ, *_inventory(nvml))
    except ValueError:
        raise
    except Exception:
        return None
    finally:
        try:
            nvml.nvmlShutdown()
        except Exception:
            pass


def _inventory(nvml: Any) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Every GPU NVML lists (by index) and every MIG slice of the GPUs in MIG mode, each
    ``{"nvml_index", "uuid", "name", "compute_capability", "parent_uuid"}`` (a slice's
    ``nvml_index`` is None, its ``parent_uuid`` its physical GPU's UUID)."""
    gpus, migs = [], []
    for i in range(nvml.nvmlDeviceGetCount()):
        handle = nvml.nvmlDeviceGetHandleByIndex(i)
        gpu = {"nvml_index": i, "uuid": _text(nvml.nvmlDeviceGetUUID(handle)),
               "name": _text(nvml.nvmlDeviceGetName(handle)),
               "compute_capability": _compute_capability(nvml, handle), "parent_uuid": None}
        gpus.append(gpu)
        for slot in range(_mig_slots(nvml, handle)):
            try:
                mig = nvml.nvmlDeviceGetMigDeviceHandleByIndex(handle, slot)
            except Exception:  # NotFound: an empty slot (slices need not be contiguous)
                continue
            migs.append({"nvml_index": None, "uuid": _text(nvml.nvmlDeviceGetUUID(mig)),
                         "name": _text(nvml.nvmlDeviceGetName(mig)),
                         "compute_capability": gpu["compute_capability"],
                         "parent_uuid": gpu["uuid"]})
    return gpus, migs


def _mig_slots(nvml: Any, handle: Any) -> int:
    """How many MIG device slots a GPU in MIG mode has; 0 when MIG is off or unknown."""
    try:
        current = nvml.nvmlDeviceGetMigMode(handle)[0]
        if current != getattr(nvml, "NVML_DEVICE_MIG_ENABLE", 1):
            return 0
        return int(nvml.nvmlDeviceGetMaxMigDeviceCount(handle))
    except Exception:  # NotSupported: a GPU without MIG, or an older driver
        return 0


def _resolve_one(device: str, index: int, environ: Mapping[str, str],
                 gpus: list[dict[str, Any]], migs: list[dict[str, Any]]) -> dict[str, Any]:
    """:func:`resolve_gpu` over an inventory (``cuda:N`` → one device)."""
    visible = environ.get("CUDA_VISIBLE_DEVICES")
    if visible is None:
        if index >= len(gpus):
            raise ValueError(f"device {device}: NVML sees {len(gpus)} GPU(s)")
        return {**gpus[index], "how": f"NVML index {index}"}
    entries = [e.strip() for e in visible.split(",") if e.strip()]
    if index >= len(entries):
        raise ValueError(f"device {device}: CUDA_VISIBLE_DEVICES={visible!r} lists "
                         f"{len(entries)} device(s)")
    entry = entries[index]
    if entry.isdigit():
        n = int(entry)
        if n >= len(gpus):
            raise ValueError(f"CUDA_VISIBLE_DEVICES entry {entry!r}: NVML sees "
                             f"{len(gpus)} GPU(s)")
        order = environ.get("CUDA_DEVICE_ORDER", "FASTEST_FIRST")
        how = f"CUDA_VISIBLE_DEVICES entry {entry} as NVML index"
        if order != "PCI_BUS_ID":
            how += " (CUDA_DEVICE_ORDER is not PCI_BUS_ID: order assumed)"
        return {**gpus[n], "how": how}
    if entry.startswith("MIG-"):
        # A MIG slice must exist now (planning time): a stale UUID from another
        # reconfiguration would otherwise fail only inside the first cell.
        found = [m for m in migs if m["uuid"] == entry or m["uuid"].startswith(entry)]
        if len(found) != 1:
            raise ValueError(f"CUDA_VISIBLE_DEVICES entry {entry!r} matches "
                             f"{len(found)} MIG device(s) NVML lists")
        return {**found[0], "how": "CUDA_VISIBLE_DEVICES MIG UUID"}
    matches = [g for g in gpus if g["uuid"].startswith(entry)]
    if len(matches) != 1:
        raise ValueError(f"CUDA_VISIBLE_DEVICES entry {entry!r} matches "
                         f"{len(matches)} NVML device(s)")
    return {**matches[0], "how": "CUDA_VISIBLE_DEVICES UUID"}


def resolve_gpus(entries: tuple[str, ...] | list[str], environ: Mapping[str, str],
                 nvml: Any = None) -> list[dict[str, Any]]:
    """A campaign's ``devices`` (engine.define.devices) → the NVML identity of each, in
    order, each as :func:`resolve_gpu` returns it plus ``"entry"`` (as written) and
    ``"parent_uuid"`` (a MIG slice's physical GPU, else None).

    ``auto`` is every device this process may use: each entry of an outer
    ``CUDA_VISIBLE_DEVICES`` when set (never widened), else every NVML GPU, a GPU in MIG
    mode as its slices. ``cuda:N`` indexes into ``CUDA_VISIBLE_DEVICES`` as
    :func:`resolve_gpu` does; a ``GPU-``/``MIG-`` UUID (or unique prefix) must exist now and,
    under an outer ``CUDA_VISIBLE_DEVICES``, be one of the devices it lets through.

    Raises:
        ValueError: NVML is unavailable or sees no GPU, an entry that matches no device (or
            several), two entries naming one device, devices of different GPU models.
    """
    if nvml is None:
        try:
            import pynvml as nvml
        except ImportError:
            raise ValueError("no NVIDIA GPU is visible here (nvidia-ml-py is not "
                             "installed)") from None
    try:
        nvml.nvmlInit()
    except Exception as exc:
        raise ValueError(f"no NVIDIA GPU is visible here (NVML: {nvml_reason(exc)})") from None
    try:
        gpus, migs = _inventory(nvml)
        visible = environ.get("CUDA_VISIBLE_DEVICES")
        outer = [e.strip() for e in visible.split(",") if e.strip()] if visible is not None else None
        allowed = None
        if outer is not None:
            allowed = [_resolve_one(f"cuda:{k}", k, environ, gpus, migs)
                       for k in range(len(outer))]
        found: list[dict[str, Any]] = []
        for entry in (list(entries) if list(entries) != ["auto"] else []):
            if entry.startswith("cuda"):
                index = int(entry.split(":", 1)[1]) if ":" in entry else 0
                got = _resolve_one(entry, index, environ, gpus, migs)
            else:
                pool = migs if entry.startswith("MIG-") else gpus
                matches = [d for d in pool if d["uuid"] == entry or d["uuid"].startswith(entry)]
                if len(matches) != 1:
                    kind = "MIG slice" if entry.startswith("MIG-") else "GPU"
                    names = ", ".join(d["uuid"] for d in pool) or "none"
                    raise ValueError(f"device {entry!r} matches {len(matches)} {kind}(s) NVML "
                                     f"lists here ({kind} UUIDs: {names})")
                got = {**matches[0], "how": "UUID"}
                if allowed is not None and got["uuid"] not in {a["uuid"] for a in allowed}:
                    raise ValueError(f"device {entry!r} is not among CUDA_VISIBLE_DEVICES="
                                     f"{visible!r} (the outer restriction is kept, never "
                                     "widened)")
            found.append({**got, "entry": entry})
        if list(entries) == ["auto"]:
            if allowed is not None:
                found = [{**a, "entry": f"cuda:{k}"} for k, a in enumerate(allowed)]
            else:
                parents = {m["parent_uuid"] for m in migs}
                found = [{**g, "how": f"NVML index {g['nvml_index']}", "entry": f"cuda:{k}"}
                         for k, g in enumerate(g for g in gpus if g["uuid"] not in parents)]
                found += [{**m, "how": "MIG slice", "entry": m["uuid"]} for m in migs]
        if not found:
            raise ValueError("no NVIDIA GPU is visible here (NVML lists none)")
        seen: dict[str, str] = {}
        for dev in found:
            if dev["uuid"] in seen:
                raise ValueError(f"devices {seen[dev['uuid']]!r} and {dev['entry']!r} are the "
                                 f"same device ({dev['uuid']})")
            seen[dev["uuid"]] = dev["entry"]
        for dev in found:
            dev.setdefault("parent_uuid", None)
        models = sorted({_model(d) for d in found})
        if len(models) > 1:
            # Every speedup divides times of one GPU model; one campaign per model keeps
            # --resume and the analysis from ever pooling two models' rows.
            raise ValueError(f"devices of different GPU models ({', '.join(models)}): run one "
                             "campaign per GPU model")
        return found
    finally:
        try:
            nvml.nvmlShutdown()
        except Exception:
            pass


def _model(device: dict[str, Any]) -> str:
    """The GPU model a device's times belong to: its name (a MIG slice's name includes its
    profile, e.g. ``... MIG 1g.5gb``: slices of two profiles are two models)."""
    return str(device.get("name") or device.get("uuid"))
