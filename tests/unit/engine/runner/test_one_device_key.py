"""One device, one key (issue 46): a one-element ``devices`` that names a card or a MIG
slice by any spelling (``cuda:N``, ``GPU-…``, ``MIG-…``) is the ``cuda:N`` it resolves to,
planned and keyed exactly as ``device = "cuda:N"``; a list of several devices keeps its
by-model key. And ``FUGUE_CELLS_ON_CPU=1`` (the test hook) trains on the CPU whichever
spelling placed the cell. On the fake NVML of tests/fixtures (no GPU needed)."""

from __future__ import annotations

import sys

import pytest

from tests.fixtures.fake_nvml import FakeDevice, FakeMigDevice, FakeMigGpu, FakeNVML

#: An outer CUDA_VISIBLE_DEVICES of the A100's two slices: cuda:1 is MIG-s2.
SLICES = "MIG-s1,MIG-s2"


def _host() -> FakeNVML:
    """Two T4s and an A100 in MIG mode with two 1g.5gb slices."""
    a100 = FakeMigGpu("GPU-a100", migs=[FakeMigDevice("MIG-s1"), FakeMigDevice("MIG-s2")])
    return FakeNVML([FakeDevice("GPU-t4-0"), FakeDevice("GPU-t4-1"), a100])


def _runner(monkeypatch, tmp_path, placement: str, visible: str | None = None):
    """A Runner planned (not run) on the fake host with ``placement`` (a ``device`` or
    ``devices`` line) under an outer CUDA_VISIBLE_DEVICES ``visible``."""
    from engine.define.campaign import load_campaign
    from engine.runner.supervisor import Runner

    monkeypatch.setitem(sys.modules, "pynvml", _host())
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    if visible is not None:
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
    path = tmp_path / "c.toml"
    path.write_text(f'name = "k"\nexperiments = "D_ens"\nexecutors = ["seq", "mp"]\n'
                    f'{placement}\nthreads = 1\nruns_dir = "{tmp_path / "runs"}"\n')
    return Runner(load_campaign(path))


def _keys(monkeypatch, tmp_path, placement: str, visible: str | None = None) -> list[str]:
    return [c.key for c in _runner(monkeypatch, tmp_path, placement, visible).cells]


@pytest.mark.parametrize("visible, index, spellings", [
    (None, "cuda:1", ['devices = ["cuda:1"]', 'devices = ["GPU-t4-1"]']),
    (SLICES, "cuda:1", ['devices = ["cuda:1"]', 'devices = ["MIG-s2"]']),
    # an outer list in another order: the UUID is the cuda:N of *this* process
    ("1,0", "cuda:0", ['devices = ["GPU-t4-1"]']),
])
def test_one_device_by_any_spelling_is_keyed_as_the_cuda_index_it_is(
        monkeypatch, tmp_path, visible, index, spellings):
    plain = _runner(monkeypatch, tmp_path, f'device = "{index}"', visible)
    for spelling in spellings:
        runner = _runner(monkeypatch, tmp_path, spelling, visible)
        assert [c.key for c in runner.cells] == [c.key for c in plain.cells], spelling
        # ... because it is that device, planned as it: one lane, the same identity
        assert runner.machine == plain.machine and runner.device == index
        assert runner.slots == [] and runner.gpu["uuid"] == plain.gpu["uuid"]


def test_a_uuid_prefix_and_another_card_resolve_to_their_own_index(monkeypatch, tmp_path):
    assert _keys(monkeypatch, tmp_path, 'devices = ["GPU-t4-0"]') == \
        _keys(monkeypatch, tmp_path, 'device = "cuda:0"')
    assert _keys(monkeypatch, tmp_path, 'devices = ["GPU-t4-0"]') != \
        _keys(monkeypatch, tmp_path, 'device = "cuda:1"')
    # the MIG-mode card as a whole is cuda:2 (NVML index 2), its UUID too
    assert _keys(monkeypatch, tmp_path, 'devices = ["GPU-a1"]') == \
        _keys(monkeypatch, tmp_path, 'device = "cuda:2"')


def test_several_devices_keep_their_by_model_key(monkeypatch, tmp_path):
    by_index = _runner(monkeypatch, tmp_path, 'devices = ["cuda:0", "cuda:1"]')
    by_uuid = _runner(monkeypatch, tmp_path, 'devices = ["GPU-t4-0", "GPU-t4-1"]')
    assert [c.key for c in by_index.cells] == [c.key for c in by_uuid.cells]
    assert by_index.machine["devices"] == "by-model" and len(by_index.slots) == 2
    assert not set(c.key for c in by_index.cells) & set(
        _keys(monkeypatch, tmp_path, 'device = "cuda:1"'))


def test_a_slice_no_cuda_index_names_keeps_the_by_model_key(monkeypatch, tmp_path):
    """Without an outer CUDA_VISIBLE_DEVICES, cuda:N is NVML's whole card N: a MIG slice is
    no cuda:N, so it stays a one-lane multi-device campaign, keyed by model as before."""
    runner = _runner(monkeypatch, tmp_path, 'devices = ["MIG-s2"]')
    assert runner.machine["devices"] == "by-model" and runner.gpu["uuid"] == "MIG-s2"
    assert [s.uuid for s in runner.slots] == ["MIG-s2"]


@pytest.mark.parametrize("placement, visible, uuid", [
    ('device = "cuda:1"', None, "GPU-t4-1"),
    ('devices = ["cuda:1"]', None, "GPU-t4-1"),
    ('devices = ["GPU-t4-1"]', None, "GPU-t4-1"),
    ('devices = ["MIG-s2"]', SLICES, "MIG-s2"),
    ('devices = ["cuda:0", "cuda:1"]', None, "GPU-t4-0"),  # one unit: on device 1
])
def test_cells_on_cpu_trains_on_the_cpu_whatever_placed_the_cell(
        monkeypatch, tmp_path, placement, visible, uuid):
    runner = _runner(monkeypatch, tmp_path, placement, visible)
    cell = runner.cells[-1]
    # the hook is read when the spec is made: a CUDA cell without it
    monkeypatch.delenv("FUGUE_CELLS_ON_CPU", raising=False)
    spec = runner.cell_spec(cell, 1)
    assert (spec.device, spec.gpu_uuid) == ("cuda:0", uuid)
    monkeypatch.setenv("FUGUE_CELLS_ON_CPU", "1")
    spec = runner.cell_spec(cell, 1)
    # on the CPU, the device still resolved, pinned and monitored by its UUID
    assert (spec.device, spec.device_requested, spec.gpu_uuid) == ("cpu", "cpu", uuid)
    env = runner.cell_environment(tmp_path, runner.slot_of(cell))
    assert env["CUDA_VISIBLE_DEVICES"] == uuid
