"""The torch side of a process that trains: the backend flags every cell and worker sets
identically, and the facts only torch can tell (versions, the GPU as torch sees it). Imports
torch inside its functions; the flags themselves are declared torch-free in
:func:`engine.measure.provenance.backend_flags` (rows record them)."""

from __future__ import annotations

from typing import Any

from engine.measure.provenance import backend_flags, cudnn_text


def torch_facts(device: Any) -> dict[str, Any]:
    """Torch-side provenance, inside a cell: versions, GPU name and VRAM as torch sees them.

    Values that cannot be read on this machine are ``None`` (empty cells), never guessed.
    """
    import torch

    facts: dict[str, Any] = {
        "torch_version": torch.__version__,
        "cuda_version": torch.version.cuda,
        "gpu_name": None, "gpu_vram_total_mb": None, "nv_driver_version": None,
        "gpu_compute_mode": None,
    }
    if getattr(device, "type", "cpu") == "cuda":
        # Driver, compute mode and power limit come from NVML through the monitor, which
        # opens the device under test by UUID (an NVML index is not a CUDA index).
        props = torch.cuda.get_device_properties(device)
        facts["gpu_name"] = props.name
        facts["gpu_vram_total_mb"] = round(props.total_memory / 2**20)
        # the cuDNN torch actually loaded (a CPU cell records the installed wheel's:
        # asking torch would load the library, 0.2 s of every CPU cell's fixed cost)
        if torch.backends.cudnn.is_available():
            facts["cudnn_version"] = cudnn_text(torch.backends.cudnn.version())
    return facts


def apply_backend_flags(precision: str | None = None) -> dict[str, Any]:
    """Set :func:`~engine.measure.provenance.backend_flags` for ``precision`` (the one that
    runs; ``tf32`` turns TF32 on) on torch; return them."""
    import torch

    flags = backend_flags(precision)
    torch.backends.cudnn.benchmark = flags["cudnn_benchmark"]
    torch.backends.cudnn.deterministic = flags["cudnn_deterministic"]
    torch.set_float32_matmul_precision(flags["float32_matmul_precision"])
    torch.backends.cuda.matmul.allow_tf32 = flags["cuda_matmul_allow_tf32"]
    torch.backends.cudnn.allow_tf32 = flags["cudnn_allow_tf32"]
    return flags
