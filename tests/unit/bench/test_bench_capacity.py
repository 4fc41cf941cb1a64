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


def test_knees_per_pass_pair_each_pass_with_the_bare_repetition_of_its_index():
    """Pass 0's cells against the bare loop's repetition 0, pass 1's against repetition 1;
    a pass with a failed K is left out rather than judged on a hole."""
    import pandas as pd

    from bench.capacity import EXPERIMENT, per_pass_apart

    ks = [1, 2, 4, 8]
    flat = [100, 190, 350, 360]      # knee 4
    steep = [100, 190, 350, 700]     # no knee inside the sweep (→ 16: two doublings from 4)
    rows = []
    for p, curve in enumerate([flat, steep, flat]):
        for k, x in zip(ks, curve, strict=False):
            if p == 2 and k == 8:
                continue  # pass 2 lost its K = 8 cell
            rows.append({"status": "ok", "executor": "unified_model", "exp_id": EXPERIMENT,
                         "K": k, "pass": p, "train_throughput_sps": float(x)})
    rows.append({"status": "ok", "executor": "seq", "exp_id": EXPERIMENT, "K": 1, "pass": 0,
                 "train_throughput_sps": 5.0})

    class Runs:
        groups = pd.DataFrame(rows)

    bare = {k: [flat[i], flat[i], flat[i]] for i, k in enumerate(ks)}
    assert per_pass_apart(Runs(), ks, bare, 0.10) == [0.0, 2.0]
