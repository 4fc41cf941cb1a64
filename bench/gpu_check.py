"""The GPU check: what only a real GPU can show, in one prepared run of at most 4 minutes.

    bash bench/gpu_check.sh                  # the default parts (their budgets: <= 240 s)
    bash bench/gpu_check.sh energy mps       # only these parts ("all": every part)
    bash bench/gpu_check.sh --rerun gpu_check_summary.txt   # only what failed there
    bash bench/gpu_check.sh --dry-run        # no GPU touched: every part SKIPs, saying why
    bash bench/gpu_check.sh --list           # the parts, budgets and needs

It runs from a checkout with no install, on a machine that has only Python, torch with
torchvision, nvidia-ml-py, psutil, filelock, pandas, pyarrow, numpy, scikit-learn and rich
(``GPU_MACHINE_PACKAGES``; CI runs the dry run in an environment that holds only those,
``bench/gpu_env.py``). A part that needs more (Ray) says SKIP with the reason.

Everything it writes goes into one archive, ``<out>/gpu_check.tar.gz``, plus one short
summary, ``<out>/gpu_check_summary.txt`` (each part PASS / FAIL / SKIP with its time, its
budget, its numbers or its reason; rewritten after every part, so it comes back even if the
run is cut short). ``<out>`` is ``--out``, else ``$OUT``, else ``./gpu_check_out``.

Each part runs in a process of its own (a fresh CUDA context; a crash or a hang costs only
that part), stopped when it outlives its declared budget. The dry run imports everything a
part imports, plans its campaigns (and runs a miniature of them on the CPU where the part
says so) and collects its tests; then the part SKIPs.

Adding a part (a feature issue that needs a GPU to be verified): one decorated function
below, in order of the run::

    @part("my_part", budget_s=30, needs=("pynvml", "torch"), default=False)
    def my_part(run: PartRun) -> tuple[str, dict]:
        \"\"\"One line: what it shows.\"\"\"
        import torch                       # imports first: the dry run checks them
        camp = run.campaign("gpu_mine", 'experiments = ["G_k8"]\\nexecutors = ["seq"]\\n')
        run.gpu()                          # dry run, or no GPU: SKIP here
        rows = camp.run()
        return "one line with the numbers", {"rows": rows}

or, for a file of GPU tests (test_* functions; ``tmp_path`` is the only fixture; no pytest
import: ``unittest.SkipTest`` skips), ``gpu_tests("tests/gpu/test_gpu_mine.py", budget_s=30)``.
A default part counts towards ``DEFAULT_BUDGET_S`` (tests/unit/bench/test_gpu_check.py checks the
sum); a longer one is ``default=False`` and runs when named.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.metadata
import importlib.util
import inspect
import io
import json
import os
import platform
import re
import shutil
import signal
import socket
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
import traceback
import unittest
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent

#: What a lent GPU machine has (besides Python 3.12 and the standard library): all the
#: check may rely on. CI's minimal environment holds these and their own requirements.
GPU_MACHINE_PACKAGES = ("torch", "torchvision", "nvidia-ml-py", "psutil", "filelock",
                        "pandas", "pyarrow", "numpy", "scikit-learn", "rich")
#: The modules those distributions provide (what a part's ``needs`` name).
GPU_MACHINE_MODULES = ("torch", "torchvision", "pynvml", "psutil", "filelock", "pandas",
                       "pyarrow", "numpy", "sklearn", "rich")
#: The default parts' budgets add up to at most this (a lent machine's call is short).
DEFAULT_BUDGET_S = 240
ARCHIVE = "gpu_check.tar.gz"
SUMMARY = "gpu_check_summary.txt"
#: Grace after SIGTERM before a part over budget is killed.
STOP_GRACE_S = 5.0
#: Files above this are cut to their head and tail in the archive (it must stay < 16 MiB).
FILE_CAP = 2 * 2**20
ARCHIVE_RAW_CAP = 48 * 2**20


class Skip(Exception):
    """A part that cannot run here (the message says why)."""


class Failed(Exception):
    """A part that ran and found a failure; ``numbers`` go into its result."""

    def __init__(self, detail: str, numbers: dict[str, Any] | None = None):
        super().__init__(detail)
        self.numbers = numbers or {}


# --------------------------------------------------------------------------- engine touchpoints
# Every use of the engine by the check is in this block (module paths move; edit them here).

RUNNER_MODULE = "engine.runner"


def _resolve_gpu() -> dict[str, Any] | None:
    from engine.measure.nvml import resolve_gpu

    return resolve_gpu("cuda", os.environ)


def _open_gpu(uuid: str):
    from engine.measure.nvml import open_gpu

    return open_gpu(uuid)


def _energy_over(samples: list[dict[str, Any]], t0: float, t1: float):
    from engine.measure.energy import energy_over

    return energy_over(samples, t0, t1)


def _read_rows(path: Path) -> list[dict[str, str]]:
    from engine.results.read import read_rows

    return read_rows(path)


def _plan(path: Path) -> list[tuple[int, str, str, str | None]]:
    """The cells of a campaign file as the runner plans them, planned for the CPU so that no
    GPU is needed: (index, experiment, executor, why it would be skipped)."""
    from engine.define.campaign import load_campaign
    from engine.plugins import load_plugins
    from engine.runner.supervisor import Runner

    load_plugins()  # this part's process is an entry: register the names a campaign uses
    runner = Runner(load_campaign(str(path), {"device": "cpu"}))
    return [(p.cell.index, p.cell.exp_id, p.cell.executor, p.skip) for p in runner.plan()]


def _individual_rows(runs_dir: Path) -> list[dict[str, str]]:
    """A runs folder's job rows."""
    from engine.results.columns import INDIVIDUAL_FILE

    return _read_rows(runs_dir / INDIVIDUAL_FILE)


def _stream_executors() -> tuple[list[str], dict[str, str]]:
    """The executors that serve arrival streams (``serves_streams``, discovered as
    ``bench.streams`` discovers them) and load here, and those that do not load, with why
    (ray on a lent machine)."""
    from bench.streams import stream_executors
    from engine.plugins import load_plugins
    from engine.registry import EXECUTORS

    load_plugins()
    here, left_out = [], {}
    for name in stream_executors():
        try:
            EXECUTORS.get(name).load()
        except ImportError as exc:
            left_out[name] = f"{type(exc).__name__}: {exc}"
        else:
            here.append(name)
    return here, left_out


def _capacity_of(jobs: list[dict[str, str]], warmup: int) -> float:
    from bench.streams import capacity_of

    return capacity_of(jobs, warmup)


def _capacity_trace(templates: list[str], warmup: list[str]) -> str:
    from bench.streams import capacity_trace

    return capacity_trace(templates, warmup)


def _nvml_devices() -> list[dict[str, Any]]:
    try:
        from engine.measure.provenance import nvml_devices

        return nvml_devices()
    except Exception:  # the header must not fail the run
        return []


# --------------------------------------------------------------------------- parts

@dataclass(frozen=True)
class Part:
    name: str
    budget_s: int
    fn: Callable[[PartRun], tuple[str, dict[str, Any]]]
    #: Importable modules the part needs; a missing one: SKIP, nothing started.
    needs: tuple[str, ...] = ()
    #: In the default run (its budget counts towards DEFAULT_BUDGET_S), else run when named.
    default: bool = True
    about: str = ""


PARTS: dict[str, Part] = {}


def part(name: str, budget_s: int, needs: tuple[str, ...] = (), default: bool = True):
    """Register the decorated function as the part ``name`` (run in registration order)."""
    def register(fn):
        if name in PARTS:
            raise ValueError(f"part {name!r} registered twice")
        about = (inspect.getdoc(fn) or "").split("\n\n")[0].replace("\n", " ")
        PARTS[name] = Part(name, budget_s, fn, tuple(needs), default, about)
        return fn
    return register


def gpu_tests(path: str, budget_s: int, needs: tuple[str, ...] = ("pynvml", "torch"),
              default: bool = True, name: str | None = None) -> None:
    """Register the GPU test file ``path`` (relative to the checkout) as a part named after
    it: its test functions run in the part's process (PartRun.tests)."""
    def run_file(run: PartRun) -> tuple[str, dict[str, Any]]:
        return run.tests(path)

    run_file.__doc__ = f"the tests in {path}"
    part(name or Path(path).stem, budget_s, needs, default)(run_file)


class PartRun:
    """What a part gets: its folder (archived), the dry-run flag, its budget, and helpers."""

    def __init__(self, spec: Part, folder: Path, dry_run: bool, budget_s: float,
                 deadline: float | None = None):
        self.spec = spec
        self.dir = folder
        self.dry_run = dry_run
        self.budget_s = budget_s
        #: time.time() at which the check stops this part (its start + its budget)
        self.deadline = deadline if deadline is not None else time.time() + budget_s
        self.checked: list[str] = []  # what the part verified before it needed the GPU

    def remaining(self) -> float:
        """Seconds left before the check stops this part."""
        return self.deadline - time.time()

    def note(self, text: str) -> None:
        self.checked.append(text)
        print(f"[{self.spec.name}] {text}", flush=True)

    def gpu(self) -> dict[str, Any]:
        """The device under test, resolved the way the runner does; SKIP in a dry run or
        where NVML sees no GPU (the reason lists what was checked before)."""
        checked = "; ".join(["imports ok", *self.checked])
        if self.dry_run:
            raise Skip(f"dry run, no GPU used; {checked}")
        if not _importable("pynvml"):
            raise Skip(f"pynvml (nvidia-ml-py) not installed; {checked}")
        found = _resolve_gpu()
        if not found:
            raise Skip(f"no GPU here (NVML sees none); {checked}")
        return found

    def campaign(self, name: str, body: str, experiments: dict[str, dict[str, Any]] | None = None,
                 rehearse: bool = True, devices: str | None = None) -> CheckCampaign:
        return CheckCampaign(self, name, body, experiments or EXPERIMENTS, rehearse, devices)

    def tests(self, path: str) -> tuple[str, dict[str, Any]]:
        """Run the ``test_*`` functions of one GPU test file, in file order, pytest-free:
        ``tmp_path`` (a fresh folder, archived) is the only fixture; ``unittest.SkipTest``
        skips; anything else raised fails that test. FAIL if one failed, SKIP if all
        skipped."""
        module = importlib.import_module(path.removesuffix(".py").replace("/", "."))
        found = [(n, f) for n, f in vars(module).items()
                 if n.startswith("test_") and inspect.isfunction(f)
                 and f.__module__ == module.__name__]
        if not found:
            raise RuntimeError(f"{path}: no test_ functions")
        for n, f in found:
            extra = set(inspect.signature(f).parameters) - {"tmp_path"}
            if extra:
                raise RuntimeError(f"{path}::{n} asks for {', '.join(sorted(extra))}: the check "
                                   "provides tmp_path only")
        self.note(f"{_n(len(found), 'test')} collected from {path}")
        self.gpu()
        outcome: dict[str, dict[str, Any]] = {}
        for n, f in found:
            kwargs = {}
            if "tmp_path" in inspect.signature(f).parameters:
                kwargs["tmp_path"] = self.dir / n
                kwargs["tmp_path"].mkdir(parents=True, exist_ok=True)
            t0 = time.monotonic()
            try:
                f(**kwargs)
                verdict, why = "passed", ""
            except unittest.SkipTest as exc:
                verdict, why = "skipped", str(exc)
            except (KeyboardInterrupt, SystemExit):
                raise
            except BaseException as exc:  # noqa: BLE001 - a test's failure is its outcome
                verdict = "skipped" if type(exc).__name__ == "Skipped" else "failed"
                why = f"{type(exc).__name__}: {exc}".strip().splitlines()[0][:300]
                traceback.print_exc()
            outcome[n] = {"outcome": verdict, "seconds": round(time.monotonic() - t0, 1),
                          "reason": why}
            print(f"[{self.spec.name}] {n}: {verdict} ({time.monotonic() - t0:.1f} s) {why}",
                  flush=True)
        counts = {v: sum(o["outcome"] == v for o in outcome.values())
                  for v in ("passed", "failed", "skipped")}
        detail = ", ".join(f"{c} {v}" for v, c in counts.items())
        bad = [f"{n}: {o['reason']}" for n, o in outcome.items() if o["outcome"] != "passed"]
        if bad:
            detail += " — " + "; ".join(bad)
        numbers = {"tests": outcome, **counts}
        if counts["failed"]:
            raise Failed(detail, numbers)
        if not counts["passed"]:
            raise Skip(detail)
        return detail, numbers


# --------------------------------------------------------------------------- campaigns

def _n(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


def _resnet(k: int, **extra: Any) -> dict[str, Any]:
    return {"type": "ensemble", "model": "resnet18", "dataset": "synthetic_cifar10", "k": k,
            "batch_size": 128, "epochs": 1, "lr": 0.01, "optimizer": "sgd",
            "optimizer_kwargs": {"momentum": 0.9}, **extra}


#: The check's experiments (``synthetic_cifar10``: CIFAR-shaped seeded noise, 10 000 + 2 000
#: images, needs no download).
EXPERIMENTS: dict[str, dict[str, Any]] = {
    "G_k8": _resnet(8),
    "G_k32": _resnet(32),
    "G_mp": _resnet(4),
}


def miniature(exp: dict[str, Any]) -> dict[str, Any]:
    """The same experiment shrunk for a CPU rehearsal: an MLP on digits, at most two jobs,
    one epoch."""
    out = {**exp, "model": "mlp", "dataset": "digits", "epochs": 1, "batch_size": 64,
           "lr": 0.05}
    out.pop("model_kwargs", None)
    if "k" in out:
        out["k"] = min(int(out["k"]), 2)
    return out


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{k} = {_toml_value(v)}" for k, v in value.items()) + " }"
    raise TypeError(f"no TOML for {value!r}")


def experiments_toml(experiments: dict[str, dict[str, Any]]) -> str:
    """An experiments file (no tomli-w on the GPU machine)."""
    lines = []
    for exp_id, table in experiments.items():
        lines.append(f"[experiments.{exp_id}]")
        lines += [f"{k} = {_toml_value(v)}" for k, v in table.items()]
    return "\n".join(lines) + "\n"


class CheckCampaign:
    """A campaign of the check: written into the part's folder, planned at once (every cell
    must be runnable), rehearsed on the CPU in a dry run (same ids, executors and options,
    experiments shrunk by ``miniature``) when ``rehearse``, and run for real by ``run()``
    (``python -m engine.runner``, device cuda, one torch thread per cell)."""

    def __init__(self, run: PartRun, name: str, body: str,
                 experiments: dict[str, dict[str, Any]], rehearse: bool,
                 devices: str | None = None):
        #: ``devices`` as TOML (issue 27, e.g. ``"auto"``): the real campaign's devices
        #: instead of ``device = "cuda"`` (planning and rehearsal stay on the CPU).
        self.devices = devices
        self.part, self.name, self.body = run, name, body
        self.dir = run.dir / name
        used = set(re.findall(r"G_\w+", body))
        self.experiments = {k: v for k, v in experiments.items() if k in used} or experiments
        self.path = self._write(self.dir, self.experiments, "cuda")
        cells = _plan(self.path)
        skipped = [f"cell {i} {exp} {executor}: {why}" for i, exp, executor, why in cells if why]
        if skipped:
            raise RuntimeError(f"campaign {name}: " + "; ".join(skipped))
        run.note(f"{name}: {_n(len(cells), 'cell')} planned")
        if run.dry_run and rehearse:
            t0 = time.monotonic()
            mini = self._write(self.dir / "rehearsal",
                               {k: miniature(v) for k, v in self.experiments.items()}, "cpu")
            rows = self._run(mini)
            bad = [f"{r['exp_id']} {r['executor']}: {r['status']} {r.get('error', '')}"
                   for r in rows if r["status"] != "ok"]
            if bad or len(rows) < len(cells):
                raise RuntimeError(f"campaign {name} rehearsed on CPU: {len(rows)} of "
                                   f"{len(cells)} cells wrote a row; " + "; ".join(bad))
            run.note(f"{name} rehearsed on CPU: {_n(len(rows), 'cell')} ok in "
                     f"{time.monotonic() - t0:.0f} s")

    def _write(self, folder: Path, experiments: dict[str, dict[str, Any]], device: str) -> Path:
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "exps.toml").write_text(experiments_toml(experiments))
        path = folder / "campaign.toml"
        where = (f"devices = {self.devices}" if self.devices and device == "cuda"
                 else f'device = "{device}"')
        path.write_text(f'name = "{self.name}"\n{where}\nthreads = 1\n'
                        f'runs_dir = {json.dumps(str(folder / "runs"))}\n'
                        f'experiments_file = "exps.toml"\n{self.body}')
        return path

    def _run(self, path: Path) -> list[dict[str, str]]:
        """The runner on ``path`` until it ends, or until shortly before the part's deadline:
        then SIGTERM (it stops the running cell and records it as killed), SIGKILL later."""
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
        log = path.parent / "runner.log"
        with open(log, "w") as out:
            proc = subprocess.Popen([sys.executable, "-m", RUNNER_MODULE, str(path)], env=env,
                                    stdin=subprocess.DEVNULL, stdout=out,
                                    stderr=subprocess.STDOUT)
            try:
                code = proc.wait(timeout=max(self.part.remaining() - STOP_GRACE_S - 3, 1))
            except subprocess.TimeoutExpired:
                code = None
                proc.terminate()
                try:
                    proc.wait(timeout=STOP_GRACE_S)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
        rows = [r for r in _read_rows(path.parent / "runs" / "master_groups.csv")
                if r["campaign_id"] == self.name]
        if code is None:
            raise Failed(f"campaign {self.name} stopped at the part's budget after "
                         f"{len(rows)} cells", {"rows": [_keep(r) for r in rows]})
        if code not in (0, 1):
            tail = log.read_text(errors="replace").strip().splitlines()[-1:] or [""]
            raise RuntimeError(f"campaign {self.name} exited {code}: {tail[0][:300]}")
        return rows

    def run(self) -> list[dict[str, str]]:
        return self._run(self.path)


_KEEP = ("exp_id", "executor", "status", "error", "T_group", "throughput_group",
         "energy_group", "energy_method", "gpu_util_mean", "vram_peak_mb", "gpu_uuid",
         "features", "features_requested", "features_reason", "rung", "compile_mode",
         "mps_used", "mps_thread_pct", "gpu_compute_mode", "executor_info", "monitor_cpu_share",
         "precision", "precision_requested", "precision_reason", "amp_skipped_steps",
         "backend_flags", "torch_peak_allocated_mb")


def _keep(row: dict[str, str]) -> dict[str, str | None]:
    return {k: row.get(k) for k in _KEEP}


def _f(value: str | None) -> float | None:
    try:
        return float(value) if value not in (None, "") else None
    except ValueError:
        return None


def _compare(rows: list[dict[str, str]], exps: list[str]) -> tuple[str, dict[str, Any]]:
    by = {(r["exp_id"], r["executor"]): r for r in rows}
    parts, numbers, bad = [], {"rows": [_keep(r) for r in rows]}, False
    for exp in exps:
        seq, uni = by.get((exp, "seq")), by.get((exp, "unified_model"))
        if seq and uni and seq["status"] == uni["status"] == "ok":
            ts, tu = _f(seq["T_group"]), _f(uni["T_group"])
            speedup = ts / tu if ts and tu else None
            numbers[exp] = {"T_group_seq": ts, "T_group_unified": tu, "speedup": speedup,
                            "energy_seq": _f(seq.get("energy_group")),
                            "energy_unified": _f(uni.get("energy_group"))}
            parts.append(f"{exp}: seq {ts:.1f} s, unified {tu:.1f} s, speedup "
                         f"{speedup:.2f}x" if speedup else f"{exp}: T_group missing")
        else:
            bad = True
            parts.append(f"{exp}: not ok ({[(r['executor'], r['status'], r['error'][:120]) for r in rows if r['exp_id'] == exp]})")
    if bad:
        raise Failed("; ".join(parts), numbers)
    return "; ".join(parts), numbers


# --------------------------------------------------------------------------- the parts

@part("nvml_probe", budget_s=15, needs=("pynvml",))
def nvml_probe(run: PartRun) -> tuple[str, dict[str, Any]]:
    """Every NVML device (name, UUID, driver, compute mode, memory, power limit) and its
    capability map (each monitor metric: supported, or NVML's reason); the device under
    test resolved as the runner resolves it."""
    import pynvml

    under_test = run.gpu()
    pynvml.nvmlInit()
    devices = []
    for i in range(pynvml.nvmlDeviceGetCount()):
        uuid = pynvml.nvmlDeviceGetUUID(pynvml.nvmlDeviceGetHandleByIndex(i))
        uuid = uuid.decode() if isinstance(uuid, bytes) else uuid
        gpu = _open_gpu(uuid)
        devices.append({"index": i, **gpu.facts, "supported": gpu.supported,
                        "missing": gpu.missing})
    first = devices[0] if devices else {}
    return (f"{len(devices)} device(s); under test {under_test['uuid']} "
            f"({first.get('gpu_name')}, {first.get('gpu_compute_mode')}); supported "
            f"{first.get('supported')}; missing {first.get('missing') or 'none'}"), {
                "devices": devices, "under_test": under_test,
                "CUDA_VISIBLE_DEVICES": os.environ.get("CUDA_VISIBLE_DEVICES")}


@part("energy", budget_s=35, needs=("pynvml", "torch"))
def energy(run: PartRun, seconds: float = 15.0) -> tuple[str, dict[str, Any]]:
    """About 15 s of matmul load on the device under test while NVML is read every 0.1 s:
    energy over the same window from the total-energy counter and from the integral of
    sampled power (the monitor's own functions), and their ratio."""
    import torch

    gpu = _open_gpu(run.gpu()["uuid"])
    samples: list[dict[str, Any]] = []
    stop = threading.Event()

    def sampler() -> None:  # ctypes releases the GIL during each NVML call
        while not stop.is_set():
            values, _ = gpu.read()
            samples.append({"t": time.monotonic(), **values})
            stop.wait(0.1)

    thread = threading.Thread(target=sampler, daemon=True)
    thread.start()
    a = torch.randn(4096, 4096, device="cuda")
    torch.cuda.synchronize()
    time.sleep(1.0)
    t0 = time.monotonic()
    while time.monotonic() - t0 < seconds:
        for _ in range(20):
            a = torch.tanh(a @ a * 1e-3)
        torch.cuda.synchronize()
    t1 = time.monotonic()
    time.sleep(1.0)
    stop.set()
    thread.join()
    counter, method = _energy_over(samples, t0, t1)
    power_only = [{k: v for k, v in s.items() if k != "energy_mj"} for s in samples]
    integral, method2 = _energy_over(power_only, t0, t1)
    ratio = integral / counter if counter and integral else None
    numbers = {"window_s": t1 - t0, "samples": len(samples), "counter_j": counter,
               "counter_method": method, "integral_j": integral, "integral_method": method2,
               "ratio_integral_to_counter": ratio,
               "mean_power_w": integral / (t1 - t0) if integral else None,
               "power_w": [s.get("power_w") for s in samples]}
    if counter is None:
        return (f"no energy counter on this device; power integral {integral} J "
                f"({method2})"), numbers
    return (f"counter {counter:.1f} J vs power integral {integral:.1f} J over {t1 - t0:.1f} s "
            f"(ratio {ratio:.3f}, mean {numbers['mean_power_w']:.0f} W)"), numbers


gpu_tests("tests/gpu/test_gpu_cells.py", budget_s=50,
          needs=("pynvml", "torch", "psutil", "filelock"))
gpu_tests("tests/gpu/test_gpu_stacked_streams.py", budget_s=25)


@part("seq_vs_unified", budget_s=75, needs=("pynvml", "torch", "psutil", "filelock"))
def seq_vs_unified(run: PartRun) -> tuple[str, dict[str, Any]]:
    """A real campaign: resnet18 ensemble of K = 8 on synthetic_cifar10, one epoch, under
    seq and unified_model: T_group, throughput, the speedup, the GPU columns, the plan."""
    camp = run.campaign("gpu_seq_unified",
                        'experiments = ["G_k8"]\nexecutors = ["seq", "unified_model"]\n')
    run.gpu()
    return _compare(camp.run(), ["G_k8"])


def mps_processes_left(psutil: Any, wait_s: float = 5.0) -> list[int]:
    """Pids of MPS control/server processes still running after ``wait_s`` s. A zombie is
    not running: the daemon double-forks, so its exit status belongs to the machine's
    init, and on the lent machine (a Firecracker VM) nothing reaps it — the first GPU run
    counted such a zombie (its log said "Exit with status 0") as a daemon left behind."""
    def running() -> list[int]:
        pids = []
        for proc in psutil.process_iter(["name", "status"]):
            if (proc.info.get("name") or "").startswith("nvidia-cuda-mps") \
                    and proc.info.get("status") != psutil.STATUS_ZOMBIE:
                pids.append(proc.pid)
        return pids

    deadline = time.monotonic() + wait_s
    left = running()
    while left and time.monotonic() < deadline:
        time.sleep(0.1)
        left = running()
    return left


@part("mps", budget_s=40, needs=("pynvml", "torch", "psutil", "filelock"))
def mps(run: PartRun) -> tuple[str, dict[str, Any]]:
    """Only where nvidia-cuda-mps-control exists: an mp campaign (K = 4) through a private
    MPS daemon: mps_used, the thread percentage, and no daemon of ours left afterwards. The
    compute mode is read, never changed."""
    import psutil

    camp = run.campaign("gpu_mps", 'experiments = ["G_mp"]\nexecutors = ["mp"]\n')
    run.gpu()
    control = shutil.which("nvidia-cuda-mps-control") or next(
        (p for p in ("/usr/sbin/nvidia-cuda-mps-control",) if os.path.exists(p)), None)
    if control is None:
        raise Skip("nvidia-cuda-mps-control not found")
    rows = camp.run()
    left = mps_processes_left(psutil)
    row = rows[-1] if rows else {}
    detail = (f"status {row.get('status')}, mps_used {row.get('mps_used')}, thread pct "
              f"{row.get('mps_thread_pct')}, compute mode {row.get('gpu_compute_mode')}, "
              f"T_group {row.get('T_group')}; MPS processes left: {left or 'none'}")
    numbers = {"rows": [_keep(r) for r in rows], "left": left}
    if row.get("status") != "ok" or left:
        raise Failed(detail, numbers)
    return detail, numbers


@part("seq_vs_unified_k32", budget_s=150, needs=("pynvml", "torch", "psutil", "filelock"),
      default=False)
def seq_vs_unified_k32(run: PartRun) -> tuple[str, dict[str, Any]]:
    """seq_vs_unified at K = 32 (the stacked model's case; seq trains 32 resnet18 in turn)."""
    camp = run.campaign("gpu_seq_unified_k32",
                        'experiments = ["G_k32"]\nexecutors = ["seq", "unified_model"]\n')
    run.gpu()
    return _compare(camp.run(), ["G_k32"])


@part("profile_device", budget_s=150, needs=("pynvml", "torch", "psutil", "filelock"),
      default=False)
def profile_device(run: PartRun) -> tuple[str, dict[str, Any]]:
    """``fugue-tui profile``'s device figures checked against a real cell (issue 24): the
    probe measures resnet18 on synthetic_cifar10 (batch 128, fp32, sgd) at K = 1, 2, 4; a
    unified_model cell of K = 8 then runs; the predicted peak reserved device memory at
    K = 8 — the engine's own stacked line (``engine.profile.memory_model.stacked``: the
    probe's intercept + 8 x its slope; the first GPU run showed why not reserved(1) +
    7 x slope: a bucket of one trains unstacked, 676 MiB, where K = 2 stacked reserved
    2444 MiB) — must be within 10 % of the cell's torch_peak_reserved_mb (and the NVML
    view, context included, is reported beside it)."""
    from engine.define.catalogue import load_catalogue
    from engine.define.workloads import expand
    from engine.profile.collect import distinct_keys, run_probe
    from engine.profile.memory_model import stacked
    from engine.profile.store import Profile

    camp = run.campaign("gpu_profile", 'experiments = ["G_k8"]\nexecutors = ["unified_model"]\n',
                        rehearse=False)
    catalogue = load_catalogue(str(camp.dir / "exps.toml"))
    jobs = {"G_k8": [j.to_dict() for j in expand(catalogue.get("G_k8"), 42)]}
    keys = distinct_keys(jobs, "off", "cuda")
    if len(keys) != 1:
        raise RuntimeError(f"G_k8 has {len(keys)} profile keys, expected 1")
    run.note(f"profile key planned: {keys[0][0]}")
    gpu = run.gpu()
    figures = run_probe(keys[0][1], device="cuda", compile_mode="off", threads=1, ks=(1, 2, 4),
                        gpu_uuid=gpu["uuid"], log=run.dir / "probe.log")
    profile = Profile({k: ("" if v is None else str(v)) for k, v in figures.items()})
    reserved = profile.by_k("device_reserved_mb")
    inc = profile.num("device_per_member_mb")
    if 1 not in reserved or inc is None:
        raise Failed("the probe measured no device memory", {"profile": figures})
    predicted = stacked(reserved[1], profile.num("device_stack_base_mb"), max(inc, 0.0), 8)
    rows = camp.run()
    row = rows[-1] if rows else {}
    measured = _f(row.get("torch_peak_reserved_mb"))
    numbers = {"profile": figures, "predicted_reserved_mb_k8": round(predicted, 1),
               "measured_reserved_mb_k8": measured, "vram_peak_mb": _f(row.get("vram_peak_mb")),
               "predicted_with_context_mb": round(predicted + (profile.num(
                   "device_context_mb") or 0.0), 1), "rows": [_keep(r) for r in rows]}
    if row.get("status") != "ok" or not measured:
        raise Failed(f"the K = 8 cell ended {row.get('status')}: {row.get('error')}", numbers)
    error = abs(predicted - measured) / measured
    numbers["error_pct"] = round(100 * error, 1)
    detail = (f"reserved at K = 8: predicted {predicted:.0f} MiB, measured {measured:.0f} MiB "
              f"(error {100 * error:.1f} %, target <= 10 %); context "
              f"{profile.num('device_context_mb')} MiB, dataset "
              f"{profile.num('device_dataset_mb')} MiB, +{inc:.0f} MiB per member; NVML peak "
              f"{row.get('vram_peak_mb')} MiB")
    if error > 0.10:
        raise Failed(detail, numbers)
    return detail, numbers


@part("devices_pinning", budget_s=90, needs=("pynvml", "torch", "psutil", "filelock"),
      default=False)
def devices_pinning(run: PartRun) -> tuple[str, dict[str, Any]]:
    """``devices = "auto"`` on a real host (issue 27): two one-job resnet18 cells on every
    visible device, each pinned by UUID. Each row must name a device NVML lists, the cell's
    torch must have trained on it (its GPU name, torch's allocations, NVML memory use on
    that UUID), and placement must follow the rule (unit i on device i mod n)."""
    from engine.measure.nvml import resolve_gpus

    experiments = {"G_pin_a": _resnet(1), "G_pin_b": _resnet(1)}
    camp = run.campaign("gpu_devices", 'experiments = ["G_pin_a", "G_pin_b"]\n'
                        'executors = ["seq"]\n', experiments, devices='"auto"')
    run.gpu()
    devices = resolve_gpus(("auto",), os.environ)
    rows = camp.run()
    numbers = {"devices": [{k: d.get(k) for k in ("uuid", "name", "entry", "parent_uuid")}
                           for d in devices],
               "rows": [{**_keep(r), "placement": r.get("placement"),
                         "cpu_affinity": r.get("cpu_affinity"), "gpu_name": r.get("gpu_name"),
                         "host_concurrent_cells": r.get("host_concurrent_cells")} for r in rows]}
    by_exp = {r["exp_id"]: r for r in rows}
    bad = []
    for i, exp in enumerate(("G_pin_a", "G_pin_b")):
        row, want = by_exp.get(exp), devices[i % len(devices)]
        if row is None or row["status"] != "ok":
            bad.append(f"{exp}: {row and row['status']} {row and row.get('error')}")
            continue
        if row["gpu_uuid"] != want["uuid"]:
            bad.append(f"{exp} ran on {row['gpu_uuid']}, placed on {want['uuid']}")
        if want.get("name") and row.get("gpu_name") and \
                not str(want["name"]).startswith(row["gpu_name"].split(" MIG")[0]):
            bad.append(f"{exp}: torch saw {row['gpu_name']}, NVML's {want['uuid']} is "
                       f"{want['name']}")
        if not _f(row.get("torch_peak_allocated_mb")) or not _f(row.get("vram_peak_mb")):
            bad.append(f"{exp}: no device memory seen on {row['gpu_uuid']} (torch "
                       f"{row.get('torch_peak_allocated_mb')}, NVML {row.get('vram_peak_mb')})")
    detail = (f"{_n(len(devices), 'device')} ({', '.join(d['uuid'] for d in devices)}): "
              + "; ".join(f"{r['exp_id']} on {r.get('placement') or r['gpu_uuid']}"
                          for r in rows))
    if bad:
        raise Failed(detail + " — " + "; ".join(bad), numbers)
    return detail, numbers


@part("packing", budget_s=90, needs=("pynvml", "torch", "psutil", "filelock"),
      default=False)
def packing(run: PartRun) -> tuple[str, dict[str, Any]]:
    """mp's ``devices`` (issue 27) on every GPU this machine lends (``"auto"``), two jobs at
    once per device, K = 4: each job's worker pinned by UUID (``job_device``, and the
    ``CUDA_VISIBLE_DEVICES`` the worker saw before CUDA started), the group row naming the
    devices, the cell ok within the budget. One lent GPU shows the pinning and the
    per-device bound; the spread over several GPUs needs a host with more."""
    body = 'experiments = ["G_mp"]\nexecutors = ["mp"]\n[options.mp]\nmps = "off"\n'
    # Planned in the dry run without devices: "auto" resolves through NVML, which a
    # machine without a GPU has not.
    run.campaign("gpu_packing_plan", body, rehearse=False)
    gpu = run.gpu()
    camp = run.campaign("gpu_packing", body + 'devices = "auto"\njobs_per_device = 2\n',
                        rehearse=False)
    rows = camp.run()
    row = rows[-1] if rows else {}
    jobs = [r for r in _read_rows(camp.dir / "runs" / "master_individual.csv")
            if r.get("campaign_id") == "gpu_packing"]
    info = json.loads(row.get("executor_info") or "{}")
    pins = {j: w.get("pin") for j, w in (info.get("workers") or {}).items()}
    devices = (row.get("packed_devices") or "").split(",")
    numbers = {"rows": [_keep(r) for r in rows], "packed_devices": devices,
               "jobs_per_device": row.get("jobs_per_device"),
               "job_device": {j["job_id"]: j.get("job_device") for j in jobs}, "pins": pins,
               "max_parallel": row.get("max_parallel")}
    detail = (f"status {row.get('status')}, devices {devices}, max_parallel "
              f"{row.get('max_parallel')} (bound {2 * len(devices)}), T_group "
              f"{row.get('T_group')} s")
    bad = [j["job_id"] for j in jobs if j.get("job_device") not in devices]
    bad += [j for j, p in pins.items()
            if not p or p.get("cuda_initialized") or p.get("visible") not in devices]
    if (row.get("status") != "ok" or gpu["uuid"] not in devices or len(jobs) != 4 or bad
            or int(_f(row.get("max_parallel")) or 0) > 2 * len(devices)):
        raise Failed(f"{detail}; wrong pins: {bad or 'none'}", numbers)
    return detail, numbers


@part("ablation", budget_s=300, needs=("pynvml", "torch", "psutil", "filelock"),
      default=False)
def ablation(run: PartRun) -> tuple[str, dict[str, Any]]:
    """The six rungs of the unified ablation ladder on the K = 8 ensemble (two compile with
    reduce-overhead): each row's effective features (six distinct signatures expected on
    CUDA) and its throughput relative to rung A."""
    camp = run.campaign("gpu_ablation",
                        'experiments = ["G_k8"]\nexecutors = ["unified_model"]\n'
                        'compile_mode = "reduce-overhead"\n'
                        '[options.unified_model]\nsweep = "ablation"\n',
                        rehearse=False)  # compiling on a CPU costs minutes; planned only
    run.gpu()
    rows = camp.run()
    effective = {(r.get("features"), r.get("compile_mode")) for r in rows if r["status"] == "ok"}
    base = next((_f(r["throughput_group"]) for r in rows
                 if r.get("rung") == "A" and r["status"] == "ok"), None)
    rel = {r.get("rung"): (_f(r["throughput_group"]) / base
                           if base and _f(r["throughput_group"]) else None) for r in rows}
    detail = (f"{len(rows)} rungs, {len(effective)} distinct effective signatures; throughput "
              "vs A: " + ", ".join(f"{k} {v:.2f}" for k, v in rel.items() if v))
    numbers = {"rows": [_keep(r) for r in rows], "distinct_effective": len(effective),
               "relative_throughput": rel}
    if len(rows) != 6 or any(r["status"] != "ok" for r in rows):
        raise Failed(detail, numbers)
    return detail, numbers


@part("ray", budget_s=120, needs=("pynvml", "torch", "psutil", "filelock", "ray"),
      default=False)
def ray(run: PartRun) -> tuple[str, dict[str, Any]]:
    """Ray actors on the GPU (K = 4, each with a quarter of it) beside seq. Ray cannot
    travel to a lent GPU machine (its wheel alone is about the size limit), so there this
    part SKIPs and Ray on a GPU stays unverified."""
    camp = run.campaign("gpu_ray", 'experiments = ["G_mp"]\nexecutors = ["seq", "ray"]\n',
                        rehearse=False)
    run.gpu()
    rows = camp.run()
    by = {r["executor"]: r for r in rows}
    detail = ", ".join(f"{e} {r['status']} T_group {r.get('T_group')}" for e, r in by.items())
    numbers = {"rows": [_keep(r) for r in rows]}
    if not rows or any(r["status"] != "ok" for r in rows):
        raise Failed(detail or "no rows", numbers)
    return detail, numbers


#: The streams part: jobs in the stream, the load it is offered at (of seq's capacity).
STREAM_COUNT = 5
STREAM_LOAD = 0.9


@part("streams", budget_s=115, needs=("pynvml", "torch", "psutil", "filelock"),
      default=False)
def streams(run: PartRun) -> tuple[str, dict[str, Any]]:
    """The streams bench part on the GPU (issue 52): seq's capacity on resnet18 jobs
    (G_mp's members, one epoch) served back to back after a one-job warm-up, then a Poisson
    stream of 5 such jobs at 0.9 of that capacity under every executor that serves streams
    and loads here (ray cannot travel to a lent machine: left out, said so): every cell ok,
    no job admitted before its arrival, and per executor JCT p50/p95, throughput and offered
    load. The dry run rehearses the capacity cell on the CPU and plans the stream."""
    executors, left_out = _stream_executors()
    if "seq" not in executors:
        raise RuntimeError(f"seq cannot serve a stream here: {left_out.get('seq')}")
    for name, why in left_out.items():
        run.note(f"{name} left out (does not load here: {why[:120]})")
    exps = {"G_mp": EXPERIMENTS["G_mp"]}
    trace = run.dir / "capacity.csv"
    trace.parent.mkdir(parents=True, exist_ok=True)
    trace.write_text(_capacity_trace(["G_mp"] * STREAM_COUNT, ["G_mp"]))
    capacity_camp = run.campaign(
        "gpu_streams_capacity",
        f'executors = ["seq"]\narrivals = {{ trace = {json.dumps(str(trace))} }}\n', exps)

    def stream_campaign(capacity: float) -> CheckCampaign:
        rate = STREAM_LOAD * capacity
        names = ", ".join(json.dumps(e) for e in executors)
        return run.campaign(
            "gpu_streams", f"executors = [{names}]\narrivals = {{ process = \"poisson\", "
            f"rate = {rate!r}, count = {STREAM_COUNT}, seed = 7, mix = {{ G_mp = 1 }} }}\n",
            exps, rehearse=False)

    if run.dry_run:  # the capacity arithmetic on the rehearsal's rows, the stream planned
        rehearsed = _capacity_of(_individual_rows(capacity_camp.dir / "rehearsal" / "runs"), 1)
        run.note(f"capacity on the CPU rehearsal: {rehearsed:.2f} jobs/s")
        stream_campaign(rehearsed)
    run.gpu()
    capacity_camp.run()
    capacity = _capacity_of(_individual_rows(capacity_camp.dir / "runs"), 1)
    camp = stream_campaign(capacity)
    rows = camp.run()
    jobs = _individual_rows(camp.dir / "runs")
    early = [j["job_id"] for j in jobs
             if _f(j.get("admitted_s")) is not None and _f(j.get("arrival_s")) is not None
             and float(j["admitted_s"]) < float(j["arrival_s"]) - 1e-3]
    numbers: dict[str, Any] = {
        "capacity_jps": capacity, "rate_jps": STREAM_LOAD * capacity, "left_out": left_out,
        "rows": [_keep(r) for r in rows],
        "streams": {r["executor"]: {k: _f(r.get(k)) for k in (
            "jct_p50_s", "jct_p95_s", "throughput_jps", "offered_load", "makespan_s")}
            for r in rows}}
    detail = (f"capacity {capacity:.2f} jobs/s, rate {STREAM_LOAD * capacity:.2f}/s; " + "; ".join(
        f"{e}: JCT p50 {s['jct_p50_s'] or float('nan'):.2f} s, p95 "
        f"{s['jct_p95_s'] or float('nan'):.2f} s, {s['throughput_jps'] or float('nan'):.2f} "
        "jobs/s" for e, s in numbers["streams"].items()))
    bad = [f"{r['executor']}: {r['status']} {r.get('error', '')[:120]}" for r in rows
           if r["status"] != "ok"]
    missing = [e for e in executors if e not in numbers["streams"]]
    if bad or missing or early:
        raise Failed("; ".join(bad + [f"no row: {', '.join(missing)}"] * bool(missing)
                               + [f"admitted before arrival: {', '.join(early)}"] * bool(early))
                     + f" ({detail})", numbers)
    return detail, numbers


#: The precision axis, every value (engine.precision.PRECISIONS; written out: the check
#: plans through the runner, not the engine's names).
_PRECISIONS = ("fp32", "tf32", "amp-fp16", "amp-bf16", "bf16")


@part("precision", budget_s=210, needs=("pynvml", "torch", "psutil", "filelock"),
      default=False)
def precision(run: PartRun) -> tuple[str, dict[str, Any]]:
    """The precision axis on CUDA: the K = 4 resnet18 ensemble under seq and unified_model
    in all five precisions (fp32, tf32, amp-fp16, amp-bf16, bf16; ten cells): each row ran
    what it asked, TF32 on in the tf32 rows' backend_flags, the GradScaler's skipped steps
    under amp-fp16, and per precision T_group, peak memory and the unified/seq speedup
    (like with like)."""
    values = ", ".join(json.dumps(p) for p in _PRECISIONS)
    camp = run.campaign("gpu_precision", 'experiments = ["G_mp"]\n'
                        'executors = ["seq", "unified_model"]\n'
                        f"precision = [{values}]\n",
                        # planned in the dry run; not rehearsed: ten CPU cells would add
                        # half a minute to CI, and tests/e2e/test_precision_cells.py runs
                        # the axis in real cells there already
                        rehearse=False)
    gpu = run.gpu()
    cc = gpu.get("compute_capability")
    if cc and tuple(int(x) for x in cc.split(".")) < (8, 0):
        raise Skip(f"compute capability {cc}: bf16 and TF32 need 8.0+ (the runner refuses "
                   "them while planning)")
    rows = camp.run()
    by = {(r["executor"], r.get("precision_requested")): r for r in rows}
    parts, bad = [], []
    numbers: dict[str, Any] = {"rows": [_keep(r) for r in rows], "compute_capability": cc}
    for name in _PRECISIONS:
        seq, uni = by.get(("seq", name)), by.get(("unified_model", name))
        for r in (seq, uni):
            if r is None or r["status"] != "ok":
                bad.append(f"{name}: {(r or {}).get('status', 'no row')} "
                           f"{(r or {}).get('error', '')[:120]}")
            elif r.get("precision") != name:
                bad.append(f"{name}: ran {r.get('precision')} ({r.get('precision_reason')})")
            elif name == "tf32" and not json.loads(r["backend_flags"]).get(
                    "cuda_matmul_allow_tf32"):
                bad.append("tf32: TF32 not on in backend_flags")
            elif (name == "amp-fp16") != (r.get("amp_skipped_steps") not in (None, "")):
                bad.append(f"{name}: amp_skipped_steps {r.get('amp_skipped_steps')!r}")
        if seq and uni and seq["status"] == uni["status"] == "ok":
            ts, tu = _f(seq["T_group"]), _f(uni["T_group"])
            speedup = ts / tu if ts and tu else None
            numbers[name] = {"T_group_seq": ts, "T_group_unified": tu, "speedup": speedup,
                             "peak_mb_seq": _f(seq.get("torch_peak_allocated_mb")),
                             "peak_mb_unified": _f(uni.get("torch_peak_allocated_mb")),
                             "amp_skipped_steps": uni.get("amp_skipped_steps")}
            parts.append(f"{name}: seq {ts:.1f} s, unified {tu:.1f} s ({speedup:.2f}x)"
                         if speedup else f"{name}: T_group missing")
    detail = "; ".join(parts + bad)
    if bad:
        raise Failed(detail, numbers)
    return detail, numbers


def _selfcheck(run: PartRun, device: str) -> dict[str, Any]:
    """``fugue-tui selfcheck --device DEVICE --json`` as a user runs it (the CLI, its
    process, the store in the part's folder); its document, also kept as a file."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    argv = [sys.executable, "-m", "fugue_tui", "selfcheck", "--device", device, "--json",
            "--runs-dir", str(run.dir / "runs")]
    try:
        done = subprocess.run(argv, env=env, capture_output=True, text=True, cwd=ROOT,
                              stdin=subprocess.DEVNULL,
                              timeout=max(run.remaining() - STOP_GRACE_S, 1))
    except subprocess.TimeoutExpired:
        raise Failed(f"selfcheck --device {device} outlived the part's budget") from None
    (run.dir / f"selfcheck_{device}.json").write_text(done.stdout)
    (run.dir / f"selfcheck_{device}.err").write_text(done.stderr)
    try:
        doc = json.loads(done.stdout)
    except ValueError:
        tail = done.stderr.strip().splitlines()[-1:] or [""]
        raise RuntimeError(f"selfcheck --device {device} exited {done.returncode} without a "
                           f"verdict: {tail[0][:300]}") from None
    if doc.get("exit_status") != done.returncode:
        raise RuntimeError(f"selfcheck --device {device}: exit {done.returncode}, document "
                           f"says {doc.get('exit_status')}")
    return doc


def _verdicts(doc: dict[str, Any]) -> str:
    counts = doc["counts"]
    outside = [f"{p['name']}: {p['text']}" for p in doc["paths"]
               if p["verdict"] == "outside bound"]
    return (f"{doc['device']}: {counts['bit_for_bit']} bit for bit, {counts['within_bound']} "
            f"within bound, {counts['outside_bound']} outside bound in {doc['elapsed_s']:.1f} s"
            + (f" (outside: {'; '.join(outside)})" if outside else ""))


@part("selfcheck", budget_s=60, needs=("torch", "pynvml", "filelock"), default=False)
def selfcheck(run: PartRun) -> tuple[str, dict[str, Any]]:
    """``fugue-tui selfcheck --device cuda --json`` (issue 42): the parity contract on the
    GPU, path by path (fp32 and tf32 under both kernels, the half precisions): the verdict
    counts and every path outside its bound. The dry run runs the whole command on the CPU
    (so the minimal environment proves it imports nothing the GPU machine lacks)."""
    import engine.selfcheck.run  # noqa: F401 - the check's imports, checked by the dry run

    if run.dry_run:
        cpu = _selfcheck(run, "cpu")
        run.note(f"rehearsed: {_verdicts(cpu)}")
        if cpu["exit_status"] != 0:
            raise Failed(_verdicts(cpu), {"cpu": cpu["counts"]})
    gpu = run.gpu()
    doc = _selfcheck(run, "cuda")
    machine = doc["machine"]
    detail = (f"{_verdicts(doc)}; {machine.get('gpu_name')} cc {machine.get('gpu_capability')}"
              f", torch {machine.get('torch_version')}, cuDNN {machine.get('cudnn_version')}")
    numbers = {"counts": doc["counts"], "gpu_uuid": gpu.get("uuid"),
               "paths": {p["name"]: {k: p[k] for k in ("verdict", "max_diff", "bound", "worst")}
                         for p in doc["paths"]}}
    if doc["exit_status"] != 0:
        raise Failed(detail, numbers)
    return detail, numbers


# --------------------------------------------------------------------------- running parts

def _child(name: str, folder: Path, dry_run: bool, budget_s: float, deadline: float) -> int:
    """One part, in its own process: writes ``result.json`` into ``folder``."""
    spec = PARTS[name]
    run = PartRun(spec, folder, dry_run, budget_s, deadline)
    numbers: dict[str, Any] = {}
    try:
        detail, numbers = spec.fn(run)
        verdict = "PASS"
        if dry_run:  # every part must reach run.gpu() (which SKIPs) before its GPU work
            verdict, detail = "FAIL", ("passed in a dry run: a part must call run.gpu() "
                                       "before its GPU work")
    except Skip as exc:
        verdict, detail = "SKIP", str(exc)
    except Failed as exc:
        verdict, detail, numbers = "FAIL", str(exc), exc.numbers
    except Exception as exc:  # noqa: BLE001 - reported as the part's failure
        verdict, detail = "FAIL", f"{type(exc).__name__}: {exc}"
        traceback.print_exc()
    (folder / "result.json").write_text(json.dumps(
        {"verdict": verdict, "detail": detail, "checked": run.checked, "numbers": numbers},
        indent=1, default=str))
    return 0


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _stop_group(proc: subprocess.Popen, running: bool) -> None:
    """End the part's whole process group: a part still running gets SIGTERM first (a
    campaign's runner then stops its cell and records it) and SIGKILL after the grace
    period; whatever a finished part left in its group gets SIGKILL."""
    if running:
        _signal_group(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            pass
    _signal_group(proc.pid, signal.SIGKILL)
    proc.wait()


def run_part(spec: Part, folder: Path, dry_run: bool, budget_s: float) -> dict[str, Any]:
    folder.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    cmd = [sys.executable, "-m", "bench.gpu_check", "--child", spec.name, "--dir", str(folder),
           "--budget", str(budget_s), "--deadline", repr(time.time() + budget_s)] + (
               ["--dry-run"] if dry_run else [])
    t0 = time.monotonic()
    with open(folder / "log.txt", "w") as log:
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdin=subprocess.DEVNULL, stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True)
        code = None
        try:
            code = proc.wait(timeout=budget_s)
        except subprocess.TimeoutExpired:
            pass
        finally:  # also on an interrupt of the whole check
            _stop_group(proc, running=code is None)
    seconds = time.monotonic() - t0
    try:
        result = json.loads((folder / "result.json").read_text())
    except (OSError, ValueError):
        result = None
    if code is None:
        result = {"verdict": "FAIL", "detail": f"over budget: stopped at {budget_s:.0f} s "
                  f"(its log: {spec.name}/log.txt)", **({"partial": result} if result else {})}
    elif result is None:
        lines = (folder / "log.txt").read_text(errors="replace").strip().splitlines()
        result = {"verdict": "FAIL", "detail": f"its process exited {code} without a result: "
                  f"{(lines[-1] if lines else '')[:300]}"}
    return {**result, "seconds": round(seconds, 1)}


# --------------------------------------------------------------------------- the whole run

def _importable(module: str) -> bool:
    if module in sys.modules:
        return True
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def _git_commit() -> str:
    try:
        out = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                             capture_output=True, text=True, timeout=10)
        dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain",
                                "--untracked-files=no"], capture_output=True, text=True,
                               timeout=10).stdout.strip()
        return out.stdout.strip() + ("+changes" if dirty else "") if out.returncode == 0 \
            else "unknown (no git checkout)"
    except (OSError, subprocess.TimeoutExpired):
        return "unknown (no git)"


def user_dirs(work: Path) -> dict[str, str]:
    """The environment variables the check sets for its parts (unless already set): the
    engine's data and config folders under the check's own work folder. Why: a lent GPU
    machine has no ``platformdirs`` (``engine.dirs``' default, a declared dependency that
    only ``pip install`` brings; the check runs from a checkout, no install), and a check
    must not leave datasets in that machine's home. Found on the first GPU run: the digits
    cell of ``test_gpu_cells`` died with ``No module named 'platformdirs'``."""
    return {"FUGUE_DATA_DIR": str(work / "data"), "FUGUE_CONFIG_DIR": str(work / "config")}


def environment(argv: list[str]) -> tuple[str, dict[str, Any]]:
    """environment.txt (for the archive) and the facts the summary's header shows."""
    facts = {"utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
             "host": socket.gethostname(), "python": platform.python_version(),
             "commit": _git_commit(), "torch": _version("torch"), "gpus": _nvml_devices()}
    lines = [f"# GPU check {facts['utc']} on {facts['host']}, commit {facts['commit']}",
             f"argv: {' '.join(argv)}",
             f"python {sys.version.split()[0]} at {sys.executable}",
             f"platform {platform.platform()}, {os.cpu_count()} CPUs"]
    for dist in (*GPU_MACHINE_PACKAGES, "ray", "textual", "plotext", "tomli-w", "matplotlib",
                 "pytest"):
        lines.append(f"{dist}: {_version(dist) or 'missing'}")
    for var in ("CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "OUT", "FUGUE_DATA_DIR",
                "FUGUE_CONFIG_DIR"):
        lines.append(f"{var}={os.environ.get(var, '(unset)')}")
    lines.append(f"NVML devices: {facts['gpus'] or 'none'}")
    smi = shutil.which("nvidia-smi")
    if smi:
        for args in (["-L"], []):
            try:
                out = subprocess.run([smi, *args], capture_output=True, text=True, timeout=20)
                lines += [f"$ nvidia-smi {' '.join(args)}", (out.stdout + out.stderr).rstrip()]
            except (OSError, subprocess.TimeoutExpired) as exc:
                lines.append(f"nvidia-smi {' '.join(args)}: {exc}")
    else:
        lines.append("nvidia-smi: not found")
    return "\n".join(lines) + "\n", facts


def _short(text: str, width: int = 300) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= width else text[:width - 3] + "..."


def summary_text(facts: dict[str, Any], results: dict[str, dict[str, Any]], dry_run: bool,
                 chosen: list[str], took: float | None, archive: str | None) -> str:
    gpus = facts["gpus"]
    gpu = (", ".join(f"{g['name']} ({g['uuid']})" for g in gpus) if gpus
           else "none visible (NVML)")
    budget = sum(r["budget_s"] for n, r in results.items() if n in chosen)
    lines = [f"GPU check {facts['utc']} · host {facts['host']} · commit {facts['commit']} · "
             f"python {facts['python']} · torch {facts['torch'] or 'missing'}",
             f"GPU: {gpu}",
             f"{'dry run' if dry_run else 'run'}: {len(chosen)} part(s) selected, budgets "
             f"{budget:.0f} s" + (f", took {took:.0f} s" if took is not None else
                                   " (in progress)")]
    width = max(len(n) for n in results)
    for name, r in results.items():
        secs = f"{r['seconds']:.0f}" if r.get("seconds") is not None else "-"
        spent = f"{secs:>3}/{r['budget_s']:.0f} s"
        lines.append(f"{r['verdict']:<4}  {name:<{width}}  {spent:<10}  {_short(r['detail'])}")
    failed = [n for n, r in results.items() if r["verdict"] == "FAIL"]
    if archive:
        lines.append(f"archive: {archive} (summary.json, environment.txt, <part>/log.txt, "
                     "<part>/result.json and each part's files)")
    if failed:
        lines.append(f"rerun the failed parts: bash bench/gpu_check.sh {' '.join(failed)}"
                     f"   (or: --rerun {SUMMARY})")
    return "\n".join(lines) + "\n"


def _archive(work: Path, dest: Path) -> None:
    """Everything under ``work`` into one tar.gz; big files cut to head and tail, the
    biggest dropped (named in MISSING.txt) if the whole would still be too large."""
    files = sorted((p for p in work.rglob("*") if p.is_file() and not p.is_symlink()),
                   key=lambda p: p.stat().st_size)
    kept, dropped, total = [], [], 0
    for p in files:
        size = min(p.stat().st_size, FILE_CAP)
        if total + size > ARCHIVE_RAW_CAP:
            dropped.append(f"{p.relative_to(work)} ({p.stat().st_size} bytes)")
            continue
        kept.append(p)
        total += size
    tmp = dest.with_name(dest.name + ".tmp")
    with tarfile.open(tmp, "w:gz") as tar:
        for p in sorted(kept):
            arcname = str(Path(work.name) / p.relative_to(work))
            size = p.stat().st_size
            if size <= FILE_CAP:
                tar.add(p, arcname=arcname, recursive=False)
                continue
            with open(p, "rb") as fh:
                head = fh.read(FILE_CAP // 8)
                fh.seek(size - (FILE_CAP - FILE_CAP // 8))
                tail = fh.read()
            data = head + f"\n[... {size - len(head) - len(tail)} bytes cut by the GPU check ...]\n".encode() + tail
            info = tarfile.TarInfo(arcname)
            info.size, info.mtime = len(data), int(p.stat().st_mtime)
            tar.addfile(info, io.BytesIO(data))
        if dropped:
            data = ("left out (archive size limit):\n" + "\n".join(dropped) + "\n").encode()
            info = tarfile.TarInfo(str(Path(work.name) / "MISSING.txt"))
            info.size, info.mtime = len(data), int(time.time())
            tar.addfile(info, io.BytesIO(data))
    os.replace(tmp, dest)


def failed_in(summary: Path) -> list[str]:
    """The parts a summary file lists as FAIL."""
    return re.findall(r"^FAIL\s+(\S+)", summary.read_text(), re.M)


def _parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="bash bench/gpu_check.sh", description=__doc__.split("\n\n")[0],
        epilog="parts: " + ", ".join(f"{n} ({p.budget_s} s{'' if p.default else ', named'})"
                                      for n, p in PARTS.items()))
    parser.add_argument("parts", nargs="*", metavar="PART",
                        help="parts to run (default: the default parts; 'all': every part)")
    parser.add_argument("--dry-run", action="store_true",
                        help="touch no GPU: import, plan and rehearse each part, then SKIP it")
    parser.add_argument("--rerun", metavar="SUMMARY", type=Path,
                        help=f"run only the parts a previous {SUMMARY} lists as FAIL")
    parser.add_argument("--out", type=Path, default=None,
                        help="folder for the archive and summary (default $OUT, else ./gpu_check_out)")
    parser.add_argument("--time-factor", type=float, default=1.0,
                        help="multiply every part's budget (a rerun of a part that ran out of time)")
    parser.add_argument("--strict", action="store_true",
                        help="a selected part that needs a module a lent GPU machine has, "
                             "missing here, FAILs instead of skipping (CI's minimal environment "
                             "must hold them all)")
    parser.add_argument("--keep", action="store_true", help="keep the work folder")
    parser.add_argument("--list", action="store_true", help="list the parts and exit")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--dir", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--budget", type=float, help=argparse.SUPPRESS)
    parser.add_argument("--deadline", type=float, help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def _extra_parts() -> None:
    """Parts from other modules (``GPU_CHECK_EXTRA_PARTS=mod1,mod2``: the check's own tests
    use it, and a new part can be tried this way before it is written in here)."""
    for name in filter(None, os.environ.get("GPU_CHECK_EXTRA_PARTS", "").split(",")):
        importlib.import_module(name.strip())


def _interrupt(signum, frame):
    """SIGTERM or SIGHUP: stop the running part and write what was done (as Ctrl-C)."""
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    _extra_parts()
    args = _parse(argv)
    if args.child:
        return _child(args.child, args.dir, args.dry_run, args.budget, args.deadline)
    if args.list:
        default = sum(p.budget_s for p in PARTS.values() if p.default)
        for p in PARTS.values():
            print(f"{p.name:<26} {p.budget_s:>4} s  {'default' if p.default else 'named  '}  "
                  f"needs {', '.join(p.needs) or '-'}: {_short(p.about, 200)}")
        print(f"default parts' budgets: {default} s (limit {DEFAULT_BUDGET_S} s)")
        return 0
    names = list(args.parts)
    if args.rerun:
        try:
            names += failed_in(args.rerun)
        except OSError as exc:
            print(f"gpu_check: --rerun {args.rerun}: {exc.strerror or exc}", file=sys.stderr)
            return 2
        if not names:
            print(f"gpu_check: {args.rerun} lists no failed part: nothing to rerun")
            return 0
    if "all" in names:
        names = list(PARTS)
    unknown = [n for n in names if n not in PARTS]
    if unknown:
        print(f"gpu_check: unknown part(s) {', '.join(unknown)}; parts: {', '.join(PARTS)}",
              file=sys.stderr)
        return 2
    if args.time_factor <= 0:
        print("gpu_check: --time-factor must be > 0", file=sys.stderr)
        return 2
    chosen = [n for n in PARTS if n in names] if names else \
        [n for n, p in PARTS.items() if p.default]
    out = args.out or Path(os.environ.get("OUT") or "gpu_check_out")
    out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="gpu-check-")) / "gpu_check"
    work.mkdir()
    for var, value in user_dirs(work.parent).items():  # the parts' processes inherit them
        os.environ.setdefault(var, value)
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _interrupt)
    env_text, facts = environment(argv)
    (work / "environment.txt").write_text(env_text)
    results: dict[str, dict[str, Any]] = {}
    blocked = set()
    for name, p in PARTS.items():
        budget = p.budget_s * args.time_factor
        missing = [m for m in p.needs if not _importable(m)]
        lacking = f"needs {', '.join(missing)}, not installed here" + (
            " (Ray cannot travel to a lent GPU machine: Ray on a GPU stays unverified)"
            if "ray" in missing else "")
        if name not in chosen:
            why = f"not selected; {lacking}" if missing else \
                f"not selected (run it: bash bench/gpu_check.sh {name})"
            results[name] = {"verdict": "SKIP", "detail": why, "selected": False}
        elif missing:
            verdict = "FAIL" if args.strict and set(missing) & set(GPU_MACHINE_MODULES) \
                else "SKIP"
            results[name] = {"verdict": verdict, "detail": lacking, "selected": True}
            blocked.add(name)
        else:
            results[name] = {"verdict": "FAIL", "selected": True,
                             "detail": "not reached (the check was cut short before it)"}
        results[name].update(budget_s=budget, seconds=None, about=p.about)
    started = time.monotonic()
    interrupted = False

    def write_summary(took: float | None, archive: str | None) -> str:
        text = summary_text(facts, results, args.dry_run, chosen, took, archive)
        tmp = out / (SUMMARY + ".tmp")
        tmp.write_text(text)
        os.replace(tmp, out / SUMMARY)
        return text

    write_summary(None, None)
    try:
        for name in chosen:
            if name in blocked:
                print(f"== {name}: {results[name]['verdict']} — {results[name]['detail']}",
                      flush=True)
                continue
            budget = results[name]["budget_s"]
            print(f"== {name}: running (budget {budget:.0f} s)", flush=True)
            results[name].update(run_part(PARTS[name], work / name, args.dry_run, budget))
            r = results[name]
            print(f"== {name}: {r['verdict']} ({r['seconds']:.0f} s) — {_short(r['detail'])}",
                  flush=True)
            write_summary(None, None)
    except KeyboardInterrupt:
        interrupted = True
        print("gpu_check: interrupted; writing what was done", file=sys.stderr)
    took = time.monotonic() - started
    doc = {"facts": facts, "dry_run": args.dry_run, "selected": chosen, "took_s": round(took, 1),
           "parts": results}
    (work / "summary.json").write_text(json.dumps(doc, indent=1, default=str))
    (work / "summary.txt").write_text(summary_text(facts, results, args.dry_run, chosen, took,
                                                   ARCHIVE))
    _archive(work, out / ARCHIVE)
    text = write_summary(took, f"{ARCHIVE} ({(out / ARCHIVE).stat().st_size / 2**20:.1f} MiB)")
    print(text, end="")
    if not args.keep:
        shutil.rmtree(work.parent, ignore_errors=True)
    else:
        print(f"work folder kept: {work}")
    if interrupted:
        return 130
    return 1 if any(r["verdict"] == "FAIL" for r in results.values()) else 0


if __name__ == "__main__":
    # Run the imported module's main, so that parts registered from other modules
    # (GPU_CHECK_EXTRA_PARTS) land in the same PARTS as the built-in ones.
    from bench import gpu_check

    sys.exit(gpu_check.main())
