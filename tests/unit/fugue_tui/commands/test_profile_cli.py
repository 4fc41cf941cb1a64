"""``fugue-tui profile`` and ``fugue-tui simulate`` on the real CLI (issue 24): one brief
probe of a tiny model (shared by the tests of this module), its row in
``<runs_dir>/profiles.csv``, ``--list``, another machine's profile ignored with one line,
and simulate's table."""

from __future__ import annotations

import csv
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[4]
TINY = """
[experiments.P_tiny]
type = "ensemble"
family = "offline"
description = "6 tiny MLPs on wine"
model = "mlp"
model_kwargs = { hidden = 16 }
dataset = "wine"
k = 6
batch_size = 16
epochs = 1
lr = 0.01
optimizer = "sgd"
size = "small"
"""


def _cli(cwd: Path, *argv: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO), "FUGUE_PLAIN": "1"}
    return subprocess.run([sys.executable, "-m", "fugue_tui", *argv], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def profiled(tmp_path_factory) -> Path:
    """A folder with exp.toml and runs/profiles.csv holding one measured profile."""
    cwd = tmp_path_factory.mktemp("profile")
    (cwd / "exp.toml").write_text(TINY)
    done = _cli(cwd, "profile", "P_tiny", "--experiments-file", "exp.toml", "--ks", "1,2,3",
                "--threads", "1", "--device", "cpu")
    assert done.returncode == 0, done.stderr + done.stdout
    (cwd / "profile.out").write_text(done.stdout)
    return cwd


def _rows(cwd: Path) -> list[dict[str, str]]:
    with open(cwd / "runs" / "profiles.csv", newline="") as f:
        return list(csv.DictReader(f))


def test_profile_measures_rss_per_k_and_keys_the_row_by_machine(profiled):
    (row,) = _rows(profiled)
    rss = {int(k): v for k, v in json.loads(row["rss_mb"]).items()}
    assert sorted(rss) == [1, 2, 3] and all(v > 100 for v in rss.values())  # torch is loaded
    assert float(row["rss1_mb"]) == pytest.approx(rss[1], abs=0.1)
    # The stacked line through K = 2, 3 (K = 1 trains unstacked, off the line).
    inc, base = float(row["rss_per_member_mb"]), float(row["rss_stack_base_mb"])
    assert inc == pytest.approx(rss[3] - rss[2], abs=0.2)
    assert base + 2 * inc == pytest.approx(rss[2], abs=0.2)
    assert 0 < float(row["parent_rss_mb"]) <= rss[1]
    assert 0 < float(row["private1_mb"]) < rss[1]     # a forked job shares the parent's pages
    assert float(row["step_time_ms"]) > 0 and int(row["steps"]) >= 1
    # On a CPU the device figures were not measured: empty, never 0.
    for name in ("device_context_mb", "device_dataset_mb", "device_reserved_mb",
                 "device_per_member_mb", "gpu_uuid", "gpu_name"):
        assert row[name] == "", name
    assert (row["host"], row["device"], row["model"], row["model_kwargs"], row["dataset"],
            row["batch_size"], row["precision"], row["optimizer"]) == (
        socket.gethostname(), "cpu", "mlp", '{"hidden":16}', "wine", "16", "fp32", "sgd")
    assert row["torch"] and len(row["profile_id"]) == 16


def test_piped_profile_prints_a_plain_line_per_k_with_an_eta(profiled):
    """Issue 49: ``profile`` was silent while each probe ran (about 50 s a configuration);
    piped it now says each K as it is measured, with an ETA, and no escape codes."""
    out = (profiled / "profile.out").read_text()
    lines = [line for line in out.splitlines() if "K = " in line and "measured" in line]
    assert [line.split("K = ")[1].split()[0] for line in lines] == ["1", "2", "3"], out
    assert all("ETA" in line and "elapsed" in line for line in lines)
    assert "ETA 0:00" in lines[-1]  # the last K: nothing left
    assert "\x1b" not in out and "\r" not in out


def test_list_shows_the_profile(profiled):
    (row,) = _rows(profiled)
    done = _cli(profiled, "profile", "--list", "--device", "cpu")
    assert done.returncode == 0, done.stderr
    assert row["profile_id"] in done.stdout and 'mlp{"hidden":16} wine bs16' in done.stdout
    assert "ignored" not in done.stdout


def test_simulate_table_and_another_machines_profile_ignored(profiled, tmp_path):
    from engine.profile.budget import Budget
    from engine.profile.estimate import fits, predict
    from engine.profile.store import Profile

    (row,) = _rows(profiled)
    profile = Profile(row)
    at = [predict(profile, "unified_model", k)[0] for k in (3, 4)]
    budget = (at[0] + at[1]) / 2 / 0.9     # room for 3 stacked members, not 4 (if they grow)
    done = _cli(profiled, "simulate", "P_tiny", "--experiments-file", "exp.toml",
                "--ram-budget", f"{budget:.3f}", "--cores", "64", "--device", "cpu")
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "safety margin 10%" in out and "P_tiny (6 jobs)" in out
    uni = next(line.split() for line in out.splitlines() if line.strip().startswith("unified"))
    expected = fits(profile, "unified_model", 6, Budget(ram_mb=float(f"{budget:.3f}"), cores=64))
    assert uni[1:3] == [str(expected.k), expected.limiting] and uni[-1] == row["profile_id"]
    if at[1] - at[0] > 0.5:  # members measurably grow: the budget bites at 3
        assert (expected.k, expected.limiting) == (3, "ram")
    seq = next(line.split() for line in out.splitlines() if line.strip().startswith("seq"))
    assert seq[1:3] == ["1", "executor"]
    # The same profile from another GPU: not used here, said once.
    (tmp_path / "runs").mkdir()
    (tmp_path / "exp.toml").write_text(TINY)
    text = (profiled / "runs" / "profiles.csv").read_text()
    header, line = text.splitlines()[:2]
    cols = header.split(",")
    values = next(csv.reader([line]))
    values[cols.index("gpu_name")] = "NVIDIA H200"
    with open(tmp_path / "runs" / "profiles.csv", "w", newline="") as f:
        csv.writer(f).writerows([cols, values])
    done = _cli(tmp_path, "simulate", "P_tiny", "--experiments-file", "exp.toml",
                "--device", "cpu")
    assert done.returncode == 0, done.stderr
    ignored = [line for line in done.stdout.splitlines() if "ignored" in line]
    assert len(ignored) == 1 and "another machine or stack" in ignored[0]
    assert "gpu_name NVIDIA H200" in ignored[0]
    assert "no profile" in done.stdout
