"""The real ``fugue-tui`` command line, as a subprocess: bad input exits 2 with one line on
stderr naming the file, key or value, no traceback, and nothing written. None of these
start a cell (they fail while loading or in the runs-folder preflight, or are dry runs)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[4]
QUICK = REPO / "campaigns" / "quick.toml"


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("FUGUE_REGISTRY_DIR", "FUGUE_PLUGINS", "FUGUE_DATA_DIR")}
    env["COLUMNS"] = "1000"  # rich tables on one line per row
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p)
    return env


def fugue(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "fugue_tui", *args], cwd=cwd, env=_env(),
                          capture_output=True, text=True, timeout=60)


def snapshot(root: Path) -> dict[str, str]:
    """Every path under ``root`` with its kind and size (links: their target)."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            rel = str(path.relative_to(root))
            if path.is_symlink():
                out[rel] = "link:" + os.readlink(path)
            elif path.is_dir():
                out[rel] = "dir"
            else:
                out[rel] = f"file:{path.stat().st_size}"
    return out


def assert_one_line_error(result: subprocess.CompletedProcess, *needles: str) -> str:
    assert result.returncode == 2, (result.returncode, result.stdout, result.stderr)
    assert "Traceback" not in result.stderr + result.stdout
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    line = lines[0]
    assert line.startswith("fugue-tui: error: "), line
    for needle in needles:
        assert needle in line, (needle, line)
    assert result.stdout == ""
    return line


def _campaign(tmp_path: Path, text: str, name: str = "c.toml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


@pytest.mark.parametrize("body, needles", [
    ('name = "x"\nexperiments = "D_ens"\npasses = = 2\n', ["c.toml:3:", "invalid TOML"]),
    ('experiments = "D_ens"\npases = 2\n', ["c.toml", "'pases'", "did you mean 'passes'"]),
    ('experiments = "D_ens,D_enz"\n', ["c.toml", "unknown experiment 'D_enz'", "'D_ens'"]),
    ('experiments = "D_ens"\nexecutors = ["sequ"]\n',
     ["c.toml", "unknown executor 'sequ'", "known: ", "seq"]),
    ('experiments = "D_ens"\npasses = 0\n', ["c.toml", "'passes'", "got 0"]),
    ('experiments = "D_ens"\ncompile = "maybe"\n', ["c.toml", "'compile'", "'maybe'"]),
])
def test_bad_campaign_exits_2_with_one_line_and_writes_nothing(tmp_path, body, needles):
    _campaign(tmp_path, body)
    before = snapshot(tmp_path)
    result = fugue(tmp_path, "--batch", "c.toml")
    assert_one_line_error(result, *needles)
    assert snapshot(tmp_path) == before
    assert not (tmp_path / "runs").exists()


def test_missing_campaign_file(tmp_path):
    result = fugue(tmp_path, "--batch", "nope.toml")
    assert_one_line_error(result, "nope.toml", "cannot read")
    assert snapshot(tmp_path) == {}


def test_bad_command_line_override(tmp_path):
    _campaign(tmp_path, 'experiments = "D_ens"\n')
    before = snapshot(tmp_path)
    # the flag is named, not the campaign file (the value came from the command line)
    assert_one_line_error(fugue(tmp_path, "--batch", "c.toml", "--passes", "0"),
                          "argument --passes", "got 0")
    assert_one_line_error(fugue(tmp_path, "--batch", "c.toml", "--device", "gpu0"),
                          "'device'", "'gpu0'")
    assert snapshot(tmp_path) == before


def test_runs_dir_under_a_regular_file(tmp_path):
    (tmp_path / "afile").write_text("not a folder\n")
    _campaign(tmp_path, 'experiments = "D_ens"\nruns_dir = "afile/runs"\n')
    before = snapshot(tmp_path)
    result = fugue(tmp_path, "--batch", "c.toml")
    assert_one_line_error(result, "afile/runs", "regular file", str(tmp_path / "afile"))
    assert snapshot(tmp_path) == before
    assert (tmp_path / "afile").read_text() == "not a folder\n"


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full here")
def test_results_file_symlinked_to_dev_full(tmp_path):
    runs = tmp_path / "runs"
    runs.mkdir()
    (runs / "master_groups.csv").symlink_to("/dev/full")
    _campaign(tmp_path, 'experiments = "D_ens"\nruns_dir = "runs"\n')
    before = snapshot(tmp_path)
    result = fugue(tmp_path, "--batch", "c.toml")
    assert_one_line_error(result, "master_groups.csv", "not a regular file", "/dev/full")
    assert snapshot(tmp_path) == before
    assert sorted(os.listdir(runs)) == ["master_groups.csv"]


def test_bad_experiments_file_for_list(tmp_path):
    (tmp_path / "mine.toml").write_text("[experiments.E12]\nsearch_space = { learning_rate = [0.1] }\n")
    result = fugue(tmp_path, "list", "--experiments", "mine.toml")
    assert_one_line_error(result, "mine.toml", "'learning_rate'", "did you mean 'lr'")


def _rows(stdout: str) -> dict[str, str]:
    """Table rows by experiment id (the first word of a line), box characters removed."""
    rows = {}
    for line in stdout.splitlines():
        words = line.replace("│", " ").split()
        if words and re.fullmatch(r"E\d\d|D_\w+", words[0]) and words[0] not in rows:
            rows[words[0]] = " ".join(words)
    return rows


def _reason(stdout: str, row: str) -> str:
    """Why a row is unavailable: in the row itself, or in the numbered note it points to."""
    ref = re.search(r"\[(\d+)\]\s*$", row)
    if ref is None:
        return row
    notes = [line for line in stdout.splitlines() if line.startswith(f"[{ref.group(1)}]")]
    assert len(notes) == 1, stdout
    return notes[0]


def test_list_shows_availability(tmp_path):
    result = fugue(tmp_path, "list")
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    rows = _rows(result.stdout)
    assert list(rows) == [f"E{i:02d}" for i in range(1, 18)] + [
        "D_ens", "D_cv", "D_hpo", "D_mm", "D_reg"]
    assert " no" in rows["E17"] and not rows["E17"].endswith("yes")
    reason = _reason(result.stdout, rows["E17"])
    assert "plugin" in reason and "transformer" in reason, reason
    for exp_id in ("D_ens", "D_cv", "D_hpo", "D_mm", "D_reg"):
        assert rows[exp_id].endswith(" yes"), rows[exp_id]
    assert snapshot(tmp_path) == {}


def test_dry_run_lists_cells_and_creates_nothing(tmp_path):
    result = fugue(tmp_path, "--batch", str(QUICK), "--dry-run")
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    assert "20 cells of" in result.stdout  # 5 experiments x 4 executors
    rows = [words for words in (line.replace("│", " ").split()
                                for line in result.stdout.splitlines())
            if len(words) >= 7 and words[0].isdigit()]
    seq = [r for r in rows if r[2] == "seq"]  # the quick campaign's seq cells, in order
    assert [(r[1], r[3], r[4], r[5]) for r in seq] == [
        ("D_ens", "off", "1", "5"), ("D_cv", "off", "1", "5"), ("D_hpo", "off", "1", "6"),
        ("D_mm", "off", "1", "4"), ("D_reg", "off", "1", "4")]
    assert [r[2] for r in rows[:4]] == ["seq", "unified_model", "mp", "ray"]
    keys = [w for r in rows for w in r if re.fullmatch(r"[0-9a-f]{16}", w)]
    assert len(keys) == 20 and len(set(keys)) == 20
    assert snapshot(tmp_path) == {}
    assert not (tmp_path / "runs").exists()
    again = fugue(tmp_path, "--batch", str(QUICK), "--dry-run", "--passes", "2")
    assert again.returncode == 0 and "40 cells of" in again.stdout
    assert snapshot(tmp_path) == {}
