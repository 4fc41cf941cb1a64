"""What the machine offers the ``mp`` executor before it starts an MPS daemon: the control
binary, NVML's view of the GPU, and the MPS processes already running.

- :func:`find_control`: ``nvidia-cuda-mps-control`` on PATH, else in :data:`FALLBACK_DIRS`;
- :func:`gpu_visible`, :func:`compute_mode` (NVML, injectable for tests) and
  :func:`check_compute_mode`: PROHIBITED allows no context at all, EXCLUSIVE_PROCESS allows
  one process, which with MPS is the MPS server;
- :func:`thread_percentage`: each worker's share of the SMs;
- :func:`foreign_daemons`: control daemons that are not ours, reported, never reused or
  stopped; :func:`is_control_daemon`, :func:`is_mps_process` and :func:`pipe_dir_of`
  identify MPS processes (``engine.executors.mp.mps`` uses them to find its own).

Kept apart from the daemon's lifecycle (``engine.executors.mp.mps``): these only read the
machine and start nothing. Sources: NVIDIA, "Multi-Process Service" (compute modes,
``CUDA_MPS_ACTIVE_THREAD_PERCENTAGE``); NVML ``nvmlDeviceGetComputeMode``. Torch-free.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
from pathlib import Path
from typing import Any

import psutil

from engine.errors import FugueError

#: The control binary, looked up on PATH, then in :data:`FALLBACK_DIRS`.
CONTROL = "nvidia-cuda-mps-control"
FALLBACK_DIRS = ("/usr/sbin",)
#: The pipe directory every CUDA process uses when ``CUDA_MPS_PIPE_DIRECTORY`` is unset.
DEFAULT_PIPE_DIR = "/tmp/nvidia-mps"
#: NVML compute mode values (``NVML_COMPUTEMODE_*``) by name.
COMPUTE_MODES = {0: "DEFAULT", 1: "EXCLUSIVE_THREAD", 2: "PROHIBITED", 3: "EXCLUSIVE_PROCESS"}


def find_control(path: str | None = None) -> str | None:
    """Absolute path of ``nvidia-cuda-mps-control``: on ``PATH`` (or ``path``), else in
    ``/usr/sbin`` (where driver packages install it, often outside a user's PATH); None
    when neither has it."""
    found = shutil.which(CONTROL, path=path)
    if found:
        return os.path.abspath(found)  # not resolved: the binary's own name must stay
    for folder in FALLBACK_DIRS:
        candidate = Path(folder) / CONTROL
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    return None


def _nvml(nvml: Any = None) -> Any:
    if nvml is not None:
        return nvml
    try:
        import pynvml
    except ImportError:
        return None
    return pynvml


def gpu_visible(index: int | str = 0, nvml: Any = None) -> bool:
    """True when NVML (``nvml``: the ``pynvml`` module, injectable for tests) sees GPU
    ``index`` (an NVML index, or the device's UUID — what a cell knows its device by: inside
    a cell ``cuda:0`` is not NVML index 0); False without nvidia-ml-py, a driver, or that
    GPU."""
    lib = _nvml(nvml)
    if lib is None:
        return False
    try:
        lib.nvmlInit()
    except lib.NVMLError:
        return False
    try:
        if isinstance(index, str):  # a GPU-/MIG- UUID: the device under test by identity
            lib.nvmlDeviceGetHandleByUUID(index)
            return True
        return index < lib.nvmlDeviceGetCount()
    except lib.NVMLError:
        return False
    finally:
        with contextlib.suppress(lib.NVMLError):
            lib.nvmlShutdown()


def compute_mode(index: int | str = 0, nvml: Any = None) -> str | None:
    """The NVML compute mode of GPU ``index`` (an NVML index or a UUID) (DEFAULT, EXCLUSIVE_THREAD, PROHIBITED,
    EXCLUSIVE_PROCESS), or None when it cannot be read (no nvidia-ml-py, no driver, no such
    GPU, or ``NVMLError_NotSupported``). ``nvml``: the ``pynvml`` module (injectable)."""
    lib = _nvml(nvml)
    if lib is None:
        return None
    try:
        lib.nvmlInit()
    except lib.NVMLError:
        return None
    try:
        handle = (lib.nvmlDeviceGetHandleByUUID(index) if isinstance(index, str)
                  else lib.nvmlDeviceGetHandleByIndex(index))
        return COMPUTE_MODES.get(lib.nvmlDeviceGetComputeMode(handle))
    except lib.NVMLError:
        return None
    finally:
        with contextlib.suppress(lib.NVMLError):
            lib.nvmlShutdown()


def check_compute_mode(mode: str | None, index: int | str, mps_running: bool) -> None:
    """Refuse what the compute mode makes impossible for several worker processes.

    Raises:
        FugueError: ``PROHIBITED`` (no process may create a CUDA context), or
            ``EXCLUSIVE_PROCESS`` without a working MPS daemon of ours (only one process may
            hold a context; with MPS that one process is the MPS server).
    """
    where = f"GPU {index} is in compute mode {mode}"
    if mode == "PROHIBITED":
        raise FugueError(f"{where}: no process may create a CUDA context, so the mp executor "
                         "cannot run (an administrator can change it: nvidia-smi -c DEFAULT)")
    if mode == "EXCLUSIVE_PROCESS" and not mps_running:
        raise FugueError(f"{where} and no MPS daemon of ours is running: only one process "
                         "may use the GPU, so concurrent workers are refused (install "
                         "nvidia-cuda-mps-control and use [options.mp] mps = \"auto\", or "
                         "nvidia-smi -c DEFAULT)")


def thread_percentage(clients: int) -> int:
    """``CUDA_MPS_ACTIVE_THREAD_PERCENTAGE`` for each of ``clients`` concurrent clients:
    floor(100 / clients) %, at least 1 (the GPU's SMs split evenly)."""
    return max(1, 100 // max(1, clients))


# --------------------------------------------------------------------------- processes

def is_control_daemon(proc: psutil.Process) -> bool:
    """A running ``nvidia-cuda-mps-control -d`` (or ``-f``), whatever runs the binary (an
    interpreter for a script): the binary's name among the first two words of its command."""
    try:
        cmd = proc.cmdline()
    except psutil.Error:
        return False
    words = [os.path.basename(w) for w in cmd[:2]]
    return CONTROL in words and any(a in ("-d", "-f") for a in cmd[1:])


def is_mps_process(proc: psutil.Process) -> bool:
    try:
        cmd = proc.cmdline()
    except psutil.Error:
        return False
    return any(os.path.basename(w).startswith("nvidia-cuda-mps-") for w in cmd[:2])


def pipe_dir_of(proc: psutil.Process) -> str | None:
    """The pipe directory a daemon serves (its environment), None when unreadable (another
    user's process)."""
    try:
        return proc.environ().get("CUDA_MPS_PIPE_DIRECTORY", DEFAULT_PIPE_DIR)
    except psutil.Error:
        return None


def _socket_answers(path: Path) -> bool:
    """True when a Unix socket at ``path`` accepts a connection (a live daemon, not a stale
    file left by one that died)."""
    if not path.exists():
        return False
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(1.0)
        try:
            sock.connect(str(path))
            return True
        except OSError:
            return False


def foreign_daemons(exclude_pids: tuple[int, ...] = ()) -> list[dict[str, Any]]:
    """MPS control daemons on this machine that are not ours (``exclude_pids``).

    Returns one dict per daemon: ``pid``, ``user``, ``pipe_dir`` (None when its environment
    is unreadable). A live control socket in the default ``/tmp/nvidia-mps`` whose process
    cannot be seen (another user, ``hidepid``) is reported with ``pid`` None. Read-only: the
    caller reports these and never reuses or stops them.
    """
    found: list[dict[str, Any]] = []
    for proc in psutil.process_iter(["pid", "username"]):
        if proc.pid in exclude_pids or proc.pid == os.getpid() or not is_control_daemon(proc):
            continue
        found.append({"pid": proc.pid, "user": proc.info.get("username"),
                      "pipe_dir": pipe_dir_of(proc)})
    if (not any(d["pipe_dir"] == DEFAULT_PIPE_DIR for d in found)
            and _socket_answers(Path(DEFAULT_PIPE_DIR) / "control")):
        found.append({"pid": None, "user": None, "pipe_dir": DEFAULT_PIPE_DIR})
    return found
