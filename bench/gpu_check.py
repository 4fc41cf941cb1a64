"""The GPU check: what only a real GPU can show, in one prepared run of at most 6 minutes.

``PYTHONPATH=. python -m bench.gpu_check [--out DIR] [--parts ...]`` (or
``bash bench/gpu_check.sh``) from the checkout, with no install. Written for a lent GPU
machine that has torch, torchvision and pynvml but no network, no Ray and no Textual: it
imports neither, and a part whose other needs are missing (psutil and filelock for real
cells) says SKIP with the reason instead of failing the rest.

Parts, in order (each prints ``== part: PASS|FAIL|SKIP — detail`` and writes
``<out>/<part>.json``):

1. ``nvml_probe``: every NVML device (name, UUID, driver, compute mode, memory, power
   limit) and its capability map (each monitor metric: supported, or NVML's reason); the
   device under test resolved the way the runner does (``engine.measure.nvml.resolve_gpu``).
2. ``energy``: ~60 s of matmul load on the device under test while NVML is read every
   0.1 s; energy over the same window from the total-energy counter and from the integral
   of sampled power (the monitor's own functions, ``engine.measure.nvml`` and
   ``engine.measure.energy``), and their ratio.
3. ``seq_vs_unified``: real campaigns (``python -m engine.runner``) of resnet18 ensembles
   on ``synthetic_cifar10`` (CIFAR-shaped seeded noise), K = 8 and K = 32, one epoch, under
   ``seq`` and ``unified_model``: T_group, throughput, the speedup, the monitor's GPU
   columns, the unified plan.
4. ``ablation``: the six rungs of the unified ablation ladder on the K = 8 ensemble: the
   effective ``features`` of each row (six distinct effective signatures expected on CUDA)
   and their throughput relative to rung A.
5. ``mps``: only if ``nvidia-cuda-mps-control`` exists: a small ``mp`` campaign (K = 4)
   with MPS: ``mps_used``, the thread percentage, and no daemon of ours left afterwards.
   The compute mode is read, never changed.
6. ``pytest_gpu``: the test suite's ``gpu``-marked tests, if pytest is installed.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PARTS = ("nvml_probe", "energy", "seq_vs_unified", "ablation", "mps", "pytest_gpu")


class Skip(Exception):
    """A part that cannot run here (the message says why)."""


def _gpu() -> dict[str, Any]:
    if not _importable("pynvml"):
        raise Skip("pynvml (nvidia-ml-py) not installed")
    from engine.measure.nvml import resolve_gpu

    found = resolve_gpu("cuda", os.environ)
    if not found:
        raise Skip("NVML sees no GPU")
    return found


def part_nvml_probe(out: Path) -> tuple[str, dict]:
    if not _importable("pynvml"):
        raise Skip("pynvml (nvidia-ml-py) not installed")
    import pynvml

    from engine.measure.nvml import open_gpu

    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as exc:
        raise Skip(f"no NVIDIA driver here ({exc})") from None
    devices = []
    for i in range(pynvml.nvmlDeviceGetCount()):
        uuid = pynvml.nvmlDeviceGetUUID(pynvml.nvmlDeviceGetHandleByIndex(i))
        uuid = uuid.decode() if isinstance(uuid, bytes) else uuid
        gpu = open_gpu(uuid)
        devices.append({"index": i, **gpu.facts, "supported": gpu.supported,
                        "missing": gpu.missing})
    under_test = _gpu()
    doc = {"devices": devices, "under_test": under_test,
           "CUDA_VISIBLE_DEVICES": os.environ.get("CUDA_VISIBLE_DEVICES")}
    first = devices[0] if devices else {}
    return (f"{len(devices)} device(s); under test {under_test['uuid']} "
            f"({first.get('gpu_name')}); supported {first.get('supported')}; "
            f"missing {first.get('missing')}"), doc


def part_energy(out: Path, seconds: float = 60.0) -> tuple[str, dict]:
    _gpu()
    import torch

    from engine.measure.energy import energy_over
    from engine.measure.nvml import open_gpu

    uuid = _gpu()["uuid"]
    gpu = open_gpu(uuid)
    samples: list[dict[str, Any]] = []
    stop = threading.Event()

    def sampler() -> None:  # ctypes releases the GIL during each NVML call
        while not stop.is_set():
            values, _ = gpu.read()
            samples.append({"t": time.monotonic(), **values})
            stop.wait(0.1)

    thread = threading.Thread(target=sampler, daemon=True)
    thread.start()
    time.sleep(1.0)
    a = torch.randn(4096, 4096, device="cuda")
    torch.cuda.synchronize()
    t0 = time.monotonic()
    while time.monotonic() - t0 < seconds:
        for _ in range(20):
            a = torch.tanh(a @ a * 1e-3)
        torch.cuda.synchronize()
    t1 = time.monotonic()
    time.sleep(1.0)
    stop.set()
    thread.join()
    counter, method = energy_over(samples, t0, t1)
    power_only = [{k: v for k, v in s.items() if k != "energy_mj"} for s in samples]
    integral, method2 = energy_over(power_only, t0, t1)
    doc = {"window_s": t1 - t0, "samples": len(samples), "counter_j": counter,
           "counter_method": method, "integral_j": integral, "integral_method": method2,
           "ratio_integral_to_counter": (integral / counter) if counter and integral else None,
           "mean_power_w": (integral / (t1 - t0)) if integral else None}
    if counter is None:
        return f"no energy counter on this device; power integral {integral} J ({method2})", doc
    return (f"counter {counter:.1f} J vs power integral {integral:.1f} J over {t1 - t0:.1f} s "
            f"(ratio {doc['ratio_integral_to_counter']:.3f})"), doc


def _needs_cells() -> None:
    missing = [m for m in ("psutil", "filelock") if not _importable(m)]
    if missing:
        raise Skip(f"real cells need {', '.join(missing)} (not installed here)")


def _importable(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None


EXPERIMENTS = """
[experiments.G_k8]
type = "ensemble"
model = "resnet18"
dataset = "synthetic_cifar10"
k = 8
batch_size = 128
epochs = 1
lr = 0.01
optimizer = "sgd"
optimizer_kwargs = { momentum = 0.9 }
[experiments.G_k32]
type = "ensemble"
model = "resnet18"
dataset = "synthetic_cifar10"
k = 32
batch_size = 128
epochs = 1
lr = 0.01
optimizer = "sgd"
optimizer_kwargs = { momentum = 0.9 }
[experiments.G_mp]
type = "ensemble"
model = "resnet18"
dataset = "synthetic_cifar10"
k = 4
batch_size = 128
epochs = 1
lr = 0.01
optimizer = "sgd"
"""


def _campaign(tmp: Path, name: str, body: str, timeout: float) -> list[dict[str, str]]:
    from engine.results.read import read_rows

    (tmp / "exps.toml").write_text(EXPERIMENTS)
    (tmp / f"{name}.toml").write_text(
        f'name = "{name}"\ndevice = "cuda"\nthreads = 1\nruns_dir = "{tmp / "runs"}"\n'
        f'experiments_file = "exps.toml"\n{body}')
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    proc = subprocess.run([sys.executable, "-m", "engine.runner", str(tmp / f"{name}.toml")],
                          env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=timeout)
    (tmp / f"{name}.log").write_text(proc.stdout + proc.stderr)
    if proc.returncode not in (0, 1):
        raise RuntimeError(f"campaign {name} exited {proc.returncode}: "
                           f"{(proc.stderr or proc.stdout)[-1500:]}")
    return [r for r in read_rows(tmp / "runs" / "master_groups.csv") if r["campaign_id"] == name]


_KEEP = ("exp_id", "executor", "status", "error", "T_group", "throughput_group",
         "energy_group", "energy_method", "gpu_util_mean", "vram_peak_mb", "gpu_uuid",
         "features", "features_requested", "features_reason", "rung", "compile_mode",
         "mps_used", "mps_thread_pct", "gpu_compute_mode", "executor_info", "monitor_cpu_share")


def part_seq_vs_unified(out: Path) -> tuple[str, dict]:
    _gpu()
    _needs_cells()
    with tempfile.TemporaryDirectory(prefix="gpu-check-") as tmp:
        rows = _campaign(Path(tmp), "gpu_seq_unified",
                         'experiments = ["G_k8", "G_k32"]\nexecutors = ["seq", "unified_model"]\n',
                         timeout=200)
    keep = [{k: r.get(k) for k in _KEEP} for r in rows]
    by = {(r["exp_id"], r["executor"]): r for r in rows}
    parts = []
    for exp in ("G_k8", "G_k32"):
        seq, uni = by.get((exp, "seq")), by.get((exp, "unified_model"))
        if seq and uni and seq["status"] == uni["status"] == "ok":
            parts.append(f"{exp}: seq {float(seq['T_group']):.1f} s, unified "
                         f"{float(uni['T_group']):.1f} s, speedup "
                         f"{float(seq['T_group']) / float(uni['T_group']):.2f}x")
        else:
            parts.append(f"{exp}: not ok ({[(r['executor'], r['status'], r['error']) for r in rows if r['exp_id'] == exp]})")
    return "; ".join(parts), {"rows": keep}


def part_ablation(out: Path) -> tuple[str, dict]:
    _gpu()
    _needs_cells()
    with tempfile.TemporaryDirectory(prefix="gpu-check-") as tmp:
        rows = _campaign(Path(tmp), "gpu_ablation",
                         'experiments = "G_k8"\nexecutors = ["unified_model"]\n'
                         'compile_mode = "reduce-overhead"\n'
                         '[options.unified_model]\nsweep = "ablation"\n', timeout=200)
    keep = [{k: r.get(k) for k in _KEEP} for r in rows]
    effective = {(r.get("features"), r.get("compile_mode")) for r in rows if r["status"] == "ok"}
    base = next((float(r["throughput_group"]) for r in rows
                 if r.get("rung") == "A" and r["status"] == "ok"), None)
    rel = {r.get("rung"): (float(r["throughput_group"]) / base if base and r["throughput_group"]
                           else None) for r in rows}
    verdict = "six distinct" if len(effective) == 6 else f"{len(effective)} distinct"
    return (f"{len(rows)} rungs, {verdict} effective signatures; throughput vs A: "
            + ", ".join(f"{k} {v:.2f}" for k, v in rel.items() if v)), {
                "rows": keep, "distinct_effective": len(effective)}


def part_mps(out: Path) -> tuple[str, dict]:
    _gpu()
    control = shutil.which("nvidia-cuda-mps-control") or (
        "/usr/sbin/nvidia-cuda-mps-control"
        if os.path.exists("/usr/sbin/nvidia-cuda-mps-control") else None)
    if control is None:
        raise Skip("nvidia-cuda-mps-control not found")
    _needs_cells()
    with tempfile.TemporaryDirectory(prefix="gpu-check-") as tmp:
        rows = _campaign(Path(tmp), "gpu_mps", 'experiments = "G_mp"\nexecutors = ["mp"]\n',
                         timeout=150)
    import psutil

    left = [p.pid for p in psutil.process_iter(["name"])
            if (p.info.get("name") or "").startswith("nvidia-cuda-mps")]
    keep = [{k: r.get(k) for k in _KEEP} for r in rows]
    row = rows[-1] if rows else {}
    return (f"status {row.get('status')}, mps_used {row.get('mps_used')}, thread pct "
            f"{row.get('mps_thread_pct')}, compute mode {row.get('gpu_compute_mode')}; "
            f"MPS processes left: {left or 'none'}"), {"rows": keep, "left": left}


def part_pytest_gpu(out: Path) -> tuple[str, dict]:
    missing = [m for m in ("pytest", "psutil", "filelock", "pandas", "tomli_w")
               if not _importable(m)]
    if missing:
        raise Skip(f"the test suite needs {', '.join(missing)} (not installed here)")
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-m", "gpu", "-p",
                           "no:cacheprovider", "tests"], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    tail = (proc.stdout + proc.stderr).strip().splitlines()[-1:] or [""]
    if proc.returncode not in (0, 5):  # 5: no tests collected
        raise RuntimeError(tail[0])
    return tail[0], {"returncode": proc.returncode, "output": proc.stdout[-5000:]}


def main(argv: list[str] | None = None) -> int:
    from engine.plugins import load_builtins

    load_builtins()  # this process's entry (python -m bench.<part>)
    parser = argparse.ArgumentParser(prog="python -m bench.gpu_check", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default=os.environ.get("OUT") or "gpu_check_out")
    parser.add_argument("--parts", nargs="+", choices=PARTS, default=list(PARTS))
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    summary = {}
    started = time.monotonic()
    for name in args.parts:
        t0 = time.monotonic()
        try:
            detail, doc = globals()[f"part_{name}"](out)
            verdict = "PASS"
        except Skip as exc:
            verdict, detail, doc = "SKIP", str(exc), {}
        except Exception as exc:  # one part's failure never stops the others
            verdict, detail = "FAIL", f"{type(exc).__name__}: {exc}"
            doc = {"traceback": traceback.format_exc()}
        seconds = time.monotonic() - t0
        summary[name] = {"verdict": verdict, "detail": detail, "seconds": round(seconds, 1)}
        (out / f"{name}.json").write_text(json.dumps({**summary[name], **doc}, indent=1,
                                                     default=str))
        print(f"== {name}: {verdict} ({seconds:.0f} s) — {detail}", flush=True)
    summary["_total_s"] = round(time.monotonic() - started, 1)
    (out / "summary.json").write_text(json.dumps(summary, indent=1))
    return 1 if any(v["verdict"] == "FAIL" for k, v in summary.items() if k != "_total_s") else 0


if __name__ == "__main__":
    sys.exit(main())
