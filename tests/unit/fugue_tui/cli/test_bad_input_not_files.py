"""The bad-input contract (tests/unit/fugue_tui/cli/test_bad_input_matrix.py) for inputs its
table cannot express (issue 44): a campaign or experiments file that is a FIFO (it blocked
for ever: the read waited for a writer) and a runs folder on a real read-only mount (the dry
run said "Permission denied" where the run said "Read-only file system").

Each runs the real ``python -m fugue_tui`` with a timeout, so a regression fails instead of
hanging the suite."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from tests.unit.fugue_tui.cli.test_bad_input_matrix import _env, _tree


def _fugue(cwd, data, *argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "fugue_tui", *argv], cwd=cwd,
                          env=_env(cwd, data, {}), capture_output=True, text=True, timeout=60,
                          stdin=subprocess.DEVNULL)


def _one_line(result: subprocess.CompletedProcess) -> str:
    shown = f"exit {result.returncode}\nstdout: {result.stdout!r}\nstderr: {result.stderr!r}"
    assert result.returncode == 2 and result.stdout == "", shown
    assert "Traceback" not in result.stderr and len(result.stderr.splitlines()) == 1, shown
    return result.stderr.strip()


@pytest.mark.parametrize("which", ["campaign", "experiments-file"])
def test_a_fifo_is_refused_at_once_with_one_line(tmp_path, which):
    cwd, data = tmp_path / "cwd", tmp_path / "data"
    cwd.mkdir()
    data.mkdir()
    if which == "campaign":
        os.mkfifo(cwd / "c.toml")
    else:
        (cwd / "c.toml").write_text('experiments = "D_ens"\nexperiments_file = "mine.toml"\n')
        os.mkfifo(cwd / "mine.toml")
    before = _tree(tmp_path)
    line = _one_line(_fugue(cwd, data, "--batch", "c.toml", "--dry-run"))
    name = "c.toml" if which == "campaign" else "mine.toml"
    kind = "a campaign file" if which == "campaign" else "an experiments file"
    assert line == (f"fugue-tui: error: {name}: cannot read: a FIFO, not a regular file "
                    f"({kind} is read from a regular file)")
    assert _tree(tmp_path) == before


def _can_mount_read_only(tmp_path) -> bool:
    if shutil.which("unshare") is None or shutil.which("mount") is None:
        return False
    probe = tmp_path / "probe"
    probe.mkdir()
    done = subprocess.run(["unshare", "-rm", "sh", "-c",
                           f"mount -t tmpfs -o ro tmpfs '{probe}'"],
                          capture_output=True, timeout=20)
    probe.rmdir()
    return done.returncode == 0


@pytest.mark.parametrize("runs", ["ro", "ro/runs"], ids=["existing-folder", "folder-to-make"])
def test_the_dry_run_and_the_run_give_the_same_reason_on_a_read_only_mount(tmp_path, runs):
    """A real read-only mount (a tmpfs mounted ro in a private mount namespace, where this
    host allows one; engine/results/test_preflight_paths.py checks the same with the
    kernel's answers simulated, everywhere)."""
    if not _can_mount_read_only(tmp_path):
        pytest.skip("cannot mount a read-only tmpfs here (unshare -rm)")
    cwd, data = tmp_path / "cwd", tmp_path / "data"
    (cwd / "ro").mkdir(parents=True)
    data.mkdir()
    (cwd / "c.toml").write_text('experiments = "D_ens"\nexecutors = ["seq"]\n')
    env = _env(cwd, data, {})
    script = (f"mount -t tmpfs -o ro tmpfs '{cwd / 'ro'}' && "
              f"'{sys.executable}' -m fugue_tui --batch c.toml --runs-dir {runs} --dry-run; "
              f"echo \"exit $?\" >&2; "
              f"'{sys.executable}' -m fugue_tui --batch c.toml --runs-dir {runs}; "
              f"echo \"exit $?\" >&2")
    done = subprocess.run(["unshare", "-rm", "sh", "-c", script], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120,
                          stdin=subprocess.DEVNULL)
    lines = done.stderr.splitlines()
    assert len(lines) == 4 and lines[1] == lines[3] == "exit 2", done
    assert lines[0] == lines[2], lines  # one wording, the true cause
    assert "Read-only file system" in lines[0], lines
    assert not (cwd / "runs").exists()
