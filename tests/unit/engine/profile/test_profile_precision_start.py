"""The concurrency estimate honours the cell's precision and mp's ``start`` list (issue
24): bf16 without a bf16 profile scales the fp32 one (engine.profile.precision_model),
a measured profile of the precision wins, autocast takes no credit; a ``start`` list gets
one estimate per value, and each resolved number keys like the number written by hand.
Torch-free; one CLI run of ``simulate``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from engine.define.matrix import build_cells
from engine.profile.auto import estimate_cell
from engine.profile.budget import Budget
from engine.profile.estimate import fits, predict
from engine.profile.store import append_profile, job_key, profile_id
from tests.unit.engine.profile.test_profile_estimate import (
    IDENT,
    MACHINE,
    WIDE,
    _campaign,
    _profile,
    _write_profile,
)

REPO = Path(__file__).resolve().parents[4]


def test_bf16_halves_what_scales_with_a_member():
    p = _profile(rss1_mb=500, rss_per_member_mb=100, rss_stack_base_mb=420)
    assert [predict(p, "unified_model", k)[0] for k in (1, 2, 8)] == [500, 620, 1220]
    # bf16: one job's own part (one increment) and every increment halved; the base stays
    assert [predict(p, "unified_model", k, member_scale=0.5)[0] for k in (1, 2, 8)] == [
        450, 520, 820]
    assert predict(p, "mp", 3, member_scale=0.5)[0] == 400 + 3 * (150 - 50)
    assert predict(p, "mp", 3, mp_start="spawn", member_scale=0.5)[0] == 3 * 450
    budget = Budget(ram_mb=1000, cores=64)
    assert fits(_profile(), "unified_model", 12, budget).k == 5       # 500 + 100 (K-1)
    assert fits(_profile(), "unified_model", 12, budget, member_scale=0.5).k == 10


def _jobs(tmp_path):
    from engine.define.catalogue import load_catalogue
    from engine.define.workloads import expand

    (tmp_path / "mine.toml").write_text(WIDE)
    return [j.to_dict() for j in expand(load_catalogue(str(tmp_path / "mine.toml")).get("W"),
                                        42)]


def test_estimate_per_precision_with_what_it_used(tmp_path):
    jobs = _jobs(tmp_path)
    pid = _write_profile(tmp_path / "runs", tmp_path)
    from engine.profile.store import read_profiles

    budget = Budget(ram_mb=1000, cores=64)
    kw = dict(compile_mode="off", device="cpu", ident=IDENT, budget=budget)
    profiles = read_profiles(tmp_path / "runs")
    fp32, ids, notes = estimate_cell(jobs, "unified_model", profiles=profiles, **kw)
    assert (fp32.k, ids, notes) == (5, [pid], [])
    bf16, ids, notes = estimate_cell(jobs, "unified_model", profiles=profiles,
                                     precision="bf16", **kw)
    assert bf16.k == 10 and ids == [pid]
    assert len(notes) == 1 and "no bf16 profile" in notes[0] and pid in notes[0]
    amp, _, notes = estimate_cell(jobs, "unified_model", profiles=profiles,
                                  precision="amp-bf16", **kw)
    assert amp.k == 5 and "no credit taken" in notes[0]  # autocast keeps fp32 state
    tf32, _, notes = estimate_cell(jobs, "unified_model", profiles=profiles,
                                   precision="tf32", **kw)
    assert tf32.k == 5 and notes == []  # tf32 runs fp32 on a CPU: the fp32 profile itself
    # a measured bf16 profile is used as measured
    key = job_key(jobs[0], "off", "cpu", "bf16")
    own = profile_id(key, IDENT)
    append_profile(tmp_path / "runs", {"profile_id": own, "timestamp": "20261201_000001",
                                       **IDENT, **key, "rss1_mb": 300, "rss_per_member_mb": 20})
    measured, ids, notes = estimate_cell(jobs, "unified_model",
                                         profiles=read_profiles(tmp_path / "runs"),
                                         precision="bf16", **kw)
    assert measured.k == 12 and ids == [own] and notes == []


def test_precision_list_and_start_list_get_one_estimate_each(tmp_path):
    (tmp_path / "mine.toml").write_text(WIDE)
    _write_profile(tmp_path / "runs", tmp_path)
    budget = 'ram = "1000MiB"\ncores = 64\n'
    cells = build_cells(_campaign(
        tmp_path, 'precision = ["fp32", "bf16"]\n[options.unified_model]\n'
                  'max_parallel = "auto"\n[options.mp]\nmax_parallel = "auto"\n'
                  'start = ["forkserver", "spawn"]\n', budget), MACHINE)
    w = [c for c in cells if c.exp_id == "W"]
    uni = {c.precision: c.max_parallel for c in w if c.executor == "unified_model"}
    assert uni == {"fp32": 5, "bf16": 10}
    mp = {(c.precision, c.options["start"]): c for c in w if c.executor == "mp"}
    # forkserver: 400 + 150 K <= 900 -> 3; spawn: 500 K <= 900 -> 1; bf16 halves the member
    assert {k: c.max_parallel for k, c in mp.items()} == {
        ("fp32", "forkserver"): 3, ("fp32", "spawn"): 1,
        ("bf16", "forkserver"): 5, ("bf16", "spawn"): 2}
    assert all(c.max_parallel_method == "profile" for c in mp.values())
    # each keys like its number written by hand, for the same single start and precision
    for (precision, start), cell in mp.items():
        (hand,) = [c for c in build_cells(_campaign(
            tmp_path, f'precision = "{precision}"\n[options.mp]\n'
                      f'max_parallel = {cell.max_parallel}\nstart = "{start}"\n', budget),
            MACHINE) if c.exp_id == "W" and c.executor == "mp"]
        assert hand.config_key == cell.config_key, (precision, start)


@pytest.mark.parametrize("value", ["fork", "forkserver,threads"])
def test_simulate_bad_start_is_one_line(value, tmp_path):
    proc = _simulate(tmp_path, "D_ens", "--mp-start", value)
    assert proc.returncode == 2 and proc.stdout == ""
    assert len(proc.stderr.splitlines()) == 1 and "--mp-start" in proc.stderr


def _simulate(cwd: Path, *argv: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO), "FUGUE_PLAIN": "1"}
    return subprocess.run([sys.executable, "-m", "fugue_tui", "simulate", *argv], cwd=cwd,
                          env=env, capture_output=True, text=True, timeout=120)


def test_simulate_prints_one_row_per_start_and_the_precision(tmp_path):
    from engine.profile.store import identity

    here = identity("cpu")  # the CLI reads profiles of this machine only
    key = job_key(_jobs(tmp_path)[0], "off", "cpu")
    pid = profile_id(key, here)
    append_profile(tmp_path / "runs", {"profile_id": pid, "timestamp": "20261201_000000",
                                       **here, **key, "rss1_mb": 500, "rss_per_member_mb": 100,
                                       "parent_rss_mb": 400, "private1_mb": 150})
    proc = _simulate(tmp_path, "W", "--experiments-file", "mine.toml", "--ram-budget",
                     "1000MiB", "--cores", "64", "--device", "cpu", "--runs-dir", "runs",
                     "--executors", "unified_model", "mp", "--mp-start", "forkserver,spawn",
                     "--precision", "bf16")
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "W (12 jobs) at bf16" in out
    rows = {" ".join(line.split()[:2]): line.split() for line in out.splitlines()
            if line.strip().startswith(("unified_model", "mp "))}
    assert rows["unified_model 10"][-1] == pid
    assert rows["mp forkserver"][2] == "5" and rows["mp spawn"][2] == "2"
    assert rows["mp forkserver"][3] == "ram" and rows["mp spawn"][3] == "ram"
    assert "no bf16 profile" in out and "estimated from the fp32 profile" in out
