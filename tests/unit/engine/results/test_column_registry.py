"""The column registry (engine.results.columns): each column declared once, everything else
derived from it — the headers, the docs tables, the analysis's typing — and the checked rows
through which executors and the cell set columns (a misspelt name fails where it is set)."""

from __future__ import annotations

import csv
import pickle

import pandas as pd
import pytest

from engine.results import columns
from engine.results.columns import (
    BOOL,
    GROUP_COLUMNS,
    GROUPS_FILE,
    INDIVIDUAL_COLUMNS,
    INDIVIDUAL_FILE,
    NUMBER,
    TEXT,
    Column,
    UnknownColumnError,
    header,
    numeric_columns,
    text_columns,
)
from engine.results.columns_doc import doc_tables
from engine.results.load import runs_from_frames
from engine.results.rows import GroupRow, JobRow
from engine.results.store import append_group

#: Added the way a later issue adds columns: at the end of the registry.
DUMMIES = (
    Column("zz_dummy_rate", GROUPS_FILE, NUMBER, "a dummy measurement for the test, 1/s"),
    Column("zz_dummy_note", INDIVIDUAL_FILE, TEXT, "a dummy note for the test"),
    Column("zz_dummy_note", GROUPS_FILE),  # same name in the other file: kind and doc inherited
)


@pytest.fixture
def dummy_columns():
    """The registry with :data:`DUMMIES` appended, restored afterwards."""
    saved = columns.COLUMNS
    columns.COLUMNS = columns._resolved(saved + DUMMIES)
    try:
        yield
    finally:
        columns.COLUMNS = saved
    assert "zz_dummy_rate" not in header(GROUPS_FILE)


def test_the_registry_declares_each_column_of_each_file_once():
    names = [(c.file, c.name) for c in columns.COLUMNS]
    assert len(names) == len(set(names))
    assert header(GROUPS_FILE) == GROUP_COLUMNS and header(INDIVIDUAL_FILE) == INDIVIDUAL_COLUMNS
    # a name means the same in both files
    for c in columns.COLUMNS:
        first = next(d for d in columns.COLUMNS if d.name == c.name)
        assert (c.kind, c.doc) == (first.kind, first.doc)
    assert set(numeric_columns(GROUPS_FILE)) | set(text_columns(GROUPS_FILE)) == set(GROUP_COLUMNS)
    assert not set(numeric_columns(GROUPS_FILE)) & set(text_columns(GROUPS_FILE))


def test_the_analysis_typing_is_the_registrys():
    """What the analysis always read as numbers still is, and what it kept as text still is
    (the lists load.py declared before the registry existed)."""
    numeric_groups = {"K", "max_parallel", "num_workers", "T_group", "total_samples",
                      "throughput_group", "energy_group", "gpu_util_mean", "gpu_util_max",
                      "vram_peak_mb", "gpu_vram_total_mb", "cpu_cores", "pass", "attempt",
                      "setup_s", "data_load_s", "train_throughput_sps", "threads",
                      "param_count", "seed", "passes"}
    numeric_jobs = {"num_workers", "total_time_s", "total_samples", "throughput_sps",
                    "gpu_util_mean", "gpu_util_max", "vram_peak_mb", "energy_j", "epochs_run",
                    "final_train_loss", "final_train_acc", "final_val_loss", "final_val_acc",
                    "seed", "batch_size", "epochs", "lr", "pass", "attempt", "train_time_s",
                    "train_throughput_sps", "val_time_s", "threads", "param_count",
                    "samples_dropped"}
    text_groups = {"group_id", "exp_id", "executor", "compile", "mode", "size", "scheduler",
                   "features", "timestamp", "gpu_name", "torch_version", "cuda_version",
                   "cpu_model", "campaign_id", "cell_key", "status", "error", "compile_mode",
                   "energy_method", "host", "campaign_hash", "rung", "config_key",
                   "workload_key"}
    text_jobs = {"group_id", "job_id", "exp_id", "executor", "compile", "gpu_name",
                 "campaign_id", "cell_key", "status", "error", "energy_method"}
    assert numeric_groups <= set(numeric_columns(GROUPS_FILE))
    assert numeric_jobs <= set(numeric_columns(INDIVIDUAL_FILE))
    assert text_groups <= set(text_columns(GROUPS_FILE))
    assert text_jobs <= set(text_columns(INDIVIDUAL_FILE))


def test_declarations_are_checked():
    with pytest.raises(ValueError, match="declared twice"):
        columns._resolved(columns.COLUMNS + (Column("T_group", GROUPS_FILE),))
    with pytest.raises(ValueError, match="another kind or doc"):
        columns._resolved(columns.COLUMNS + (Column("job_id", GROUPS_FILE, NUMBER, "x"),))
    with pytest.raises(ValueError, match="kind"):
        columns._resolved((Column("x", GROUPS_FILE, "float", "x"),))
    with pytest.raises(ValueError, match="unknown file"):
        columns._resolved((Column("x", "groups.csv", TEXT, "x"),))
    with pytest.raises(ValueError, match="one line"):
        columns._resolved((Column("x", GROUPS_FILE, TEXT, "two\nlines"),))
    with pytest.raises(ValueError, match="kind"):  # a first declaration must say what it is
        columns._resolved((Column("x", GROUPS_FILE),))


def test_a_new_column_is_a_one_place_change(dummy_columns, tmp_path):
    """One declaration at the end of the registry, and the header, the docs tables and the
    analysis's typing all have it."""
    assert header(GROUPS_FILE) == GROUP_COLUMNS + ("zz_dummy_rate", "zz_dummy_note")
    assert header(INDIVIDUAL_FILE) == INDIVIDUAL_COLUMNS + ("zz_dummy_note",)

    # the header the cell writes
    group = GroupRow(group_id="seq_1", exp_id="E01", executor="seq", T_group=2.0,
                     zz_dummy_rate=0.5, zz_dummy_note="hello")
    append_group(tmp_path, group, [JobRow(group_id="seq_1", job_id="J0", zz_dummy_note="hi")])
    with open(tmp_path / GROUPS_FILE, newline="", encoding="utf-8") as f:
        head, row = list(csv.reader(f))
    assert head == list(GROUP_COLUMNS) + ["zz_dummy_rate", "zz_dummy_note"]
    assert row[-2:] == ["0.5", "hello"]
    with open(tmp_path / INDIVIDUAL_FILE, newline="", encoding="utf-8") as f:
        head, row = list(csv.reader(f))
    assert head[-1] == "zz_dummy_note" and row[-1] == "hi"

    # the docs tables: in each file's section, last
    groups_part, jobs_part = doc_tables().split(f"## {INDIVIDUAL_FILE}")
    assert groups_part.rstrip().splitlines()[-2:] == [
        "| `zz_dummy_rate` | a dummy measurement for the test, 1/s |",
        "| `zz_dummy_note` | a dummy note for the test |"]
    assert jobs_part.rstrip().splitlines()[-1] == "| `zz_dummy_note` | a dummy note for the test |"

    # the analysis's typing: a number read as a float, a text column always present
    assert "zz_dummy_rate" in numeric_columns(GROUPS_FILE)
    assert "zz_dummy_note" in text_columns(GROUPS_FILE)
    frame = pd.DataFrame({"group_id": ["a", "b"], "exp_id": ["E01"] * 2,
                          "executor": ["seq"] * 2, "T_group": ["1", "2"],
                          "zz_dummy_rate": ["1.5", ""]})
    runs = runs_from_frames(frame, pd.DataFrame({"group_id": ["a"], "job_id": ["J0"]}))
    assert runs.groups["zz_dummy_rate"].iloc[0] == 1.5
    assert pd.isna(runs.groups["zz_dummy_rate"].iloc[1])  # empty: not measured, never 0
    assert runs.groups["zz_dummy_note"].tolist() == ["", ""]
    assert runs.jobs["zz_dummy_note"].tolist() == [""]


def test_a_misspelt_group_column_fails_where_it_is_set():
    group = GroupRow()
    with pytest.raises(UnknownColumnError) as info:
        group["max_paralel"] = 2
    message = str(info.value)
    assert message == ("unknown master_groups.csv column 'max_paralel' "
                       "(did you mean 'max_parallel'?)")
    assert "\n" not in message and not group
    group["max_parallel"] = 2
    # every way of setting is checked, and a failed update sets nothing
    with pytest.raises(UnknownColumnError, match="'mps_uesd'.*'mps_used'"):
        group.update(mps_present=True, mps_uesd=True)
    with pytest.raises(UnknownColumnError, match="schedular"):
        group.update({"schedular": "asha"})
    with pytest.raises(UnknownColumnError, match="featurs"):
        group.setdefault("featurs", "vf:1")
    with pytest.raises(UnknownColumnError, match="executor_inf"):
        group |= {"executor_info": {}, "executor_inf": {}}
    with pytest.raises(UnknownColumnError, match="nonsense_xyz.*docs/results.md"):
        GroupRow(nonsense_xyz=1)
    assert group == {"max_parallel": 2}
    # a job column is no group column, and the other way round
    with pytest.raises(UnknownColumnError, match="master_groups.csv column 'job_id'"):
        group["job_id"] = "J0"
    with pytest.raises(UnknownColumnError, match="master_individual.csv column 'T_group'"):
        JobRow(T_group=1.0)
    assert isinstance(group, dict) and isinstance(group.copy(), GroupRow)


def test_checked_rows_survive_pickling():
    group = GroupRow(max_parallel=2, executor_info={"plan": [1]})
    again = pickle.loads(pickle.dumps(group))
    assert type(again) is GroupRow and again == group
    with pytest.raises(UnknownColumnError):
        again["max_paralel"] = 3


def test_ctx_group_is_checked_for_executors_and_plugins():
    """``ctx.group[...] = ...`` keeps working for plugins, and fails at once on a typo."""
    torch = pytest.importorskip("torch")
    from engine.executors.base import CellContext
    from engine.train.loop import TrainSettings

    ctx = CellContext(settings=TrainSettings(device=torch.device("cpu")), datasets=None,
                      emit=lambda *a, **k: None, threads=1)
    ctx.group["executor_info"] = {"compat_plugin": True}
    ctx.group.update(max_parallel=1, mps_used=False)
    assert ctx.group == {"executor_info": {"compat_plugin": True}, "max_parallel": 1,
                         "mps_used": False}
    with pytest.raises(UnknownColumnError, match="did you mean 'train_throughput_sps'"):
        ctx.group["train_throughput_spss"] = 1.0
    # a plain dict given by a caller is checked too
    assert isinstance(CellContext(settings=ctx.settings, datasets=None, emit=ctx.emit,
                                  threads=1, group={"rung": "A"}).group, GroupRow)
    with pytest.raises(UnknownColumnError, match="'rungg'"):
        CellContext(settings=ctx.settings, datasets=None, emit=ctx.emit, threads=1,
                    group={"rungg": "A"})


def test_bool_columns_stay_text_in_the_analysis():
    assert all(c.kind != BOOL or c.name in text_columns(c.file) for c in columns.COLUMNS)
