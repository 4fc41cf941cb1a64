"""Shared test set-up: GPU tests (every test under tests/gpu/, and any marked ``gpu``) skip
without a CUDA device (checked through NVML so that collecting tests never creates a CUDA
context). The files under tests/gpu/ import no pytest (bench/gpu_check.py runs them on a GPU
machine that may have none), so they get the ``gpu`` mark here, from their folder."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.measure.provenance import nvml_devices
from engine.plugins import load_builtins

# The test process's entry: register the built-ins once, as every entry point of the product
# does (the registries import nothing by themselves).
load_builtins()

GPU_TESTS = Path(__file__).resolve().parent / "gpu"
E2E_TESTS = Path(__file__).resolve().parent / "e2e"


def pytest_collection_modifyitems(config, items):
    for item in items:
        parents = Path(str(item.fspath)).resolve().parents
        if GPU_TESTS in parents:
            item.add_marker(pytest.mark.gpu)
        if E2E_TESTS in parents:
            # scripts/test runs these alone, after the rest: real cells under a watchdog,
            # tmux terminals and Ray clusters, timed against a host nobody else loads
            item.add_marker(pytest.mark.serial)
    if nvml_devices():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU (none visible through NVML)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)



# -- parity probes (tests/parity.py; the kernel-dispatch matrix, scripts/parity-matrix) --
_PARITY_RECORDS = pytest.StashKey[list]()


@pytest.fixture
def parity(request):
    """Compare through the parity contract and record what was compared (tests/parity.py).
    Imported here, not at the top: collecting tests must not import torch."""
    from tests.parity import Parity

    records = request.config.stash.setdefault(_PARITY_RECORDS, [])
    return Parity(request.node.nodeid, records)


@pytest.fixture
def module_parity(request, parity):
    """The test's probes as its module's ``PARITY`` global, for modules whose helpers
    compare through them (``pytestmark = pytest.mark.usefixtures("module_parity")``)."""
    request.module.PARITY = parity
    yield parity
    request.module.PARITY = None


def pytest_itemcollected(item):
    # A test that compares through the contract is parity-sensitive: the matrix re-runs it.
    if "parity" in getattr(item, "fixturenames", ()):
        item.add_marker(pytest.mark.parity)


def pytest_sessionfinish(session, exitstatus):
    import os

    target = os.environ.get("FUGUE_PARITY_RECORD")
    if target:
        from tests.parity import write

        write(session.config.stash.get(_PARITY_RECORDS, []), target)


# -- the fuzzer (tests/unit/fugue_tui/cli/test_fuzz_campaigns.py) ------------------------
def pytest_terminal_summary(terminalreporter):
    """One ``fuzz:`` line per fuzzer test that ran: its example count and time (the test
    records them as a property), so that CI's log says how much was fuzzed and how long."""
    for report in terminalreporter.stats.get("passed", []) + terminalreporter.stats.get(
            "failed", []):
        for name, value in getattr(report, "user_properties", ()):
            if name == "fuzz" and report.when == "call":
                terminalreporter.write_line(f"fuzz: {report.nodeid.rpartition('::')[2]}: "
                                            f"{value}")
