"""mp's packing (issue 27, "the seeds' recipe"), the parts that need no worker process:
device resolution against a fake NVML with several GPUs, MIG slices and an outer
``CUDA_VISIBLE_DEVICES``; the round-robin placement and the per-device bound; the cell
keys of a packed cell; the analysis that never gives a packed row a single-GPU speedup;
and the refusal of a worker that cannot be re-pinned (a forked child whose CUDA is
initialised). The executor with real workers: tests/unit/engine/executors/test_packing_mp.py."""

from __future__ import annotations

import multiprocessing
import os
import sys
from contextlib import contextmanager
from pathlib import Path

import pandas as pd
import pytest

from engine.define.campaign import load_campaign
from engine.define.matrix import build_cells
from engine.executors import packing
from engine.measure import gpu_pool
from engine.results.analysis import PACKED_BASELINE, speedups
from engine.results.load import runs_from_frames
from tests.fixtures.fake_nvml import FakeDevice, FakeMigDevice, FakeMigGpu, FakeNVML

H200 = "NVIDIA H200"


def _nvml(*devices) -> FakeNVML:
    return FakeNVML(list(devices))


def _host() -> FakeNVML:
    """Two H200s, a T4, and an A100 in MIG mode with two slices."""
    return _nvml(FakeDevice("GPU-h200-aaaa", name=H200), FakeDevice("GPU-h200-bbbb", name=H200),
                 FakeDevice("GPU-t4-cccc"),
                 FakeMigGpu("GPU-a100-dddd", migs=[FakeMigDevice("MIG-slice-0000"),
                                                   FakeMigDevice("MIG-slice-1111")]))


# ------------------------------------------------------------------ resolution

def test_cuda_indices_uuids_prefixes_and_auto_resolve_to_uuids():
    found = gpu_pool.resolve(["cuda:1", "GPU-t4", "MIG-slice-1111"], {}, _host())
    assert [d.uuid for d in found] == ["GPU-h200-bbbb", "GPU-t4-cccc", "MIG-slice-1111"]
    assert [d.name for d in found] == [H200, "Tesla T4", "NVIDIA A100-SXM4-40GB MIG 1g.5gb"]
    # auto: every GPU CUDA would show (a MIG slice only when named, as CUDA does)
    auto = gpu_pool.resolve("auto", {}, _host())
    assert [d.uuid for d in auto] == ["GPU-h200-aaaa", "GPU-h200-bbbb", "GPU-t4-cccc",
                                      "GPU-a100-dddd"]


def test_an_outer_cuda_visible_devices_is_indexed_into_never_escaped():
    """A scheduler's allocation (entries 2 and 0, an NVML index and a UUID): cuda:0 is its
    first entry, auto is exactly it, and a device outside it is refused."""
    outer = {"CUDA_VISIBLE_DEVICES": "2,GPU-h200-aaaa"}
    assert [d.uuid for d in gpu_pool.resolve(["cuda:0", "cuda:1"], outer, _host())] == [
        "GPU-t4-cccc", "GPU-h200-aaaa"]
    assert [d.uuid for d in gpu_pool.resolve("auto", outer, _host())] == [
        "GPU-t4-cccc", "GPU-h200-aaaa"]
    with pytest.raises(ValueError, match="lists 2 usable"):
        gpu_pool.resolve(["cuda:2"], outer, _host())
    with pytest.raises(ValueError, match="'GPU-h200-bbbb': no device"):
        gpu_pool.resolve(["GPU-h200-bbbb"], outer, _host())
    mig = {"CUDA_VISIBLE_DEVICES": "MIG-slice-0000,MIG-slice-1111"}
    assert [d.uuid for d in gpu_pool.resolve("auto", mig, _host())] == [
        "MIG-slice-0000", "MIG-slice-1111"]


@pytest.mark.parametrize("value, match", [
    (["MIG-slice-9999"], "no device"), (["cuda:0", "GPU-h200-aaaa"], "same device"),
    (["cuda:0", "cuda:0"], "listed twice"), ("cuda:0", "a list such as"), ([], "non-empty"),
    (["gpu1"], "not \"cuda:N\""), (["GPU-h200"], "2 device")])
def test_bad_devices_are_refused_with_the_reason(value, match):
    with pytest.raises(ValueError, match=match):
        gpu_pool.resolve(value, {}, _host())


def test_the_command_line_takes_devices_as_a_comma_list():
    from fugue_tui.commands.run import _add_option

    options: dict = {}
    _add_option(options, "mp.devices=cuda:0,GPU-h200-bbbb")
    _add_option(options, "mp.jobs_per_device=3")
    assert options == {"mp": {"devices": ["cuda:0", "GPU-h200-bbbb"], "jobs_per_device": 3}}
    _add_option(options, "mp.devices=auto")
    assert options["mp"]["devices"] == "auto"
    # the dashboard's option field reads the same text the same way
    from engine.executors import MPOptions  # noqa: F401 - registers mp
    from engine.registry import EXECUTORS
    from fugue_tui.app.models.plan import format_option, parse_option

    field = EXECUTORS.get("mp").option_fields["devices"]
    assert parse_option("cuda:0, cuda:1", field.types, field.axis) == ["cuda:0", "cuda:1"]
    assert parse_option("GPU-h200-aaaa", field.types, field.axis) == ["GPU-h200-aaaa"]
    assert parse_option("auto", field.types, field.axis) == "auto"
    assert format_option(["cuda:0", "cuda:1"]) == "cuda:0,cuda:1"


# ------------------------------------------------------------------ placement

def test_round_robin_placement_and_per_device_bound():
    assert packing.assign(7, 3) == [0, 1, 2, 0, 1, 2, 0]
    slots = packing.Slots(7, 3, per_device=2)
    started = []
    while (job := slots.next()) is not None:
        started.append(job)
    assert started == [0, 1, 2, 3, 4, 5] and slots.running == [2, 2, 2]
    slots.done(4)  # device 1 frees a slot: its queue is empty, device 0's job 6 still waits
    assert slots.next() is None
    slots.done(0)
    assert slots.next() == 6 and not slots.waiting()
    total = packing.Slots(4, 2, per_device=2, total=3)  # max_parallel caps the sum
    assert [total.next() for _ in range(4)] == [0, 1, 2, None]


def test_a_worker_whose_cuda_is_initialised_cannot_be_repinned():
    packing.check_repin("GPU-b", {}, cuda_initialized=False)  # fresh: fine
    packing.check_repin("GPU-b", {"CUDA_VISIBLE_DEVICES": "GPU-b"}, cuda_initialized=True)
    with pytest.raises(RuntimeError, match="cannot pin this worker to GPU-b.*'GPU-a'"):
        packing.check_repin("GPU-b", {"CUDA_VISIBLE_DEVICES": "GPU-a"}, cuda_initialized=True)


def test_a_spawned_worker_pins_before_torch_is_imported():
    """``start = "spawn"``: the child imports ``worker_main``'s module and runs it; its pin
    (the first thing it does) must find no torch, so nothing it imported may load torch."""
    import subprocess

    code = ("import sys, engine.executors.mp.worker, engine.executors.packing; "
            "print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, check=True)
    assert out.stdout.strip() == "False"


def _initialised_worker(conn) -> None:
    """A forked child whose CUDA counts as initialised on GPU-a, asked to train pinned to
    GPU-b: ``worker_main`` must refuse before anything else."""
    import torch

    from engine.executors.mp.worker import worker_main

    torch.cuda.is_initialized = lambda: True  # as after a first CUDA call in this process
    os.environ["CUDA_VISIBLE_DEVICES"] = "GPU-a"
    worker_main(conn, {}, {"pin": "GPU-b"}, 1, {"CUDA_VISIBLE_DEVICES": "GPU-b"}, os.getppid())


def test_worker_main_refuses_a_repin_in_its_error_message():
    import torch  # noqa: F401 - the forked child has it, as a forkserver worker does

    ctx = multiprocessing.get_context("fork")
    receiver, sender = ctx.Pipe(duplex=False)
    child = ctx.Process(target=_initialised_worker, args=(sender,))
    child.start()
    sender.close()
    kind, line = receiver.recv()
    child.join(30)
    assert kind == "error" and "cannot pin this worker to GPU-b" in line and "GPU-a" in line
    assert child.exitcode == 1


# ------------------------------------------------------------------ keys

MACHINE = {"host": "golden-host", "device": "cpu", "torch": "2.x"}


@contextmanager
def fake_host(nvml: FakeNVML, visible: str | None = None):
    """``import pynvml`` answers ``nvml``; the outer CUDA_VISIBLE_DEVICES is ``visible``."""
    saved_mod, saved_env = sys.modules.get("pynvml"), os.environ.get("CUDA_VISIBLE_DEVICES")
    sys.modules["pynvml"] = nvml
    os.environ.pop("CUDA_VISIBLE_DEVICES", None)
    if visible is not None:
        os.environ["CUDA_VISIBLE_DEVICES"] = visible
    try:
        yield
    finally:
        if saved_mod is None:
            sys.modules.pop("pynvml", None)
        else:
            sys.modules["pynvml"] = saved_mod
        os.environ.pop("CUDA_VISIBLE_DEVICES", None)
        if saved_env is not None:
            os.environ["CUDA_VISIBLE_DEVICES"] = saved_env


def _plan(tmp: Path, mp_options: str, nvml: FakeNVML | None = None,
          visible: str | None = None) -> dict[str, object]:
    path = tmp / "c.toml"
    path.write_text('name = "g"\nexperiments = "D_ens"\nexecutors = ["seq", "mp"]\n'
                    f'threads = 1\n[options.mp]\nmps = "off"\n{mp_options}')
    with fake_host(nvml or _host(), visible):
        cells = build_cells(load_campaign(path), MACHINE)
    return {c.executor: c for c in cells}


def test_packed_cells_are_keyed_by_the_gpu_models_never_the_uuids(tmp_path):
    plain = _plan(tmp_path, "")
    listed = _plan(tmp_path, 'devices = ["cuda:0", "cuda:1"]\njobs_per_device = 2\n')
    auto = _plan(tmp_path, 'devices = "auto"\njobs_per_device = 2\n',
                 visible="GPU-h200-aaaa,GPU-h200-bbbb")
    others = _plan(tmp_path, 'devices = ["cuda:0", "cuda:1"]\njobs_per_device = 2\n',
                   nvml=_nvml(FakeDevice("GPU-h200-eeee", name=H200),
                              FakeDevice("GPU-h200-ffff", name=H200)))
    mixed = _plan(tmp_path, 'devices = ["cuda:0", "cuda:2"]\njobs_per_device = 2\n')
    # absent is not hashed: seq and the unpacked mp keep their keys; seq's never moves
    assert listed["seq"].key == plain["seq"].key and mixed["seq"].key == plain["seq"].key
    assert listed["mp"].config_key != plain["mp"].config_key
    # the same models in the same order: the same configuration, whichever UUIDs
    assert auto["mp"].key == listed["mp"].key == others["mp"].key
    assert mixed["mp"].config_key != listed["mp"].config_key  # an H200 + a T4 is another
    # the cell runs on the UUIDs (resolved in the runner's environment)
    assert listed["mp"].options["devices"] == ["GPU-h200-aaaa", "GPU-h200-bbbb"]
    assert others["mp"].options["devices"] == ["GPU-h200-eeee", "GPU-h200-ffff"]
    assert plain["mp"].options.get("devices") is None


# ------------------------------------------------------------------ analysis

def _row(executor: str, t: float, key: str, packed: str = "") -> dict:
    return {"exp_id": "D_ens", "executor": executor, "T_group": str(t), "status": "ok",
            "config_key": key, "compile_mode": "off", "machine": "m", "host": "m",
            "pass": "1", "mp_start": "forkserver" if executor == "mp" else "",
            "packed_devices": packed}


def test_a_packed_row_never_enters_a_single_gpu_speedup():
    rows = [_row("seq", 4.0, "s"), _row("mp", 2.0, "one"),
            _row("mp", 1.0, "two", "GPU-h200-aaaa,GPU-h200-bbbb"),
            _row("mp", 3.0, "solo", "GPU-h200-aaaa")]  # packing onto one device: comparable
    table = speedups(runs_from_frames(pd.DataFrame(rows)), n_boot=0).set_index("config_key")
    assert table.loc["one", "speedup"] == 2.0
    assert pd.isna(table.loc["two", "speedup"]) and table.loc["two", "baseline"] == PACKED_BASELINE
    assert table.loc["solo", "speedup"] == pytest.approx(4 / 3)
    assert table.loc["two", "T_group_mean"] == 1.0  # its own numbers stay
    # nor a time-to-best speedup (hpo), which divides by a one-GPU seq just the same
    ttb = [{**r, "time_to_best_s": str(float(r["T_group"]) / 2), "group_id": f"g{i}"}
           for i, r in enumerate(rows)]
    table_ttb = speedups(runs_from_frames(pd.DataFrame(ttb)), n_boot=0).set_index("config_key")
    assert pd.isna(table_ttb.loc["two", "ttb_speedup"])
    assert table_ttb.loc["two", "ttb_baseline"] == PACKED_BASELINE
    from fugue_tui.report.cell_tables import cell_values as _cell_values

    shown = {r["config_key"]: _cell_values(r)["speedup"]
             for r in table.reset_index().to_dict("records")}
    assert shown["two"] == "n/a (packed)" and shown["one"] == "2.000"
