"""A kill during ``report --export … --overwrite`` (issue 43): a real ``fugue-tui report``
subprocess, SIGKILLed at each stage of its export (``FUGUE_EXPORT_KILL_AT``: all files
staged, after the first and the third replacement, before the manifest), over a complete
earlier export, leaves every data file either the complete old or the complete new version
(byte for byte), a file it does not own untouched, and the next export removes the
staging folder with a one-line note and leaves a manifest every file matches."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from engine.results.columns import GROUP_COLUMNS
from engine.results.store import append_rows
from fugue_tui.report.export_commit import MANIFEST, STAGING_PREFIX, verify

REPO = Path(__file__).resolve().parents[4]
FORMATS = "tex,parquet,json"
DATA = ("results.tex", "groups.parquet", "jobs.parquet", "groups.json", "jobs.json")


def export(root: Path, out: str, kill_at: str | None = None,
           formats: str = FORMATS) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO), "COLUMNS": "120"}
    env.pop("FUGUE_EXPORT_KILL_AT", None)
    if kill_at:
        env["FUGUE_EXPORT_KILL_AT"] = kill_at
    return subprocess.run([sys.executable, "-m", "fugue_tui", "report", "runs", "--export",
                           out, "--format", formats, "--overwrite"], cwd=root, env=env,
                          capture_output=True, text=True, timeout=180)


def rows(runs: Path, first: int, n: int) -> None:
    append_rows(runs / "master_groups.csv", [
        {"exp_id": "D_ens", "campaign_id": "c", "compile_mode": "off", "host": "box",
         "energy_method": "none", "K": 2, "status": "ok", "pass": p, "attempt": 1,
         "timestamp": f"20261201_1010{p:02d}", "group_id": f"{ex}_{p:08d}", "executor": ex,
         "cell_key": key * 16, "T_group": 1.5 + p / 10 if ex == "seq" else 1.0 + p / 10,
         "throughput_group": 200.0 + p}
        for p in range(first, first + n) for ex, key in (("seq", "a"), ("mp", "b"))],
        GROUP_COLUMNS)


def snapshot(out: Path) -> dict[str, bytes]:
    return {name: (out / name).read_bytes() for name in DATA if (out / name).exists()}


@pytest.fixture(scope="module")
def versions(tmp_path_factory):
    root = tmp_path_factory.mktemp("crash")
    rows(root / "runs", 1, 2)
    assert export(root, "old").returncode == 0
    rows(root / "runs", 3, 2)  # the runs folder grows: the next export differs
    assert export(root, "new").returncode == 0
    old, new = snapshot(root / "old"), snapshot(root / "new")
    assert set(old) == set(new) == set(DATA)
    assert all(old[n] != new[n] for n in ("groups.json", "groups.parquet", "results.tex"))
    return root, old, new


@pytest.mark.parametrize("stage", ["staged", "replaced-1", "replaced-3", "manifest"])
def test_a_kill_at_each_stage_leaves_old_or_new_files(versions, stage):
    root, old, new = versions
    out = root / f"killed-{stage}"
    subprocess.run(["cp", "-a", str(root / "old"), str(out)], check=True)
    (out / "notes.txt").write_text("mine")  # not the export's: never touched
    proc = export(root, out.name, kill_at=stage)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    now = snapshot(out)
    assert set(now) == set(DATA)  # none missing
    for name, data in now.items():
        assert data in (old[name], new[name]), f"{name} torn after a kill at {stage}"
    replaced = [n for n in DATA if now[n] == new[n] != old[n]]
    assert bool(replaced) == (stage != "staged")
    # the old manifest stays until the last step: it matches the old export, and once any
    # file was replaced a reader can tell the export is incomplete
    assert (verify(out) == []) == (stage == "staged")
    assert (out / "notes.txt").read_text() == "mine"
    assert list(out.glob(STAGING_PREFIX + "*"))  # what the kill left

    again = export(root, out.name)
    assert again.returncode == 0, again.stderr
    assert "note: removed" in again.stderr and STAGING_PREFIX in again.stderr
    assert len([ln for ln in again.stderr.splitlines() if "note: removed" in ln]) == 1
    assert snapshot(out) == new and verify(out) == []
    assert not list(out.glob(STAGING_PREFIX + "*"))
    assert sorted(p.name for p in out.iterdir()) == sorted([*DATA, MANIFEST, "notes.txt"])


def test_a_full_disk_leaves_the_old_export_and_one_line(versions):
    """A write limit (``RLIMIT_FSIZE``: writes past it fail with EFBIG, as a full disk's
    fail with ENOSPC) during the export, TensorBoard's writer included: exit 2, one line
    naming the file, no traceback (tensorboardX's exit hook once printed one), the old
    files whole, no staging folder left."""
    import resource

    root, old, _new = versions
    out = root / "full"
    subprocess.run(["cp", "-a", str(root / "old"), str(out)], check=True)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("FUGUE_EXPORT_KILL_AT", None)
    for formats, limit in ((f"{FORMATS},tensorboard", 600), ("tensorboard", 100)):
        proc = subprocess.run(
            [sys.executable, "-m", "fugue_tui", "report", "runs", "--export", out.name,
             "--format", formats, "--overwrite"], cwd=root, env=env, capture_output=True,
            text=True, timeout=180,
            preexec_fn=lambda n=limit: resource.setrlimit(resource.RLIMIT_FSIZE, (n, n)))
        assert proc.returncode == 2, proc.stderr
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
        assert "File too large" in lines[0] and "whole" in lines[0]
        assert snapshot(out) == old and verify(out) == []
        assert not list(out.glob(STAGING_PREFIX + "*")) and not (out / "tensorboard").exists()


def _listing(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())


@pytest.mark.parametrize("stage", ["replaced-2", "replaced-3"])
def test_a_kill_never_leaves_the_tensorboard_folder_missing_or_mixed(versions, stage):
    """The ``tensorboard/`` folder (a folder cannot be renamed over a full one) is swapped
    with the old one in one step: a kill before or after it leaves the old folder (marked)
    or the new one whole, never none."""
    root = versions[0]
    out = root / f"tb-{stage}"
    assert export(root, out.name, formats="json,tensorboard").returncode == 0
    (out / "tensorboard" / "old.marker").write_text("the old folder")
    old = _listing(out / "tensorboard")
    proc = export(root, out.name, kill_at=stage, formats="json,tensorboard")
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    now = _listing(out / "tensorboard")
    if stage == "replaced-2":  # groups.json, jobs.json replaced; not yet the folder
        assert now == old
    else:  # the new folder whole: as many event files, none of the old folder's
        assert "old.marker" not in now and len(now) == len(old) - 1
