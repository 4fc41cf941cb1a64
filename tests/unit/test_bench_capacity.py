"""Bench part ``capacity`` (issue 23): the campaign it runs is a valid K sweep, and the
knee comparison's arithmetic. The part itself is run by hand (bench/RESULTS.md)."""

from __future__ import annotations

from bench import PARTS
from bench.capacity import DEFAULT_KS, campaign_text, doublings_apart
from engine.define.campaign import load_campaign
from engine.define.matrix import build_cells
from engine.plugins import load_builtins


def test_the_part_is_registered():
    assert "capacity" in PARTS


def test_its_campaign_is_the_d_ens_sweep(tmp_path):
    load_builtins()
    (tmp_path / "mine.toml").write_text("[experiments.D_ens]\nepochs = 2\n")
    path = tmp_path / "capacity.toml"
    path.write_text(campaign_text(list(DEFAULT_KS), ["seq", "unified_model"], 3, 1,
                                  tmp_path / "runs"))
    campaign = load_campaign(path)
    assert campaign.k_sweep == DEFAULT_KS and campaign.threads == 1
    cells = build_cells(campaign, {"host": "h"})
    assert len(cells) == 7 * 2 * 3
    assert {c.k for c in cells} == set(DEFAULT_KS)
    assert {c.jobs[0]["epochs"] for c in cells} == {2}


def test_knees_apart_in_doublings():
    assert doublings_apart(8, 8, 64) == 0
    assert doublings_apart(8, 16, 64) == 1
    assert doublings_apart(4, 16, 64) == 2
    assert doublings_apart(None, 64, 64) == 1  # not reached: one doubling beyond the sweep
    assert doublings_apart(None, None, 64) == 0
