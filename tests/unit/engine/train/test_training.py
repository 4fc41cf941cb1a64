"""The training loop's contract (docs/measurement.md), on CPU with real data."""

from __future__ import annotations

import math

import pytest
import torch

from engine.define.catalogue import load_catalogue
from engine.define.workloads import expand
from engine.parts.datasets import load_dataset
from engine.train.data import to_device
from engine.train.loop import TrainSettings, train_job

CPU = TrainSettings(device=torch.device("cpu"))


@pytest.fixture(scope="module")
def digits():
    torch.set_num_threads(1)
    return to_device(load_dataset("digits"), torch.device("cpu"))


def _jobs(exp_id, **overrides):
    from dataclasses import replace

    exp = replace(load_catalogue().get(exp_id), **overrides)
    return expand(exp, seed=7)


def test_same_seed_same_model_different_seed_different_model(digits):
    a, b = _jobs("D_ens", epochs=1)[:2]
    first, again, other = train_job(a, digits, CPU), train_job(a, digits, CPU), train_job(b, digits, CPU)
    assert first.status == again.status == other.status == "ok"
    assert first.final_val_loss == again.final_val_loss
    assert first.final_val_loss != other.final_val_loss


def test_samples_times_and_history(digits):
    job = _jobs("D_ens", epochs=3)[0]
    progress = []
    result = train_job(job, digits, CPU, progress=lambda **f: progress.append(f))
    n_train = 1797 - round(1797 * 0.2)
    assert result.samples == (n_train // 64) * 64 * 3
    assert result.samples_dropped == (n_train % 64) * 3
    assert result.epochs_run == 3 and len(result.history) == 3
    assert 0 < result.train_time_s < result.total_time_s
    assert result.val_time_s > 0
    assert result.train_throughput_sps == pytest.approx(result.samples / result.train_time_s)
    # non-hpo jobs validate after the last epoch only
    assert ["val_acc" in h for h in result.history] == [False, False, True]
    assert result.final_val_acc > 0.5 and result.param_count > 0
    assert result.amp_applied is False  # requested or not, AMP never applies on CPU
    epoch_ends = [p for p in progress if p.get("epoch_end")]
    assert [p["epoch"] for p in epoch_ends] == [1, 2, 3]
    assert epoch_ends[-1]["samples"] == result.samples


def test_hpo_validates_every_epoch_on_the_same_holdout(digits):
    jobs = _jobs("D_hpo", epochs=2)
    results = [train_job(job, digits, CPU) for job in jobs[:2]]
    for result in results:
        assert all("val_acc" in h for h in result.history)
        assert result.val_source == "holdout"
    assert jobs[0].lr == jobs[1].lr and jobs[0].batch_size != jobs[1].batch_size


def test_regression_reports_r2():
    data = to_device(load_dataset("diabetes"), torch.device("cpu"))
    job = _jobs("D_reg", epochs=30)[0]
    result = train_job(job, data, CPU)
    assert result.status == "ok"
    assert 0.0 < result.final_val_acc < 1.0  # R², a real fit on held-out patients


def test_diverging_job_fails_with_reason(digits):
    job = _jobs("D_ens", epochs=2, lr=1e12)[0]
    result = train_job(job, digits, CPU)
    assert result.status == "failed"
    assert "loss" in result.error or "nan" in result.error.lower()
    assert result.total_time_s is not None


def test_compile_mode_is_recorded_and_trains_the_same_numbers(digits):
    job = _jobs("D_hpo", epochs=1)[1]
    eager = train_job(job, digits, CPU)
    compiled = train_job(job, digits, TrainSettings(device=torch.device("cpu"),
                                                    compile_mode="default"))
    assert compiled.status == "ok", compiled.error
    assert compiled.compile_mode == "default" and eager.compile_mode == "off"
    assert math.isclose(compiled.final_val_loss, eager.final_val_loss, rel_tol=1e-3)
