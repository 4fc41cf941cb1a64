"""ray's options of issue 20, without a Ray runtime: ``reuse_actors`` in cell keys
(docs/measurement.md, "Cell keys": legacy ``false``, hpo cells only) and each actor's
request from the nodes' resources (``engine.executors.ray.runtime.actor_request``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.define.campaign import load_campaign
from engine.define.matrix import build_cells
from engine.errors import FugueError
from engine.executors import RAY_REUSE_DEFAULT
from engine.executors.ray import runtime as raytools

MACHINE = {"host": "h", "device": "cpu", "gpu_uuid": "", "gpu_name": "", "torch": "2.13.0"}


def _cells(tmp: Path, options: str = "") -> dict[str, object]:
    path = tmp / "c.toml"
    path.write_text('name = "k"\nexperiments = "D_hpo,D_ens"\nexecutors = ["ray"]\n'
                    + (f"[options.ray]\n{options}\n" if options else ""))
    return {c.slug: c for c in build_cells(load_campaign(path), MACHINE)}


def _ids(cells) -> list[tuple]:
    return [(c.key, c.config_key, c.workload_key, c.slug) for c in cells.values()]


def test_reuse_false_keeps_the_legacy_keys_and_true_keys_hpo_cells_only(tmp_path):
    legacy = _cells(tmp_path, "reuse_actors = false")
    reuse = _cells(tmp_path, "reuse_actors = true")
    hpo, = (c for s, c in reuse.items() if "D_hpo" in s)
    old_hpo, = (c for s, c in legacy.items() if "D_hpo" in s)
    assert hpo.slug == old_hpo.slug == "001-D_hpo-ray-fifo-p1"  # one value: no new folder
    assert hpo.key != old_hpo.key and hpo.config_key != old_hpo.config_key
    assert hpo.workload_key == old_hpo.workload_key  # the same seq baseline
    assert hpo.options["reuse_actors"] is True and old_hpo.options["reuse_actors"] is False
    # D_ens runs no Tune: the option does not apply, its key is the one it always had
    assert reuse["002-D_ens-ray-p1"].key == legacy["002-D_ens-ray-p1"].key
    # the legacy value keeps the key the cell had before the option existed (golden
    # scenario ray_reuse pins the key of `reuse_actors = false`)


def test_a_list_runs_both_modes_for_hpo_and_one_cell_for_the_rest(tmp_path):
    both = _cells(tmp_path, "reuse_actors = [false, true]")
    assert list(both) == ["001-D_hpo-ray-fifo-no-reuse_actors-p1",
                          "002-D_hpo-ray-fifo-reuse_actors-p1", "003-D_ens-ray-p1"]
    assert "reuse_actors" in both["002-D_hpo-ray-fifo-reuse_actors-p1"].label
    assert [c.options["reuse_actors"] for c in list(both.values())[:2]] == [False, True]
    legacy = _cells(tmp_path, "reuse_actors = false")
    reuse = _cells(tmp_path, "reuse_actors = true")
    assert both["001-D_hpo-ray-fifo-no-reuse_actors-p1"].key == \
        legacy["001-D_hpo-ray-fifo-p1"].key
    assert both["002-D_hpo-ray-fifo-reuse_actors-p1"].key == reuse["001-D_hpo-ray-fifo-p1"].key
    assert both["003-D_ens-ray-p1"].key == legacy["002-D_ens-ray-p1"].key


def test_the_default_reuses_and_is_keyed_as_asked(tmp_path):
    """Reuse is the default (bench/RESULTS.md, part strategies): a campaign silent about it
    runs reuse and gets the key of ``reuse_actors = true`` — never the legacy one, whose rows
    were fresh processes per trial (docs/measurement.md, the re-pin table)."""
    assert RAY_REUSE_DEFAULT is True
    silent = _cells(tmp_path)
    assert _ids(silent) == _ids(_cells(tmp_path, "reuse_actors = true"))
    assert _ids(silent) != _ids(_cells(tmp_path, "reuse_actors = false"))


@pytest.mark.parametrize("nodes, count, gpu, expected", [
    # a local runtime: one node with the cell's cores (as before the cluster rule)
    ([{"CPU": 2.0}], 1, False, {"CPU": 2.0, "GPU": 0.0}),
    ([{"CPU": 2.0}], 3, False, {"CPU": 0.6666, "GPU": 0.0}),
    ([{"CPU": 16.0, "GPU": 1.0}], 3, True, {"CPU": 5.0, "GPU": 0.3333}),
    # a cluster of 1-CPU nodes: never more than a node has, whatever this host's cores
    ([{"CPU": 1.0}, {"CPU": 1.0}], 1, False, {"CPU": 1.0, "GPU": 0.0}),
    ([{"CPU": 1.0}, {"CPU": 1.0}], 2, False, {"CPU": 1.0, "GPU": 0.0}),
    ([{"CPU": 1.0}, {"CPU": 1.0}], 3, False, {"CPU": 0.5, "GPU": 0.0}),
    # uneven nodes: the largest share all fit in at once
    ([{"CPU": 4.0}, {"CPU": 1.0}], 2, False, {"CPU": 2.0, "GPU": 0.0}),
    # the GPU on one node of two: both actors share it there
    ([{"CPU": 8.0}, {"CPU": 2.0, "GPU": 1.0}], 2, True, {"CPU": 1.0, "GPU": 0.5}),
])
def test_actor_request_from_the_nodes(nodes, count, gpu, expected):
    request = raytools.actor_request(nodes, count, gpu)
    assert request == expected
    raytools.check_schedulable(request, count, nodes)  # and they all fit


def test_no_request_fits_a_gpu_cell_on_a_cluster_without_gpu():
    request = raytools.actor_request([{"CPU": 2.0}], 1, gpu=True)
    with pytest.raises(FugueError, match="can never be scheduled"):
        raytools.check_schedulable(request, 1, [{"CPU": 2.0}])


def test_the_hub_module_imports_no_torch():
    """Ray imports an actor's module in the actor's process: the hub's (started beside the
    actors in setup) must not pay torch's import, a second of CPU on a small host."""
    import json
    import subprocess
    import sys

    code = ("import sys, json, engine.executors.ray.hub\n"
            "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in "
            "('torch', 'sklearn'))))")
    out = subprocess.run([sys.executable, "-c", code], cwd=Path(__file__).resolve().parents[5],
                         capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == []


def test_the_lean_start_applies_to_the_ray_version_it_was_written_for_only(monkeypatch):
    """``_lean_init`` swaps Ray's node class for one ``ray.init`` call on Ray 2.60 (and puts
    it back); on any other version it is plain ``ray.init`` and skips nothing."""
    import ray
    import ray._private.node as node_module

    base, calls = node_module.Node, []
    monkeypatch.setattr(ray, "init", lambda **kw: calls.append((node_module.Node, kw)) or "ctx")
    monkeypatch.setattr(ray, "__version__", "2.99.0")
    skipped: list[str] = []
    assert raytools._lean_init(ray, skipped, num_cpus=1) == "ctx"
    assert skipped == [] and calls == [(base, {"num_cpus": 1})]
    monkeypatch.setattr(ray, "__version__", "2.60.0")
    assert raytools._lean_init(ray, skipped, num_cpus=1) == "ctx"
    lean = calls[-1][0]
    assert lean is not base and issubclass(lean, base) and node_module.Node is base
    assert skipped == list(raytools.LEAN_SKIPS)
