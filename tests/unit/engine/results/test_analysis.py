"""engine.results.load and engine.results.analysis: loading (ours and the harness's files),
ratio-of-means speedups per machine and stack, baseline choice, bootstrap intervals, parity. No
timing here: the 100 000-row timing is bench part ``results_scale`` (bench/README.md)."""

from __future__ import annotations

import math
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from engine.results.analysis import NO_CI, cell_status, speedups
from engine.results.columns import GROUP_COLUMNS, INDIVIDUAL_COLUMNS
from engine.results.load import NoResultsError, Runs, load_runs, runs_from_frames
from engine.results.store import append_rows

HARNESS = Path(__file__).resolve().parents[3] / "fixtures" / "fugue-harness-cpu"

_counter = iter(range(10**9))


def group(exp="E01", executor="seq", t=1.0, *, compile_mode="off", status="ok", host="hostA",
          gpu="NVIDIA L4", torch="2.5.1", cuda="12.4", k=4, scheduler="", features="",
          energy="", energy_method="none", campaign="c1", campaign_hash="h1", **extra):
    n = next(_counter)
    row = {"group_id": f"{executor}_{n:08x}", "exp_id": exp, "executor": executor,
           "compile": compile_mode != "off", "mode": "ensemble", "K": k,
           "scheduler": scheduler, "features": features, "T_group": t,
           "total_samples": 1000 * k, "throughput_group": None if t is None else 1000 * k / t,
           "energy_group": energy, "gpu_name": gpu, "torch_version": torch,
           "cuda_version": cuda, "cpu_model": "Test CPU", "cpu_cores": 8,
           "campaign_id": campaign, "cell_key": f"{n:016x}", "pass": 1, "attempt": 1,
           "status": status, "compile_mode": compile_mode, "energy_method": energy_method,
           "host": host, "campaign_hash": campaign_hash}
    row.update(extra)
    return row


def job(group_row, acc, i=0, status="ok"):
    return {"group_id": group_row["group_id"], "job_id": f"{group_row['exp_id']}_ens_s{i}",
            "exp_id": group_row["exp_id"], "executor": group_row["executor"],
            "final_val_acc": acc, "status": status, "cell_key": group_row["cell_key"],
            "campaign_id": group_row["campaign_id"]}


def write(tmp_path: Path, groups, jobs=()) -> Path:
    append_rows(tmp_path / "master_groups.csv", groups, GROUP_COLUMNS)
    if jobs:
        append_rows(tmp_path / "master_individual.csv", jobs, INDIVIDUAL_COLUMNS)
    return tmp_path


def row_of(df: pd.DataFrame, **match) -> pd.Series:
    sel = df
    for key, value in match.items():
        sel = sel[sel[key] == value]
    assert len(sel) == 1, (match, sel)
    return sel.iloc[0]


# --------------------------------------------------------------------------- speedup formula

def test_ratio_of_means_not_mean_of_ratios(tmp_path):
    # per-pass ratios 1/0.5 = 2 and 3/3 = 1: mean of ratios 1.5; ratio of means 2/1.75
    rows = [group(executor="seq", t=1.0), group(executor="mp", t=0.5),
            group(executor="seq", t=3.0), group(executor="mp", t=3.0)]
    df = speedups(load_runs(write(tmp_path, rows)))
    mp = row_of(df, executor="mp")
    assert mp["speedup"] == pytest.approx(2.0 / 1.75)
    assert mp["speedup"] != pytest.approx(1.5)
    assert mp["baseline"] == "seq" and mp["n_strategy"] == 2 and mp["n_seq"] == 2
    assert mp["T_group_mean"] == pytest.approx(1.75)
    assert row_of(df, executor="seq")["speedup"] == 1.0


def test_machines_and_stacks_are_never_mixed(tmp_path):
    rows = [group(executor="seq", t=2.0, host="A"), group(executor="mp", t=1.0, host="A"),
            group(executor="seq", t=8.0, host="B"), group(executor="mp", t=1.0, host="B"),
            # same host, another torch: its own key, and without a seq row no speedup
            group(executor="mp", t=1.0, host="A", torch="2.6.0")]
    df = speedups(load_runs(write(tmp_path, rows)))
    assert row_of(df, executor="mp", machine="A", torch_version="2.5.1")["speedup"] == 2.0
    assert row_of(df, executor="mp", machine="B")["speedup"] == 8.0  # mixed would give 5
    lone = row_of(df, executor="mp", torch_version="2.6.0")
    assert math.isnan(lone["speedup"]) and lone["baseline"] == "" and lone["n_seq"] == 0


def test_gpu_and_cuda_are_part_of_the_key(tmp_path):
    rows = [group(executor="seq", t=2.0, gpu="Tesla T4"),
            group(executor="mp", t=1.0, gpu="NVIDIA L4"),
            group(executor="seq", t=4.0, cuda="12.1"), group(executor="mp", t=1.0, cuda="12.1")]
    df = speedups(load_runs(write(tmp_path, rows)))
    other_gpu = row_of(df, executor="mp", gpu_name="NVIDIA L4", cuda_version="12.4")
    assert math.isnan(other_gpu["speedup"])
    assert row_of(df, executor="mp", cuda_version="12.1")["speedup"] == 4.0


def test_compiled_baseline_when_present_else_uncompiled(tmp_path):
    rows = [group(executor="seq", t=4.0), group(executor="seq", t=2.0, compile_mode="default"),
            group(executor="unified_model", t=1.0, compile_mode="default"),
            group(executor="unified_model", t=1.0, compile_mode="reduce-overhead"),
            group(executor="unified_model", t=1.0)]
    df = speedups(load_runs(write(tmp_path, rows)))
    compiled = row_of(df, executor="unified_model", compile_mode="default")
    assert compiled["speedup"] == 2.0 and compiled["baseline"] == "seq compile=default"
    no_compiled_seq = row_of(df, executor="unified_model", compile_mode="reduce-overhead")
    assert no_compiled_seq["speedup"] == 4.0 and no_compiled_seq["baseline"] == "seq"
    plain = row_of(df, executor="unified_model", compile_mode="off")
    assert plain["speedup"] == 4.0 and plain["baseline"] == "seq"
    compiled_seq = row_of(df, executor="seq", compile_mode="default")
    assert compiled_seq["speedup"] == 1.0 and compiled_seq["baseline"] == "seq compile=default"


def test_cells_split_by_scheduler_and_features(tmp_path):
    rows = [group(executor="seq", t=2.0),
            group(executor="ray", t=1.0, scheduler="asha"),
            group(executor="ray", t=2.0, scheduler="fifo"),
            group(executor="unified_model", t=0.5, features="vf:1,s:0,fl:0"),
            group(executor="unified_model", t=1.0, features="vf:0,s:0,fl:0")]
    df = speedups(load_runs(write(tmp_path, rows)))
    assert row_of(df, scheduler="asha")["speedup"] == 2.0
    assert row_of(df, scheduler="fifo")["speedup"] == 1.0
    assert row_of(df, features="vf:1,s:0,fl:0")["speedup"] == 4.0  # read back with its commas
    assert row_of(df, features="vf:0,s:0,fl:0")["speedup"] == 2.0


def test_by_campaign_keeps_campaign_files_apart(tmp_path):
    rows = [group(executor="seq", t=2.0, campaign_hash="h1"),
            group(executor="mp", t=1.0, campaign_hash="h1"),
            group(executor="seq", t=6.0, campaign_hash="h2"),
            group(executor="mp", t=1.0, campaign_hash="h2")]
    runs = load_runs(write(tmp_path, rows))
    assert row_of(speedups(runs), executor="mp")["speedup"] == 4.0
    split = speedups(runs, by_campaign=True)
    assert row_of(split, executor="mp", campaign_hash="h1")["speedup"] == 2.0
    assert row_of(split, executor="mp", campaign_hash="h2")["speedup"] == 6.0


def test_only_ok_rows_count(tmp_path):
    rows = [group(executor="seq", t=2.0), group(executor="seq", t=50.0, status="failed"),
            group(executor="mp", t=1.0), group(executor="mp", t=99.0, status="killed"),
            group(executor="mp", t=None, status="failed", error="cell exited with status 7"),
            group(executor="ray", t=0.1, status="failed")]
    runs = load_runs(write(tmp_path, rows))
    df = speedups(runs)
    mp = row_of(df, executor="mp")
    assert mp["speedup"] == 2.0 and mp["n_strategy"] == 1 and mp["n_seq"] == 1
    assert "ray" not in set(df["executor"])  # a cell without an ok row has no speedup
    status = cell_status(runs)
    assert row_of(status, executor="mp")[["ok", "not_ok"]].tolist() == [1, 2]
    assert row_of(status, executor="ray")[["ok", "not_ok"]].tolist() == [0, 1]


# --------------------------------------------------------------------------- intervals

def _passes(executor, times, **kw):
    return [group(executor=executor, t=t, **kw) for t in times]


def test_no_interval_with_fewer_than_five_passes(tmp_path):
    rows = _passes("seq", [2.0, 2.1, 1.9, 2.0]) + _passes("mp", [1.0, 1.1, 0.9, 1.0, 1.05])
    mp = row_of(speedups(load_runs(write(tmp_path, rows))), executor="mp")
    assert mp["ci"] == NO_CI == "n/a"
    assert math.isnan(mp["ci_low"]) and math.isnan(mp["ci_high"])
    assert math.isfinite(mp["speedup"])


def test_interval_with_five_passes_contains_the_estimate(tmp_path):
    rows = _passes("seq", [2.0, 2.2, 1.8, 2.1, 1.9]) + _passes("mp", [1.0, 1.1, 0.9, 1.05, 0.95])
    mp = row_of(speedups(load_runs(write(tmp_path, rows))), executor="mp")
    assert math.isfinite(mp["ci_low"]) and math.isfinite(mp["ci_high"])
    assert mp["ci_low"] < mp["speedup"] < mp["ci_high"]
    assert mp["speedup"] == pytest.approx(10.0 / 5.0)
    assert mp["ci"] == f"[{mp['ci_low']:.3f}, {mp['ci_high']:.3f}]"
    seq = row_of(speedups(load_runs(tmp_path)), executor="seq")
    assert seq["speedup"] == 1.0 and seq["ci"] == "n/a"  # 1 by definition, no interval


def _naive_percentile_bootstrap(seq, strat, n_boot, seed):
    """The textbook loop (Efron & Tibshirani 1993, percentile interval), another RNG."""
    rng = np.random.default_rng(seed)
    ratios = [rng.choice(seq, len(seq)).mean() / rng.choice(strat, len(strat)).mean()
              for _ in range(n_boot)]
    return np.percentile(ratios, [2.5, 97.5])


def test_vectorised_bootstrap_agrees_with_the_textbook_loop(tmp_path):
    rng = np.random.default_rng(7)
    seq_t = rng.lognormal(np.log(2.0), 0.15, 30)
    mp_t = rng.lognormal(np.log(1.0), 0.25, 24)
    rows = _passes("seq", seq_t) + _passes("mp", mp_t)
    mp = row_of(speedups(load_runs(write(tmp_path, rows)), n_boot=4000), executor="mp")
    low, high = _naive_percentile_bootstrap(seq_t, mp_t, 4000, 123)
    assert mp["speedup"] == pytest.approx(seq_t.mean() / mp_t.mean())
    # Monte Carlo error of a 2.5 % quantile with 4000 replicates: well under 2 %
    assert mp["ci_low"] == pytest.approx(low, rel=0.02)
    assert mp["ci_high"] == pytest.approx(high, rel=0.02)


def test_interval_is_reproducible_and_independent_of_other_cells(tmp_path):
    base = (_passes("seq", [2.0, 2.2, 1.8, 2.1, 1.9, 2.05])
            + _passes("mp", [1.0, 1.2, 0.9, 1.1, 0.8]))
    one = row_of(speedups(load_runs(write(tmp_path / "a", base))), executor="mp")
    more = base + _passes("ray", [0.5, 0.6, 0.7, 0.55, 0.65]) + _passes(
        "seq", [5.0] * 5, exp="E02") + _passes("mp", [1.0] * 7, exp="E02")
    two = row_of(speedups(load_runs(write(tmp_path / "b", more))), executor="mp", exp_id="E01")
    assert (one["ci_low"], one["ci_high"]) == (two["ci_low"], two["ci_high"])
    other_seed = row_of(speedups(load_runs(tmp_path / "a"), seed=1), executor="mp")
    assert other_seed["ci_low"] != one["ci_low"]
    assert other_seed["speedup"] == one["speedup"]


# --------------------------------------------------------------------------- energy, VRAM, parity

def test_missing_energy_stays_missing_and_measured_zero_stays_zero(tmp_path):
    rows = [group(executor="seq", t=2.0, k=4, energy="", energy_method="none"),
            group(executor="mp", t=1.0, k=4, energy=100.0, energy_method="nvml_energy_counter",
                  vram_peak_mb=900),
            group(executor="mp", t=1.0, k=4, energy=60.0, energy_method="nvml_energy_counter",
                  vram_peak_mb=1200),
            group(executor="ray", t=1.0, k=4, energy=0.0, energy_method="nvml_energy_counter")]
    runs = load_runs(write(tmp_path, rows))
    df = speedups(runs)
    seq = row_of(df, executor="seq")
    assert math.isnan(seq["energy_per_model_j"]) and seq["energy_n"] == 0
    assert math.isnan(seq["vram_peak_mb_max"])
    mp = row_of(df, executor="mp")
    assert mp["energy_per_model_j"] == pytest.approx((25.0 + 15.0) / 2)
    assert mp["vram_peak_mb_max"] == 1200
    assert row_of(df, executor="ray")["energy_per_model_j"] == 0.0  # measured, with a method


def test_accuracy_parity(tmp_path):
    seqs = [group(executor="seq", t=2.0), group(executor="seq", t=2.0)]
    inside = group(executor="mp", t=1.0)
    outside = group(executor="ray", t=1.0)
    no_jobs = group(executor="unified_model", t=1.0)
    jobs = ([job(seqs[0], a, i) for i, a in enumerate([0.80, 0.90])]
            + [job(seqs[1], a, i) for i, a in enumerate([0.85, 0.95])]
            + [job(inside, 0.86), job(inside, 0.88), job(inside, 0.10, 2, status="failed")]
            + [job(outside, 0.50), job(outside, 0.60)])
    df = speedups(load_runs(write(tmp_path, seqs + [inside, outside, no_jobs], jobs)))
    seq = row_of(df, executor="seq")
    assert seq["acc_mean"] == pytest.approx(0.875) and seq["parity"] == "within seq spread"
    mp = row_of(df, executor="mp")
    assert mp["acc_mean"] == pytest.approx(0.87) and mp["acc_n"] == 2  # the failed job left out
    assert (mp["seq_acc_min"], mp["seq_acc_max"]) == (0.80, 0.95)
    assert mp["seq_acc_mean"] == pytest.approx(0.875)
    assert mp["parity"] == "within seq spread"
    assert row_of(df, executor="ray")["parity"] == "outside seq spread"
    lone = row_of(df, executor="unified_model")
    assert lone["parity"] == "n/a" and math.isnan(lone["acc_mean"])


# --------------------------------------------------------------------------- loading

def test_harness_fixture_speedups_and_quirks(tmp_path):
    runs_dir = tmp_path / "harness"
    shutil.copytree(HARNESS, runs_dir)
    runs = load_runs(runs_dir)
    g = runs.groups
    assert len(g) == 12 and len(runs.jobs) == 36
    assert set(g["status"]) == {"ok"} and set(g["campaign_id"]) == {""}
    assert set(g.loc[g["executor"] == "unified_model", "features"]) == {"vf:1,s:1,fl:1"}
    # seq rows say energy_group = 0 without NVML: read as not measured, like the others
    raw = pd.read_csv(runs_dir / "master_groups.csv", dtype=str, keep_default_na=False)
    assert set(raw.loc[raw["executor"] == "seq", "energy_group"]) == {"0"}
    assert g["energy_group"].isna().all()
    assert set(g["machine"]) == {"AMD EPYC (2 cores)"}  # no host column: CPU model + cores
    df = speedups(runs)
    um = df[df["executor"] == "unified_model"].set_index("exp_id")
    assert {e: round(v, 3) for e, v in um["speedup"].items()} == {
        "D_ens": 1.464, "D_cv": 1.236, "D_hpo": 1.113}
    assert set(um["ci"]) == {"n/a"}  # two passes each
    assert set(um["baseline"]) == {"seq"}
    assert df["energy_per_model_j"].isna().all()
    assert list(df["exp_id"]) == ["D_ens", "D_ens", "D_cv", "D_cv", "D_hpo", "D_hpo"]
    assert list(df["executor"])[::2] == ["seq"] * 3


def test_torn_last_line_is_ignored(tmp_path):
    write(tmp_path, [group(executor="seq", t=2.0), group(executor="mp", t=1.0)])
    with open(tmp_path / "master_groups.csv", "a", newline="") as f:
        f.write('mp_deadbeef,E01,mp,False,ensemble,,4,,,,"vf:1,s')  # a write in progress
    runs = load_runs(tmp_path)
    assert len(runs.groups) == 2
    assert row_of(speedups(runs), executor="mp")["speedup"] == 2.0


def test_missing_folder_or_file_is_a_one_line_error(tmp_path):
    with pytest.raises(NoResultsError, match="has no master_groups.csv"):
        load_runs(tmp_path)
    with pytest.raises(NoResultsError, match="does not exist"):
        load_runs(tmp_path / "nope")
    assert NoResultsError.exit_code == 2


def test_a_campaigns_run_folder_points_at_its_runs_folder(tmp_path):
    """``report runs/batch1`` (the folder --batch prints) said only 'has no
    master_groups.csv': the rows are in the runs folder above, under the campaign's id."""
    write(tmp_path, [group(executor="seq", t=2.0)])
    run = tmp_path / "batch1"
    run.mkdir()
    (run / "runner.jsonl").write_text("")
    with pytest.raises(NoResultsError) as caught:
        load_runs(run)
    assert str(caught.value) == (f"'{run}' is a campaign's run folder; its rows are in "
                                 f"'{tmp_path / 'master_groups.csv'}': fugue-tui report "
                                 f"{tmp_path} --campaign batch1")


def test_header_only_file_gives_no_cells(tmp_path):
    (tmp_path / "master_groups.csv").write_text(",".join(GROUP_COLUMNS) + "\r\n")
    runs = load_runs(tmp_path)
    assert len(runs.groups) == 0 and len(speedups(runs)) == 0


def test_select_campaign(tmp_path):
    rows = [group(executor="seq", t=2.0, campaign="a"), group(executor="mp", t=1.0, campaign="a"),
            group(executor="seq", t=9.0, campaign="b")]
    jobs = [job(rows[0], 0.9), job(rows[2], 0.1)]
    runs = load_runs(write(tmp_path, rows, jobs))
    assert runs.campaign_ids() == ["a", "b"]
    only_a = runs.select("a")
    assert len(only_a.groups) == 2 and len(only_a.jobs) == 1
    assert row_of(speedups(only_a), executor="mp")["speedup"] == 2.0


def test_large_synthetic_file_functional():
    """Functional only (the timing is bench part results_scale): a 20 000-row synthetic file
    aggregates into its 816 cells with the speedups its generator put in."""
    from bench.results_scale import synthetic_groups

    frame = synthetic_groups(20_000)
    runs = runs_from_frames(frame)
    assert isinstance(runs, Runs) and len(runs.groups) == len(frame)
    df = speedups(runs, n_boot=200)
    assert len(df) == 2 * 17 * 2 * 12  # machines × experiments × compile modes × strategies
    strategies = df[df["executor"] != "seq"]
    assert (strategies["ci"] != "n/a").all()  # >= 5 ok passes on both sides everywhere
    assert (strategies["ci_low"] <= strategies["speedup"]).all()
    assert (strategies["speedup"] <= strategies["ci_high"]).all()
    # unified_model rung 0 runs at 0.5 × seq's time (log-normal noise, sigma 0.1, about 20
    # passes a side): each cell's speedup near 2, and their average closer still
    rung0 = strategies[strategies["features"] == "vf:0,s:0,fl:0"]
    assert len(rung0) == 68 and np.allclose(rung0["speedup"], 2.0, rtol=0.15)
    assert rung0["speedup"].mean() == pytest.approx(2.0, rel=0.02)
    assert set(strategies["baseline"]) == {"seq", "seq compile=default"}
    ok = frame["status"] == "ok"
    assert df["n_strategy"].sum() == ok.sum()


def test_only_rows_of_the_same_configuration_pool_and_baselines_share_the_workload(tmp_path):
    """Two campaigns of one experiment id with different epochs (workloads w15 and w2), and
    two max_parallel settings of one executor (configurations m5 and m2): nothing pools
    across them, and each strategy divides the seq of its own workload."""
    rows = [group("D_ens", "seq", 10.0, workload_key="w15", config_key="s15"),
            group("D_ens", "seq", 2.0, workload_key="w2", config_key="s2"),
            group("D_ens", "ray", 5.0, workload_key="w15", config_key="r15"),
            group("D_ens", "mp", 1.0, workload_key="w2", config_key="m5"),
            group("D_ens", "mp", 4.0, workload_key="w2", config_key="m2")]
    table = speedups(load_runs(write(tmp_path, rows)), n_boot=0)
    assert len(table) == 5  # no two rows pooled
    by = {(r["executor"], r["config_key"]): r for r in table.to_dict("records")}
    assert by[("ray", "r15")]["speedup"] == pytest.approx(10.0 / 5.0)
    assert by[("mp", "m5")]["speedup"] == pytest.approx(2.0 / 1.0)
    assert by[("mp", "m2")]["speedup"] == pytest.approx(2.0 / 4.0)
    assert all(r["n_strategy"] == 1 for r in table.to_dict("records"))


def test_a_killed_row_without_stack_columns_joins_its_machine(tmp_path):
    rows = [group("D_ens", "seq", 2.0), group("D_ens", "seq", None, status="killed",
                                               torch="", cuda="", gpu="")]
    runs = load_runs(write(tmp_path, rows))
    assert runs.groups["torch_version"].tolist() == ["2.5.1", "2.5.1"]
    assert runs.groups["gpu_name"].tolist() == ["NVIDIA L4", "NVIDIA L4"]


# --------------------------------------------------------------------------- the two parsers

def _both_parsers(path: Path, monkeypatch) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The groups as load_runs gives them through Arrow, and with Arrow refused (pandas'
    parser, pd.to_numeric): the product must not depend on which parser read the file."""
    import engine.results.load as loading

    fast = load_runs(path).groups
    with monkeypatch.context() as m:
        m.setattr(loading, "_read_csv_arrow", lambda data: None)
        m.setattr(loading, "_arrow_float", lambda column: None)
        slow = load_runs(path).groups
    return fast, slow


def test_arrow_and_pandas_parsers_give_the_same_frame(tmp_path, monkeypatch):
    import engine.results.load as loading

    rows = [group(executor="seq", t=2.0, features="vf:1,s:0,fl:1", energy=12.5,
                  energy_method="nvml_energy_counter", error="line one\nline two, with comma"),
            group(executor="mp", t=1.0, k=8, scheduler="asha", energy=""),
            group(executor="ray", t=None, status="failed", error='said "no"')]
    write(tmp_path, rows)
    calls = []
    real = loading._read_csv_arrow
    monkeypatch.setattr(loading, "_read_csv_arrow", lambda data: calls.append(1) or real(data))
    fast, slow = _both_parsers(tmp_path, monkeypatch)
    assert calls, "the Arrow reader was not used on a complete file"
    pd.testing.assert_frame_equal(fast, slow, check_dtype=False)
    assert row_of(fast, executor="seq")["error"] == "line one\nline two, with comma"
    assert row_of(fast, executor="seq")["features"] == "vf:1,s:0,fl:1"
    assert math.isnan(row_of(fast, executor="ray")["T_group"])
    assert row_of(fast, executor="seq")["energy_group"] == 12.5
    assert math.isnan(row_of(fast, executor="mp")["energy_group"])  # empty, never 0


def test_an_unreadable_number_leaves_its_row_out_named_and_its_neighbours_are_read(
        tmp_path, monkeypatch):
    """Issue 44: a T_group that is text or NaN was read as NaN and the row dropped out of
    the ok count without a word; now the row is left out with a note naming file:line,
    by both parsers alike, and a readable neighbour (" 0.5") is still read."""
    rows = [group(executor="seq", t=2.0), group(executor="mp", t=None),
            group(executor="ray", t=None), group(executor="unified_model", t=None)]
    for row, text in zip(rows[1:], ("1.0 s", " 0.5", "nan"), strict=False):
        row["T_group"] = text
    write(tmp_path, rows)
    fast, slow = _both_parsers(tmp_path, monkeypatch)
    pd.testing.assert_frame_equal(fast, slow, check_dtype=False)
    assert list(fast["executor"]) == ["seq", "ray"]
    assert row_of(fast, executor="seq")["T_group"] == 2.0
    assert row_of(fast, executor="ray")["T_group"] == 0.5      # pandas reads " 0.5"
    notes = [n for n in load_runs(tmp_path).notes if "impossible value" in n]
    assert len(notes) == 1 and "master_groups.csv:3 T_group='1.0 s'" in notes[0]
    assert "master_groups.csv:5 T_group='nan'" in notes[0]


def test_bom_and_duplicated_header_are_read(tmp_path, monkeypatch):
    write(tmp_path, [group(executor="seq", t=2.0), group(executor="mp", t=1.0)])
    path = tmp_path / "master_groups.csv"
    path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())
    fast, slow = _both_parsers(tmp_path, monkeypatch)
    pd.testing.assert_frame_equal(fast, slow, check_dtype=False)
    assert list(fast["executor"]) == ["seq", "mp"]
    text = path.read_text(encoding="utf-8-sig").splitlines()
    text[0] += ",host"                                   # a second 'host' column
    path.write_text("\n".join([text[0]] + [line + ",other" for line in text[1:]]) + "\n")
    runs = load_runs(tmp_path)
    assert row_of(speedups(runs), executor="mp")["speedup"] == 2.0


def test_quoted_newlines_across_arrows_blocks_are_read_whole(tmp_path, monkeypatch):
    """Arrow reads a file in 1 MiB blocks; a quoted newline near a block boundary must not
    split a record (the fast read is kept only when every newline ended a record)."""
    rows = [group(executor="seq" if i % 2 else "mp", t=1.0 + i % 7,
                  error=f"row {i} first line\n" + "x" * (150 + i % 97) + "\nlast, line")
            for i in range(6000)]
    write(tmp_path, rows)
    assert (tmp_path / "master_groups.csv").stat().st_size > 2 * 2**20
    fast, slow = _both_parsers(tmp_path, monkeypatch)
    pd.testing.assert_frame_equal(fast, slow, check_dtype=False)
    assert len(fast) == 6000
    assert fast["error"].str.endswith("\nlast, line").all()
