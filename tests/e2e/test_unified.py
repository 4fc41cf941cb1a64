"""``unified_model`` end to end: the offline ensemble (D_ens: mlp_bn with BatchNorm and live
dropout, SGD momentum) and cv (D_cv: simplecnn, AdamW, five folds) experiments under
``seq`` and ``unified_model`` in real cell processes at one thread each. Per job, the final
training loss agrees within 1e-5 relative (float32, same data order): seeds, data order,
dropout masks and the loop are the same. The group row records the effective features,
why they differ from the request, the largest bucket and the plan."""

from __future__ import annotations

import json

import pytest

from engine.results.read import read_rows
from tests.e2e.conftest import run_batch

pytestmark = pytest.mark.slow

# Short horizons: float32 rounding differences (vmap's batched matmuls accumulate in
# another order than solo ones, ~1 ulp) are amplified chaotically by training, so after
# several epochs members drift ~1e-4 from seq whatever the loop does (docs/measurement.md,
# "unified_model"). kernels = "exact" runs BatchNorm and convolutions per member with their
# native kernels; the float64 parity tests (tests/unit/engine/executors/unified/test_unified_parity.py) prove the
# equivalence at 1e-6 for the default batched kernels.
EXPERIMENTS = """
[experiments.D_ens]
epochs = 2
[experiments.D_cv]
epochs = 1
"""


@pytest.fixture(scope="module")
def unified_run(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("unified")
    (workdir / "unified-experiments.toml").write_text(EXPERIMENTS)
    run = run_batch(workdir, """
name = "e2e-unified"
experiments = ["D_ens", "D_cv"]
executors = ["seq", "unified_model"]
passes = 1
seed = 42
runs_dir = "runs"
device = "cpu"
threads = 1
experiments_file = "unified-experiments.toml"

[options.unified_model]
kernels = "exact"
""")
    assert run.proc.returncode == 0, run.proc.stdout[-3000:] + run.proc.stderr[-3000:]
    return run


def test_final_training_loss_equals_seq(unified_run):
    jobs = read_rows(unified_run.runs / "master_individual.csv")
    by_exec: dict[str, dict[str, dict[str, str]]] = {}
    for row in jobs:
        by_exec.setdefault(row["executor"], {})[row["job_id"]] = row
    seq, uni = by_exec["seq"], by_exec["unified_model"]
    assert set(seq) == set(uni) and len(seq) == 10
    for job_id, s in seq.items():
        u = uni[job_id]
        assert u["status"] == "ok", u["error"]
        a, b = float(s["final_train_loss"]), float(u["final_train_loss"])
        assert abs(a - b) <= 1e-5 * abs(a), f"{job_id}: seq {a} unified {b}"
        assert s["total_samples"] == u["total_samples"]
        assert s["samples_dropped"] == u["samples_dropped"]
        assert s["seed"] == u["seed"] and s["split"] == u["split"]
        assert float(u["train_time_s"]) > 0 and float(u["total_time_s"]) >= float(
            u["train_time_s"])


def test_group_rows_record_the_plan(unified_run):
    groups = [r for r in read_rows(unified_run.runs / "master_groups.csv")
              if r["executor"] == "unified_model"]
    assert len(groups) == 2
    for g in groups:
        assert g["status"] == "ok"
        assert g["features"] == "vf:1,s:0,fl:0"
        assert g["features_requested"] == "vf:1,s:1,fl:0"
        assert "no CUDA streams" in g["features_reason"]
        assert g["max_parallel"] == "5"
        assert float(g["train_throughput_sps"]) > 0
        info = json.loads(g["executor_info"])
        [bucket] = info["plan"]
        assert (bucket["route"], bucket["check"]) == ("vectorised", "verified")
        assert len(bucket["jobs"]) == 5 and bucket["data_order"] == "per_member"
    ens = next(g for g in groups if g["exp_id"] == "D_ens")
    assert json.loads(ens["executor_info"])["plan"][0]["dropout_masks"] == \
        "per-member generators (seq's masks)"


def test_plan_is_printed_in_the_cell_log(unified_run):
    logs = list((unified_run.runs).rglob("*D_ens-unified_model*/attempt-1/*.log"))
    text = "\n".join(p.read_text() for p in logs)
    assert "unified_model plan: 5 jobs → 1 bucket" in text, logs
    assert "vectorised verified" in text


# --------------------------------------------------------------------------- ablation
@pytest.fixture(scope="module")
def ablation_run(tmp_path_factory):
    """The six rungs of the ablation ladder as a real campaign (sweep = "ablation") on
    D_ens; the compiling rungs use the 'eager' torch.compile backend (graph capture
    without code generation: the probe and the bookkeeping are real, the minute of
    inductor code generation per cell on this CPU is not)."""
    workdir = tmp_path_factory.mktemp("ablation")
    (workdir / "unified-experiments.toml").write_text("[experiments.D_ens]\nepochs = 1\n")
    run = run_batch(workdir, """
name = "e2e-ablation"
experiments = ["D_ens"]
executors = ["unified_model"]
passes = 1
seed = 42
runs_dir = "runs"
device = "cpu"
threads = 1
experiments_file = "unified-experiments.toml"

[options.unified_model]
sweep = "ablation"
compile_backend = "eager"
""")
    assert run.proc.returncode == 0, run.proc.stdout[-3000:] + run.proc.stderr[-3000:]
    return run


def test_ablation_rows_record_requested_and_effective_features(ablation_run):
    from engine.define.axes import ABLATION_LADDER
    from engine.executors.unified.features import effective_features, features_string

    groups = read_rows(ablation_run.runs / "master_groups.csv")
    assert len(groups) == 6 and all(g["status"] == "ok" for g in groups)
    by_rung = {g["rung"]: g for g in groups}
    assert set(by_rung) == {r.name for r in ABLATION_LADDER}
    requested = {(g["features_requested"], g["compile_requested"]) for g in groups}
    assert len(requested) == 6  # six distinct requested signatures
    for rung in ABLATION_LADDER:
        g = by_rung[rung.name]
        assert g["features_requested"] == rung.features
        mode = g["compile_requested"]
        assert (mode != "off") == rung.compile
        ok = None if mode == "off" else g["compile_mode"] != "off"
        have, why = effective_features(g["features_requested"], "cpu", mode, ok)
        assert g["features"] == features_string(have), rung.name
        assert (g["features_reason"] or None) == why, rung.name
        if rung.compile:  # the probe ran: compiled, warm-up reported apart
            assert g["compile_mode"] == mode and float(g["compile_warmup_s"]) > 0
        else:
            assert g["compile_mode"] == "off" and not g["compile_warmup_s"]
        info = json.loads(g["executor_info"])
        [bucket] = info["plan"]
        assert bucket["route"] == ("eager" if rung.name == "A" else "vectorised")
