"""``max_parallel`` bounds unified_model's memory, not only what trains at once: a finished
chunk's models, optimizers and stacks are released before the next chunk is built
(``engine.executors.unified.executor.release``). Before, a cell in chunks of 8 kept every
chunk's stack until it ended and its peak RSS grew past a single stack of 8 (issue 24's
``max_parallel = "auto"`` proof ran at 1.40x its RAM budget)."""

from __future__ import annotations

import dataclasses
import gc

import pytest

torch = pytest.importorskip("torch")

from engine.executors.seq import SeqExecutor  # noqa: E402
from engine.executors.unified.executor import UnifiedExecutor  # noqa: E402
from tests.unit.engine.executors.unified.test_unified_parity import _ctx, _data, _job  # noqa: E402


def test_a_finished_chunk_is_released_before_the_next_and_results_stay_exact(monkeypatch):
    import weakref

    import engine.executors.unified.bucket_build as build_mod

    jobs = [_job(i, epochs=1, model="mlp", model_kwargs={"hidden": 16}) for i in range(6)]
    data = _data()
    data = dataclasses.replace(data, pool_x=data.pool_x.float())  # as a cell holds it
    seq = SeqExecutor().run(jobs, _ctx(data, []))
    built: list[weakref.ref] = []
    alive_at_chunk_start: list[int] = []
    real_build = build_mod.build_model

    def tracking(*args, **kwargs):
        model = real_build(*args, **kwargs)
        if not built or len(built) % 2 == 0:  # a new chunk starts building
            gc.collect()
            alive_at_chunk_start.append(sum(r() is not None for r in built))
        built.append(weakref.ref(model))
        return model

    monkeypatch.setattr(build_mod, "build_model", tracking)
    executor = UnifiedExecutor()
    ctx = _ctx(data, [], max_parallel=2)
    uni = executor.run(jobs, ctx)
    plans = ctx.group["executor_info"]["plan"]
    assert len(plans) == 3 and all(p["route"] == "vectorised" for p in plans)
    # exactly what seq trained, chunk by chunk
    for s, u in zip(seq, uni, strict=True):
        assert u.status == "ok" and u.final_train_loss == pytest.approx(s.final_train_loss,
                                                                        rel=1e-6)
    # each chunk started with no earlier chunk's model alive (its models built in the
    # probe's copies aside, which are not tracked: copies are not built by build_model)
    assert alive_at_chunk_start[0] == 0
    assert alive_at_chunk_start[1:] == [0, 0], alive_at_chunk_start
    # the runs stay for inspection, the earlier chunks without their heavy state
    assert executor.runs[0].stack is None and executor.runs[0].members[0].model is None
    assert executor.runs[-1].stack is not None
