"""The job pane labels the validation column by what the events say it holds (issue 30):
"val R²" for regression, "val acc" for classification and for older recordings."""

from __future__ import annotations

import io

from rich.console import Console

from fugue_tui.live.job_table import val_header
from fugue_tui.live.view import LiveView


def ev(type, ts, **fields):
    base = {"v": 1, "ts": ts, "type": type}
    if type in ("job_progress", "started", "job_started"):  # a cell's own events
        base.update(cell="k1", attempt=1)
    else:  # the runner's
        base.update(campaign="c")
    return {**base, **fields}


def pane(metric: str | None) -> str:
    view = LiveView(1, clock=lambda: 1010.0)
    extra = {"val_metric": metric} if metric else {}
    for event in (
        ev("campaign_started", 1000.0, cells=1, run_dir="r", device="cpu", runner_pid=1,
           resume=False),
        ev("cell_started", 1001.0, cell="k1", index=1, label="D_reg seq pass 1", attempt=1,
           events="e", log_path="l", pid=10),
        ev("started", 1001.5, pid=10, jobs=["D_reg_0"]),
        ev("job_started", 1002.0, job_id="D_reg_0"),
        ev("job_progress", 1005.0, job_id="D_reg_0", epoch=1, epochs=1, step=4, steps=4,
           samples=256, loss=0.5, val_loss=0.4, val_acc=0.72, elapsed=3.0, epoch_end=True,
           train_sps=80.0, **extra)):
        view.apply(event)
    console = Console(file=io.StringIO(), width=120, color_system=None)
    console.print(view.job_rows(view.state.cells["k1"], 1010.0))
    return console.file.getvalue()


def test_regression_jobs_are_headed_r2_and_classification_val_acc():
    assert "val R²" in pane("r2") and "val acc" not in pane("r2")
    assert "val acc" in pane("accuracy") and "R²" not in pane("accuracy")
    assert "val acc" in pane(None)  # an older recording: as before
    assert "0.720" in pane("r2")


def test_val_header_of_mixed_and_unknown_metrics():
    assert val_header(["r2", None, "r2"]) == "val R²"
    assert val_header(["r2", "accuracy"]) == "val metric"
    assert val_header([]) == "val acc"


def test_epoch_progress_carries_the_metric_only_with_a_validation():
    from types import SimpleNamespace

    from engine.train.loop import epoch_progress

    job = SimpleNamespace(job_id="j", epochs=2)
    order = SimpleNamespace(n_batches=4)
    result = SimpleNamespace(samples=64, start=0.0, train_time_s=1.0)
    validated = {"epoch": 2, "train_loss": 0.3, "val_loss": 0.2, "val_acc": 0.9}
    fields = epoch_progress(result, job, order, validated, 2.0, metric="r2")
    assert fields["val_metric"] == "r2" and fields["val_acc"] == 0.9
    not_validated = {"epoch": 1, "train_loss": 0.3}
    assert "val_metric" not in epoch_progress(result, job, order, not_validated, 1.0,
                                              metric="r2")
