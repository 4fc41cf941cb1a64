"""A job that fails under unified_model is recorded with the words seq and mp use
(:func:`engine.errors.failure_line`): a message-less ``MemoryError`` raised while a bucket
is built reads ``MemoryError (no message); when recorded: ...``, never ``MemoryError: ``
(issue 44: unified_model's row said ``MemoryError: `` where seq and mp said "(no message)")."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import engine.executors.unified.bucket_build as build_mod  # noqa: E402
import engine.train.loop as loop_mod  # noqa: E402
from engine.executors.seq import SeqExecutor  # noqa: E402
from engine.executors.unified.executor import UnifiedExecutor  # noqa: E402
from tests.unit.engine.executors.unified.test_unified_parity import _ctx, _data, _job  # noqa: E402


def _no_memory(*args, **kwargs):
    raise MemoryError()


def _errors(executor, jobs) -> list[str]:
    results = executor.run(jobs, _ctx(_data(), []))
    assert [r.status for r in results] == ["failed"] * len(jobs)
    return [r.error for r in results]


def test_a_member_that_cannot_be_built_reads_as_under_seq(monkeypatch):
    jobs = [_job(i, epochs=1, model="mlp", model_kwargs={"hidden": 8}) for i in range(2)]
    monkeypatch.setattr(loop_mod, "build_model", _no_memory)
    monkeypatch.setattr(build_mod, "build_model", _no_memory)
    seq = _errors(SeqExecutor(), jobs)
    unified = _errors(UnifiedExecutor(), jobs)
    for line in seq + unified:
        assert line.startswith("MemoryError (no message)"), (seq, unified)
        assert not line.rstrip().endswith(":"), line


def test_a_bucket_that_breaks_after_its_members_are_built_fails_them_in_the_same_words(
        monkeypatch):
    jobs = [_job(i, epochs=1, model="mlp", model_kwargs={"hidden": 8}) for i in range(2)]
    monkeypatch.setattr(build_mod, "build_stacked", _no_memory)  # the stack's optimizer
    unified = _errors(UnifiedExecutor(), jobs)
    assert all(line.startswith("MemoryError (no message)") for line in unified), unified
