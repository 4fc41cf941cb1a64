"""The K sweep (issue 23): campaign key ``k_sweep`` and ``fugue-tui run --k-sweep`` plan one
ensemble cell per K per executor, member i is the same model at every K, and K enters a
cell's keys only when swept."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import torch

from engine.define.campaign import load_campaign
from engine.define.matrix import build_cells
from engine.define.workloads import JobSpec
from engine.plugins import load_builtins
from engine.train.data import EpochOrder

MACHINE = {"host": "test-host", "device": "cpu"}


def _campaign(tmp: Path, body: str):
    load_builtins()
    path = tmp / "c.toml"
    path.write_text('name = "ks"\n' + body)
    return load_campaign(path)


def test_one_cell_per_k_per_executor_in_order(tmp_path):
    campaign = _campaign(tmp_path, 'experiments = "D_ens"\nexecutors = ["seq", "unified_model"]'
                                   '\npasses = 2\nk_sweep = [1, 2, 4]\n')
    cells = build_cells(campaign, MACHINE)
    assert [(c.pass_index, c.k, c.executor) for c in cells] == [
        (p, k, e) for p in (1, 2) for k in (1, 2, 4) for e in ("seq", "unified_model")]
    assert [len(c.jobs) for c in cells[:6]] == [1, 1, 2, 2, 4, 4]
    assert all(c.experiment["k"] == c.k for c in cells)
    assert cells[2].slug == "003-D_ens-seq-k2-p1"
    assert cells[3].label == "D_ens unified_model K=2 pass 1"
    # every K its own configuration and seq baseline; passes of one K pool together
    assert len({c.config_key for c in cells}) == 6
    assert len({c.workload_key for c in cells}) == 3
    assert cells[0].config_key == cells[6].config_key and cells[0].key != cells[6].key
    assert campaign.resolved()["k_sweep"] == [1, 2, 4]


def test_member_i_is_the_same_model_and_data_order_at_every_k(tmp_path):
    campaign = _campaign(tmp_path, 'experiments = "D_ens"\nk_sweep = [1, 2, 8]\n')
    by_k = {c.k: c.jobs for c in build_cells(campaign, MACHINE)}
    for i in range(2):
        assert by_k[2][i] == by_k[8][i]  # id, seed, split, hyperparameters
    assert by_k[1][0] == by_k[8][0]
    assert [j["seed"] for j in by_k[8]] == [42 + i for i in range(8)]
    # the batch order is drawn from the member's own seed: the same three epochs
    train = torch.arange(300)
    orders = []
    for k in (2, 8):
        order = EpochOrder(JobSpec.from_dict(by_k[k][1]), train)
        orders.append([order.batches(torch.device("cpu")) for _ in range(3)])
    for a, b in zip(*orders, strict=True):
        assert torch.equal(a, b)
    other = EpochOrder(JobSpec.from_dict(by_k[8][2]), train).batches(torch.device("cpu"))
    assert not torch.equal(orders[0][0], other)  # a different member: a different order


def test_k_enters_the_key_only_when_swept(tmp_path):
    """No ``k_sweep``: the keys a campaign always had (the golden test pins them). A swept
    cell at the catalogue's own K (D_ens: 5) is that configuration and shares its keys;
    its slug and label name the K."""
    swept = _campaign(tmp_path, 'experiments = "D_ens"\nexecutors = ["seq"]\n'
                                'k_sweep = [2, 5]\n')
    plain = dataclasses.replace(swept, k_sweep=())
    plain_cells = build_cells(plain, MACHINE)
    assert [c.k for c in plain_cells] == [None] and plain_cells[0].slug == "001-D_ens-seq-p1"
    assert "k_sweep" not in plain.resolved()
    at5 = [c for c in build_cells(swept, MACHINE) if c.k == 5][0]
    assert (at5.key, at5.config_key, at5.workload_key) == (
        plain_cells[0].key, plain_cells[0].config_key, plain_cells[0].workload_key)
    at2 = [c for c in build_cells(swept, MACHINE) if c.k == 2][0]
    assert at2.key != plain_cells[0].key


def test_combines_with_the_ablation_ladder(tmp_path):
    campaign = _campaign(tmp_path, 'experiments = "D_ens"\nexecutors = ["unified_model"]\n'
                                   'k_sweep = [1, 4]\n[options.unified_model]\n'
                                   'sweep = "ablation"\n')
    cells = build_cells(campaign, MACHINE)
    assert len(cells) == 12  # six rungs at each K
    assert {(c.k, c.rung) for c in cells} == {(k, r) for k in (1, 4)
                                              for r in ("A", "B", "C", "C+FL", "D", "D+FL")}
    assert cells[6].slug == "007-D_ens-unified_model-k4-A-p1"


def test_plan_size_counts_every_k(tmp_path):
    from engine.bounds import MAX_PLANNED_JOBS
    from engine.errors import ConfigError

    big = [2 ** i for i in range(13)]  # 1 .. 4096: 8191 jobs per pass, 1.6 M in 200
    campaign = _campaign(tmp_path, 'experiments = "D_ens"\nexecutors = ["seq"]\npasses = 200\n'
                                   f'k_sweep = {big}\n')
    try:
        build_cells(campaign, MACHINE)
    except ConfigError as exc:
        assert "jobs in all" in str(exc) and str(MAX_PLANNED_JOBS) in str(exc)
    else:
        raise AssertionError("a sweep over the job bound was planned")
