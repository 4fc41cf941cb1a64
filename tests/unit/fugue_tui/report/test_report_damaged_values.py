"""Issue 44: damaged results are named and left out, never averaged in or dropped silently.
``fugue-tui report`` runs as a subprocess on copies of the fugue harness's own files with
one value damaged (a negative or NaN ``T_group``, text in a number column, a negative
memory), with bare carriage-return line ends, and on a file it cannot read."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[4]
HARNESS = REPO / "tests" / "fixtures" / "fugue-harness-cpu"


def fugue(*args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "NO_COLOR")}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p)
    return subprocess.run([sys.executable, "-m", "fugue_tui", *args], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=120)


def harness_copy(tmp_path: Path, damage=None, file: str = "master_groups.csv",
                 line_end: str = "\n") -> Path:
    """The harness's two files in ``tmp_path``, ``damage(rows)`` applied to ``file``'s rows
    (header first), written with ``line_end``."""
    for name in ("master_groups.csv", "master_individual.csv"):
        with open(HARNESS / name, newline="") as f:
            rows = list(csv.reader(f))
        if name == file and damage is not None:
            damage(rows)
        with open(tmp_path / name, "w", newline="") as f:
            csv.writer(f, lineterminator=line_end if name == file else "\n").writerows(rows)
    return tmp_path


def cell(doc: dict, exp: str, executor: str) -> dict:
    return next(c for c in doc["cells"] if c["exp_id"] == exp and c["executor"] == executor)


def set_value(row_index: int, column: str, value: str):
    def damage(rows: list[list[str]]) -> None:
        rows[row_index][rows[0].index(column)] = value
    return damage


def clean_seq_ens() -> dict:
    return cell(json.loads(fugue("report", "--json", str(HARNESS)).stdout), "D_ens", "seq")


def test_negative_t_group_is_named_and_not_averaged(tmp_path):
    # row 1 of the fixture is D_ens seq pass 1 (line 2 of the file)
    runs = harness_copy(tmp_path, set_value(1, "T_group", "-0.73"))
    proc = fugue("report", "--json", str(runs))
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    doc = json.loads(proc.stdout)
    seq = cell(doc, "D_ens", "seq")
    assert seq["ok"] == clean_seq_ens()["ok"] - 1
    assert seq["T_group_mean"] > 0  # -0.73 is in no average
    where = f"{runs / 'master_groups.csv'}:2 T_group='-0.73'"
    warned = [w for w in proc.stderr.splitlines() if where in w]
    assert len(warned) == 1 and warned[0].startswith("fugue-tui: warning: "), proc.stderr
    assert any(where in w for w in doc["warnings"])  # --json carries it in the document


@pytest.mark.parametrize("value", ["nan", "abc", "inf"])
def test_nan_or_text_t_group_is_named(tmp_path, value):
    runs = harness_copy(tmp_path, set_value(1, "T_group", value))
    proc = fugue("report", "--width", "120", str(runs))
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    warning = [w for w in proc.stderr.splitlines() if w.startswith("fugue-tui: warning: ")
               and "master_groups.csv:" in w]
    assert len(warning) == 1, proc.stderr
    # the group's job rows go with it, said once for their file
    assert "master_individual.csv: 4 job row(s)" in proc.stderr
    assert f"master_groups.csv:2 T_group='{value}'" in warning[0]
    assert "not a number" in warning[0]


def test_negative_job_time_is_named(tmp_path):
    runs = harness_copy(tmp_path, set_value(3, "total_time_s", "-1.5"),
                        file="master_individual.csv")
    proc = fugue("report", "--json", str(runs))
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    assert f"{runs / 'master_individual.csv'}:4 total_time_s='-1.5' (negative)" in proc.stderr
    doc = json.loads(proc.stdout)
    assert len(doc["warnings"]) == 1


def test_accuracy_above_one_and_empty_cells(tmp_path):
    def damage(rows):
        rows[2][rows[0].index("final_val_acc")] = "1.5"
        rows[5][rows[0].index("final_val_acc")] = ""  # empty: not measured, no damage
    runs = harness_copy(tmp_path, damage, file="master_individual.csv")
    proc = fugue("report", "--json", str(runs))
    assert proc.returncode == 0, proc.stderr
    assert "master_individual.csv:3 final_val_acc='1.5' (above 1)" in proc.stderr
    assert "master_individual.csv:6" not in proc.stderr


def test_a_diverged_loss_is_a_result_and_text_in_it_is_damage(tmp_path):
    """NaN or inf in a loss column is what the training measured (a validation loss can
    diverge while the training loss stays finite): the row stays; text there does not."""
    def damage(rows):
        rows[2][rows[0].index("final_val_loss")] = "nan"
        rows[3][rows[0].index("final_val_loss")] = "inf"
        rows[4][rows[0].index("final_val_loss")] = "lots"
    runs = harness_copy(tmp_path, damage, file="master_individual.csv")
    proc = fugue("report", "--json", str(runs))
    assert proc.returncode == 0, proc.stderr
    assert "master_individual.csv:5 final_val_loss='lots' (not a number)" in proc.stderr
    assert "master_individual.csv:3" not in proc.stderr
    assert "master_individual.csv:4" not in proc.stderr
    assert "1 row with an impossible value" in proc.stderr


def test_clean_harness_files_warn_nothing():
    proc = fugue("report", "--json", str(HARNESS))
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    assert json.loads(proc.stdout)["warnings"] == []


def test_bare_carriage_returns_read_like_newlines(tmp_path):
    runs = harness_copy(tmp_path, line_end="\r")
    proc = fugue("report", "--json", str(runs))
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    assert json.loads(proc.stdout)["cells"] == json.loads(
        fugue("report", "--json", str(HARNESS)).stdout)["cells"]


def test_bare_carriage_returns_in_the_jobs_file(tmp_path):
    runs = harness_copy(tmp_path, set_value(3, "total_time_s", "-2"),
                        file="master_individual.csv", line_end="\r")
    proc = fugue("report", "--json", str(runs))
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    assert "master_individual.csv:4 total_time_s='-2'" in proc.stderr


def test_many_damaged_rows_one_line_naming_the_first_few(tmp_path):
    def damage(rows):
        for i in range(1, 6):
            rows[i][rows[0].index("T_group")] = "-1"
    runs = harness_copy(tmp_path, damage)
    proc = fugue("report", "--json", str(runs))
    assert proc.returncode == 0, proc.stderr
    lines = [w for w in proc.stderr.splitlines() if "master_groups.csv" in w]
    assert len(lines) == 1 and "5 rows" in lines[0] and "and 2 more" in lines[0], lines


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads any file")
def test_unreadable_results_file_is_named_with_its_cause(tmp_path):
    runs = harness_copy(tmp_path)
    (runs / "master_groups.csv").chmod(0)
    try:
        proc = fugue("report", str(runs))
    finally:
        (runs / "master_groups.csv").chmod(0o644)
    assert proc.returncode == 2 and proc.stdout == "", proc.stderr
    assert proc.stderr.splitlines() == [
        f"fugue-tui: error: results file '{runs / 'master_groups.csv'}': Permission denied"]


def test_results_file_that_is_a_directory_is_named(tmp_path):
    (tmp_path / "master_groups.csv").mkdir()
    proc = fugue("report", str(tmp_path))
    assert proc.returncode == 2 and proc.stdout == "" and "Traceback" not in proc.stderr
    assert proc.stderr.splitlines() == [
        f"fugue-tui: error: results file '{tmp_path / 'master_groups.csv'}': "
        "is a directory, not a file"]
