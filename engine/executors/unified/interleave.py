"""Several buckets of one chunk trained together in one process, step by step
(``docs/measurement.md``, "unified_model").

:class:`Interleave` trains the buckets of one chunk together: every global step gives one
step to every bucket that still has an active member, in bucket order (round-robin over
active members only; a bucket whose members have all finished is never stepped again, and
the loop ends with the last member's last step). Members whose epochs have different
numbers of batches or budgets reach their epoch ends at different global steps: the loop
runs in *segments* of steps during which no member of any bucket crosses an epoch boundary,
and does the bookkeeping of the members that reached one between segments
(``BucketRun.finish``). A bucket that raises fails its unfinished members; the others go on.

Streams (CUDA, feature ``s``): each bucket steps on its own stream; per segment the side
streams ``wait_stream`` the current stream before reading what it produced (batch
indices, parameters after validation), tensors allocated on the current stream and used on
a side stream are ``record_stream``-ed on it, and the current stream waits for every side
stream before any bookkeeping reads losses or parameters.

``Interleave.train_clock_s`` (the shared :class:`Clock`) is the chunk's training-step wall
time (the denominator of the group's ``train_throughput_sps``); each bucket also adds it to
its own ``train_clock_s`` while it has active members.

``observer`` (:class:`~engine.executors.step_observer.StepObserver`, the cell context's
``step_observer``): told when the loop starts and around each bucket step (the profile
probe's timings and peaks); None costs one test per step.

A stream cell (issue 52, ``engine.executors.unified.serve``) runs one loop for the whole
stream: its ``feed`` is called before every segment (it adds new buckets with
:meth:`Interleave.add`, joins arriving jobs into running ones and waits while nothing
runs) and its ``interrupt`` after every global step (True ends the segment there, so an
arrival is admitted at the next step boundary, not at the next epoch end).
"""

from __future__ import annotations

import time
import traceback
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import torch

from engine.train.loop import sync

if TYPE_CHECKING:
    from engine.executors.step_observer import StepObserver
    from engine.executors.unified.bucket import BucketRun


class Clock:
    """The chunk's training-step wall time so far (shared by its buckets)."""

    def __init__(self) -> None:
        self.s = 0.0


class Interleave:
    """Train the buckets ``runs`` (built) of one chunk together, round-robin per global
    step over the buckets with active members; see the module docstring.

    ``streams``: one CUDA stream per bucket (CUDA only), or a callable deciding it from
    the runs once their compile probes are done (streams never meet CUDA-graph capture).
    ``trace``: when a list, one ``(bucket index, member job ids stepped)`` tuple is
    appended per bucket step (tests). ``observer``: see the module docstring."""

    def __init__(self, runs: Sequence[BucketRun], device: torch.device, *,
                 streams: bool | Callable[[list[BucketRun]], bool] = False,
                 trace: list | None = None, observer: StepObserver | None = None,
                 feed: Callable[[Interleave], bool] | None = None,
                 interrupt: Callable[[], bool] | None = None):
        self.runs = [r for r in runs if r.route is not None and r.active]
        self.device = device
        self._streams = streams
        self.streams = False
        self.trace = trace
        self.observer = observer
        self.clock = Clock()
        #: A stream cell's scheduler (``engine.executors.unified.serve``): called before
        #: every segment, it may add runs (:meth:`add`) or join jobs into running ones,
        #: and waits while nothing runs and more is to come; returns whether more is to
        #: come (the loop ends when nothing runs and it says no).
        self.feed = feed
        #: Asked after every global step: True ends the segment there (a job arrived that
        #: the feed should admit at this step boundary rather than at the next epoch end).
        self.interrupt = interrupt

    def add(self, run: BucketRun) -> None:
        """A run built while the loop runs (a stream's new bucket): started on the shared
        clock and, when the loop uses CUDA streams, given its own. A run that cannot
        start fails its members; one with nothing to train is not added."""
        if run.route is None or not run.active:
            return
        try:
            run.start(self.clock)
        except Exception as exc:  # noqa: BLE001
            traceback.print_exc()
            run.fail_all(exc)
            return
        if self.streams:
            run.stream = torch.cuda.Stream(self.device)
        self.runs.append(run)

    def _probe(self, runs: list[BucketRun]) -> None:
        for r in runs:
            if r._needs_probe and r.active:
                try:
                    r.compile_probe()
                except Exception as exc:  # noqa: BLE001 - the bucket broke
                    traceback.print_exc()
                    r.fail_all(exc)

    @property
    def train_clock_s(self) -> float:
        return self.clock.s

    def run(self) -> None:
        observer = self.observer
        if observer is not None:
            observer.training_starts()
        runs = self.runs
        for r in runs:
            try:
                r.start(self.clock)
            except Exception as exc:  # noqa: BLE001
                traceback.print_exc()
                r.fail_all(exc)
        self._probe(runs)
        want = self._streams(runs) if callable(self._streams) else self._streams
        self.streams = bool(want) and self.device.type == "cuda"
        if self.streams:
            for r in runs:
                r.stream = torch.cuda.Stream(self.device)
        while True:
            more = self.feed(self) if self.feed is not None else False
            live = [r for r in self.runs if r.active]
            self._probe(live)  # buckets re-stacked under compile
            live = [r for r in live if r.active]
            if not live:
                if more:
                    continue
                break
            length = min(r.remaining() for r in live)
            for r in live:
                r.prepare(length)
            main = torch.cuda.current_stream(self.device) if self.streams else None
            if main is not None:
                for r in live:
                    r.stream.wait_stream(main)    # indices, parameters, state: ready
                    r._seg.record_stream(r.stream)
                    r.loss_sums.record_stream(r.stream)
            sync(self.device)
            t0 = time.perf_counter()
            broken: set[int] = set()
            for i in range(length):
                for j, r in enumerate(live):
                    if j in broken:
                        continue
                    try:
                        if main is not None:
                            with torch.cuda.stream(r.stream):
                                _step(r, i, observer)
                        else:
                            _step(r, i, observer)
                    except Exception as exc:  # noqa: BLE001 - that bucket broke
                        traceback.print_exc()
                        broken.add(j)
                        r.fail_all(exc)
                    if self.trace is not None:
                        self.trace.append((r.plan.index, tuple(
                            m.job.job_id for m in r.members if m.active)))
                if self.interrupt is not None and i + 1 < length and self.interrupt():
                    length = i + 1  # the segment ends at this step boundary
                    break
            if main is not None:
                for r in live:
                    main.wait_stream(r.stream)  # losses, parameters: before bookkeeping
            sync(self.device)
            elapsed = time.perf_counter() - t0
            self.clock.s += elapsed
            for j, r in enumerate(live):
                r.train_clock_s += elapsed
                if j in broken:
                    continue
                try:
                    r.finish(length)
                except Exception as exc:  # noqa: BLE001
                    traceback.print_exc()
                    r.fail_all(exc)


def _step(run: BucketRun, i: int, observer: StepObserver | None) -> None:
    """Bucket step ``i``, observed when there is an observer (the window an observer
    sees is the step's call alone: on its stream, after the segment's set-up)."""
    if observer is None:
        run.step(i)
        return
    observer.step_starts()
    run.step(i)
    observer.step_ends()
