"""Training wall time of concurrent jobs: the union of their epochs' training phases.
Torch-free; shared by the executors whose jobs train at the same time in worker processes
(mp, ray), which define the group's ``train_throughput_sps`` as samples trained ÷ the time at
least one job was in a training phase (docs/measurement.md)."""

from __future__ import annotations

import time
from typing import Any


class TrainSpans:
    """``on_epoch_end`` hook that records each epoch's training-step phase as a
    ``(start, end)`` pair of ``time.perf_counter`` values (a system-wide monotonic clock on
    Linux, so spans of different workers compare): the group's training wall time is their
    union. The phase ended when the epoch's validation began, ``train_s`` before that."""

    def __init__(self, then=None):
        self.spans: list[tuple[float, float]] = []
        self._val_total = 0.0
        self._then = then

    def __call__(self, result: Any) -> None:
        now = time.perf_counter()
        val_total = result.val_time_s or 0.0
        end = now - (val_total - self._val_total)
        self._val_total = val_total
        self.spans.append((end - result.history[-1]["train_s"], end))
        if self._then is not None:
            self._then(result, self.spans)


def union_seconds(spans) -> float:
    """Length of the union of ``(start, end)`` intervals, seconds."""
    total, cur_start, cur_end = 0.0, None, None
    for start, end in sorted(spans):
        if cur_end is None or start > cur_end:
            if cur_end is not None:
                total += cur_end - cur_start
            cur_start, cur_end = start, end
        else:
            cur_end = max(cur_end, end)
    if cur_end is not None:
        total += cur_end - cur_start
    return total
