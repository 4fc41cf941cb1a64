"""The profile probe: ``python -m engine.cell.profile_probe SPEC.json OUT.json``, a fresh
process per profile key (started by :mod:`engine.profile.collect`). It lives beside the
cell because it is one: the torch side, importing the executors and the training loop.

The parent imports torch, the engine and the plugins and loads the dataset on the host,
exactly as a cell does before its group window (``engine.cell.main``), and records its own
RSS (``parent_rss_mb``: what a pre-warmed parent costs). It never touches the device. Then,
one after another, it forks one child per stack size K (``ks``, default 1, 2, 4); each
child trains K copies of the job (seeds ``seed + i``) through the real stacked path
(``engine.executors.unified.UnifiedExecutor``, one epoch, or ``max_steps`` steps when the
spec sets it) and reports:

* its peak RSS (``VmHWM``: a forked child's high-water mark starts at its RSS at the fork;
  the parent's file-backed pages the child has not mapped yet are added, so it is the peak
  of a process that holds everything the parent loaded, as a cell does), split where Linux
  allows it (``/proc/self/clear_refs``) into the peak **before training** (models built,
  verification's float64 probe step, the stack) and the peak **during training** — two
  lines in K, not one: at mlp hidden 4096 the set-up peak (verification) dominates up to
  K ≈ 8 and the training peak beyond, so one line through K = 2, 4, 8 under-predicted
  K = 32 by 26 %; and, for K = 1,
  its peak private memory (``/proc/self/smaps_rollup``: what another forked worker really
  adds, the mp forkserver form);
* on CUDA: the device memory of its CUDA context (NVML's used memory right after the
  context exists, minus before), of one dataset copy (``torch.cuda.memory_allocated``
  after the copy) and ``torch.cuda.max_memory_reserved`` / ``max_memory_allocated``;
* the median step time after ``warmup`` steps (a device sync around each step).

It measures inside the training loop through the executor's step hook (a
:class:`ProbeObserver` as ``CellContext.step_observer``,
:mod:`engine.executors.step_observer`): each bucket step timed, the set-up peak read where
training starts. Nothing of the executor is patched.

A last child imports ray (when installed) and reports the RSS it added: what an actor
process carries over a plain worker. Children run one at a time, so no two measurements
share the machine's memory. A child that dies (the kernel's OOM killer, a crash) leaves
that K out with its exit status; K = 1 failing fails the probe.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from engine.executors.step_observer import StepObserver


def _status_kib(field: str) -> float | None:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return float(line.split()[1])
    except OSError:
        return None
    return None


def _reset_peak() -> bool:
    """Reset this process's peak RSS (``VmHWM``) to its current RSS: writing 5 to
    ``/proc/self/clear_refs`` (Linux >= 4.0). False where that is not possible."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def _private_mib() -> float | None:
    """Private (unshared) resident memory of this process, MiB (smaps_rollup)."""
    try:
        total = 0.0
        for line in Path("/proc/self/smaps_rollup").read_text().splitlines():
            if line.startswith(("Private_Clean:", "Private_Dirty:")):
                total += float(line.split()[1])
        return total / 1024
    except OSError:
        return None


def _nvml_used_mib(uuid: str | None) -> float | None:
    if not uuid:
        return None
    try:
        import pynvml

        pynvml.nvmlInit()
        try:
            handle = pynvml.nvmlDeviceGetHandleByUUID(uuid)
            return pynvml.nvmlDeviceGetMemoryInfo(handle).used / 2**20
        finally:
            pynvml.nvmlShutdown()
    except Exception:  # NVML absent or refusing: the context figure stays empty
        return None


class _Enough(BaseException):
    """Raised by the probe's observer after ``max_steps`` steps: the measurement has what it needs
    (the peak is reached within the first steps: parameters, gradients, optimizer state
    and activations all exist after one). A BaseException, so that no per-member failure
    handling of the executor takes it for a job's error."""


class ProbeObserver(StepObserver):
    """What the probe measures inside the executor's training loop, through its step hook
    (``CellContext.step_observer``, :mod:`engine.executors.step_observer`).

    * ``times``: each step's wall time, seconds, the device drained before and after (on
      CUDA) so that it is the step's own;
    * ``private``: for K = 1, the private memory (MiB) after every fourth step from the
      first (the peak of a forked worker's own pages);
    * ``setup_hwm_kib`` / ``setup_reset``: the set-up peak (``VmHWM``, KiB; builds,
      verification, the stack), read where the first chunk's training starts, and whether
      the high-water mark could then be restarted for the training peak.

    After ``max_steps`` steps (when set), :class:`_Enough` ends the training."""

    def __init__(self, device: Any, *, k: int, max_steps: int | None) -> None:
        import torch

        self.device = device
        # The drain, looked up once: nothing but the step and the sync in the window.
        self._sync = torch.cuda.synchronize if device.type == "cuda" else None
        self.k = k
        self.max_steps = max_steps
        self.times: list[float] = []
        self.private: list[float] = []
        self.setup_hwm_kib: float | None = None
        self.setup_reset = False
        self._started = False
        self._t0 = 0.0

    def training_starts(self) -> None:
        # The set-up peak (builds, verification, the stack) ends where training starts:
        # read it there, then restart the high-water mark for the training peak.
        if self._started:
            return
        self._started = True
        self.setup_hwm_kib = _status_kib("VmHWM")
        self.setup_reset = _reset_peak()

    def step_starts(self) -> None:
        if self._sync is not None:
            self._sync(self.device)
        self._t0 = time.perf_counter()

    def step_ends(self) -> None:
        if self._sync is not None:
            self._sync(self.device)
        self.times.append(time.perf_counter() - self._t0)
        if self.max_steps and len(self.times) >= self.max_steps:
            raise _Enough
        if self.k == 1 and len(self.times) % 4 == 1:
            p = _private_mib()
            if p is not None:
                self.private.append(p)


def _measure_k(spec: dict[str, Any], host_data: Any, k: int) -> dict[str, Any]:
    """In a forked child: train a K-stack for one epoch; return the figures."""
    import torch

    from engine.define.workloads import JobSpec
    from engine.executors.base import CellContext
    from engine.executors.unified.executor import UnifiedExecutor
    from engine.train.data import to_device
    from engine.train.loop import TrainSettings

    # A forked child maps the parent's file-backed pages lazily (its RSS at the fork is
    # below the parent's): what it lacks is added to its peak, so that RSS(K) is that of a
    # process holding everything the parent loaded, as a fresh cell would.
    unmapped = max(float(spec["parent_rss_mb"]) - (_status_kib("VmRSS") or 0) / 1024, 0.0)
    device = torch.device(spec["device"])
    cuda = device.type == "cuda"
    out: dict[str, Any] = {"k": k, "unmapped_mb": unmapped}
    if cuda:
        before = _nvml_used_mib(spec.get("gpu_uuid"))
        torch.cuda.init()
        torch.empty(0, device=device)
        torch.cuda.synchronize(device)
        after = _nvml_used_mib(spec.get("gpu_uuid"))
        out["context_mb"] = (after - before) if before is not None and after is not None else None
    data = to_device(host_data, device)
    if cuda:
        torch.cuda.synchronize(device)
        out["dataset_mb"] = torch.cuda.memory_allocated(device) / 2**20
        torch.cuda.reset_peak_memory_stats(device)
    base = dict(spec["job"])
    jobs = [JobSpec.from_dict({**base, "job_id": f"profile-{i}", "index": i,
                               "seed": int(base["seed"]) + i, "epochs": 1,
                               "validate_every_epoch": False}) for i in range(k)]
    observer = ProbeObserver(device, k=k, max_steps=int(spec["max_steps"])
                             if spec.get("max_steps") else None)
    settings = TrainSettings(device=device, compile_mode=spec.get("compile_mode", "off"),
                             amp_allowed=cuda)
    ctx = CellContext(settings=settings, datasets=lambda name: data,
                      emit=lambda type, **f: None, threads=int(spec["threads"]),
                      options={}, seed=int(base["seed"]), step_observer=observer)
    try:
        results = UnifiedExecutor().run(jobs, ctx)
    except _Enough:
        results = []
    failed = [r for r in results if r.status != "ok"]
    if failed:
        raise RuntimeError(f"{failed[0].job.job_id}: {failed[0].error}")
    times, private = observer.times, observer.private
    p = _private_mib()
    if p is not None:
        private.append(p)
    warm = times[int(spec.get("warmup", 3)):] or times
    hwm = _status_kib("VmHWM")
    setup_hwm = observer.setup_hwm_kib
    if observer.setup_reset and setup_hwm and hwm:
        out.update(rss_setup_mb=setup_hwm / 1024 + unmapped, rss_train_mb=hwm / 1024 + unmapped)
        hwm = max(hwm, setup_hwm)
    out.update(rss_mb=hwm / 1024 + unmapped if hwm else None,
               step_ms=statistics.median(warm) * 1000 if warm else None, steps=len(warm),
               private_mb=max(private) if private else None)
    if cuda:
        out.update(reserved_mb=torch.cuda.max_memory_reserved(device) / 2**20,
                   allocated_mb=torch.cuda.max_memory_allocated(device) / 2**20)
    return out


def _measure_ray() -> dict[str, Any]:
    before = _status_kib("VmRSS")
    try:
        import ray  # noqa: F401
    except ImportError:
        return {"ray_import_mb": None}
    after = _status_kib("VmRSS")
    return {"ray_import_mb": (after - before) / 1024 if before and after else None}


def _in_child(fn, *args) -> dict[str, Any]:
    """Run ``fn(*args)`` in a forked child; its JSON result, or ``{"error": ...}``."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns
        os.close(r)
        try:
            doc = fn(*args)
        except BaseException as exc:  # reported to the parent, which decides
            doc = {"error": f"{type(exc).__name__}: {exc}"}
        with os.fdopen(w, "w") as pipe:
            pipe.write(json.dumps(doc))
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)
    os.close(w)
    with os.fdopen(r) as pipe:
        text = pipe.read()
    _, status = os.waitpid(pid, 0)
    if text:
        return json.loads(text)
    if os.WIFSIGNALED(status):
        return {"error": f"killed by signal {os.WTERMSIG(status)} (the OOM killer?)"}
    return {"error": f"exited with status {os.waitstatus_to_exitcode(status)}"}


def slope(points: dict[int, float]) -> float | None:
    """Least-squares slope of value over K (MiB per member); None with < 2 points."""
    line = fit(points)
    return None if line is None else line[1]


def fit(points: dict[int, float]) -> tuple[float, float] | None:
    """Least-squares line ``value = base + per_member x K``: ``(base, per_member)``, None
    with fewer than two distinct K."""
    if len(points) < 2:
        return None
    ks, vs = list(points), list(points.values())
    mk, mv = statistics.fmean(ks), statistics.fmean(vs)
    den = sum((k - mk) ** 2 for k in ks)
    if not den:
        return None
    b = sum((k - mk) * (v - mv) for k, v in zip(ks, vs, strict=True)) / den
    return mv - b * mk, b


def stacked(points: dict[int, float]) -> dict[int, float]:
    """The points of the stacked path: K >= 2. A bucket of one member trains as a plain
    model (route ``eager``: no vmap, no functional copies), so K = 1 is not on the stacked
    line: measured, the first stacked member costs about twice what each later one does."""
    return {k: v for k, v in points.items() if k >= 2}


def memory_lines(per_k: dict[int, dict[str, Any]]) -> dict[str, Any]:
    """The stacked path's RSS lines from the children's figures (profile columns).

    With every stacked K split into its set-up and training peaks: the training line is
    ``rss_stack_base_mb`` + K x ``rss_per_member_mb`` and the set-up line
    ``rss_setup_base_mb`` + K x ``rss_setup_per_member_mb`` (the prediction is the higher
    of the two); otherwise one line through the whole peaks, the set-up columns empty."""
    def js(d: dict[int, float]) -> str:
        return json.dumps({str(k): round(v, 1) for k, v in d.items()}) if d else ""

    rss = {k: d["rss_mb"] for k, d in per_k.items() if d.get("rss_mb") is not None}
    setup = {k: d["rss_setup_mb"] for k, d in per_k.items() if d.get("rss_setup_mb")}
    train = {k: d["rss_train_mb"] for k, d in per_k.items() if d.get("rss_train_mb")}
    split = set(stacked(setup)) == set(stacked(train)) == set(stacked(rss))
    train_line = fit(stacked(train)) if split else None
    setup_line = fit(stacked(setup)) if split else None
    if train_line is None or setup_line is None:
        line = fit(stacked(rss))
        return {"rss_per_member_mb": line[1] if line else None,
                "rss_stack_base_mb": line[0] if line else None,
                "rss_setup_mb": js(setup), "rss_train_mb": js(train),
                "rss_setup_base_mb": None, "rss_setup_per_member_mb": None}
    return {"rss_per_member_mb": train_line[1], "rss_stack_base_mb": train_line[0],
            "rss_setup_mb": js(setup), "rss_train_mb": js(train),
            "rss_setup_base_mb": setup_line[0], "rss_setup_per_member_mb": setup_line[1]}


def _note(spec: dict[str, Any], **fields: Any) -> None:
    """One JSON line in the spec's ``progress`` file (absent: nothing): the parent reads it
    while it waits, for ``profile``'s progress line (the imports and data loaded, each K
    started and ended). A failed write is not the probe's failure."""
    path = spec.get("progress")
    if not path:
        return
    try:
        with open(path, "a") as out:
            out.write(json.dumps({"t": time.time(), **fields}) + "\n")
    except OSError:
        pass


def probe(spec: dict[str, Any]) -> dict[str, Any]:
    """Measure one profile key (see the module docstring); the figures as a dict of the
    profiles file's columns (``engine.profile.store.COLUMNS``)."""
    t0 = time.perf_counter()
    load = os.getloadavg()[0]
    import torch

    from engine.parts import datasets as dataset_lib
    from engine.plugins import load_builtins, load_plugins
    from engine.train.backend import apply_backend_flags

    load_builtins()
    load_plugins()
    torch.set_num_threads(int(spec["threads"]))
    apply_backend_flags()
    host_data = dataset_lib.load_dataset(spec["job"]["dataset"])
    parent_rss = (_status_kib("VmRSS") or 0) / 1024 or None
    spec = {**spec, "parent_rss_mb": parent_rss or 0.0}
    per_k: dict[int, dict[str, Any]] = {}
    errors = []
    _note(spec, phase="loaded")
    for k in spec["ks"]:
        _note(spec, k=k, phase="start")
        doc = _in_child(_measure_k, spec, host_data, k)
        _note(spec, k=k, phase="end", ok="error" not in doc)
        if "error" in doc:
            errors.append(f"K={k}: {doc['error']}")
            if k == min(spec["ks"]):
                raise RuntimeError(f"the profile run failed at {errors[-1]}")
            continue
        per_k[k] = doc
    ray_doc = _in_child(_measure_ray) if spec.get("ray", True) else {"ray_import_mb": None}
    rss = {k: d["rss_mb"] for k, d in per_k.items() if d.get("rss_mb") is not None}
    reserved = {k: d["reserved_mb"] for k, d in per_k.items() if d.get("reserved_mb") is not None}
    allocated = {k: d["allocated_mb"] for k, d in per_k.items()
                 if d.get("allocated_mb") is not None}
    first = per_k[min(per_k)]

    def js(d: dict[int, float]) -> str:
        return json.dumps({str(k): round(v, 1) for k, v in d.items()}) if d else ""

    dev_line = fit(stacked(reserved))
    lines = memory_lines(per_k)
    return {
        "threads": spec["threads"], "ks": ",".join(str(k) for k in per_k),
        "rss_mb": js(rss), "rss1_mb": first.get("rss_mb"), **lines,
        "device_stack_base_mb": dev_line[0] if dev_line else None,
        "parent_rss_mb": parent_rss,
        "private1_mb": first.get("private_mb"),
        "ray_import_mb": ray_doc.get("ray_import_mb"),
        "device_context_mb": first.get("context_mb"),
        "device_dataset_mb": first.get("dataset_mb"),
        "device_reserved_mb": js(reserved), "device_allocated_mb": js(allocated),
        "device_per_member_mb": dev_line[1] if dev_line else None,
        "step_time_ms": first.get("step_ms"),
        "step_time_ms_by_k": json.dumps({str(k): round(d["step_ms"], 3) for k, d in
                                         per_k.items() if d.get("step_ms") is not None}),
        "steps": first.get("steps"), "load_avg": round(load, 2),
        "load_avg_end": round(os.getloadavg()[0], 2), "cpu_cores": os.cpu_count(),
        "probe_s": round(time.perf_counter() - t0, 2), "errors": errors,
    }


def main(argv: list[str]) -> int:
    spec = json.loads(Path(argv[0]).read_text())
    try:
        doc = probe(spec)
    except Exception as exc:
        doc = {"error": f"{type(exc).__name__}: {exc}"}
    Path(argv[1]).write_text(json.dumps(doc))
    return 0 if "error" not in doc else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
