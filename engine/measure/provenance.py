"""Where and with what a number was measured: the provenance columns of every row.

:func:`host_facts` and :func:`machine_identity` are torch-free (the runner computes cell
keys with them); the torch-side facts are read inside cells by :mod:`engine.train.backend`.
"""

from __future__ import annotations

import functools
import importlib.metadata
import os
import platform
import socket
import subprocess
from pathlib import Path
from typing import Any

from engine import __version__

#: The version of the rule that says which phases fall inside ``T_group``
#: (docs/measurement.md, "Which phases fall inside T_group"), recorded in every group row
#: (``window_rule``): "2" = one rule for every executor (a strategy's job-independent
#: runtime is ``setup_s``, everything done per job is inside); "1" = the per-executor
#: boundaries before it, under which every row without the column was measured.
WINDOW_RULE = "2"


def _cpuinfo(field: str) -> str:
    """The first ``field`` of ``/proc/cpuinfo``, or ``""`` (no such file or field)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith(field):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return ""


@functools.cache
def cpu_model() -> str:
    """CPU model name from ``/proc/cpuinfo`` (``platform.processor()`` elsewhere)."""
    return _cpuinfo("model name") or platform.processor() or ""


@functools.cache
def cpu_vendor() -> str:
    """CPU vendor from ``/proc/cpuinfo`` (``GenuineIntel``, ``AuthenticAMD``), or ``""``:
    BLAS libraries pick their kernels by vendor as well as ISA (MKL rounds some GEMMs
    otherwise on AMD than on Intel, docs/fidelity.md "The parity contract")."""
    return _cpuinfo("vendor_id")


@functools.cache
def git_commit() -> str:
    """The fugue-tui source commit (short hash, ``+dirty`` when modified), or ``""``."""
    root = Path(__file__).resolve().parents[2]
    if not (root / ".git").exists():
        return ""
    try:
        head = subprocess.run(["git", "-C", str(root), "rev-parse", "--short=12", "HEAD"],
                              capture_output=True, text=True, timeout=5)
        if head.returncode != 0:
            return ""
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain",
                                "--untracked-files=no", "--", "engine", "fugue_tui"],
                               capture_output=True, text=True, timeout=5)
        return head.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")
    except (OSError, subprocess.SubprocessError):
        return ""


def dist_version(name: str) -> str:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return ""


def host_facts() -> dict[str, Any]:
    """Torch-free provenance: host, CPU, Python, fugue-tui version and commit."""
    return {
        "host": socket.gethostname(),
        "cpu_model": cpu_model(),
        "cpu_cores": os.cpu_count(),
        "python_version": platform.python_version(),
        "fugue_tui_version": __version__,
        "fugue_tui_commit": git_commit(),
    }


@functools.cache
def stack_versions() -> dict[str, Any]:
    """Torch-free versions of the measured stack (every group row, also the rows the runner
    writes for a cell killed or failed before it reported): ``torch_version`` and
    ``cuda_version`` as torch reports them (read from ``torch/version.py`` without
    importing torch: ``2.14.1+cu130``, ``13.0``), ``numpy_version``, ``sklearn_version``,
    ``ray_version`` (installed distributions) and ``cudnn_version`` (the installed
    ``nvidia-cudnn-cu*`` wheel, ``major.minor.patch``; a CUDA cell replaces it with the
    version torch loaded). Missing: None (an empty cell), never guessed."""
    torch = _torch_version_file()
    return {"torch_version": torch.get("__version__"), "cuda_version": torch.get("cuda"),
            "numpy_version": dist_version("numpy") or None,
            "sklearn_version": dist_version("scikit-learn") or None,
            "ray_version": dist_version("ray") or None,
            "cudnn_version": _cudnn_wheel_version()}


def _torch_version_file() -> dict[str, Any]:
    """The literal assignments of torch's ``version.py`` (``__version__``, ``cuda``), found
    without importing torch (which costs seconds and, in the runner, is forbidden)."""
    import ast
    import importlib.util

    try:
        spec = importlib.util.find_spec("torch")
        if spec is None or not spec.origin:
            return {}
        tree = ast.parse((Path(spec.origin).parent / "version.py").read_text())
    except (OSError, ValueError, SyntaxError, ImportError):
        return {}
    out: dict[str, Any] = {}
    for node in tree.body:
        target = (node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1
                  else node.target if isinstance(node, ast.AnnAssign) else None)
        value = getattr(node, "value", None)
        if isinstance(target, ast.Name) and isinstance(value, ast.Constant):
            out[target.id] = value.value
    return out


def _cudnn_wheel_version() -> str | None:
    # by name (a scan of every installed distribution costs ~0.1 s of a cell's fixed cost)
    for cuda in ("13", "12", "11"):
        version = dist_version(f"nvidia-cudnn-cu{cuda}")
        if version:
            return ".".join(version.split(".")[:3])
    return None


def cudnn_text(version: int | None) -> str | None:
    """torch's ``torch.backends.cudnn.version()`` (``92400``, or ``8907`` for cuDNN 8) as
    ``9.24.0`` / ``8.9.7``; None stays None."""
    if not version:
        return None
    if version >= 90000:  # cuDNN 9 packs major * 10000 + minor * 100 + patch
        return f"{version // 10000}.{version % 10000 // 100}.{version % 100}"
    return f"{version // 1000}.{version % 1000 // 100}.{version % 100}"


def nvml_devices() -> list[dict[str, Any]]:
    """GPUs NVML can see (name, uuid), or ``[]`` without a driver. Torch-free."""
    try:
        import pynvml
    except ImportError:
        return []
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError:
        return []
    try:
        out = []
        for i in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(i)
            out.append({"index": i, "name": _text(pynvml.nvmlDeviceGetName(handle)),
                        "uuid": _text(pynvml.nvmlDeviceGetUUID(handle))})
        return out
    except pynvml.NVMLError:
        return []
    finally:
        try:
            pynvml.nvmlShutdown()
        except pynvml.NVMLError:
            pass


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def resolve_device(requested: str) -> str:
    """``auto`` → ``cuda`` when NVML sees a GPU, else ``cpu``; other values unchanged."""
    if requested == "auto":
        return "cuda" if nvml_devices() else "cpu"
    return requested


def machine_identity(device: str, gpu: dict[str, Any] | None = None) -> dict[str, Any]:
    """The part of a cell key that says *where*: resuming on another host, GPU or torch
    build reruns the cell instead of mixing numbers from two machines. ``gpu`` is the
    device under test as ``engine.measure.nvml.resolve_gpu`` found it."""
    gpu = gpu or {}
    return {"host": socket.gethostname(), "device": device, "gpu_uuid": gpu.get("uuid", ""),
            "gpu_name": gpu.get("name") or "", "torch": dist_version("torch")}


def model_identity(gpu: dict[str, Any]) -> dict[str, Any]:
    """The machine part of the key of a multi-device campaign (``devices``; issue 27): the
    host and the GPU *model* (the name NVML gives: a MIG slice's includes its profile),
    never a UUID, so a resume on other devices of the same model skips what already ran;
    ``devices = "by-model"`` keeps these keys apart from a one-device campaign's."""
    return {**machine_identity("cuda", None), "gpu_name": gpu.get("name") or "",
            "devices": "by-model"}


def backend_flags(precision: str | None = None) -> dict[str, Any]:
    """The torch backend flags every cell sets identically (recorded in ``backend_flags``).
    ``precision``: the precision that runs (``engine.precision``); ``tf32`` turns
    TF32 matmuls on (float32 matmul precision "high"), every other keeps them off."""
    tf32 = precision == "tf32"
    return {"cudnn_benchmark": False, "cudnn_deterministic": False,
            "float32_matmul_precision": "high" if tf32 else "highest",
            "cuda_matmul_allow_tf32": tf32, "cudnn_allow_tf32": True}
