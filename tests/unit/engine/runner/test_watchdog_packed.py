"""The watchdog of a packed cell (mp/ray ``devices``, issue 27): its jobs may run on GPUs
other than the one its monitor samples, with little host CPU. Every packed device is read
(fake NVML, real nvidia-ml-py exceptions): a cell busy only on its second device is not
suspected; one idle on every device still is, and is hung."""

from __future__ import annotations

import time
from types import SimpleNamespace

from engine.event_types import MonitorSample
from engine.runner.attempt import Attempt
from engine.runner.watchdog import MEMORY, UNKNOWN, UTILISATION, PackedDevices, Watchdog
from tests.fixtures.fake_nvml import (
    FakeDevice,
    FakeMigDevice,
    FakeMigGpu,
    FakeNVML,
    flat_trace,
    ramp_trace,
)
from tests.unit.engine.runner.test_watchdog_mig import FAST, idle_pid  # noqa: F401 - a fixture

IDLE_SAMPLE = MonitorSample.of({"type": "sample", "gpu_util_pct": 0.0, "mem_used_mib": 900.0})


def _checks(pid: int, packed: PackedDevices, n: int = 4):
    """``n`` checks of an idle process on GPU-a (its monitor: 0 %) packed onto others."""
    dog = Watchdog(FAST, pid, pid, has_device=True, packed=packed)
    out = []
    for _ in range(n):
        time.sleep(FAST.interval_s)
        dog.sample(IDLE_SAMPLE)
        out.append(dog.check())
    return out


def _nvml(second: FakeDevice | FakeMigGpu) -> FakeNVML:
    return FakeNVML([FakeDevice("GPU-a", trace=flat_trace(900.0)), second])


def test_a_cell_busy_only_on_its_second_device_is_not_suspected(idle_pid):  # noqa: F811
    busy = _nvml(FakeDevice("GPU-b", trace=flat_trace(4000.0, util=85.0)))
    checks = _checks(idle_pid, PackedDevices(["GPU-b"], busy))
    assert [c.state for c in checks] == ["ok"] * 4 and all(c.strikes == 0 for c in checks)
    assert checks[-1].device_busy and checks[-1].device_util_pct == 85.0
    # a MIG slice (no utilisation) whose memory keeps moving counts as busy too
    slice_ = FakeMigDevice("MIG-b", trace=ramp_trace(1000.0, 5000.0))
    moving = _checks(idle_pid, PackedDevices(["MIG-b"], _nvml(FakeMigGpu("GPU-p",
                                                                         migs=[slice_]))))
    assert moving[-1].state == "ok" and moving[-1].device_signal == MEMORY


def test_a_cell_idle_on_every_device_is_still_suspected_then_hung(idle_pid):  # noqa: F811
    idle = _nvml(FakeDevice("GPU-b", trace=flat_trace(4000.0, util=0.0)))
    checks = _checks(idle_pid, PackedDevices(["GPU-b"], idle))
    assert [c.state for c in checks] == ["ok", "ok", "suspect", "hung"]  # 1st: no CPU yet
    assert checks[-1].device_signal == UTILISATION and checks[-1].device_busy is False
    assert "packed GPU-b at 0 %" in checks[-1].describe()
    # a packed device NVML cannot open: its signal is unknown, so twice the evidence
    lost = _checks(idle_pid, PackedDevices(["GPU-gone"], idle), n=5)
    assert lost[-1].device_signal == UNKNOWN and lost[-1].state == "suspect"
    assert "packed GPU-gone signal unknown" in lost[-1].describe()


def test_the_attempt_watches_the_packed_devices_besides_its_own():
    def dog(options, gpu_uuid="GPU-a"):
        attempt = SimpleNamespace(
            settings=SimpleNamespace(watchdog=FAST),
            cell=SimpleNamespace(executor="mp", options=options),
            spec=SimpleNamespace(device="cuda:0", device_requested="cuda:0", gpu_uuid=gpu_uuid))
        return Attempt._watchdog(attempt, SimpleNamespace(pid=1))

    assert dog({"devices": ["GPU-a", "GPU-b", "GPU-c"]}).packed.uuids == ["GPU-b", "GPU-c"]
    assert dog({}).packed is None and dog({"devices": ["GPU-a"]}).packed is None


def test_a_lane_requested_by_uuid_is_watched_as_a_gpu_cell():
    """A several-device lane records the UUID it was given as device_requested; it was
    watched as a CPU cell (no device signal) because only "cuda…" counted as a GPU."""
    def dog(requested):
        attempt = SimpleNamespace(
            settings=SimpleNamespace(watchdog=FAST),
            cell=SimpleNamespace(executor="seq", options={}),
            spec=SimpleNamespace(device=requested, device_requested=requested, gpu_uuid=None))
        return Attempt._watchdog(attempt, SimpleNamespace(pid=1))

    assert dog("GPU-a").has_device and dog("MIG-a/1/0").has_device and dog("cuda:1").has_device
    assert not dog("cpu").has_device
