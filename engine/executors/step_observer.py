"""A hook into an executor's training loop, for whoever measures it from inside the cell's
process (``docs/executors.md``, "Step observer"): the profile probe
(``engine.cell.profile_probe``) times each step and reads the memory peaks through it.

An observer is handed to the executor in its context (``CellContext.step_observer``);
without one (None, the default) the loop makes one ``is None`` test per step and nothing
else. The executors that call it:

* ``unified_model`` (``engine.executors.unified.interleave.Interleave``): one step is one
  bucket's step of the interleaved loop (every active member of that bucket, one batch);
  :meth:`StepObserver.training_starts` once per chunk, before its buckets start.
* ``seq``, ``mp`` and ``ray`` do not call it: seq's steps run in ``engine.train.loop``,
  mp's and ray's in worker processes the observer does not reach.

Torch-free: the observer decides what to do around a step (the probe drains the device
before and after, so that the step's time is its own).
"""

from __future__ import annotations


class StepObserver:
    """Observes a training loop step by step; every method does nothing here, so an
    observer overrides only what it needs (and costs nothing it does not).

    Calls, per chunk of jobs trained together: :meth:`training_starts`, then for each step
    :meth:`step_starts` right before it and :meth:`step_ends` right after it returned (not
    after a step that raised: that step failed its jobs). An exception an observer raises
    propagates out of the executor's ``run``; one that is not an ``Exception`` (a
    ``BaseException`` subclass) passes the executor's per-bucket failure handling, which is
    how the probe stops training once it has measured enough steps.
    """

    def training_starts(self) -> None:
        """A chunk's training loop starts: its models are built, verified and stacked;
        nothing has trained yet (no batch order made, no compile probe run)."""

    def step_starts(self) -> None:
        """A step is about to run (on CUDA, possibly on a bucket's own stream, which is
        then current)."""

    def step_ends(self) -> None:
        """The step just returned (its device work may still be queued)."""
