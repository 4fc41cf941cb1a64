"""Power readings: NVML's instantaneous field where the driver offers it, the averaged
reading otherwise, and the ``power_method`` column that says which (docs/measurement.md,
"Device metrics"). On Ampere and later ``nvmlDeviceGetPowerUsage`` is a one-second
average: sampled every 0.5 s it smooths the power curve that ``gpu_power_mean_w`` and the
power-integral energy are made of. Fake NVML at the hardware boundary (real nvidia-ml-py
field structures and exceptions, a real T4 power trace)."""

from __future__ import annotations

import json
import signal
import sys
from pathlib import Path

import pytest

from engine.cell.sidecar import CellMonitor
from engine.measure.energy import summarise
from engine.measure.nvml import open_gpu

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures"
sys.path.insert(0, str(FIXTURES))
from fake_nvml import FakeDevice, FakeNVML  # noqa: E402

from tests.unit.engine.measure.test_monitor import (  # noqa: E402
    TIMES,
    WINDOW,
    Clock,
    _sidecar,
    _wait_for,
)


def _open(**device):
    clock = Clock()
    nvml = FakeNVML([FakeDevice("GPU-1", **device)], clock=clock)
    return nvml, clock, open_gpu("GPU-1", nvml)


def _series(gpu, clock):
    out = []
    for t in TIMES:
        clock.t = t
        values, errors = gpu.read()
        assert errors == []
        out.append({"t": t, **values})
    return out


def test_instant_field_is_read_where_the_driver_offers_it():
    nvml, clock, gpu = _open(instant_power=True, power_average_s=1.0)
    assert gpu.power_method == "instant" and "power" in gpu.supported
    samples = _series(gpu, clock)
    dev = nvml.devices[0]
    for s in samples:
        assert s["power_w"] == pytest.approx(FakeNVML._at(dev, s["t"])[1], abs=1e-3)
    # The averaged reading would have said something else on this trace ...
    assert any(abs(s["power_w"] - nvml.average_power_w(dev, s["t"])) > 1.0 for s in samples)
    # ... and it is never asked for.
    assert nvml.calls.count("power") == 0
    assert nvml.calls.count("power_instant") == len(TIMES) + 1  # the probe, then each sample


def test_averaged_reading_where_the_field_is_missing():
    nvml, clock, gpu = _open(instant_power=False, power_average_s=1.0)
    assert gpu.power_method == "average" and "power" in gpu.supported
    assert "power" not in gpu.missing  # power is there; only its instant form is not
    dev = nvml.devices[0]
    for s in _series(gpu, clock):
        assert s["power_w"] == pytest.approx(nvml.average_power_w(dev, s["t"]), abs=1e-3)


def test_no_power_at_all_has_no_method():
    _, _, gpu = _open(instant_power=True, unsupported={"power"})
    assert gpu.power_method is None and gpu.missing["power"] == "NotSupported"


def test_an_instant_read_failing_mid_run_blanks_that_sample_only():
    _, clock, gpu = _open(instant_power=True, fail_between={"power": (5.0, 7.0)})
    clock.t = 6.0
    values, errors = gpu.read()
    assert values["power_w"] is None and errors == ["power: GpuIsLost"]
    clock.t = 8.0
    values, errors = gpu.read()
    assert values["power_w"] is not None and errors == []
    assert gpu.power_method == "instant"  # no silent switch to the averaged reading


def _monitor(tmp_path, method, samples) -> CellMonitor:
    monitor = CellMonitor(tmp_path, "seq_1", tmp_path / "events.jsonl", "c", 1, "GPU-1")
    monitor.meta = {"gpu": {"gpu_uuid": "GPU-1"}, "power_method": method}
    monitor.samples = samples
    return monitor


@pytest.mark.parametrize("method", ["instant", "average"])
def test_rows_say_which_power_their_values_are_made_of(tmp_path, method):
    """Group: behind gpu_power_mean_w (and a power-integral energy); job: behind its
    power-integral energy only."""
    _, clock, gpu = _open(instant_power=method == "instant", power_average_s=1.0,
                          energy_counter=False)
    samples = _series(gpu, clock)
    monitor = _monitor(tmp_path, gpu.power_method, samples)
    group = monitor.group_columns(*WINDOW)
    assert group["gpu_power_mean_w"] is not None and group["energy_method"] == "power_integral"
    assert group["power_method"] == method
    job = monitor.job_columns("J0", *WINDOW, shared=False)
    assert job["energy_method"] == "power_integral" and job["power_method"] == method
    # Jobs sharing the device have no power-derived column of their own.
    assert "power_method" not in monitor.job_columns("J0", *WINDOW, shared=True)


def test_rows_without_power_leave_the_method_empty(tmp_path):
    _, clock, gpu = _open(unsupported={"power"})
    monitor = _monitor(tmp_path, gpu.power_method, _series(gpu, clock))
    group = monitor.group_columns(*WINDOW)
    assert group["gpu_power_mean_w"] is None and group["power_method"] is None
    # A job whose energy comes from the counter used no power reading.
    job = monitor.job_columns("J0", *WINDOW, shared=False)
    assert job["energy_method"] == "nvml_energy_counter" and job.get("power_method") is None
    assert summarise(monitor.samples, *WINDOW)["gpu_power_mean_w"] is None


def test_sidecar_records_the_method(tmp_path):
    """The sidecar process (fake pynvml on its path) writes the method into its meta file,
    which the cell reads."""
    proc = _sidecar(tmp_path, {"devices": [{"uuid": "GPU-a", "instant_power": True}]},
                    interval=0.1, extra=["--gpu-uuid", "GPU-a"])
    _wait_for(tmp_path / "m.json")
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=20) == 0, proc.stderr.read()
    meta = json.loads((tmp_path / "m.json").read_text())
    assert meta["power_method"] == "instant"
