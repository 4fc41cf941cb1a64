"""A campaign's ``devices`` (issue 27): parsing, resolution against NVML (the fake NVML
of tests/fixtures with several GPUs, MIG slices and an outer CUDA_VISIBLE_DEVICES),
placement, the core split, and the key rule (host and GPU model, never the UUID)."""

from __future__ import annotations

import math

import pytest

from engine.define.devices import check_device_pair, parse_devices
from engine.errors import ConfigError
from engine.measure.nvml import resolve_gpu, resolve_gpus
from engine.results.values import cpu_list
from engine.runner.placement import Slot, place, split_cores, units
from tests.fixtures.fake_nvml import FakeDevice, FakeMigDevice, FakeMigGpu, FakeNVML


def _host() -> FakeNVML:
    """Two T4s and an A100 in MIG mode with two 1g.5gb slices."""
    a100 = FakeMigGpu("GPU-a100", migs=[FakeMigDevice("MIG-s1"), FakeMigDevice("MIG-s2")])
    return FakeNVML([FakeDevice("GPU-t4-0"), FakeDevice("GPU-t4-1"), a100])


def test_parse_devices_forms_and_refusals():
    assert parse_devices("auto", "c.toml") == ("auto",)
    assert parse_devices(["cuda:0", "GPU-ab", "MIG-x/1/0"], "c.toml") == ("cuda:0", "GPU-ab",
                                                                          "MIG-x/1/0")
    assert parse_devices("cuda:0, cuda:2", "argument --devices") == ("cuda:0", "cuda:2")
    for bad, needle in ((["cuda:0", "cuda:0"], "listed twice"), (["gpu0"], "'gpu0'"),
                        ([], "empty"), (["auto", "cuda:1"], "stands alone"), (3, "must be")):
        with pytest.raises(ConfigError, match=needle):
            parse_devices(bad, "c.toml")


def test_device_and_devices_are_one_setting():
    with pytest.raises(ConfigError, match="'device' and 'devices' are both set"):
        check_device_pair({"device": "cpu", "devices": ["cuda:0"]}, {}, "c.toml")
    # a command-line value replaces the file's, whichever of the two keys the file used
    assert "devices" not in check_device_pair({"device": "cpu", "devices": "auto"},
                                              {"device": "cpu"}, "c.toml")
    with pytest.raises(ConfigError, match="--device and --devices"):
        check_device_pair({}, {"device": "cpu", "devices": "auto"}, "c.toml")


def test_auto_is_every_gpu_and_every_mig_slice_and_a_mig_parent_is_not_a_device():
    two_t4 = FakeNVML([FakeDevice("GPU-t4-0"), FakeDevice("GPU-t4-1")])
    assert [(d["uuid"], d["entry"]) for d in resolve_gpus(("auto",), {}, two_t4)] == [
        ("GPU-t4-0", "cuda:0"), ("GPU-t4-1", "cuda:1")]
    a100 = FakeNVML([FakeMigGpu("GPU-a100", migs=[FakeMigDevice("MIG-s1"),
                                                  FakeMigDevice("MIG-s2")])])
    found = resolve_gpus(("auto",), {}, a100)
    assert [(d["uuid"], d["parent_uuid"]) for d in found] == [("MIG-s1", "GPU-a100"),
                                                              ("MIG-s2", "GPU-a100")]
    # T4s and A100 slices on one host: refused (one campaign per GPU model).
    with pytest.raises(ValueError, match="different GPU models"):
        resolve_gpus(("auto",), {}, _host())


def test_list_entries_resolve_by_index_and_uuid_with_mig_parents():
    nvml = _host()
    t4s = resolve_gpus(("cuda:1", "GPU-t4-0"), {}, nvml)
    assert [(d["uuid"], d["entry"], d["parent_uuid"]) for d in t4s] == [
        ("GPU-t4-1", "cuda:1", None), ("GPU-t4-0", "GPU-t4-0", None)]
    migs = resolve_gpus(("MIG-s2", "MIG-s1"), {}, nvml)
    assert [(d["uuid"], d["parent_uuid"]) for d in migs] == [("MIG-s2", "GPU-a100"),
                                                             ("MIG-s1", "GPU-a100")]
    assert migs[0]["name"].endswith("MIG 1g.5gb")


@pytest.mark.parametrize("entries, env, needle", [
    (("MIG-nope",), {}, "matches 0 MIG slice"),              # refused at planning time
    (("GPU-zz",), {}, "matches 0 GPU"),
    (("cuda:3",), {}, "NVML sees 3 GPU"),
    (("cuda:0", "GPU-t4-0"), {}, "same device"),             # two names of one device
    (("cuda:0", "MIG-s1"), {}, "different GPU models"),
    (("GPU-t4-0",), {"CUDA_VISIBLE_DEVICES": "1"}, "not among CUDA_VISIBLE_DEVICES"),
    (("cuda:1",), {"CUDA_VISIBLE_DEVICES": "1"}, "lists 1 device"),
])
def test_bad_devices_are_refused_before_anything_runs(entries, env, needle):
    with pytest.raises(ValueError, match=needle):
        resolve_gpus(entries, env, _host())


def test_an_outer_cuda_visible_devices_is_indexed_into_never_widened():
    env = {"CUDA_VISIBLE_DEVICES": "1,MIG-s2", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}
    with pytest.raises(ValueError, match="different GPU models"):  # a T4 and a slice
        resolve_gpus(("auto",), env, _host())
    env = {"CUDA_VISIBLE_DEVICES": "MIG-s2,MIG-s1"}
    found = resolve_gpus(("auto",), env, _host())
    assert [(d["uuid"], d["entry"]) for d in found] == [("MIG-s2", "cuda:0"), ("MIG-s1", "cuda:1")]
    assert [d["uuid"] for d in resolve_gpus(("cuda:1",), env, _host())] == ["MIG-s1"]
    env = {"CUDA_VISIBLE_DEVICES": "1"}
    assert [d["uuid"] for d in resolve_gpus(("auto",), env, _host())] == ["GPU-t4-1"]


def test_resolve_gpu_refuses_a_mig_uuid_that_does_not_exist():
    with pytest.raises(ValueError, match="matches 0 MIG"):
        resolve_gpu("cuda", {"CUDA_VISIBLE_DEVICES": "MIG-gone"}, _host())
    found = resolve_gpu("cuda", {"CUDA_VISIBLE_DEVICES": "MIG-s1"}, _host())
    assert found["uuid"] == "MIG-s1" and found["parent_uuid"] == "GPU-a100"
    assert found["name"].endswith("MIG 1g.5gb")


class _Cell:
    def __init__(self, key, exp_id, pass_index):
        self.key, self.exp_id, self.pass_index = key, exp_id, pass_index


def test_placement_keeps_an_experiment_and_pass_on_one_device_deterministically():
    cells = [_Cell(f"{e}-{x}-{p}", e, p) for p in (1, 2) for e in ("A", "B", "C")
             for x in ("seq", "mp")]
    placed = place(cells, 2)
    assert units(cells) == [("A", 1), ("B", 1), ("C", 1), ("A", 2), ("B", 2), ("C", 2)]
    for c in cells:  # seq and mp of one experiment and pass: always the same device
        assert placed[c.key] == placed[c.key.replace("seq", "mp").replace("mp", "seq")]
    assert [placed[f"{e}-seq-{p}"] for p in (1, 2) for e in "ABC"] == [0, 1, 0, 1, 0, 1]
    assert place(cells, 2) == placed  # nothing random, nothing timed


def test_the_host_cores_are_split_between_devices():
    assert split_cores(2, [0, 1, 2, 3, 4]) == [(0, 1, 2), (3, 4)]
    assert split_cores(3, [0, 1]) == [(0, 1)] * 3  # fewer cores than devices: shared
    assert split_cores(1, [0, 1]) == [(0, 1)]
    assert cpu_list((0, 1, 2, 3, 6)) == "0-3,6" and cpu_list([5]) == "5"
    slot = Slot(1, {"uuid": "MIG-s2", "parent_uuid": "GPU-a100", "entry": "cuda:1"}, (2, 3))
    assert slot.parent == "GPU-a100" and slot.describe(2) == "device 2/2 cuda:1 MIG-s2"


def _runner_on(monkeypatch, tmp_path, nvml: FakeNVML, devices: str = '"auto"'):
    """A Runner planned (not run) on a fake host: pynvml is the fake NVML."""
    import sys

    from engine.define.campaign import load_campaign
    from engine.runner.supervisor import Runner

    monkeypatch.setitem(sys.modules, "pynvml", nvml)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    path = tmp_path / "c.toml"
    path.write_text(f'name = "k"\nexperiments = "D_ens,D_cv"\nexecutors = ["seq", "mp"]\n'
                    f'devices = {devices}\nthreads = 1\nruns_dir = "{tmp_path / "runs"}"\n')
    return Runner(load_campaign(path))


def test_the_key_of_a_multi_device_campaign_is_host_and_model_not_uuid(monkeypatch, tmp_path):
    first = _runner_on(monkeypatch, tmp_path, FakeNVML([FakeDevice("GPU-a"), FakeDevice("GPU-b")]))
    other_cards = _runner_on(monkeypatch, tmp_path,
                             FakeNVML([FakeDevice("GPU-c"), FakeDevice("GPU-d"),
                                       FakeDevice("GPU-e")]))
    assert [c.key for c in first.cells] == [c.key for c in other_cards.cells]
    assert first.machine["gpu_uuid"] == "" and first.machine["gpu_name"] == "Tesla T4"
    other_model = _runner_on(monkeypatch, tmp_path,
                             FakeNVML([FakeDevice("GPU-a", name="NVIDIA L4")]))
    assert not set(c.key for c in first.cells) & set(c.key for c in other_model.cells)
    # every executor of one experiment and pass on one device: each speedup is one GPU's
    slots = {}
    for cell in first.cells:
        slots.setdefault((cell.exp_id, cell.pass_index), set()).add(first.placement[cell.key])
    assert all(len(s) == 1 for s in slots.values()) and len(set().union(*slots.values())) == 2
    # the cells' environment: pinned by UUID, the slot's share of the cores as threads
    slot = first.slot_of(first.cells[-1])
    env = first.cell_environment(tmp_path, slot)
    assert env["CUDA_VISIBLE_DEVICES"] == slot.uuid and env["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"
    spec = first.cell_spec(first.cells[-1], 1)
    assert spec.gpu_uuid == slot.uuid and spec.device == "cuda:0"
    assert spec.placement == slot.describe(2) and spec.cpus == (list(slot.cpus) or None)


def test_no_speedup_divides_times_of_two_gpu_models(tmp_path):
    """Rows of one multi-device campaign on slices of two MIG profiles (two models, as
    NVML names them): seq of one never serves as the baseline of the other."""
    from engine.results.analysis import speedups
    from engine.results.load import load_runs
    from tests.unit.engine.results.test_analysis import group, row_of, write

    small, large = "NVIDIA A100-SXM4-40GB MIG 1g.5gb", "NVIDIA A100-SXM4-40GB MIG 3g.20gb"
    rows = [group(executor="seq", t=2.0, gpu=small), group(executor="mp", t=1.0, gpu=small),
            group(executor="mp", t=0.5, gpu=large)]
    df = speedups(load_runs(write(tmp_path, rows)))
    assert row_of(df, executor="mp", gpu_name=small)["speedup"] == 2.0
    assert math.isnan(row_of(df, executor="mp", gpu_name=large)["speedup"])


def test_the_dry_run_shows_where_each_cell_is_placed(monkeypatch, tmp_path):
    import io

    from rich.console import Console

    from fugue_tui.console.dry_run import dry_run

    runner = _runner_on(monkeypatch, tmp_path, FakeNVML([FakeDevice("GPU-a"), FakeDevice("GPU-b")]))
    console = Console(file=io.StringIO(), width=200, record=True, color_system=None)
    dry_run(runner, console, "c.toml")
    lines = [line for line in console.export_text().splitlines() if "D_" in line]
    assert [("1 cuda:0" in line, "2 cuda:1" in line) for line in lines] == [
        (True, False), (True, False), (False, True), (False, True)]  # D_ens seq+mp, D_cv


def test_one_cell_per_host_keeps_placement_but_runs_one_cell_at_a_time():
    """engine.runner.concurrent: a device's thread takes its next cell only while no cell
    runs on the host when one_cell_per_host is set; otherwise at once."""
    import threading
    from collections import deque

    from engine.runner.board import Board
    from engine.runner.concurrent import Lanes, _State

    for strict in (True, False):
        cells = [_Cell("a", "A", 1), _Cell("b", "B", 1)]
        slots = [Slot(0, {"uuid": "GPU-0"}), Slot(1, {"uuid": "GPU-1"})]
        board = Board(threading.RLock(), queue=deque(cells))
        state = _State(Lanes(slots, {"a": 0, "b": 1}, board, commands=None, run_cell=None,
                             one_at_a_time=strict))
        assert state._next(slots[0]).key == "a"  # a now runs on device 1
        got = []
        waiter = threading.Thread(target=lambda g=got, st=state, sl=slots[1]: g.append(st._next(sl)),
                                  daemon=True)
        waiter.start()
        waiter.join(timeout=0.5)
        assert bool(got) is (not strict)  # strict: b waits for a
        state._ended(cells[0])
        waiter.join(timeout=2)
        assert got and got[0].key == "b" and board.running == {"b": slots[1]}


def test_commands_reach_the_running_cell_they_name_and_abort_stops_every_one():
    """With several cells running, the main thread routes each command: a stop kept for
    the cell it names (its attempt takes it), abort for every running cell."""
    import threading
    from collections import deque
    from types import SimpleNamespace

    from engine.runner.board import Board
    from engine.runner.commands import Commands
    from engine.runner.concurrent import Lanes, _State

    emitted, queued = [], []
    cells = {"a": _Cell("a", "A", 1), "b": _Cell("b", "B", 1), "c": _Cell("c", "C", 1)}
    board = Board(threading.RLock(), queue=deque([cells["c"]]),
                  running={"a": Slot(0, {"uuid": "GPU-0"}), "b": Slot(1, {"uuid": "GPU-1"})})
    journal = SimpleNamespace(emit=lambda event: emitted.append((event.type, event.fields)))
    commands = Commands(SimpleNamespace(poll=list), journal, board, find=cells.get, skip=None,
                        lanes=True)
    commands.queued = lambda name, ref, cell: queued.append((name, ref))
    commands.stale_retry = lambda command, cell: False
    state = _State(Lanes([], {"c": 0}, board, commands, run_cell=None))
    state._command({"cmd": "kill", "cell": "b"})
    state._command({"cmd": "retry", "cell": "a"})
    state._command({"cmd": "skip", "cell": "c"})  # queued: the one-device handling
    assert board.stops == {"b": ("stop", "killed by control command"),
                           "a": ("retry", "stopped for a retry by control command")}
    assert queued == [("skip", "c")]
    # each attempt takes the stop kept for it, once
    assert commands.stop_for(cells["b"]) == ("stop", "killed by control command")
    assert commands.stop_for(cells["b"]) is None
    board.stops.clear()
    state._command({"cmd": "abort", "reason": "wrong data"})
    assert state.aborted and state.halted == "abort"
    assert {k: v[0] for k, v in board.stops.items()} == {"a": "abort", "b": "abort"}
    assert "wrong data" in board.stops["a"][1]
    assert state._next(Slot(0, {"uuid": "GPU-0"})) is None  # no new cell after an abort
