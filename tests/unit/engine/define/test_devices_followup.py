"""Issue 27 follow-ups on a fake multi-GPU host (tests/fixtures/fake_nvml.py):
``max_parallel = "auto"`` of a multi-device campaign budgets one cell's share of the host's
cores (its cells run side by side), with the profiles of its GPU model."""

from __future__ import annotations

import os
import socket
import sys

from engine.define.campaign import load_campaign
from engine.profile.store import append_profile, job_key, profile_id, torch_cuda_version
from engine.runner.supervisor import Runner
from tests.fixtures.fake_nvml import FakeDevice, FakeNVML
from tests.unit.engine.profile.test_profile_estimate import WIDE

HOST_CORES = 8


def _profile_on(tmp_path, uuid: str) -> None:
    """A profile of W's job measured on the T4 ``uuid`` of this host, in the runs folder."""
    from engine.define.catalogue import load_catalogue
    from engine.define.workloads import expand
    from engine.measure.provenance import dist_version

    (tmp_path / "mine.toml").write_text(WIDE)
    job = expand(load_catalogue(str(tmp_path / "mine.toml")).get("W"), 42)[0].to_dict()
    key = job_key(job, "off", "cuda")
    ident = {"host": socket.gethostname(), "device": "cuda", "gpu_name": "Tesla T4",
             "gpu_uuid": uuid, "torch": dist_version("torch"), "cuda": torch_cuda_version()}
    append_profile(tmp_path / "runs", {"profile_id": profile_id(key, ident), **ident, **key,
                                       "timestamp": "20261201_000000", "rss1_mb": 50,
                                       "rss_per_member_mb": 10, "parent_rss_mb": 40,
                                       "private1_mb": 15})


def _planned(monkeypatch, tmp_path, devices: str, budget: str = 'ram = "100GiB"\n') -> Runner:
    """A Runner planned (not run) with mp's ``max_parallel = "auto"`` on two T4s (fake NVML)
    of an 8-core host, a profile of W's job measured on another T4 of this host."""
    monkeypatch.setitem(sys.modules, "pynvml", FakeNVML(
        [FakeDevice("GPU-a"), FakeDevice("GPU-b"), FakeDevice("GPU-c")]))
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(HOST_CORES)),
                        raising=False)
    monkeypatch.setattr(os, "cpu_count", lambda: HOST_CORES)
    # measured on GPU-c, a T4 the campaign does not use: the model is what counts
    _profile_on(tmp_path, "GPU-c")
    path = tmp_path / "c.toml"
    path.write_text(f'name = "md"\nexperiments = "W"\nexecutors = ["mp"]\ndevices = {devices}\n'
                    f'experiments_file = "mine.toml"\nruns_dir = "{tmp_path / "runs"}"\n'
                    f'[options.mp]\nmax_parallel = "auto"\n[budget]\n{budget}')
    return Runner(load_campaign(path))


def test_auto_in_a_multi_device_campaign_budgets_the_cells_core_share(monkeypatch, tmp_path):
    two = _planned(monkeypatch, tmp_path, '["GPU-a", "GPU-b"]')
    cell = two.cells[0]
    # 8 host cores split between 2 devices: 4 mp workers at once, not 8 (W has 12 jobs)
    assert [len(s.cpus) for s in two.slots] == [4, 4]
    assert (cell.max_parallel, cell.max_parallel_method) == (4, "profile-share")
    assert cell.max_parallel_profile  # the profile of another T4 of this host was used
    # the other devices of the same model: the same estimate, the same key (resume skips)
    assert _planned(monkeypatch, tmp_path, '["GPU-c", "GPU-a"]').cells[0].key == cell.key
    # the host's RAM measured is shared too: 200 MiB, 100 per cell, 90 usable: forkserver
    # mp's parent 40 + P x 15 -> 3 (the whole host's RAM would allow 9, the cores 4)
    import engine.profile.budget as budget

    monkeypatch.setattr(budget, "host_ram_mb", lambda: 200.0)
    ram = _planned(monkeypatch, tmp_path, '["GPU-a", "GPU-b"]', "").cells[0]
    assert (ram.max_parallel, ram.max_parallel_method) == (3, "profile-share")
    # [budget] cores and ram given are the user's word (one cell's): as written, profile
    given = _planned(monkeypatch, tmp_path, '["GPU-a", "GPU-b"]',
                     'ram = "100GiB"\ncores = 6\n').cells[0]
    assert (given.max_parallel, given.max_parallel_method) == (6, "profile")
    # one device by its UUID is device = "cuda:0" (issue 46): nothing is split, and like
    # any one-device campaign it takes profiles of its own card only (GPU-c's is not)
    one = _planned(monkeypatch, tmp_path, '["GPU-a"]').cells[0]
    assert one.key == _planned(monkeypatch, tmp_path, '["cuda:0"]').cells[0].key
    assert (one.max_parallel, one.max_parallel_method) == (12, "all")
    _profile_on(tmp_path, "GPU-a")  # measured on that card: the whole host's 8 cores
    one = _planned(monkeypatch, tmp_path, '["GPU-a"]').cells[0]
    assert (one.max_parallel, one.max_parallel_method) == (8, "profile")


def _plan_json(monkeypatch, tmp_path, capsys, devices: str) -> dict:
    """The ``--dry-run --json`` plan of D_ens and D_cv under seq and a packed mp (jobs on
    both T4s, two at a time per device), validated against plan.v1.json."""
    import io

    from rich.console import Console

    from fugue_tui.console.dry_run import dry_run
    from tests.unit.fugue_tui.test_json_outputs import strict

    monkeypatch.setitem(sys.modules, "pynvml", FakeNVML([FakeDevice("GPU-a"),
                                                          FakeDevice("GPU-b")]))
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    path = tmp_path / "c.toml"
    path.write_text(f'name = "md"\nexperiments = "D_ens,D_cv"\nexecutors = ["seq", "mp"]\n'
                    f'devices = {devices}\nruns_dir = "{tmp_path / "runs"}"\n'
                    '[options.mp]\ndevices = ["cuda:1", "cuda:0"]\njobs_per_device = 2\n')
    capsys.readouterr()
    dry_run(Runner(load_campaign(path)), Console(file=io.StringIO()), str(path), as_json=True)
    return strict(capsys.readouterr().out, "plan")


def test_the_json_plan_names_each_cells_device_and_the_packed_devices(monkeypatch, tmp_path,
                                                                      capsys):
    doc = _plan_json(monkeypatch, tmp_path, capsys, '"auto"')
    assert [(d["device"], d["entry"], d["uuid"], d["name"]) for d in doc["devices"]] == [
        (1, "cuda:0", "GPU-a", "Tesla T4"), (2, "cuda:1", "GPU-b", "Tesla T4")]
    assert doc["devices"][1]["placement"] == "device 2/2 cuda:1 GPU-b"
    # the placement rule: every executor of one experiment and pass on one device
    placed = [(c["exp_id"], c["executor"], c["placement"]["device"], c["placement"]["uuid"])
              for c in doc["cells"]]
    assert placed == [("D_ens", "seq", 1, "GPU-a"), ("D_ens", "mp", 1, "GPU-a"),
                      ("D_cv", "seq", 2, "GPU-b"), ("D_cv", "mp", 2, "GPU-b")]
    assert doc["cells"][2]["placement"]["placement"] == "device 2/2 cuda:1 GPU-b"
    # mp packs its jobs over the devices as listed (UUIDs); seq packs nothing
    mp = [c for c in doc["cells"] if c["executor"] == "mp"]
    assert all(c["packed_devices"] == ["GPU-b", "GPU-a"] and c["jobs_per_device"] == 2
               for c in mp)
    assert not any("packed_devices" in c for c in doc["cells"] if c["executor"] == "seq")
    assert {c["max_parallel_method"] for c in mp} == {"all"}
    # one device: no placement keys (the v1 document as before), the packing still said
    one = _plan_json(monkeypatch, tmp_path, capsys, '["GPU-a"]')
    assert "devices" not in one and not any("placement" in c for c in one["cells"])
    assert [c.get("packed_devices") for c in one["cells"]] == [None, ["GPU-b", "GPU-a"]] * 2
