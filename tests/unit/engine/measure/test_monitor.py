"""The monitor against a fake NVML at the hardware boundary (real nvidia-ml-py exceptions,
a real Tesla T4 power trace), and its sidecar and host metrics on the real CPU."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from engine.event_types import MonitorSample
from engine.measure.energy import energy_over, integrate, summarise
from engine.measure.host import ProcessTree
from engine.measure.nvml import GpuDevice, open_gpu, resolve_gpu
from engine.measure.samples import read_samples
from engine.results.values import format_value
from engine.runner.watchdog import Watchdog, WatchdogSettings

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures"
sys.path.insert(0, str(FIXTURES))
from fake_nvml import FakeDevice, FakeNVML, load_trace, trace_energy_j  # noqa: E402

ROOT = Path(__file__).resolve().parents[4]


class Clock:
    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t


def sample_series(gpu: GpuDevice, clock: Clock, times) -> list[dict]:
    """Samples as the sidecar takes them, with the fake device's clock set to each time."""
    rows = []
    for t in times:
        clock.t = t
        values, _ = gpu.read()
        rows.append({"t": t, **values})
    return rows


def make(devices, **kw):
    clock = Clock()
    return FakeNVML(devices, clock=clock, **kw), clock


TIMES = [i * 0.5 for i in range(40)]          # 0 .. 19.5 s, the sidecar's 0.5 s grid
WINDOW = (1.3, 18.2)                          # a group window between samples


def test_energy_counter_difference_over_exactly_the_window():
    nvml, clock = make([FakeDevice("GPU-1")])
    gpu = open_gpu("GPU-1", nvml)
    assert "energy" in gpu.supported and gpu.missing == {}
    joules, method = energy_over(sample_series(gpu, clock, TIMES), *WINDOW)
    assert method == "nvml_energy_counter"
    exact = trace_energy_j(load_trace(), *WINDOW)
    # The counter is read every 0.5 s and interpolated at the window's ends.
    assert joules == pytest.approx(exact, rel=0.01)


def test_without_a_counter_energy_integrates_real_t4_power():
    nvml, clock = make([FakeDevice("GPU-1", energy_counter=False)])
    gpu = open_gpu("GPU-1", nvml)
    assert gpu.missing == {"energy": "NotSupported"}
    samples = sample_series(gpu, clock, TIMES)
    joules, method = energy_over(samples, *WINDOW)
    assert method == "power_integral"
    exact = trace_energy_j(load_trace(), *WINDOW)
    assert joules == pytest.approx(exact, rel=0.02)  # 0.5 s samples of a ~0.2 s trace
    assert 20 * (WINDOW[1] - WINDOW[0]) < joules < 50 * (WINDOW[1] - WINDOW[0])  # a T4's watts


def test_power_unsupported_too_means_energy_missing_not_zero():
    nvml, clock = make([FakeDevice("GPU-1", energy_counter=False, unsupported={"power"})])
    gpu = open_gpu("GPU-1", nvml)
    assert gpu.missing == {"energy": "NotSupported", "power": "NotSupported"}
    cols = summarise(sample_series(gpu, clock, TIMES), *WINDOW)
    assert cols["energy"] is None and cols["energy_method"] == "none"
    assert format_value(cols["energy"]) == ""  # an empty CSV cell, never "0"
    assert cols["gpu_util_mean"] is not None  # the rest is still measured


def test_mig_slice_without_utilisation_still_records_memory_and_power():
    nvml, clock = make([FakeDevice("MIG-9", unsupported={"utilization"})])
    gpu = open_gpu("MIG-9", nvml)
    assert gpu.missing == {"utilization": "NotSupported"}
    cols = summarise(sample_series(gpu, clock, TIMES), *WINDOW)
    assert cols["gpu_util_mean"] is None and cols["gpu_util_max"] is None
    assert cols["vram_peak_mb"] == pytest.approx(683.875, abs=1e-3)
    assert cols["gpu_power_mean_w"] is not None and cols["energy"] is not None
    # Probed once: no utilisation call after the probe.
    assert nvml.calls.count("utilization") == 1


def test_driver_error_mid_run_blanks_only_those_samples():
    nvml, clock = make([FakeDevice("GPU-1", fail_between={"power": (5.0, 7.0),
                                                          "utilization": (5.0, 7.0)})])
    gpu = open_gpu("GPU-1", nvml)
    samples, errors = [], []
    for t in TIMES:
        clock.t = t
        values, errs = gpu.read()
        samples.append({"t": t, **values})
        errors += errs
    lost = [s for s in samples if 5.0 <= s["t"] <= 7.0]
    assert lost and all(s["power_w"] is None and s["gpu_util_pct"] is None for s in lost)
    assert all(s["mem_used_mib"] is not None for s in lost)  # other metrics unaffected
    assert all(s["power_w"] is not None for s in samples if s["t"] > 7.0)  # it recovered
    assert errors.count("power: GpuIsLost") == len(lost)
    joules, method = energy_over(samples, *WINDOW)  # the counter still spans the window
    assert method == "nvml_energy_counter" and joules > 0


def test_cuda_visible_devices_index_picks_the_right_nvml_device():
    nvml, _ = make([FakeDevice("GPU-aaaa"), FakeDevice("GPU-bbbb", offset=100)])
    env = {"CUDA_VISIBLE_DEVICES": "1", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}
    found = resolve_gpu("cuda", env, nvml)
    assert found["uuid"] == "GPU-bbbb" and found["nvml_index"] == 1
    gpu = open_gpu(found["uuid"], nvml)
    values, _ = gpu.read()
    assert values["gpu_util_pct"] >= 100  # device 1's readings (offset 100), not device 0's
    assert resolve_gpu("cuda:1", {}, nvml)["uuid"] == "GPU-bbbb"
    assert resolve_gpu("cuda", {"CUDA_VISIBLE_DEVICES": "GPU-bb"}, nvml)["uuid"] == "GPU-bbbb"
    assert resolve_gpu("cpu", {}, nvml) is None
    with pytest.raises(ValueError, match="lists 1 device"):
        resolve_gpu("cuda:1", {"CUDA_VISIBLE_DEVICES": "0"}, nvml)
    with pytest.raises(ValueError, match="matches 0"):
        resolve_gpu("cuda", {"CUDA_VISIBLE_DEVICES": "GPU-zz"}, nvml)


def test_device_facts_for_provenance():
    nvml, _ = make([FakeDevice("GPU-1", compute_mode=3)], driver="550.54.15")
    facts = open_gpu("GPU-1", nvml).facts
    assert facts == {"gpu_uuid": "GPU-1", "gpu_name": "Tesla T4", "nv_driver_version": "550.54.15",
                     "gpu_compute_mode": "EXCLUSIVE_PROCESS", "gpu_vram_total_mb": 15360,
                     "gpu_power_limit_w": 70.0}


def test_unknown_uuid_is_a_clear_error():
    nvml, _ = make([FakeDevice("GPU-1")])
    with pytest.raises(RuntimeError, match="NVML has no device GPU-2: NotFound"):
        open_gpu("GPU-2", nvml)


def test_integration_and_window_shorter_than_one_interval():
    pts = [(0.0, 10.0), (1.0, 10.0), (2.0, 30.0)]
    assert integrate(pts, 0.5, 1.5) == pytest.approx(5.0 + 0.5 * (10 + 20) / 2)
    assert integrate(pts, -1.0, 1.0) is None  # not covered: unknown, not a guess
    cols = summarise([{"t": 0.0, "cpu_pct": 50.0}, {"t": 1.0, "cpu_pct": 150.0}], 0.4, 0.45)
    assert cols["cpu_util_mean"] == 50.0 and cols["monitor_samples"] == 0


def test_process_tree_counts_a_busy_child():
    child = subprocess.Popen([sys.executable, "-c", "import time\nt=time.time()\n"
                              "while time.time()-t<3: pass"])
    try:
        tree = ProcessTree(os.getpid())
        tree.read()
        time.sleep(1.0)
        cpu, rss = tree.read()
        assert cpu > 40  # the busy child (this machine may be loaded: not a full core)
        assert rss > 10
    finally:
        child.kill()
        child.wait()


def test_watchdog_reads_device_utilisation_from_monitor_samples():
    clock = Clock()
    dog = Watchdog(WatchdogSettings(interval_s=1.0), os.getpid(), os.getsid(0), clock=clock)
    assert dog.device_util() is None
    dog.sample(MonitorSample.of({"type": "sample", "gpu_util_pct": 87.0}))
    assert dog.device_util() == 87.0
    clock.t = 10.0  # stale samples do not count as a busy device
    assert dog.device_util() is None


def _sidecar(tmp_path, config, interval=0.1, extra=()):
    (tmp_path / "cfg.json").write_text(json.dumps(config))
    env = dict(os.environ, FAKE_NVML_CONFIG=str(tmp_path / "cfg.json"),
               PYTHONPATH=os.pathsep.join([str(FIXTURES / "fake_nvml_site"), str(ROOT)]))
    argv = [sys.executable, "-m", "engine.measure.monitor", "--root-pid", str(os.getpid()),
            "--parent-pid", str(os.getpid()), "--interval", str(interval),
            "--samples", str(tmp_path / "s.csv"), "--events", str(tmp_path / "ev.jsonl"),
            "--meta", str(tmp_path / "m.json"), "--cell", "k", "--attempt", "1", *extra]
    return subprocess.Popen(argv, env=env, stderr=subprocess.PIPE, text=True)


def _wait_for(path: Path, timeout=30.0):
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.05)


def test_sidecar_samples_the_fake_gpu_and_stops_cleanly(tmp_path):
    proc = _sidecar(tmp_path, {"devices": [{"uuid": "GPU-a"},
                                           {"uuid": "GPU-b", "energy_counter": False}]},
                    extra=["--gpu-uuid", "GPU-b"])
    _wait_for(tmp_path / "m.json")
    time.sleep(1.0)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=20) == 0, proc.stderr.read()
    meta = json.loads((tmp_path / "m.json").read_text())
    assert meta["state"] == "stopped" and meta["gpu"]["gpu_uuid"] == "GPU-b"
    assert meta["gpu_missing"] == {"energy": "NotSupported"}
    samples = read_samples(tmp_path / "s.csv")
    assert not (tmp_path / "s.csv.partial").exists()
    assert len(samples) == meta["samples"] >= 5
    assert all(s["power_w"] and s["energy_mj"] is None for s in samples)
    events = [json.loads(line) for line in (tmp_path / "ev.jsonl").read_text().splitlines()]
    assert {e["type"] for e in events} == {"sample"} and len(events) == len(samples)
    assert meta["cpu_s"] < 0.5  # a second of 0.1 s sampling costs little CPU


def test_a_two_second_nvml_call_stalls_the_sampler_not_the_clock(tmp_path):
    """The sampler is a separate process: a slow NVML call delays its own samples only.
    (The cell-level proof that training does not wait is tests/e2e/test_monitor_cells.py.)"""
    proc = _sidecar(tmp_path, {"devices": [{"uuid": "GPU-a", "slow": {"power": 2.0}}]},
                    interval=0.1, extra=["--gpu-uuid", "GPU-a"])
    _wait_for(tmp_path / "m.json", timeout=40)
    time.sleep(2.5)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == 0, proc.stderr.read()
    samples = read_samples(tmp_path / "s.csv")
    gaps = [b["t"] - a["t"] for a, b in zip(samples, samples[1:], strict=False)]
    assert max(gaps) >= 1.9  # each sample waits for the slow call ...
    assert all(s["power_w"] is not None for s in samples)  # ... and still gets its value


_LATE_CHILD = """
import subprocess, sys, time
sys.stdin.readline()
child = subprocess.Popen([sys.executable, "-c",
    "import sys, time\\nt = time.process_time()\\nwhile time.process_time() - t < 0.6: pass\\n"
    "print('burnt', flush=True)\\ntime.sleep(0.3)\\n"
    "if sys.argv[1] == 'stays': time.sleep(60)",
    sys.argv[1]], stdout=sys.stdout)
child.wait()
time.sleep(60)
"""


@pytest.mark.parametrize("child", ["stays", "reaped"])
def test_cpu_spent_before_an_interval_is_owed_never_above_the_host(child):
    """The dashboard's ~5,000 % spike when an mp cell started: a process the tree found at
    a rescan (an mp worker, found up to REFRESH_S late) added ALL its CPU so far to one
    interval, and so did a child born and reaped between two rescans (its CPU lands in its
    parent's children times at once). No reading exceeds the host's cores now (one here),
    and the later readings report the rest: nothing is lost."""
    root = subprocess.Popen([sys.executable, "-c", _LATE_CHILD, child],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        tree = ProcessTree(root.pid)
        tree.REFRESH_S = 1e9          # no rescan until the test asks for one
        tree._cores = 1               # the bound of a one-core host, on any host
        tree.read()
        root.stdin.write("go\n")
        root.stdin.flush()
        assert root.stdout.readline().strip() == "burnt"  # 0.6 s of CPU, not yet seen
        tree.read()
        last = time.monotonic()
        tree._scanned_at = -float("inf")  # the next reading's rescan finds it if it stays
        time.sleep(0.35)                  # (else it is gone, reaped by the root)
        reported = 0.0
        for _ in range(9):
            cpu, _ = tree.read()
            now = time.monotonic()
            # was ~0.6 s / 0.35 s = 170 % in one reading, either way
            assert cpu is not None and cpu <= 100, cpu
            reported += cpu / 100 * (now - last)
            last = now
            time.sleep(0.1)
        # the rest is owed, not dropped: the later readings report it while all sleep
        assert reported >= 0.6 * 0.9, reported  # all of its 0.6 s (ticks aside)
    finally:
        for proc in psutil_children(root.pid):
            proc.kill()
        root.kill()
        root.wait()


def psutil_children(pid):
    import psutil

    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.Error:
        return []


def test_a_reading_milliseconds_after_the_last_reports_no_pct_and_keeps_the_cpu():
    """A mark's sample comes ~10 ms after a regular one: over so short an interval one
    clock tick is hundreds of %. It reports None (missing, not 0) and the next reading
    counts that CPU: a busy process still shows busy."""
    child = subprocess.Popen([sys.executable, "-c", "import time\nt=time.time()\n"
                              "while time.time()-t<3: pass"])
    try:
        tree = ProcessTree(child.pid)
        tree.read()
        time.sleep(0.3)
        tree.read()
        cpu, rss = tree.read()  # microseconds later
        assert cpu is None and rss is not None and rss > 1
        time.sleep(0.5)
        cpu, _ = tree.read()
        assert cpu is not None and 20 < cpu <= 100 * os.cpu_count(), cpu
    finally:
        child.kill()
        child.wait()


def test_a_window_whose_samples_are_its_marks_still_has_its_cpu_use():
    """A fast cell's window holds only its two mark samples, each under 50 ms after a
    reading, which report no CPU % (they leave it to the next reading): cpu_util_mean and
    _max were empty (seen on a ray D_mm cell in CI). The first reading after the window
    opened covers part of it and is used; a metric that no reading has stays missing."""
    samples = [{"t": 0.0, "cpu_pct": 40.0}, {"t": 1.00, "cpu_pct": 90.0},
               {"t": 1.02, "cpu_pct": None}, {"t": 1.30, "cpu_pct": None},
               {"t": 2.00, "cpu_pct": 150.0}, {"t": 3.0, "cpu_pct": 60.0}]
    row = summarise(samples, 1.02, 1.30)
    assert row["cpu_util_mean"] == row["cpu_util_max"] == 150.0
    assert row["gpu_util_mean"] is None  # no reading has it: missing, never 0
    # with a reading inside the window, only the inside ones count
    row = summarise([*samples, {"t": 1.2, "cpu_pct": 120.0}], 1.02, 1.30)
    assert row["cpu_util_mean"] == row["cpu_util_max"] == 120.0
    assert summarise([{"t": 1.0, "cpu_pct": None}], 0.5, 1.5)["cpu_util_mean"] is None
