"""``python -m bench.hpo`` (issue 25): ray in the multi-pass run — ``--max-parallel`` caps
the trials at once of the slotted executors under fifo and the asynchronous schedulers
while sha cells, which need every trial at once, run uncapped in a campaign of their own;
every campaign it plans loads (the sha-slot rule refuses none). No cell runs here."""

from __future__ import annotations

from bench import hpo
from engine.define.campaign import parse_campaign
from engine.define.matrix import build_cells


def _cells(tmp_path, name, options, executors):
    (tmp_path / "exps.toml").write_text(hpo.EXPERIMENTS)
    doc = {"name": name, "experiments": "D_hpo,S16", "executors": executors,
           "runs_dir": str(tmp_path / "runs"), "device": "cpu", "threads": 1,
           "experiments_file": str(tmp_path / "exps.toml"), "options": options}
    return build_cells(parse_campaign(doc, "bench"), {"host": "h", "device": "cpu"})


def test_sha_runs_uncapped_in_a_campaign_of_its_own(tmp_path):
    executors = ["seq", "unified_model", "ray"]
    planned = hpo.campaigns(executors, ["fifo", "asha", "sha"], 2)
    assert [name for name, _ in planned] == ["bench-hpo", "bench-hpo-sha"]
    capped, sha = (options for _, options in planned)
    assert capped["ray"] == {"scheduler": ["fifo", "asha"], "max_parallel": 2}
    assert capped["seq"] == {"scheduler": ["fifo", "asha"]}  # seq has no slots
    assert all(o == {"scheduler": ["sha"]} for o in sha.values())
    seen = set()
    for name, options in planned:
        for cell in _cells(tmp_path, name, options, [e for e in executors if e in options]):
            seen.add((cell.exp_id, cell.executor, cell.scheduler or "fifo", cell.max_parallel))
    assert ("S16", "ray", "sha", None) in seen and ("S16", "ray", "asha", 2) in seen
    assert ("D_hpo", "unified_model", "fifo", 2) in seen
    assert not any(s == "sha" and mp for _, _, s, mp in seen)


def test_no_cap_one_campaign():
    (name, options), = hpo.campaigns(["seq", "ray"], ["fifo", "sha"], None)
    assert name == "bench-hpo" and options["ray"] == {"scheduler": ["fifo", "sha"]}
