"""The watchdog on a device that reports no utilisation (a MIG slice): the per-instance
activity NVML still offers (memory used moving between checks) stands in for utilisation;
where the device tells nothing, the device condition is dropped and the cell is hung only
after twice ``hung_after`` checks, saying so. Real idle processes, the monitor's own sampler
over the fake NVML's MIG handles (real nvidia-ml-py exceptions)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pynvml
import pytest

from engine.event_types import MonitorSample
from engine.measure.monitor import Sampler
from engine.measure.nvml import open_gpu
from engine.runner.watchdog import Watchdog, WatchdogSettings

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "fixtures"))
from fake_nvml import (
    MIG_UNSUPPORTED,
    FakeMigDevice,
    FakeMigGpu,
    FakeNVML,
    flat_trace,
    ramp_trace,
)

FAST = WatchdogSettings(interval_s=0.1, suspect_after=2, hung_after=3)
#: Samples the monitor takes between two checks (it samples faster than the watchdog checks).
SAMPLES_PER_CHECK = 2


@pytest.fixture(scope="module")
def idle_pid():
    """A process that uses no CPU and reports nothing: the watchdog's other two conditions
    hold, so only the device decides."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"],
                            start_new_session=True)
    time.sleep(0.3)  # past interpreter start-up
    yield proc.pid
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def mig_nvml(**mig_fields) -> FakeNVML:
    """An A100 in MIG mode with one slice, ``MIG-slice``."""
    slice_ = FakeMigDevice("MIG-slice", **mig_fields)
    return FakeNVML([FakeMigGpu("GPU-parent", migs=[slice_])])


def watch(nvml: FakeNVML, pid: int, checks: int):
    """Run ``checks`` checks of a GPU cell whose monitor samples the MIG slice in between."""
    sampler = Sampler(pid, open_gpu("MIG-slice", nvml))
    dog = Watchdog(FAST, pid, pid, has_device=True)
    out = []
    for _ in range(checks):
        for _ in range(SAMPLES_PER_CHECK):
            time.sleep(FAST.interval_s / SAMPLES_PER_CHECK)
            dog.sample(MonitorSample.of({"type": "sample", **sampler.sample()}))
        out.append(dog.check())
    return out


def test_fake_mig_handles_behave_like_nvml():
    nvml = mig_nvml(trace=flat_trace(9000.0))
    nvml.nvmlInit()
    parent = nvml.nvmlDeviceGetHandleByIndex(0)
    assert nvml.nvmlDeviceGetMigMode(parent) == [pynvml.NVML_DEVICE_MIG_ENABLE] * 2
    mig = nvml.nvmlDeviceGetMigDeviceHandleByIndex(parent, 0)
    assert nvml.nvmlDeviceIsMigDeviceHandle(mig) and not nvml.nvmlDeviceIsMigDeviceHandle(parent)
    assert nvml.nvmlDeviceGetHandleByUUID("MIG-slice") is mig
    assert nvml.nvmlDeviceGetDeviceHandleFromMigDeviceHandle(mig) is parent
    assert nvml.nvmlDeviceGetCount() == 1  # MIG devices are not enumerated by index
    with pytest.raises(pynvml.NVMLError_NotSupported):
        nvml.nvmlDeviceGetUtilizationRates(mig)
    assert nvml.nvmlDeviceGetMemoryInfo(mig).used == 9000 * 2**20
    with pytest.raises(pynvml.NVMLError_NotFound):
        nvml.nvmlDeviceGetMigDeviceHandleByIndex(parent, 1)
    gpu = open_gpu("MIG-slice", nvml)  # what the monitor opens
    assert gpu.supported == ["memory"] and gpu.missing["utilization"] == "NotSupported"


def test_working_mig_slice_is_not_hung(idle_pid):
    """No utilisation, no progress event, no CPU, 250 W: memory used moving between checks
    is the slice's own sign of work, and the cell is never hung (it was, when unknown
    utilisation counted as idle)."""
    checks = watch(mig_nvml(trace=ramp_trace(9000.0, 9600.0)), idle_pid, 2 * FAST.hung_after + 2)
    assert [c.state for c in checks] == ["ok"] * len(checks)
    assert "device memory changing" in checks[-1].describe()


def test_blocked_mig_slice_is_still_hung(idle_pid):
    """A truly blocked cell on a slice: its memory stays put, so it is hung after hung_after
    checks like any other, and the reason says what the device showed."""
    checks = watch(mig_nvml(trace=flat_trace(9000.0)), idle_pid, FAST.hung_after + 1)
    # the first check has no CPU baseline; then a strike per check
    assert [c.state for c in checks] == ["ok", "ok", "suspect", "hung"]
    assert "device memory unchanged (utilisation not reported)" in checks[-1].describe()


def test_device_that_tells_nothing_needs_twice_hung_after(idle_pid):
    """Neither utilisation nor memory: the device condition is dropped and twice as many
    quiet checks are needed; the reason says the device signal was unknown."""
    nvml = mig_nvml(trace=flat_trace(9000.0), unsupported=set(MIG_UNSUPPORTED) | {"memory"})
    checks = watch(nvml, idle_pid, 2 * FAST.hung_after + 1)
    states = [c.state for c in checks]
    assert states[FAST.hung_after] == "suspect"  # where a known-idle device would be hung
    assert states[:-1].count("hung") == 0 and states[-1] == "hung"
    assert checks[-1].strikes == 2 * FAST.hung_after
    assert "device signal unknown" in checks[-1].describe()


def test_gpu_cell_without_any_sample_needs_twice_hung_after(idle_pid):
    """A GPU cell whose monitor sends nothing (monitor off, or not started yet)."""
    dog = Watchdog(FAST, idle_pid, idle_pid, has_device=True)
    states = []
    for _ in range(2 * FAST.hung_after + 1):
        time.sleep(FAST.interval_s)
        states.append(dog.check().state)
    assert states[FAST.hung_after] == "suspect" and states[-1] == "hung"
    assert "hung" not in states[:-1]
