"""Issue 50: under ``kernels = "exact"`` seq and unified_model train the same weights bit for
bit, so their ``weights_sha256`` digests are equal, member by member, on an offline
dataset (digits); a perturbed member is caught. unified_model hands its members back one at
a time (never all K unstacked copies at once)."""

from __future__ import annotations

import gc
import weakref
from types import SimpleNamespace

import pytest

torch = pytest.importorskip("torch")

from engine.define.workloads import JobSpec, SplitSpec  # noqa: E402
from engine.executors.seq import SeqExecutor  # noqa: E402
from engine.executors.unified.executor import UnifiedExecutor  # noqa: E402
from engine.models.digest import weights_sha256  # noqa: E402
from engine.models.hand_back import hand_back  # noqa: E402
from engine.train.loop import TrainSettings  # noqa: E402


@pytest.fixture(scope="module")
def digits():
    from engine.parts.datasets import load_dataset
    from engine.train.data import to_device

    return to_device(load_dataset("digits"), torch.device("cpu"))


def _jobs(model="mlp_bn", **kwargs):
    return [JobSpec(job_id=f"j{i}", exp_id="X", index=i, seed=42 + i, model=model,
                    dataset="digits", task="classification", batch_size=64, epochs=2, lr=lr,
                    optimizer="sgd", optimizer_kwargs={"momentum": 0.9},
                    model_kwargs=kwargs or {"hidden": 32, "dropout": 0.2},
                    split=SplitSpec("holdout", 0))
            for i, lr in enumerate((0.05, 0.02, 0.1))]


def _ctx(data, **options):
    return SimpleNamespace(arrivals=None, settings=TrainSettings(torch.device("cpu")),
                           datasets=lambda name: data, threads=1, seed=42,
                           emit=lambda type_, **f: None, options=options, features=None,
                           max_parallel=None, group={}, attempt_dir=None, scheduler=None)


@pytest.fixture(scope="module")
def trained(digits):
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # a shared host: OpenMP threads spin-wait
    try:
        jobs = _jobs()
        seq, uni = SeqExecutor(), UnifiedExecutor()
        seq_results = seq.run(jobs, _ctx(digits))
        uni_results = uni.run(jobs, _ctx(digits, kernels="exact"))
        return jobs, (seq, seq_results), (uni, uni_results)
    finally:
        torch.set_num_threads(threads)


def _digests(executor, jobs, results):
    backs = hand_back(executor.final_states(jobs, results, None), results, "x", set(), None)
    return {j: b.digest for j, b in backs.items()}


def test_exact_kernels_give_seqs_digests(trained, parity):
    jobs, (seq, seq_results), (uni, uni_results) = trained
    assert [r.status for r in seq_results + uni_results] == ["ok"] * 6
    assert all(run.plan.route == "vectorised" for run in uni.runs)  # stacked, not eager
    want, got = _digests(seq, jobs, seq_results), _digests(uni, jobs, uni_results)
    assert len(set(want.values())) == 3  # three different models
    for job in jobs:
        parity.same(f"{job.job_id} weights_sha256", got[job.job_id], want[job.job_id])


def test_a_perturbed_member_is_caught(digits):
    jobs = _jobs("mlp", hidden=16)[:2]
    uni = UnifiedExecutor()
    results = uni.run(jobs, _ctx(digits, kernels="exact"))
    state = {job.job_id: st for job, st in uni.final_states(jobs, results, None)}["j1"]
    clean = weights_sha256(state)
    key = sorted(state)[0]
    state[key] = state[key].clone()
    state[key].view(-1)[0] += 1e-7  # one element, its last bits
    assert weights_sha256(state) != clean


def test_unified_hands_back_one_member_at_a_time(digits):
    """The hand-back asks for the next member's state only after the previous one was
    digested and dropped: while member k is handed out, no earlier member's is alive."""
    jobs = _jobs("mlp", hidden=16)
    uni = UnifiedExecutor()
    results = uni.run(jobs, _ctx(digits, kernels="exact"))
    from engine.executors.unified.executor import release

    release(uni.runs)  # the finished chunk's models dropped: only the kept states remain
    alive: list[weakref.ref] = []
    seen = []

    def states():
        for job, state in uni.final_states(jobs, results, None):
            gc.collect()
            seen.append(sum(ref() is not None for ref in alive))
            alive.append(weakref.ref(next(iter(state.values()))))
            yield job, state

    backs = hand_back(states(), results, "unified_model", set(), None)
    assert len(backs) == 3 and all(b.digest for b in backs.values())
    assert seen == [0, 0, 0]


def test_pruned_trials_too_seq_and_unified_same_digests(parity):
    """hpo under sha with the same decisions on both sides: every trial is digested, a
    pruned one with its weights at its stop, and each equals seq's (kernels exact)."""
    from engine.executors.base import CellContext
    from engine.parts.datasets import load_dataset
    from engine.train.data import to_device
    from tests.unit.engine.executors.test_hpo_seq_schedulers import trials
    from tests.unit.engine.executors.unified.test_hpo_unified_schedulers import (
        trials as two,
    )

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        wine = to_device(load_dataset("wine"), torch.device("cpu"))
        jobs = two()
        assert [j.job_id for j in jobs] == [j.job_id for j in trials()]
        got = {}
        for name, executor, options in (("seq", SeqExecutor(), {}),
                                        ("unified_model", UnifiedExecutor(),
                                         {"kernels": "exact", "verify": False})):
            ctx = CellContext(settings=TrainSettings(device=torch.device("cpu")),
                              datasets=lambda n: wine, emit=lambda kind, **f: None,
                              threads=1, scheduler="sha",
                              options={"scheduler": "sha", "grace_period": 1,
                                       "reduction_factor": 2, **options})
            results = executor.run(jobs, ctx)
            got[name] = ({r.job.job_id for r in results if r.early_stopped},
                         _digests(executor, jobs, results))
    finally:
        torch.set_num_threads(threads)
    (stopped, seq), (stopped_u, uni) = got["seq"], got["unified_model"]
    assert stopped and stopped == stopped_u and len(seq) == len(jobs)
    for job in jobs:
        parity.same(f"{job.job_id} weights_sha256", uni[job.job_id], seq[job.job_id])
