"""The concurrency estimate (issue 24): budgets parsed, profiles keyed by machine, the
fits-at-once arithmetic per executor, and ``max_parallel = "auto"`` resolved into the number
the cell key hashes (docs/measurement.md, "Cell keys", rule 3). Torch-free and fast: the
probe itself is tested in tests/unit/fugue_tui/commands/test_profile_cli.py."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from engine.define.campaign import load_campaign
from engine.define.matrix import build_cells
from engine.errors import ConfigError
from engine.profile.budget import SAFETY_MARGIN, Budget, make_budget, parse_size
from engine.profile.estimate import fits
from engine.profile.store import (
    Profile,
    append_profile,
    job_key,
    lookup,
    profile_id,
    read_profiles,
    torch_cuda_version,
)

MACHINE = {"host": "test-host", "device": "cpu", "gpu_uuid": "", "gpu_name": "",
           "torch": "2.13.0"}
IDENT = {"host": "test-host", "device": "cpu", "gpu_name": "", "gpu_uuid": "",
         "torch": "2.13.0", "cuda": torch_cuda_version()}
WIDE = """
[experiments.W]
type = "ensemble"
family = "offline"
description = "12 wide MLPs"
model = "mlp"
model_kwargs = { hidden = 4096 }
dataset = "digits"
k = 12
batch_size = 64
epochs = 1
lr = 0.01
optimizer = "sgd"
size = "small"
"""


@pytest.mark.parametrize("text, mib", [("6GiB", 6144), ("6G", 6144), ("512MiB", 512),
                                       ("512", 512), (512, 512), ("1.5TiB", 1.5 * 2**20),
                                       ("2048KiB", 2), ("1048576B", 1)])
def test_sizes_parse_to_mib(text, mib):
    assert parse_size(text, "x") == pytest.approx(mib)


@pytest.mark.parametrize("text, needle", [("-1GiB", "must be > 0"), ("0", "must be > 0"),
                                          ("lots", "not a size"), ("6 GB extra", "not a size"),
                                          (True, "not a size")])
def test_bad_sizes_are_one_line_naming_the_value(text, needle):
    with pytest.raises(ConfigError, match=needle) as err:
        parse_size(text, "argument --ram-budget")
    assert str(err.value).startswith("argument --ram-budget: ")


def _profile(**figures) -> Profile:
    row = {"rss1_mb": "500", "rss_per_member_mb": "100", "parent_rss_mb": "400",
           "private1_mb": "150", "ray_import_mb": "40"}
    row.update({k: ("" if v is None else str(v)) for k, v in figures.items()})
    return Profile(row)


def test_unified_fits_one_process_plus_k_members_within_the_margin():
    budget = Budget(ram_mb=1000, cores=64)
    est = fits(_profile(), "unified_model", 12, budget)
    # 500 + (K-1) * 100 <= 1000 * (1 - margin) = 900  ->  K = 5
    assert SAFETY_MARGIN == pytest.approx(0.10)
    assert (est.k, est.limiting, est.ram_mb) == (5, "ram", 900)
    assert fits(_profile(), "unified_model", 3, budget).limiting == "jobs"


def test_the_stacked_line_starts_at_two_members():
    """K = 1 trains unstacked: measured; K >= 2 follows the stacked line base + K x inc
    (bench profile_estimate: the first stacked member costs more than each later one)."""
    from engine.profile.estimate import predict

    p = _profile(rss1_mb=700, rss_stack_base_mb=850, rss_per_member_mb=210)
    assert [predict(p, "unified_model", k)[0] for k in (1, 2, 8)] == [700, 1270, 2530]
    est = fits(p, "unified_model", 32, Budget(ram_mb=3000, cores=2))   # 850 + 210 K <= 2700
    assert (est.k, est.limiting) == (8, "ram")


def test_mp_pays_a_process_per_job_and_is_capped_by_cores():
    big = Budget(ram_mb=10_000, cores=64)
    forked = fits(_profile(), "mp", 100, big)            # 400 + P*150 <= 9000 -> 57
    spawned = fits(_profile(), "mp", 100, big, mp_start="spawn")   # P*500 <= 9000 -> 18
    assert (forked.k, spawned.k) == (57, 18)
    assert fits(_profile(), "mp", 100, Budget(ram_mb=10_000, cores=4)).limiting == "cores"


def test_ray_adds_the_measured_import_per_actor_and_names_what_it_leaves_out():
    est = fits(_profile(), "ray", 100, Budget(ram_mb=10_000, cores=64))   # P*540 <= 9000
    assert est.k == 16 and est.ram_mb == pytest.approx(16 * 540)
    assert any("Ray runtime" in n for n in est.notes)


def test_seq_is_always_one():
    est = fits(_profile(), "seq", 9, Budget(ram_mb=1, cores=1))
    assert (est.k, est.limiting) == (1, "executor")


def test_device_memory_limits_on_a_gpu_profile():
    gpu = _profile(device_context_mb=500, device_reserved_mb='{"1": 1000, "2": 1600}',
                   device_per_member_mb=600)
    budget = Budget(ram_mb=1e6, cores=64, device_mb=5000)
    est = fits(gpu, "unified_model", 20, budget)      # 500 + 1000 + (K-1)*600 <= 4500 -> 6
    assert (est.k, est.limiting, est.device_mb) == (6, "device", 4500)
    mp = fits(gpu, "mp", 20, budget)                   # P * 1500 <= 4500 -> 3
    assert (mp.k, mp.limiting) == (3, "device")
    assert any("MPS server" in n for n in mp.notes)


def test_one_job_over_budget_still_runs_one_and_says_so():
    est = fits(_profile(), "unified_model", 4, Budget(ram_mb=100, cores=4))
    assert est.k == 1 and est.notes[0].startswith("even one job")


def test_a_profile_of_another_machine_is_ignored_with_one_line(tmp_path):
    key = {"model": "mlp", "model_kwargs": "{}", "dataset": "wine", "batch_size": "16",
           "precision": "fp32", "compile_mode": "off", "optimizer": "sgd",
           "optimizer_kwargs": "{}"}
    other = {**IDENT, "gpu_name": "NVIDIA H200", "device": "cuda", "gpu_uuid": "GPU-1"}
    append_profile(tmp_path, {"profile_id": profile_id(key, other), **other, **key,
                              "rss1_mb": 1})
    found, note = lookup(read_profiles(tmp_path), key, IDENT)
    assert found is None
    assert "ignored" in note and "gpu_name NVIDIA H200 (here -)" in note and "\n" not in note
    append_profile(tmp_path, {"profile_id": profile_id(key, IDENT), "timestamp": "1", **IDENT,
                              **key, "rss1_mb": 2})
    found, note = lookup(read_profiles(tmp_path), key, IDENT)
    assert found is not None and found.num("rss1_mb") == 2 and note == ""


def test_budget_measured_when_not_given():
    budget = make_budget(cores=3)
    assert budget.ram_mb > 100 and budget.cores == 3 and budget.device_mb is None
    from engine.cgroup_memory import total_mib

    # MemTotal, or a container's cgroup limit where it is lower
    assert budget.source("ram") == total_mib()[1] and budget.source("cores") == "given"


# -- max_parallel = "auto" in the plan ---------------------------------------------------------

def _write_profile(runs: Path, campaign_dir: Path) -> str:
    from engine.define.catalogue import load_catalogue
    from engine.define.workloads import expand

    job = expand(load_catalogue(str(campaign_dir / "mine.toml")).get("W"), 42)[0].to_dict()
    key = job_key(job, "off", "cpu")
    pid = profile_id(key, IDENT)
    append_profile(runs, {"profile_id": pid, "timestamp": "20261201_000000", **IDENT, **key,
                          "rss1_mb": 500, "rss_per_member_mb": 100, "parent_rss_mb": 400,
                          "private1_mb": 150})
    return pid


def _campaign(tmp: Path, options: str, budget: str = 'ram = "1000MiB"\ncores = 2\n'):
    (tmp / "mine.toml").write_text(WIDE)
    path = tmp / "c.toml"
    path.write_text(f'name = "c"\nexperiments = "W,D_ens"\nexecutors = ["unified_model", "mp"]\n'
                    f'experiments_file = "mine.toml"\nruns_dir = "{tmp / "runs"}"\n{options}'
                    f'[budget]\n{budget}')
    return load_campaign(path)


def test_auto_resolves_from_the_profile_and_keys_the_number(tmp_path):
    (tmp_path / "mine.toml").write_text(WIDE)
    pid = _write_profile(tmp_path / "runs", tmp_path)
    auto = {(c.exp_id, c.executor): c for c in build_cells(_campaign(
        tmp_path, '[options.unified_model]\nmax_parallel = "auto"\n'
                  '[options.mp]\nmax_parallel = "auto"\n'), MACHINE)}
    w_uni, w_mp = auto["W", "unified_model"], auto["W", "mp"]
    assert (w_uni.max_parallel, w_uni.max_parallel_method, w_uni.max_parallel_profile) == (
        5, "profile", pid)
    assert (w_mp.max_parallel, w_mp.max_parallel_method) == (2, "profile")   # 2 cores
    # The key is that of the number written by hand (rule 3): the same thing runs.
    by_hand = {(c.exp_id, c.executor): c for c in build_cells(_campaign(
        tmp_path, '[options.unified_model]\nmax_parallel = 5\n[options.mp]\nmax_parallel = 2\n'),
        MACHINE)}
    assert w_uni.key == by_hand["W", "unified_model"].key
    assert w_mp.config_key == by_hand["W", "mp"].config_key
    assert by_hand["W", "mp"].max_parallel_method == "user"
    assert "auto" not in json.dumps(w_uni.options)
    # D_ens has no profile: all its jobs, method all, and one line saying so.
    ens = auto["D_ens", "unified_model"]
    assert (ens.max_parallel, ens.max_parallel_method) == (5, "all")
    assert len(ens.notes) == 1 and "no profile of mlp_bn digits" in ens.notes[0]
    assert "may run out of memory" in ens.notes[0]


def test_a_larger_budget_changes_the_number_and_the_key(tmp_path):
    (tmp_path / "mine.toml").write_text(WIDE)
    _write_profile(tmp_path / "runs", tmp_path)
    opts = '[options.unified_model]\nmax_parallel = "auto"\n'
    small = build_cells(_campaign(tmp_path, opts), MACHINE)[0]
    large = build_cells(_campaign(tmp_path, opts, 'ram = "2000MiB"\n'), MACHINE)[0]
    assert (small.max_parallel, large.max_parallel) == (5, 12)
    assert small.key != large.key


def test_without_auto_the_method_is_user_or_all_and_seq_has_none(tmp_path):
    (tmp_path / "mine.toml").write_text(WIDE)
    path = tmp_path / "c.toml"
    path.write_text('experiments = "W"\nexecutors = ["seq", "mp"]\nexperiments_file = '
                    '"mine.toml"\n')
    seq, mp = build_cells(load_campaign(path), MACHINE)
    assert seq.max_parallel_method is None and mp.max_parallel_method == "all"


def test_group_rows_record_the_resolved_number_method_and_profile():
    from engine.results.rows import group_static
    from tests.unit.engine.cell.cell_specs import hand_spec

    spec = hand_spec("runs", cell={"exp_id": "W", "executor": "unified_model",
                                   "jobs": [{"amp": False}] * 12, "key": "k",
                                   "max_parallel": 5, "max_parallel_method": "profile",
                                   "max_parallel_profile": "abc"},
                     group_id="g")
    row = group_static(spec)
    assert (row["max_parallel_resolved"], row["max_parallel_method"],
            row["max_parallel_profile"]) == (5, "profile", "abc")
    spec = replace(spec, cell=replace(spec.cell, max_parallel=None, max_parallel_method="all",
                                      max_parallel_profile=None))
    assert group_static(spec)["max_parallel_resolved"] == 12
    spec = replace(spec, cell=replace(spec.cell, executor="seq", max_parallel_method=None))
    assert "max_parallel_method" not in dict(group_static(spec))


def test_the_dashboard_option_field_takes_a_number_or_auto():
    """The plan's option fields are generated from the declarations: max_parallel's
    accepts ``auto`` beside a number, and its hint says what auto does."""
    from engine.define.executor_options import hint
    from engine.executors import check_max_parallel
    from engine.registry import EXECUTORS
    from fugue_tui.app.models.plan import parse_option

    for name in ("mp", "ray", "unified_model"):
        declared = EXECUTORS.get(name).option_fields["max_parallel"]
        assert parse_option("auto", declared.types) == "auto"
        assert parse_option("3", declared.types) == 3
        assert "auto" in hint(declared)
    with pytest.raises(ValueError, match="did you mean 'auto'"):
        check_max_parallel("atuo")
    with pytest.raises(ValueError, match="integer >= 1"):
        check_max_parallel(0)


def test_the_dashboard_preview_warns_once_when_auto_has_no_profile(tmp_path):
    """The plan screen's preview (the dashboard's path to the runner) says what --batch
    says: one line per cell group without a profile, not one per cell."""
    from fugue_tui.app.models.plan import preview

    doc = {"experiments": "D_ens", "executors": ["unified_model"], "passes": 2,
           "runs_dir": str(tmp_path / "runs"), "device": "cpu",
           "options": {"unified_model": {"max_parallel": "auto"}}}
    shown = preview(doc)
    assert shown.error in (None, ""), shown.error
    lines = [w for w in shown.warnings if "no profile" in w]
    assert len(lines) == 1 and "all 5 jobs run at once" in lines[0]


def test_a_stack_peaks_at_the_higher_of_its_set_up_and_training_lines():
    """Measured at mlp hidden 4096 (this project's CPU host): before training the peak is
    verification's probe step, nearly constant in K (3.4, 3.5, 3.8 GiB at K = 2, 4, 8);
    during training it grows ~320 MiB per member (1.5, 2.0, 3.4 GiB). One line through
    the whole peaks follows the plateau and under-predicts K = 32; the two lines do not."""
    from engine.profile.estimate import predict

    two_lines = _profile(rss1_mb=880, rss_stack_base_mb=840, rss_per_member_mb=320,
                         rss_setup_base_mb=3270, rss_setup_per_member_mb=62)
    ram = {k: predict(two_lines, "unified_model", k)[0] for k in (1, 2, 4, 8, 32)}
    assert ram[1] == 880                      # one member trains unstacked: measured
    assert ram[2] == pytest.approx(3270 + 2 * 62)   # the set-up plateau
    assert ram[8] == pytest.approx(3270 + 8 * 62)
    assert ram[32] == pytest.approx(840 + 32 * 320)  # the training line
    one_line = _profile(rss1_mb=880, rss_stack_base_mb=840, rss_per_member_mb=320)
    assert predict(one_line, "unified_model", 2)[0] == pytest.approx(1480)  # no plateau


def test_the_probe_fits_two_lines_only_where_every_stacked_size_was_split():
    from engine.cell.profile_probe import memory_lines

    split = {1: {"rss_mb": 880, "rss_setup_mb": 870, "rss_train_mb": 880},
             2: {"rss_mb": 3396, "rss_setup_mb": 3396, "rss_train_mb": 1477},
             4: {"rss_mb": 3510, "rss_setup_mb": 3510, "rss_train_mb": 2011},
             8: {"rss_mb": 3764, "rss_setup_mb": 3764, "rss_train_mb": 3385}}
    lines = memory_lines(split)
    assert lines["rss_per_member_mb"] == pytest.approx(321.6, abs=0.1)  # the training line
    assert lines["rss_setup_per_member_mb"] == pytest.approx(61.6, abs=0.1)
    assert lines["rss_stack_base_mb"] + 32 * lines["rss_per_member_mb"] == pytest.approx(
        11113, rel=0.05)  # K = 32 measured: 11113 MiB
    unsplit = {k: {"rss_mb": d["rss_mb"]} for k, d in split.items()}
    one = memory_lines(unsplit)
    assert one["rss_setup_base_mb"] is None and one["rss_setup_per_member_mb"] is None
    assert one["rss_per_member_mb"] == pytest.approx(61.6, abs=0.1)  # the plateau's slope


def test_the_peak_can_be_restarted_on_this_linux():
    """The probe reads the set-up peak, restarts the high-water mark and reads the training
    peak; a restart that did nothing would merge the two again."""
    import numpy as np

    from engine.cell.profile_probe import _reset_peak, _status_kib

    big = np.ones(200 * 2**20 // 8)
    del big
    before = _status_kib("VmHWM")
    if not _reset_peak():
        pytest.skip("/proc/self/clear_refs is not writable here")
    assert _status_kib("VmHWM") < before - 150 * 1024
