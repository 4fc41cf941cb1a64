"""Exports carry the weights digest (issue 50): a job row's ``weights_sha256`` reaches the
parquet and JSON exports (typed from the column registry, as every job column) and the
MLflow job run's params."""

from __future__ import annotations

import json

import pandas as pd
import pyarrow.parquet as pq
import pytest

from engine.results.columns import INDIVIDUAL_COLUMNS, INDIVIDUAL_FILE
from fugue_tui.report.export_data import typed_frame, write_json, write_parquet
from fugue_tui.report.export_mlflow import JOB_PARAMS, _params

DIGEST = "ab" * 32


@pytest.mark.skipif("weights_sha256" not in INDIVIDUAL_COLUMNS,
                    reason="the job column lands with the executors' hand-back (issue 50)")
def test_parquet_and_json_exports_carry_the_digest(tmp_path):
    jobs = pd.DataFrame([{"job_id": "D_ens_m0", "group_id": "seq_1", "weights_sha256": DIGEST},
                         {"job_id": "D_ens_m1", "group_id": "seq_1", "weights_sha256": ""}])
    frame = typed_frame(jobs, INDIVIDUAL_FILE)
    write_json(frame, tmp_path / "jobs.json")
    write_parquet(frame, tmp_path / "jobs.parquet")
    assert [r["weights_sha256"] for r in json.loads((tmp_path / "jobs.json").read_text())] \
        == [DIGEST, None]  # missing is null
    assert pq.read_table(tmp_path / "jobs.parquet").column("weights_sha256").to_pylist() \
        == [DIGEST, None]


def test_the_mlflow_job_run_gets_the_digest_as_a_param():
    assert "weights_sha256" in JOB_PARAMS
    assert ("weights_sha256", DIGEST) in _params({"job_id": "j", "weights_sha256": DIGEST},
                                                 JOB_PARAMS)
    assert all(name != "weights_sha256" for name, _ in _params({"job_id": "j"}, JOB_PARAMS))
