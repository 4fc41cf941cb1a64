"""Helpers for the hand-back tests of the executors (issue 50): a small hpo grid that a
pruning scheduler stops a trial of whatever the timing when trials run one at a time,
and the digests of jobs trained alone under seq (the reference every executor's digests
are compared with)."""

from __future__ import annotations

import torch

from engine.define.workloads import JobSpec
from engine.executors.base import CellContext
from engine.executors.seq import SeqExecutor
from engine.models.hand_back import hand_back
from engine.train.loop import TrainSettings


def hpo_jobs() -> list[JobSpec]:
    """Three wine MLP trials of 3 epochs, validated every epoch: good learning rates first,
    so the weak last one (lr 1e-5) reaches asha's (and sha's) first rung below the first
    trial there and is stopped after epoch 1; the first always finishes."""
    return [JobSpec(job_id=f"H{i}", exp_id="H", index=i, seed=42 + i, model="mlp",
                    dataset="wine", task=None, batch_size=32, epochs=3, lr=lr,
                    optimizer="sgd", validate_every_epoch=True)
            for i, lr in enumerate([3e-2, 1e-2, 1e-5])]


def seq_digests(jobs: list[JobSpec]) -> dict[str, str | None]:
    """Each job trained alone under seq on the CPU, one thread: its weights' digest."""
    from engine.parts.datasets import load_dataset
    from engine.train.data import to_device

    data = {name: to_device(load_dataset(name), torch.device("cpu"))
            for name in {j.dataset for j in jobs}}
    ctx = CellContext(settings=TrainSettings(device=torch.device("cpu")),
                      datasets=data.__getitem__, emit=lambda kind, **f: None, threads=1)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        seq = SeqExecutor()
        results = seq.run(jobs, ctx)
    finally:
        torch.set_num_threads(threads)
    return {j: b.digest for j, b in
            hand_back(seq.final_states(jobs, results, ctx), results, "seq", set(), None).items()}
