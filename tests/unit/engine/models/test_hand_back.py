"""The cell's hand-back phase (issue 50): after the group window each ok job gets its
``weights_sha256``; ``save_models`` true / best writes the right files; a save that fails
(an unwritable folder) says so in ``save_status`` and leaves the digests and results."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

torch = pytest.importorskip("torch")

from engine.cell.hand_back import run_hand_back  # noqa: E402
from engine.define.workloads import JobSpec, SplitSpec  # noqa: E402
from engine.executors.seq import SeqExecutor  # noqa: E402
from engine.models.digest import weights_sha256  # noqa: E402
from engine.results.rows import GroupRow  # noqa: E402
from engine.train.data import DeviceData  # noqa: E402
from engine.train.loop import TrainSettings  # noqa: E402


def _data() -> DeviceData:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(64, 4, generator=g)
    y = (x.sum(1) > 0).long()
    return DeviceData("syn", "classification", (4,), 2, x, y, None, None)


def _jobs():
    return [JobSpec(job_id=f"j{i}", exp_id="X", index=i, seed=i, model="mlp",
                    dataset="digits", task="classification", batch_size=16, epochs=2, lr=lr,
                    optimizer="sgd", model_kwargs={"hidden": 8}, split=SplitSpec("holdout", 0))
            for i, lr in enumerate((0.5, 0.0, 0.1))]  # lr 0: j1 learns nothing


def _ctx(tmp_path, save):
    data = _data()
    return SimpleNamespace(settings=TrainSettings(torch.device("cpu")),
                           datasets=lambda name: data, threads=1, seed=0, options={},
                           emit=lambda type_, **f: None, group=GroupRow(), scheduler=None,
                           attempt_dir=tmp_path / "attempt-1", save_models=save,
                           features=None, max_parallel=None, outside_window=[], arrivals=None)


@pytest.fixture(scope="module")
def threads():
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(old)


def _run(tmp_path, save, fail=None, executor="seq"):
    from engine.executors.unified.executor import UnifiedExecutor

    jobs = _jobs()
    ctx = _ctx(tmp_path, save)
    seq = SeqExecutor() if executor == "seq" else UnifiedExecutor()
    results = seq.run(jobs, ctx)
    if fail is not None:
        results[fail].status = "failed"
    events = []
    run_hand_back(seq, jobs, results, ctx, executor, lambda t, **f: events.append((t, f)))
    assert events[-1][0] == "phase" and events[-1][1]["phase"] == "hand_back"
    return results, ctx


def test_every_ok_job_is_digested_and_nothing_saved_by_default(tmp_path, threads):
    results, ctx = _run(tmp_path, "false", fail=2)
    assert [len(r.weights_sha256 or "") for r in results] == [64, 64, 0]
    assert ctx.group["digest_s"] > 0
    assert ctx.group["save_s"] is None and ctx.group["save_status"] is None
    assert not (tmp_path / "attempt-1" / "models").exists()


@pytest.mark.parametrize("executor", ["seq", "unified_model"])
def test_save_true_writes_every_job_with_its_digest(tmp_path, threads, executor):
    results, ctx = _run(tmp_path, "true", executor=executor)
    assert ctx.group["save_status"] == "ok" and ctx.group["save_s"] > 0
    folder = tmp_path / "attempt-1" / "models"
    assert sorted(p.name for p in folder.iterdir()) == [
        f"j{i}.{ext}" for i in range(3) for ext in ("json", "safetensors")]
    from safetensors.torch import load_file

    for r in results:
        meta = json.loads((folder / f"{r.job.job_id}.json").read_text())
        assert meta["weights_sha256"] == r.weights_sha256
        assert (meta["executor"], meta["model"], meta["seed"]) == (executor, "mlp", r.job.seed)
        assert weights_sha256(load_file(str(folder / f"{r.job.job_id}.safetensors"))) \
            == r.weights_sha256


@pytest.mark.parametrize("executor", ["seq", "unified_model"])
def test_save_best_writes_only_the_best_job(tmp_path, threads, executor):
    results, ctx = _run(tmp_path, "best", executor=executor)
    folder = tmp_path / "attempt-1" / "models"
    from engine.models.hand_back import best_job

    best = best_job(results)
    assert best != "j1"  # the job that learnt nothing is not the best
    assert sorted(p.name for p in folder.iterdir()) == [f"{best}.json", f"{best}.safetensors"]
    assert all(len(r.weights_sha256) == 64 for r in results)  # every job still digested


def test_an_unwritable_folder_fails_the_save_not_the_rows(tmp_path, threads):
    """The attempt folder's ``models`` is taken by a file (root ignores a read-only mode,
    not this): the save fails with one line; every job keeps its row and its digest."""
    (tmp_path / "attempt-1").mkdir()
    (tmp_path / "attempt-1" / "models").write_text("not a folder")
    results, ctx = _run(tmp_path, "true")
    assert ctx.group["save_status"].startswith("failed: FileExistsError"), ctx.group
    assert "\n" not in ctx.group["save_status"]
    assert [r.status for r in results] == ["ok"] * 3
    assert all(len(r.weights_sha256) == 64 for r in results)


def test_a_hand_back_that_raises_leaves_the_results(tmp_path, threads):
    jobs = _jobs()
    ctx = _ctx(tmp_path, "best")
    seq = SeqExecutor()
    results = seq.run(jobs, ctx)

    def broken(*args):
        raise RuntimeError("worker gone")

    seq.hand_back = broken
    run_hand_back(seq, jobs, results, ctx, "seq", lambda t, **f: None)
    assert ctx.group["save_status"] == "failed: RuntimeError: worker gone"
    assert [r.weights_sha256 for r in results] == [None] * 3
    assert [r.status for r in results] == ["ok"] * 3
