"""Ray Tune trials hand their weights back (issue 50): every trial — completed, or stopped
by asha at a rung — hands its final weights off to the cell as its process ends or takes
the next trial (engine.executors.ray.worker.hand_off), and the cell digests them after the
group window and saves the best trial when ``save_models = "best"``. Real Ray, real Tune,
one trial at a time (the decisions do not depend on timing): a stopped trial's digest is
the digest of the same job trained alone for the epochs it ran (seq, one thread), and the
saved best trial loads back (``engine.models.load``) with the same digest."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
import torch

pytest.importorskip("ray")

from engine.executors.base import CellContext  # noqa: E402
from engine.models.hand_back import save_selection  # noqa: E402
from engine.train.loop import TrainSettings  # noqa: E402
from tests.unit.engine.models.trained import hpo_jobs, seq_digests  # noqa: E402

pytestmark = pytest.mark.slow

HEX = set("0123456789abcdef")


def test_every_tune_trial_hands_back_and_the_best_is_saved(tmp_path):
    from engine.executors.ray.actors import RayExecutor
    from engine.models import load

    jobs = hpo_jobs()
    ctx = CellContext(settings=TrainSettings(device=torch.device("cpu")), datasets=None,
                      emit=lambda kind, **f: None, threads=1, scheduler="asha",
                      options={"max_parallel": 1, "grace_period": 1, "reduction_factor": 2,
                               "reuse_actors": True},
                      attempt_dir=tmp_path / "attempt-1", save_models="best")
    executor = RayExecutor()
    executor.setup(jobs, ctx)
    try:
        results = executor.run(jobs, ctx)
        save = save_selection("best", results)
        backs = executor.hand_back(jobs, results, ctx, save, "ray")
    finally:
        executor.teardown(ctx)
    stopped = [r for r in results if r.early_stopped]
    assert "H2" in {r.job.job_id for r in stopped} and "H0" not in {r.job.job_id for r in stopped}
    assert all(r.epochs_run < 3 for r in stopped)
    assert all(r.status == "ok" for r in results)
    # every trial, the stopped one included, has a full digest
    assert sorted(backs) == ["H0", "H1", "H2"]
    for back in backs.values():
        assert back.digest and len(back.digest) == 64 and set(back.digest) <= HEX
    # the same weights as the same job alone: to the end, or to the epoch it stopped at
    alone = [dataclasses.replace(r.job, epochs=r.epochs_run) for r in results]
    assert {j: b.digest for j, b in backs.items()} == seq_digests(alone)
    info = ctx.group["executor_info"]
    assert info["tune_handoff_s"]["trials"] == 3 and info["tune_handoff_s"]["sum"] > 0
    assert info["stopped_trial_pids_alive"] == []
    # "best": exactly one model for the group, the best trial's, which loads back
    assert len(save) == 1
    folder = tmp_path / "attempt-1" / "models"
    (best,) = save
    assert sorted(p.name for p in folder.iterdir()) == [f"{best}.json", f"{best}.safetensors"]
    meta = json.loads((folder / f"{best}.json").read_text())
    assert meta["executor"] == "ray" and meta["weights_sha256"] == backs[best].digest
    module, loaded = load(Path(folder / f"{best}.safetensors"))
    from engine.models.digest import weights_sha256

    assert isinstance(module, torch.nn.Module) and loaded["weights_sha256"] == backs[best].digest
    assert weights_sha256(module.state_dict()) == backs[best].digest
