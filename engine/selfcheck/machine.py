"""The facts a self-check's verdict depends on: which CPU (model, vendor, the ISA ATen
dispatches to), which BLAS, which torch and CUDA, and what the other executors would find
(NVML, the MPS control binary, Ray) — so that a verdict read later says where it held.

The kernel-dispatch settings CI's parity matrix varies (``MKL_CBWR``,
``ATEN_CPU_CAPABILITY``) are recorded as set. Reuses the provenance readers
(``engine.measure.provenance``); torch is imported inside :func:`facts` only, and Ray is
never imported (its installed version is read from its distribution).
"""

from __future__ import annotations

import os
import re
from typing import Any

from engine.measure.provenance import (
    cpu_model,
    cpu_vendor,
    cudnn_text,
    dist_version,
    nvml_devices,
)

#: The kernel-dispatch environment variables recorded with a verdict.
DISPATCH_ENV = ("MKL_CBWR", "ATEN_CPU_CAPABILITY", "MKL_ENABLE_INSTRUCTIONS",
                "MKL_DEBUG_CPU_TYPE")


def blas(config: str) -> dict[str, str | None]:
    """The BLAS torch was built with, from ``torch.__config__.show()``'s text: ``blas``
    (``BLAS_INFO``: ``mkl``, ``open``, ``accelerate`` ...) and ``mkl_version`` (``2024.2``;
    None without MKL)."""
    info = re.search(r"BLAS_INFO=([^,\s]+)", config)
    mkl = re.search(r"Math Kernel Library Version ([0-9][0-9.]*)", config)
    return {"blas": info.group(1) if info else None, "mkl_version": mkl.group(1) if mkl else None}


def dispatch_setting() -> str:
    """The kernel-dispatch variables as set, ``MKL_CBWR=AVX2 ATEN_CPU_CAPABILITY=avx2``
    ("" when none is: the default dispatch)."""
    return " ".join(f"{k}={os.environ[k]}" for k in DISPATCH_ENV if os.environ.get(k))


def facts(device: Any) -> dict[str, Any]:
    """The machine's facts for a verdict on ``device`` (a ``torch.device``). Values that
    cannot be read here are None, never guessed."""
    import torch

    from engine.executors.mp.mps_checks import find_control

    gpus = nvml_devices()
    out: dict[str, Any] = {
        "cpu_model": cpu_model() or None, "cpu_vendor": cpu_vendor() or None,
        "cpu_cores": os.cpu_count(),
        "isa": torch.backends.cpu.get_cpu_capability(),
        "dispatch": dispatch_setting() or None,
        **blas(torch.__config__.show()),
        "torch_version": torch.__version__, "cuda_version": torch.version.cuda,
        "cudnn_version": None, "gpu_name": None, "gpu_capability": None,
        "threads": torch.get_num_threads(),
        "nvml": bool(gpus), "nvml_gpus": len(gpus),
        "mps_control": find_control(),
        "ray_version": dist_version("ray") or None,
    }
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        out["gpu_name"] = props.name
        out["gpu_capability"] = f"{props.major}.{props.minor}"
        if torch.backends.cudnn.is_available():
            out["cudnn_version"] = cudnn_text(torch.backends.cudnn.version())
    return out
