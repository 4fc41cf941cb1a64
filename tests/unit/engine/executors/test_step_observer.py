"""The executor step hook (issue 40, item 5; docs/executors.md, "Step observer"): the
unified model's interleaved loop tells a ``CellContext.step_observer`` where each chunk's
training starts and around every bucket step, and the profile probe takes its step times
and its set-up peak from it instead of patching ``BucketRun.step`` and ``Interleave.run``."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from engine.executors.step_observer import StepObserver  # noqa: E402
from engine.executors.unified.bucket import BucketRun  # noqa: E402
from engine.executors.unified.executor import UnifiedExecutor  # noqa: E402
from engine.executors.unified.interleave import Interleave  # noqa: E402
from tests.unit.engine.executors.unified.test_unified_buckets import _multi_model  # noqa: E402
from tests.unit.engine.executors.unified.test_unified_parity import _ctx, _data, _job  # noqa: E402


@pytest.fixture
def float64():
    """As tests/unit/engine/executors/unified/test_unified_parity.py's (its synthetic data are float64); one thread."""
    old, threads = torch.get_default_dtype(), torch.get_num_threads()
    torch.set_default_dtype(torch.float64)
    torch.set_num_threads(1)
    yield
    torch.set_default_dtype(old)
    torch.set_num_threads(threads)


class Recorder(StepObserver):
    def __init__(self, stop_after: int | None = None) -> None:
        self.calls: list[str] = []
        self.stop_after = stop_after

    def training_starts(self) -> None:
        self.calls.append("training")

    def step_starts(self) -> None:
        self.calls.append("start")

    def step_ends(self) -> None:
        self.calls.append("end")
        if self.stop_after is not None and self.calls.count("end") >= self.stop_after:
            raise Stop


class Stop(BaseException):
    pass


def _run(jobs, observer, **extra):
    executor = UnifiedExecutor()
    executor.trace = []
    ctx = _ctx(_data(), [], **extra)
    ctx.step_observer = observer
    return executor, executor.run(jobs, ctx)


@pytest.mark.usefixtures("float64")
def test_every_bucket_step_of_every_chunk_is_observed_once():
    """Two chunks (max_parallel = 2) of three buckets: each chunk's loop starts once, and
    every bucket step (the executor's trace) is wrapped by one start and one end."""
    observer = Recorder()
    executor, results = _run(_multi_model(), observer, max_parallel=2)
    assert all(r.status == "ok" for r in results)
    assert len(executor.interleaves) == 2
    assert observer.calls.count("training") == 2
    steps = [c for c in observer.calls if c != "training"]
    assert len(steps) == 2 * len(executor.trace) > 0
    assert steps == ["start", "end"] * len(executor.trace)
    # each chunk's start comes before its first step
    assert observer.calls[0] == "training"


@pytest.mark.usefixtures("float64")
def test_the_base_observer_does_nothing_and_none_is_the_default():
    jobs = [_job(0, epochs=1), _job(1, epochs=1)]
    _, plain = _run(jobs, None)
    _, observed = _run(jobs, StepObserver())
    assert [r.final_train_loss for r in plain] == [r.final_train_loss for r in observed]
    assert Interleave([], torch.device("cpu")).observer is None


@pytest.mark.usefixtures("float64")
def test_an_observer_that_raises_a_base_exception_ends_the_run():
    """How the probe stops after max_steps: not a job's failure, out of run()."""
    observer = Recorder(stop_after=3)
    with pytest.raises(Stop):
        _run([_job(0, epochs=2), _job(1, epochs=2)], observer)
    assert observer.calls == ["training", "start", "end", "start", "end", "start", "end"]


def test_the_probe_times_its_steps_through_the_hook(monkeypatch):
    """The probe's K-child, in this process: its step times and set-up peak come from the
    hook (a loop that does not call it leaves ``steps`` at 0 and ``step_ms`` empty), and no
    method of the executor is replaced."""
    from engine.cell import profile_probe
    from engine.parts import datasets as dataset_lib

    step, run = BucketRun.step, Interleave.run
    seen: list[str] = []
    monkeypatch.setattr(profile_probe.ProbeObserver, "training_starts",
                        lambda self, _o=profile_probe.ProbeObserver.training_starts:
                        seen.append("training") or _o(self))
    job = _job(0, model="mlp", model_kwargs={"hidden": 8}, dataset="wine", batch_size=16,
               epochs=1, optimizer_kwargs={}).to_dict()
    spec = {"job": job, "device": "cpu", "threads": 1, "parent_rss_mb": 0.0, "warmup": 1,
            "max_steps": 6}
    out = profile_probe._measure_k(spec, dataset_lib.load_dataset("wine"), 2)
    assert seen == ["training"]
    assert out["steps"] == 5 and out["step_ms"] > 0      # 6 steps timed, 1 of warm-up
    assert out["rss_mb"] > 0 and "reserved_mb" not in out
    if profile_probe._reset_peak():
        assert out["rss_setup_mb"] > 0 and out["rss_train_mb"] > 0
    assert (BucketRun.step, Interleave.run) == (step, run)
