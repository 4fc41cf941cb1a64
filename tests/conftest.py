"""Shared test set-up: GPU-marked tests skip without a CUDA device (checked through NVML so
that collecting tests never creates a CUDA context)."""

from __future__ import annotations

import pytest

from engine.measure.provenance import nvml_devices
from engine.plugins import load_builtins

# The test process's entry: register the built-ins once, as every entry point of the product
# does (the registries import nothing by themselves).
load_builtins()


def pytest_collection_modifyitems(config, items):
    if nvml_devices():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU (none visible through NVML)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)

