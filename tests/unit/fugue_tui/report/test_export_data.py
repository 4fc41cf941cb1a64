"""``report --export DIR --format parquet,json,tensorboard,mlflow`` (issues 29, 49) as a
subprocess on a runs folder written through the results store, with an attempt's event
stream: typed rows that pandas and pyarrow read without options, the same rows as JSON,
TensorBoard event files with each job's per-epoch curves and each group's headline
figures, and MLflow runs read back with MLflow's own client."""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest

from engine.results.columns import GROUP_COLUMNS, INDIVIDUAL_COLUMNS
from engine.results.store import append_rows

REPO = Path(__file__).resolve().parents[4]
KEY = "abcdef0123456789"
EPOCHS = {1: (0.9, 0.8, 0.55), 2: (0.5, 0.45, 0.75)}  # epoch: loss, val_loss, val_acc


def fugue(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO), "COLUMNS": "120"}
    return subprocess.run([sys.executable, "-m", "fugue_tui", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=180)


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    root = tmp_path_factory.mktemp("export")
    runs = root / "runs"
    base = {"exp_id": "D_ens", "campaign_id": "c", "compile_mode": "off", "host": "box",
            "torch_version": "2.14.1+cu130", "cuda_version": "13.0", "energy_method": "none",
            "K": 2, "status": "ok", "pass": 1, "attempt": 1, "timestamp": "20261201_101010",
            "backend_flags": json.dumps({"cudnn_benchmark": False, "precision": "highest"})}
    append_rows(runs / "master_groups.csv", [
        {**base, "group_id": "seq_00000001", "executor": "seq", "cell_key": KEY,
         "T_group": 1.5, "throughput_group": 200.0, "setup_s": 0.25},
        {**base, "group_id": "mp_00000002", "executor": "mp", "cell_key": "9" * 16,
         "T_group": 1.0, "throughput_group": 300.0, "timestamp": "20261201_101020",
         "executor_info": json.dumps({"workers": 2})},
    ], GROUP_COLUMNS)
    append_rows(runs / "master_individual.csv", [
        {"group_id": "seq_00000001", "job_id": f"D_ens_{i}", "exp_id": "D_ens",
         "executor": "seq", "final_val_acc": 0.75, "epochs": 2, "early_stopped": False,
         "campaign_id": "c", "cell_key": KEY, "status": "ok", "model": "mlp",
         "dataset": "wine", "lr": 0.01, "precision": "fp32",
         "trial_config": json.dumps({"lr": 0.01 * (i + 1), "hidden": 16})} for i in range(2)],
        INDIVIDUAL_COLUMNS)
    attempt = runs / "c" / "cells" / f"001-D_ens-seq-p1-{KEY[:8]}" / "attempt-1"
    attempt.mkdir(parents=True)
    lines = [json.dumps({"v": 1, "ts": 1796157700.0 + 10 * epoch + i, "type": "job_progress",
                         "cell": KEY, "attempt": 1, "job_id": f"D_ens_{i}", "epoch": epoch,
                         "epochs": 2, "loss": loss + i, "val_loss": val_loss,
                         "val_acc": val_acc, "epoch_end": True})
             for epoch, (loss, val_loss, val_acc) in EPOCHS.items() for i in range(2)]
    (attempt / "events.jsonl").write_text("\n".join(lines) + "\n")
    proc = fugue("report", "runs", "--export", "out", "--format",
                 "parquet,json,tensorboard,mlflow", cwd=root)
    assert proc.returncode == 0, proc.stderr
    return root


def test_parquet_has_proper_dtypes_for_pandas_and_pyarrow(exported):
    groups = pd.read_parquet(exported / "out" / "groups.parquet")
    assert list(groups.columns[:3]) == ["group_id", "exp_id", "executor"]
    assert str(groups["timestamp"].dtype).startswith("datetime64")
    assert groups["timestamp"][0] == pd.Timestamp("2026-12-01 10:10:10")
    assert str(groups["cuda_version"].dtype) == "string" and groups["cuda_version"][0] == "13.0"
    assert str(groups["K"].dtype) == "Int64" and str(groups["pass"].dtype) == "Int64"
    assert str(groups["compile"].dtype) == "boolean"
    assert groups["T_group"].dtype == "float64"
    assert groups["backend_flags"][0] == {"cudnn_benchmark": False, "precision": "highest"}
    assert pd.isna(groups["energy_group"][0])  # not measured: null, never 0
    assert pd.isna(groups["gpu_name"][0])      # empty text: null, never ""
    schema = pq.read_schema(exported / "out" / "groups.parquet")
    assert str(schema.field("timestamp").type).startswith("timestamp[")
    assert str(schema.field("cuda_version").type) in ("string", "large_string")
    assert str(schema.field("backend_flags").type).startswith("struct<")
    jobs = pd.read_parquet(exported / "out" / "jobs.parquet")
    assert len(jobs) == 2 and str(jobs["epochs"].dtype) == "Int64"
    assert str(jobs["early_stopped"].dtype) == "boolean"


def test_json_rows(exported):
    rows = json.loads((exported / "out" / "groups.json").read_text(),
                      parse_constant=lambda c: (_ for _ in ()).throw(ValueError(c)))
    assert [r["executor"] for r in rows] == ["seq", "mp"]
    assert rows[0]["timestamp"] == "2026-12-01T10:10:10"
    assert rows[0]["cuda_version"] == "13.0" and rows[0]["K"] == 2
    assert rows[0]["energy_group"] is None and rows[0]["gpu_name"] is None
    assert rows[1]["executor_info"] == {"workers": 2}
    jobs = json.loads((exported / "out" / "jobs.json").read_text())
    assert {j["job_id"] for j in jobs} == {"D_ens_0", "D_ens_1"}


def _scalars(folder: Path) -> dict[str, list[tuple[int, float]]]:
    """The scalars of the event files under ``folder`` (TFRecord framing: length, its
    CRC, the Event proto, its CRC)."""
    from tensorboardX.proto.event_pb2 import Event

    out: dict[str, list[tuple[int, float]]] = {}
    for path in folder.glob("events.out.tfevents.*"):
        data = path.read_bytes()
        at = 0
        while at < len(data):
            (length,) = struct.unpack("<Q", data[at:at + 8])
            event = Event.FromString(data[at + 12:at + 12 + length])
            at += 12 + length + 4
            for value in event.summary.value:
                if value.HasField("simple_value"):
                    out.setdefault(value.tag, []).append((event.step, value.simple_value))
    return out


def test_tensorboard_curves_per_job_and_figures_per_group(exported):
    run = exported / "out" / "tensorboard" / "c" / "D_ens" / "seq" / "pass1-attempt1"
    for i in range(2):
        scalars = _scalars(run / f"D_ens_{i}")
        assert scalars["train/loss"] == [(e, pytest.approx(v[0] + i)) for e, v in EPOCHS.items()]
        assert scalars["val/acc"] == [(e, pytest.approx(v[2])) for e, v in EPOCHS.items()]
        assert [e for e, _ in scalars["val/loss"]] == [1, 2]
    group = _scalars(run / "group")
    assert group["group/T_group_s"] == [(1, 1.5)]
    assert group["group/throughput_sps"] == [(1, 200.0)]
    assert group["group/val_acc_mean"] == [(1, 0.75)]
    assert "group/energy_per_model_j" not in group  # not measured: not drawn as 0
    mp = exported / "out" / "tensorboard" / "c" / "D_ens" / "mp" / "pass1-attempt1" / "group"
    assert _scalars(mp)["group/T_group_s"] == [(1, 1.0)]


def test_overwrite_replaces_the_tensorboard_folder(exported):
    over = fugue("report", "runs", "--export", "out", "--format", "tensorboard",
                 "--overwrite", cwd=exported)
    assert over.returncode == 0, over.stderr
    assert len(list((exported / "out" / "tensorboard" / "c" / "D_ens" / "seq" /
                     "pass1-attempt1" / "group").glob("events.out.*"))) == 1


def _texts(folder: Path) -> dict[str, str]:
    """The text summaries (``add_text``) of the event files under ``folder``."""
    from tensorboardX.proto.event_pb2 import Event

    out: dict[str, str] = {}
    for path in folder.glob("events.out.tfevents.*"):
        data = path.read_bytes()
        at = 0
        while at < len(data):
            (length,) = struct.unpack("<Q", data[at:at + 8])
            event = Event.FromString(data[at + 12:at + 12 + length])
            at += 12 + length + 4
            for value in event.summary.value:
                if value.HasField("tensor") and value.tensor.string_val:
                    out[value.tag.split("/")[0]] = value.tensor.string_val[0].decode()
    return out


def test_tensorboard_folder_names_are_portable_and_the_label_is_inside(tmp_path):
    """Issue 49: ``unified_model-sha-vf:1,s:0,fl:0`` held ``:`` and ``,``, which Windows
    file systems and some tools refuse; two labels with one portable form stay apart."""
    from types import SimpleNamespace

    from fugue_tui.report.export_data import write_tensorboard

    base = {"campaign_id": "camp:1", "exp_id": "E,1", "executor": "unified_model",
            "scheduler": "sha", "pass": 1, "attempt": 1, "T_group": 2.0,
            "timestamp": "20261201_101010", "group_id": "g1"}
    groups = pd.DataFrame([{**base, "features": "vf:1,s:0,fl:0"},
                           {**base, "features": "vf_1_s_0_fl_0", "group_id": "g2",
                            "T_group": 3.0}])
    out = write_tensorboard(SimpleNamespace(groups=groups, jobs=pd.DataFrame()),
                            tmp_path / "tb")
    folders = sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_dir())
    for folder in folders:
        for part in Path(folder).parts:
            assert all(c.isalnum() or c in "-_." for c in part), folder
    runs = [out / f for f in folders if f.endswith("/group")]
    assert len(runs) == 2  # the two variants did not share one folder
    first = out / "camp_1" / "E_1" / "unified_model-sha-vf_1_s_0_fl_0" / "pass1-attempt1"
    assert first / "group" in runs
    by_label = {_texts(r)["label"]: _scalars(r)["group/T_group_s"] for r in runs}
    assert by_label == {
        "camp:1/E,1/unified_model-sha-vf:1,s:0,fl:0/pass1-attempt1": [(1, 2.0)],
        "camp:1/E,1/unified_model-sha-vf_1_s_0_fl_0/pass1-attempt1": [(1, 3.0)]}


@pytest.mark.filterwarnings("ignore:.*noload.*")  # MLflow 3.17 on SQLAlchemy 2.1, not ours
def test_mlflow_runs_read_back_with_mlflows_client(exported):
    """Issue 49: one experiment per campaign, a parent run per group with its figures, a
    child run per job with its configuration, trial_config, per-epoch metrics at their
    own times, and the executor, precision, K and machine tags."""
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{exported / 'out' / 'mlflow.db'}")
    experiment = client.get_experiment_by_name("fugue-tui/c")
    assert experiment is not None
    runs = client.search_runs([experiment.experiment_id], max_results=100)
    groups = {r.data.tags["executor"]: r for r in runs if r.data.tags["fugue.kind"] == "group"}
    jobs = [r for r in runs if r.data.tags["fugue.kind"] == "job"]
    assert sorted(groups) == ["mp", "seq"] and len(jobs) == 2
    seq = groups["seq"]
    assert seq.info.run_name == "D_ens/seq/pass1-attempt1"
    assert seq.data.metrics["group/T_group_s"] == 1.5
    assert seq.data.metrics["group/throughput_sps"] == 200.0
    assert seq.data.metrics["group/val_acc_mean"] == pytest.approx(0.75)
    assert "group/energy_per_model_j" not in seq.data.metrics  # not measured: not 0
    assert seq.data.params["K"] == "2" and seq.data.params["cell_key"] == KEY
    assert "group/val_acc_mean" not in groups["mp"].data.metrics  # no job rows
    for job in jobs:
        i = int(job.info.run_name.rsplit("_", 1)[1])
        tags = job.data.tags
        assert tags["mlflow.parentRunId"] == seq.info.run_id
        assert (tags["executor"], tags["precision"], tags["K"]) == ("seq", "fp32", "2")
        assert tags["machine"]  # the provenance label the reader adds
        params = job.data.params
        assert (params["model"], params["dataset"], params["lr"]) == ("mlp", "wine", "0.01")
        assert float(params["trial.lr"]) == pytest.approx(0.01 * (i + 1))
        assert params["trial.hidden"] == "16"
        history = client.get_metric_history(job.info.run_id, "train/loss")
        assert [(m.step, m.value) for m in history] == [
            (e, pytest.approx(v[0] + i)) for e, v in EPOCHS.items()]
        # each epoch at its own time (the event's ts, in ms)
        assert [m.timestamp for m in history] == [
            int(round((1796157700.0 + 10 * e + i) * 1000)) for e in EPOCHS]
        assert [m.value for m in client.get_metric_history(job.info.run_id, "val/acc")] == [
            pytest.approx(v[2]) for v in EPOCHS.values()]
    assert (exported / "out" / "mlflow.db").is_file()
    assert not (exported / "mlruns").exists()  # nothing in the working folder


def test_mlflow_uri_and_missing_format_are_checked(exported, tmp_path):
    bad = fugue("report", "runs", "--export", "out2", "--mlflow-uri", "sqlite:///x.db",
                cwd=exported)
    assert bad.returncode == 2
    assert bad.stderr.strip().endswith("--mlflow-uri sqlite:///x.db: only applies with "
                                       "--format mlflow")
    assert not (exported / "out2").exists() and not (exported / "x.db").exists()
    uri = f"sqlite:///{tmp_path / 'elsewhere.db'}"
    done = fugue("report", "runs", "--export", "out3", "--format", "mlflow",
                 "--mlflow-uri", uri, cwd=exported)
    assert done.returncode == 0, done.stderr
    assert not (exported / "out3" / "mlflow.db").exists()
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    experiment = client.get_experiment_by_name("fugue-tui/c")
    assert len(client.search_runs([experiment.experiment_id])) == 4
