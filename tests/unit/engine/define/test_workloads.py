"""Experiment → jobs (ids, seeds, hyperparameters, splits) and the data path's split and
batch-order functions (``engine.train.data.split_for``, ``EpochOrder``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from engine.define.catalogue import load_catalogue
from engine.define.workloads import JobSpec, SplitSpec, expand
from engine.errors import ConfigError
from engine.train.data import EpochOrder, split_for

CAT = load_catalogue()


def _user(tmp_path: Path, text: str):
    path = tmp_path / "experiments.toml"
    path.write_text(text)
    return load_catalogue(path)


# --------------------------------------------------------------------------- ids and seeds

def test_ensemble_ids_and_seeds():
    jobs = expand(CAT.get("E02"))
    assert [j.job_id for j in jobs] == [f"E02_ens_s{i}" for i in range(7)]
    assert [j.seed for j in jobs] == [42 + i for i in range(7)]
    assert [j.index for j in jobs] == list(range(7))
    # identical but for the seed (and id/index)
    assert {(j.model, j.dataset, j.batch_size, j.epochs, j.lr, j.optimizer,
             json.dumps(j.optimizer_kwargs), j.amp, j.split) for j in jobs} == {
        ("resnet18", "cifar10", 128, 10, 0.01, "sgd", '{"momentum": 0.9}', True,
         SplitSpec("test", 0, 0.2))}
    assert not any(j.validate_every_epoch for j in jobs)


def test_custom_seed_is_seed_plus_index_for_every_type():
    for exp_id in ("E01", "E09", "E15", "E16", "D_ens", "D_cv", "D_hpo", "D_mm"):
        jobs = expand(CAT.get(exp_id), seed=1000)
        assert [j.seed for j in jobs] == [1000 + i for i in range(len(jobs))], exp_id
        assert len(jobs) == CAT.get(exp_id).k
        assert {j.exp_id for j in jobs} == {exp_id}


def test_cv_ids_and_fold_splits():
    jobs = expand(CAT.get("E09"), seed=7)
    assert [j.job_id for j in jobs] == [f"E09_fold{i}" for i in range(5)]
    assert [j.seed for j in jobs] == [7, 8, 9, 10, 11]
    assert [j.split for j in jobs] == [SplitSpec("fold", 0, 0.2, i, 5) for i in range(5)]
    assert {(j.batch_size, j.epochs, j.lr, j.optimizer) for j in jobs} == {(64, 8, 0.001, "adamw")}


def test_hpo_ids_follow_the_cartesian_product_in_written_order():
    jobs = expand(CAT.get("E15"))
    assert [j.job_id for j in jobs] == [f"E15_t{i}" for i in range(9)]
    # lr written first: lr is the outer loop, batch_size the inner one
    assert [(j.lr, j.batch_size) for j in jobs] == [
        (lr, bs) for lr in (1e-4, 3e-4, 1e-3) for bs in (32, 64, 128)]
    assert all(j.validate_every_epoch and j.split == SplitSpec("holdout", 0, 0.2) for j in jobs)
    assert {j.epochs for j in jobs} == {10}


def test_hpo_key_order_as_written_in_a_user_file(tmp_path):
    cat = _user(tmp_path, """
[experiments.H1]
type = "hpo"
model = "mlp"
dataset = "digits"
epochs = 2
search_space = { batch_size = [16, 32], lr = [0.1, 0.2, 0.3] }
""")
    jobs = expand(cat.get("H1"))
    assert [(j.batch_size, j.lr) for j in jobs] == [
        (bs, lr) for bs in (16, 32) for lr in (0.1, 0.2, 0.3)]
    assert [j.job_id for j in jobs] == [f"H1_t{i}" for i in range(6)]


def test_hpo_optimizer_kwarg_keys_land_in_optimizer_kwargs(tmp_path):
    cat = _user(tmp_path, """
[experiments.H2]
type = "hpo"
model = "mlp"
dataset = "digits"
batch_size = 16
epochs = 2
lr = 0.05
optimizer = "sgd"
optimizer_kwargs = { nesterov = false }
search_space = { momentum = [0.0, 0.9], weight_decay = [0.0, 1e-4] }
""")
    exp = cat.get("H2")
    jobs = expand(exp)
    assert [j.optimizer_kwargs for j in jobs] == [
        {"nesterov": False, "momentum": m, "weight_decay": wd}
        for m in (0.0, 0.9) for wd in (0.0, 1e-4)]
    for j in jobs:
        assert (j.lr, j.batch_size, j.optimizer) == (0.05, 16, "sgd")
        assert not hasattr(j, "momentum")
    assert exp.optimizer_kwargs == {"nesterov": False}  # the experiment is not modified


def test_hpo_expand_does_not_mutate_the_experiment(tmp_path):
    cat = _user(tmp_path, """
[experiments.H3]
type = "hpo"
model = "mlp"
dataset = "digits"
batch_size = 16
epochs = 2
lr = 0.05
optimizer = "sgd"
search_space = { optimizer_kwargs = [{ weight_decay = 0.1 }], momentum = [0.5, 0.9] }
""")
    exp = cat.get("H3")
    before = json.dumps(exp.to_dict(), sort_keys=True)
    jobs = expand(exp)
    assert [j.optimizer_kwargs for j in jobs] == [
        {"weight_decay": 0.1, "momentum": 0.5}, {"weight_decay": 0.1, "momentum": 0.9}]
    assert json.dumps(exp.to_dict(), sort_keys=True) == before


def test_multi_model_ids_and_per_member_hyperparameters():
    jobs = expand(CAT.get("E16"), seed=3)
    assert [j.job_id for j in jobs] == ["E16_m0_lenet", "E16_m1_resnet18", "E16_m2_resnet50"]
    assert [j.seed for j in jobs] == [3, 4, 5]
    assert [(j.dataset, j.batch_size, j.epochs, j.lr) for j in jobs] == [
        ("mnist", 256, 20, 0.01), ("cifar10", 128, 100, 0.001), ("cifar100", 64, 120, 0.002)]
    assert all(j.optimizer == "sgd" and j.optimizer_kwargs == {"momentum": 0.9} and j.amp
               for j in jobs)
    mm = expand(CAT.get("D_mm"))
    assert [j.job_id for j in mm] == ["D_mm_m0_mlp_bn", "D_mm_m1_mlp", "D_mm_m2_mlp_bn",
                                      "D_mm_m3_mlp"]
    assert [j.task for j in mm] == [None, None, None, "regression"]
    assert [j.optimizer for j in mm] == ["sgd", "adam", "adamw", "adam"]


def test_jobspec_dict_round_trip():
    for exp_id in ("E01", "E09", "E12", "E17", "D_mm"):
        for job in expand(CAT.get(exp_id), seed=5):
            data = job.to_dict()
            again = JobSpec.from_dict(json.loads(json.dumps(data)))
            assert again == job
            assert isinstance(again.split, SplitSpec)
            assert again.to_dict() == data


# --------------------------------------------------------------------------- splits

@pytest.mark.parametrize("n, k", [(1797, 5), (100, 3), (10, 4), (12, 3)])
def test_cv_folds_partition_the_pool(n, k):
    splits = [split_for(SplitSpec("fold", 0, 0.2, i, k), n, None) for i in range(k)]
    vals = [s.val_idx.tolist() for s in splits]
    assert sorted(sum(vals, [])) == list(range(n))  # disjoint and covering
    sizes = [len(v) for v in vals]
    base, extra = divmod(n, k)
    assert sizes == [base + 1] * extra + [base] * (k - extra)
    assert max(sizes) - min(sizes) <= 1
    for s in splits:
        assert s.val_source == "fold"
        assert set(s.train_idx.tolist()).isdisjoint(s.val_idx.tolist())
        assert len(s.train_idx) + len(s.val_idx) == n


def test_cv_folds_are_blocks_of_a_permutation_not_the_identity():
    val0 = split_for(SplitSpec("fold", 0, 0.2, 0, 5), 1000, None).val_idx.tolist()
    assert val0 != list(range(200))


def test_folds_independent_of_job_seed_and_stable_across_calls():
    exp = CAT.get("D_cv")
    a = [split_for(j.split, 1797, None) for j in expand(exp, seed=1)]
    b = [split_for(j.split, 1797, None) for j in expand(exp, seed=999)]
    for x, y in zip(a, b, strict=False):
        assert torch.equal(x.val_idx, y.val_idx) and torch.equal(x.train_idx, y.train_idx)
    other = split_for(SplitSpec("fold", 1, 0.2, 0, 5), 1797, None)
    assert not torch.equal(other.val_idx, a[0].val_idx)  # the split seed does matter


@pytest.mark.parametrize("n", [100, 1797, 7])
def test_holdout_is_20_percent_and_disjoint(n):
    s = split_for(SplitSpec("holdout", 0, 0.2), n, None)
    assert s.val_source == "holdout"
    assert len(s.val_idx) == max(1, round(n * 0.2))
    assert set(s.train_idx.tolist()).isdisjoint(s.val_idx.tolist())
    assert sorted(s.train_idx.tolist() + s.val_idx.tolist()) == list(range(n))
    again = split_for(SplitSpec("holdout", 0, 0.2), n, None)
    assert torch.equal(again.val_idx, s.val_idx)


def test_holdout_same_for_every_hpo_trial():
    jobs = expand(CAT.get("D_hpo"), seed=11)
    firsts = split_for(jobs[0].split, 1797, None)
    for j in jobs[1:]:
        assert torch.equal(split_for(j.split, 1797, None).val_idx, firsts.val_idx)
    assert len(firsts.val_idx) == 359


def test_test_split_uses_the_dataset_test_set_else_falls_back_to_holdout():
    spec = SplitSpec("test", 0, 0.2)
    with_test = split_for(spec, 50, 20)
    assert with_test.val_source == "test"
    assert with_test.train_idx.tolist() == list(range(50))
    assert with_test.val_idx.tolist() == list(range(20))
    for n_test in (None, 0):
        fallback = split_for(spec, 50, n_test)
        holdout = split_for(SplitSpec("holdout", 0, 0.2), 50, None)
        assert fallback.val_source == "holdout"
        assert len(fallback.val_idx) == 10
        assert torch.equal(fallback.val_idx, holdout.val_idx)


# --------------------------------------------------------------------------- batch order

def _job(seed: int, batch_size: int) -> JobSpec:
    return JobSpec(job_id=f"j{seed}", exp_id="X", index=0, seed=seed, model="mlp",
                   dataset="digits", task=None, batch_size=batch_size, epochs=1, lr=0.1,
                   optimizer="sgd")


def test_epoch_order_same_seed_same_order_and_tail_dropped():
    train = torch.arange(3, 106)  # 103 samples, not starting at zero
    a, b = EpochOrder(_job(5, 10), train), EpochOrder(_job(5, 10), train)
    assert a.n_batches == 10 and a.dropped_per_epoch == 3
    cpu = torch.device("cpu")
    first_a, first_b = a.batches(cpu), b.batches(cpu)
    assert first_a.shape == (10, 10)
    assert torch.equal(first_a, first_b)
    assert set(first_a.flatten().tolist()) <= set(train.tolist())
    assert len(set(first_a.flatten().tolist())) == 100  # no repeats within an epoch
    second_a, second_b = a.batches(cpu), b.batches(cpu)
    assert torch.equal(second_a, second_b)
    assert not torch.equal(first_a, second_a)  # a new order each epoch


def test_epoch_order_different_seeds_differ():
    train = torch.arange(200)
    a = EpochOrder(_job(1, 20), train).batches(torch.device("cpu"))
    b = EpochOrder(_job(2, 20), train).batches(torch.device("cpu"))
    assert not torch.equal(a, b)
    assert sorted(a.flatten().tolist()) == sorted(b.flatten().tolist()) == list(range(200))


def test_epoch_order_exact_multiple_drops_nothing():
    order = EpochOrder(_job(0, 25), torch.arange(100))
    assert (order.n_batches, order.dropped_per_epoch) == (4, 0)


def test_batch_size_larger_than_training_set_is_a_config_error():
    with pytest.raises(ConfigError, match=r"j3: batch_size 64 exceeds its 63 training samples"):
        EpochOrder(_job(3, 64), torch.arange(63))


# --------------------------------------------------------------------------- the registry

def test_builtin_types_are_registered_in_order():
    from engine.define.workloads import WORKLOADS

    assert WORKLOADS.names()[:4] == ["ensemble", "cv", "hpo", "multi_model"]


def test_a_registered_type_is_accepted_by_the_catalogue_and_expands(tmp_path):
    from engine.define.workloads import (
        WORKLOADS,
        base_fields,
        make_job,
        register_workload,
    )

    @register_workload("zz_pairs")
    def zz_pairs(exp, seed):
        split = SplitSpec("holdout", exp.split_seed, exp.val_fraction)
        return [make_job(exp, f"{exp.id}_p{i}", i, seed, base_fields(exp), split)
                for i in range(exp.k)]

    try:
        cat = _user(tmp_path, '[experiments.P1]\ntype = "zz_pairs"\nmodel = "mlp"\n'
                              'dataset = "wine"\nk = 2\nbatch_size = 8\nepochs = 1\nlr = 0.1\n')
        jobs = expand(cat.get("P1"), seed=5)
        assert [(j.job_id, j.seed, j.index) for j in jobs] == [("P1_p0", 5, 0), ("P1_p1", 6, 1)]
        with pytest.raises(ConfigError, match="already registered"):
            register_workload("zz_pairs")(zz_pairs)
    finally:
        WORKLOADS.items.pop("zz_pairs", None)
    with pytest.raises(ConfigError, match=r"key 'type' must be one of .*got 'zz_pairs'"):
        _user(tmp_path, '[experiments.P1]\ntype = "zz_pairs"\nmodel = "mlp"\ndataset = "wine"\n'
                        'k = 2\nbatch_size = 8\nepochs = 1\nlr = 0.1\n')


def test_a_type_that_breaks_the_seed_contract_is_refused(tmp_path):
    from engine.define.workloads import (
        WORKLOADS,
        base_fields,
        make_job,
        register_workload,
    )

    @register_workload("zz_bad_seeds")
    def zz_bad(exp, seed):
        split = SplitSpec("holdout", exp.split_seed, exp.val_fraction)
        return [make_job(exp, f"{exp.id}_x{i}", i, seed + 100, base_fields(exp), split)
                for i in range(exp.k)]

    try:
        cat = _user(tmp_path, '[experiments.B1]\ntype = "zz_bad_seeds"\nmodel = "mlp"\n'
                              'dataset = "wine"\nk = 2\nbatch_size = 8\nepochs = 1\nlr = 0.1\n')
        with pytest.raises(ConfigError, match=r"zz_bad_seeds.*seed \+ index"):
            expand(cat.get("B1"))
    finally:
        WORKLOADS.items.pop("zz_bad_seeds", None)


def test_a_resolved_split_is_shared_and_equals_a_fresh_resolution():
    """``split_for`` is cached per process (every member of a stacked ensemble resolves
    the same split): the same arguments give the same object, whose tensors equal an
    uncached resolution; another seed, fold or pool size is another split."""
    from engine.train import data as data_mod

    spec = SplitSpec("holdout", 3, 0.2)
    a, b = split_for(spec, 500, None), split_for(SplitSpec("holdout", 3, 0.2), 500, None)
    assert a is b
    fresh = data_mod._split_for.__wrapped__(spec, 500, None)
    assert torch.equal(a.train_idx, fresh.train_idx) and torch.equal(a.val_idx, fresh.val_idx)
    assert not torch.equal(split_for(SplitSpec("holdout", 4, 0.2), 500, None).val_idx,
                           a.val_idx)
    assert len(split_for(spec, 400, None).train_idx) == 320
    folds = [split_for(SplitSpec("fold", 0, 0.2, i, 5), 500, None) for i in range(5)]
    assert len({id(f) for f in folds}) == 5


def test_seed_job_seeds_what_torch_manual_seed_seeds_for_the_job():
    """A CPU job: the CPU generator exactly as ``torch.manual_seed`` leaves it (the model's
    initial weights and dropout draws follow from it); a job on another device goes
    through ``torch.manual_seed`` itself (its device's generators too)."""
    from engine.train import loop

    torch.manual_seed(11)
    want = torch.get_rng_state()
    torch.manual_seed(0)
    loop.seed_job(11, torch.device("cpu"))
    assert torch.equal(torch.get_rng_state(), want)
    calls = []
    real = torch.manual_seed
    try:
        torch.manual_seed = lambda seed: calls.append(seed) or real(seed)
        loop.seed_job(12, torch.device("cuda", 0))
        loop.seed_job(13, torch.device("cpu"))
    finally:
        torch.manual_seed = real
    assert calls == [12] if not torch.cuda.is_initialized() else calls == [12, 13]


def test_rows_gathers_what_advanced_indexing_gathers():
    """``engine.train.data.rows`` (``index_select`` on the flattened index) is ``t[idx]``:
    same values, dtype and shape, for (K, B) and (B,) indices into images, labels and
    regression columns, repeated and unsorted indices included."""
    from engine.train.data import rows

    g = torch.Generator().manual_seed(0)
    for t in (torch.randn(50, 1, 8, 8, generator=g), torch.randint(0, 10, (50,), generator=g),
              torch.randn(50, 3, generator=g, dtype=torch.float64)):
        for idx in (torch.randint(0, 50, (4, 7), generator=g), torch.tensor([3, 3, 0, 49]),
                    torch.randint(0, 50, (11,), generator=g)):
            got = rows(t, idx)
            assert got.dtype == t.dtype and got.shape == t[idx].shape
            assert torch.equal(got, t[idx])
