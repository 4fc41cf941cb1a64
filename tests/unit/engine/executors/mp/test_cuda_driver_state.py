"""``parent_preload.cuda_driver_state``: what the pre-warmed parent asks the CUDA driver
before any worker is forked from it. The driver is the hardware boundary: a stand-in
``libcuda.so.1`` (compiled here, a C compiler needed) answers ``cuDeviceGetCount`` as the
real one does before and after ``cuInit``; the mapping, ``RTLD_NOLOAD`` and the call are
real."""

from __future__ import annotations

import ctypes
import shutil
import subprocess

import pytest

from engine.executors.mp.parent_preload import cuda_driver_state

FAKE = r"""
int fake_rc = 3;               /* CUDA_ERROR_NOT_INITIALIZED: nobody called cuInit */
int cuDeviceGetCount(int *count) { *count = fake_rc == 0 ? 1 : 0; return fake_rc; }
"""


@pytest.fixture(scope="module")
def fake_driver(tmp_path_factory):
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("needs a C compiler to build the stand-in libcuda")
    folder = tmp_path_factory.mktemp("driver")
    (folder / "fake.c").write_text(FAKE)
    lib = folder / "libcuda.so.1"
    subprocess.run([cc, "-shared", "-fPIC", "-o", str(lib), str(folder / "fake.c")],
                   check=True, capture_output=True)
    return lib


def test_no_driver_mapped_is_absent(tmp_path):
    maps = tmp_path / "maps"
    maps.write_text("7f00-7f01 r-xp 0 00:00 0 /usr/lib/libc.so.6\n")
    assert cuda_driver_state(str(maps)) == "absent"
    assert cuda_driver_state(str(tmp_path / "none")).startswith("unknown: ")


def test_a_mapped_library_not_loaded_here_is_not_loaded_to_ask(tmp_path, fake_driver):
    """A maps file naming a libcuda this process has not loaded: RTLD_NOLOAD refuses,
    so asking loads nothing and the answer is "unknown" (refused by the parent's check)."""
    other = tmp_path / "libcuda.so.1"
    shutil.copy(fake_driver, other)
    maps = tmp_path / "maps"
    maps.write_text(f"7f00-7f01 r-xp 0 00:00 0 {other}\n")
    assert cuda_driver_state(str(maps)).startswith("unknown: ")
    assert str(other) not in open("/proc/self/maps").read()


def test_the_driver_is_asked_whether_cuinit_ran(fake_driver):
    lib = ctypes.CDLL(str(fake_driver))  # mapped, as a CUDA build's import maps it
    rc = ctypes.c_int.in_dll(lib, "fake_rc")
    rc.value = 3
    assert cuda_driver_state() == "loaded"
    rc.value = 0  # cuInit ran: the count is answered
    assert cuda_driver_state() == "initialised"
    rc.value = 100  # CUDA_ERROR_NO_DEVICE: cuInit ran and found none
    assert cuda_driver_state() == "initialised (CUresult 100)"
    rc.value = 3
