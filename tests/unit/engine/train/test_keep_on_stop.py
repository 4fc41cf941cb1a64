"""The training loop keeps a stopped job's weights (issue 50): an epoch-end hook that stops
the job with a BaseException (JobStopped, Ray Tune's SystemExit out of tune.report) gets
the weights as of that epoch into ``keep`` — the weights of the same job trained for that
many epochs — and the exception through; a hook that fails (an Exception) fails the job
and keeps nothing."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from engine.models.digest import weights_sha256
from engine.parts.datasets import load_dataset
from engine.train.data import to_device
from engine.train.loop import JobStopped, TrainSettings, train_job
from tests.unit.engine.models.trained import hpo_jobs

#: what the last _train kept (its call may end in the stop's exception)
_KEPT: dict = {}


def _train(job, stop_at: int, exc: BaseException):
    data = to_device(load_dataset(job.dataset), torch.device("cpu"))
    kept = _KEPT
    kept.clear()

    def hook(result):
        if result.epochs_run == stop_at:
            raise exc

    result = train_job(job, data, TrainSettings(device=torch.device("cpu")),
                       on_epoch_end=hook, keep=lambda s: kept.update(state=s))
    return result, kept, data


@pytest.mark.parametrize("exc", [JobStopped(), SystemExit(0)])
def test_a_stop_keeps_the_weights_of_its_epoch(exc):
    job = hpo_jobs()[0]
    with pytest.raises(type(exc)):
        _train(job, 2, exc)
    kept = _KEPT.pop("state")
    alone: dict = {}
    data = to_device(load_dataset(job.dataset), torch.device("cpu"))
    train_job(dataclasses.replace(job, epochs=2), data,
              TrainSettings(device=torch.device("cpu")), keep=lambda s: alone.update(state=s))
    assert weights_sha256(kept) == weights_sha256(alone["state"])


def test_a_failing_hook_keeps_nothing():
    result, kept, _ = _train(hpo_jobs()[0], 1, RuntimeError("hub gone"))
    assert result.status == "failed" and "hub gone" in result.error and not kept
