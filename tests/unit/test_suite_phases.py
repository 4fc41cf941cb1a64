"""scripts/test's two phases (README, "Development") together run every test once: every
end-to-end test is marked ``serial`` (tests/conftest.py) and so runs in the second phase,
alone; a unit test that measures the host carries the mark itself."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _collect(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q",
                           "-p", "no:cacheprovider", "-o", "addopts=", *args],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)


def test_every_e2e_test_is_serial_and_a_host_measurement_too():
    e2e = _collect("-m", "not serial", "tests/e2e")
    assert e2e.returncode == 5, e2e.stdout[-2000:]  # 5: nothing collected — all serial
    serial = _collect("-m", "serial", "tests/e2e", "tests/unit/engine/measure/test_core_meter.py")
    ids = [line for line in serial.stdout.splitlines() if "::" in line]
    assert any(i.startswith("tests/unit/engine/measure/test_core_meter.py::") for i in ids)
    assert sum(i.startswith("tests/e2e/") for i in ids) > 50
