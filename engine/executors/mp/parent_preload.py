"""The body of mp's pre-warmed parent (``[options.mp] start = "forkserver"``): the one module
the stdlib's fork server imports (``set_forkserver_preload``) before it forks any worker.

Importing this module *is* the parent's set-up, so nothing but that fork server may import
it with :data:`PARENT_ENV` set (without the variable, an import does nothing: a docs tool
or an import check may load it safely). In that process, in this order:

1. the kernel's parent-death signal (SIGKILL) on the cell: the stdlib's server ends only
   when every holder of its "alive" pipe is gone, and its workers hold that pipe too, so a
   cell killed by SIGKILL would otherwise leave the server and its workers running until
   their jobs ended. The workers die with the server (their own parent-death signal, set
   in ``worker_main``), so nothing of the cell survives it;
2. the cell's ``sys.path`` (Python 3.11's fork server does not apply it), so plugins
   import here as they do in the cell;
3. torch, ``torch._dynamo`` (which ``torch.optim`` imports on first use), the engine
   modules a worker uses and the plugins: what a spawned worker pays per job is paid once
   here, in the executor's setup (``setup_s``, docs/measurement.md);
4. a quick exit: when the cell closes its pipe the server leaves through ``SystemExit``,
   and a normal interpreter teardown with torch loaded costs seconds of CPU (the same
   reason ``worker_main`` and the cell leave with ``os._exit``); an ``atexit`` handler, the
   first thing that teardown runs, leaves at once instead. Forked children never run it:
   the server's child branch ends in ``os._exit``; its stack dump handler
   (``engine.stacks``, role ``mp-parent``), so a hung cell's dumps cover it too;
5. what happened, for the probe (``engine.executors.mp.parent.probe``): seconds taken,
   the error when an import failed (the stdlib server swallows ``ImportError`` and dies on
   anything else, so nothing may escape here), whether torch initialised CUDA, and the
   CUDA *driver's* state after each import step (:func:`cuda_driver_state`; it must not be
   initialised: a driver initialised before ``fork`` is unusable in the forked workers, and
   the workers must read the MPS variables when *they* initialise CUDA).

The imports run with ``PYTORCH_NVML_BASED_CUDA_CHECK=1`` (removed again before any worker
is forked): an import that asks ``torch.cuda.is_available()`` (torch's own modules on a
CUDA build, a plugin) is then answered through NVML instead of ``cudaGetDeviceCount``,
which initialises the driver (``cuInit``) without torch noticing — PyTorch documents the
variable for exactly this, forked processes failing with a CUDA initialisation error. On
the first GPU run (torch 2.11+cu130, H200) the parent mapped ``libcuda`` while importing
and was refused; whether the driver was merely loaded or initialised is now asked of the
driver itself instead of inferred from the mapping.

Nothing here touches a CUDA device or starts a thread; torch's import does not either.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib
import json
import os
import sys
import time

#: Set by the cell around the fork server's start: JSON ``{"pid": cell pid, "sys_path": [...]}``.
PARENT_ENV = "FUGUE_MP_PARENT"

#: The engine modules ``worker_main`` imports (besides torch and the plugins).
WORKER_MODULES = ("engine.define.workloads", "engine.errors", "engine.executors.mp.worker",
                  "engine.measure.spans", "engine.parts.datasets", "engine.stacks",
                  "engine.train.backend", "engine.train.data", "engine.train.loop")

#: Filled when the module ran as the parent's body (read by the probe).
STATE: dict = {}


#: torch reads it at each ``torch.cuda.is_available()`` call (``_nvml_based_avail``).
NVML_CHECK_ENV = "PYTORCH_NVML_BASED_CUDA_CHECK"
#: CUresult of ``cuDeviceGetCount`` before any ``cuInit`` in the process.
CUDA_ERROR_NOT_INITIALIZED = 3


def cuda_driver_state(maps: str = "/proc/self/maps") -> str:
    """The CUDA driver in this process: ``"absent"`` (``libcuda`` not mapped: nothing can
    have initialised it), ``"loaded"`` (mapped, ``cuInit`` never called: a forked child can
    still use the GPU), ``"initialised"`` (``cuDeviceGetCount`` answered: a forked child
    cannot), ``"initialised (CUresult N)"`` for another answer, or ``"unknown: …"`` when it
    cannot be asked (no ``/proc``, the library not loadable without loading anything new).

    Asking initialises nothing: ``cuDeviceGetCount`` returns ``CUDA_ERROR_NOT_INITIALIZED``
    until ``cuInit`` ran (CUDA driver API, "Initialization"; vLLM's fork check uses the
    same question). ``RTLD_NOLOAD`` only finds the library already mapped."""
    import ctypes

    try:
        with open(maps, encoding="utf-8", errors="replace") as lines:
            path = next((ln.split()[-1] for ln in lines if "libcuda.so" in ln), None)
    except OSError as exc:
        return f"unknown: {exc.strerror or exc}"
    if path is None:
        return "absent"
    try:
        lib = ctypes.CDLL(path, mode=os.RTLD_NOLOAD | os.RTLD_LAZY)
        count = ctypes.c_int(0)
        rc = int(lib.cuDeviceGetCount(ctypes.byref(count)))
    except (OSError, AttributeError) as exc:
        return f"unknown: {exc}"
    if rc == CUDA_ERROR_NOT_INITIALIZED:
        return "loaded"
    return "initialised" if rc == 0 else f"initialised (CUresult {rc})"


def _leave() -> None:
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(0)


def _warm(cell_pid: int, sys_path: list[str]) -> None:
    from engine.processes import die_with_parent

    die_with_parent(cell_pid)()  # exits at once when the cell is already gone
    atexit.register(_leave)
    from engine import stacks

    stacks.install("mp-parent")  # a hung cell's dumps include it (workers register anew)
    sys.path[:0] = [p for p in sys_path if p not in sys.path]
    t0 = time.perf_counter()
    driver: dict[str, str] = {}  # import step -> the driver's state after it
    STATE["cuda_driver_steps"] = driver
    had_check = os.environ.get(NVML_CHECK_ENV)
    os.environ[NVML_CHECK_ENV] = "1"
    try:
        import torch  # noqa: F401 - the parent's purpose

        driver["torch"] = cuda_driver_state()
        import torch._dynamo  # noqa: F401 - the ~2 s torch.optim would pay on first use

        driver["torch._dynamo"] = cuda_driver_state()
        for name in WORKER_MODULES:
            importlib.import_module(name)
        driver["engine"] = cuda_driver_state()
        from engine.plugins import load_plugins

        STATE["plugins"] = load_plugins()
        driver["plugins"] = cuda_driver_state()
    except BaseException as exc:  # noqa: BLE001 - the probe reports it; the server must live
        STATE["error"] = f"{type(exc).__name__}: {exc}"
    finally:  # the workers forked from here run with the cell's own environment
        if had_check is None:
            os.environ.pop(NVML_CHECK_ENV, None)
        else:
            os.environ[NVML_CHECK_ENV] = had_check
    STATE["cuda_driver"] = cuda_driver_state()
    STATE["nvml_check_env"] = os.environ.get(NVML_CHECK_ENV)  # what the workers inherit
    STATE["preload_s"] = time.perf_counter() - t0
    torch_mod = sys.modules.get("torch")
    STATE["cuda_initialized"] = bool(torch_mod is not None
                                     and torch_mod.cuda.is_initialized())


_config = os.environ.pop(PARENT_ENV, None)  # popped: the workers forked from here never see it
if _config:
    _doc = json.loads(_config)
    _warm(int(_doc["pid"]), list(_doc.get("sys_path") or []))
