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
from tests.unit.test_profile_estimate import WIDE

HOST_CORES = 8


def _planned(monkeypatch, tmp_path, devices: str, budget: str = "") -> Runner:
    """A Runner planned (not run) with mp's ``max_parallel = "auto"`` on two T4s (fake NVML)
    of an 8-core host, a profile of W's job measured on another T4 of this host."""
    from engine.define.catalogue import load_catalogue
    from engine.define.workloads import expand
    from engine.measure.provenance import dist_version

    monkeypatch.setitem(sys.modules, "pynvml", FakeNVML(
        [FakeDevice("GPU-a"), FakeDevice("GPU-b"), FakeDevice("GPU-c")]))
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(HOST_CORES)),
                        raising=False)
    monkeypatch.setattr(os, "cpu_count", lambda: HOST_CORES)
    (tmp_path / "mine.toml").write_text(WIDE)
    job = expand(load_catalogue(str(tmp_path / "mine.toml")).get("W"), 42)[0].to_dict()
    key = job_key(job, "off", "cuda")
    # measured on GPU-c, a T4 the campaign does not use: the model is what counts
    ident = {"host": socket.gethostname(), "device": "cuda", "gpu_name": "Tesla T4",
             "gpu_uuid": "GPU-c", "torch": dist_version("torch"), "cuda": torch_cuda_version()}
    append_profile(tmp_path / "runs", {"profile_id": profile_id(key, ident), **ident, **key,
                                       "timestamp": "20261201_000000", "rss1_mb": 50,
                                       "rss_per_member_mb": 10, "parent_rss_mb": 40,
                                       "private1_mb": 15})
    path = tmp_path / "c.toml"
    path.write_text(f'name = "md"\nexperiments = "W"\nexecutors = ["mp"]\ndevices = {devices}\n'
                    f'experiments_file = "mine.toml"\nruns_dir = "{tmp_path / "runs"}"\n'
                    f'[options.mp]\nmax_parallel = "auto"\n[budget]\nram = "100GiB"\n{budget}')
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
    # a [budget] cores given is the user's word: used as written, method profile
    given = _planned(monkeypatch, tmp_path, '["GPU-a", "GPU-b"]', "cores = 6\n").cells[0]
    assert (given.max_parallel, given.max_parallel_method) == (6, "profile")
    # one device (a devices list of one): nothing is split, the whole host's cores
    one = _planned(monkeypatch, tmp_path, '["GPU-a"]').cells[0]
    assert (one.max_parallel, one.max_parallel_method) == (8, "profile")
