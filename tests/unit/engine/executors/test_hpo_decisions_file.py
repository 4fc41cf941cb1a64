"""Auditable schedulers (issue 46): seq and unified_model write every rung decision of an
hpo cell to ``decisions.json`` in the attempt folder, in the documented schema
(engine.results.decisions), and what the file says stopped is what stopped; unified_model
with ``max_parallel = 1`` runs one trial at a time and says so, as seq does."""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")

from engine.executors.base import CellContext  # noqa: E402
from engine.executors.seq import SeqExecutor  # noqa: E402
from engine.executors.unified.executor import UnifiedExecutor  # noqa: E402
from engine.results import decisions  # noqa: E402
from engine.train.loop import TrainSettings  # noqa: E402
from tests.unit.engine.executors.test_hpo_seq_schedulers import (  # noqa: E402
    CPU,
    EPOCHS,
    trials,
    wine,  # noqa: F401 - the fixture
)

KEYS = {"schema", "executor", "scheduler", "metric", "mode", "grace_period",
        "reduction_factor", "max_t", "trials", "decisions"}
ENTRY = {"arrival", "trial", "index", "rung", "value", "decision"}


def _ctx(data, scheduler, attempt_dir, events, **options):
    return CellContext(settings=TrainSettings(device=CPU), datasets=lambda name: data,
                       emit=lambda kind, **f: events.append((kind, f)), threads=1,
                       scheduler=scheduler, attempt_dir=attempt_dir,
                       options={"scheduler": scheduler, "kernels": "exact", "verify": False,
                                **options})


def _check(path, executor, jobs, results):
    doc = json.loads(path.read_text())
    assert set(doc) == KEYS and doc["schema"] == decisions.SCHEMA
    assert doc == decisions.read(path)  # the reader takes what the writer wrote
    assert (doc["executor"], doc["scheduler"], doc["metric"], doc["mode"]) == \
        (executor, "asha", "val_loss", "min")
    assert (doc["grace_period"], doc["reduction_factor"], doc["max_t"]) == (1, 2, EPOCHS)
    assert doc["trials"] == [j.job_id for j in jobs]
    entries = doc["decisions"]
    assert entries and all(set(e) == ENTRY for e in entries)
    assert [e["arrival"] for e in entries] == list(range(1, len(entries) + 1))
    assert all(e["decision"] in ("continue", "stop") and e["rung"] < EPOCHS for e in entries)
    # asha's rungs with grace 1, factor 2, max_t 4: epochs 1 and 2
    assert {e["rung"] for e in entries} <= {1, 2}
    stops = {e["index"]: e["rung"] for e in entries if e["decision"] == "stop"}
    assert stops == {i: r.epochs_run for i, r in enumerate(results) if r.early_stopped}
    assert stops
    for e in entries:  # the value judged is the trial's metric after that epoch
        assert e["value"] == results[e["index"]].history[e["rung"] - 1]["val_loss"]
    return doc


def test_seq_and_unified_write_their_asha_decisions(wine, tmp_path):  # noqa: F811
    jobs = trials()
    runs = {}
    for name, executor in (("seq", SeqExecutor), ("unified_model", UnifiedExecutor)):
        folder = tmp_path / name
        folder.mkdir()
        results = executor().run(jobs, _ctx(wine, "asha", folder, [], grace_period=1,
                                            reduction_factor=2))
        runs[name] = _check(folder / decisions.FILE, name, jobs, results)
    # seq: trial after trial; the stack: every member's epoch 1 before any epoch 2
    seq_order = [(e["index"], e["rung"]) for e in runs["seq"]["decisions"]]
    assert seq_order == sorted(seq_order)
    unified_rungs = [e["rung"] for e in runs["unified_model"]["decisions"]]
    assert unified_rungs == sorted(unified_rungs)
    assert decisions.first_difference(runs["seq"], runs["seq"]) is None


def test_fifo_writes_no_decisions(wine, tmp_path):  # noqa: F811
    SeqExecutor().run(trials(2), _ctx(wine, None, tmp_path, []))
    assert not (tmp_path / decisions.FILE).exists()


def test_unified_one_trial_at_a_time_warns_as_seq(wine, tmp_path):  # noqa: F811
    events: list = []
    UnifiedExecutor().run(trials(3), _ctx(wine, "asha", None, events, grace_period=1,
                                          reduction_factor=2, max_parallel=1))
    warnings = [f["message"] for kind, f in events if kind == "warning"]
    assert any(w.startswith("unified_model: asha runs one trial at a time") for w in warnings)
