"""``fugue-tui models RUN_FOLDER [--json]`` (issue 50): the saved models of a run folder,
a cell or one attempt, from their JSON, without importing torch; none saved is one line
(exit 0) naming the cells that ran without saving; a folder that is none of these is one
line, exit 2."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import jsonschema

from fugue_tui.jsonout import schema
from tests.unit.engine.models.run_folders import make_run

REPO = Path(__file__).resolve().parents[4]
# the command in a fresh interpreter, which must not import torch to list the models
_RUN = ("import sys; from fugue_tui.cli import main; rc = main(sys.argv[1:]); "
        "assert 'torch' not in sys.modules, 'models imported torch'; sys.exit(rc)")


def fugue(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO), "COLUMNS": "200", "FUGUE_PLAIN": "1"}
    return subprocess.run([sys.executable, "-c", _RUN, *args], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=120,
                          stdin=subprocess.DEVNULL)


def test_lists_the_saved_models_and_the_cells_without(tmp_path):
    run = make_run(tmp_path / "c", [("001-D_ens-seq-p1-aaaa1111", "true", ["D_ens_m0", "D_ens_m1"]),
                                    ("002-D_ens-mp-p1-bbbb2222", "false", [])])
    done = fugue("models", str(run))
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    digest = json.loads((run / "cells" / "001-D_ens-seq-p1-aaaa1111" / "attempt-1" / "models"
                         / "D_ens_m1.json").read_text())["weights_sha256"]
    row = next(line for line in lines if "D_ens_m1" in line)
    assert "seq" in row and "val_acc 0.6" in row and digest[:12] in row and digest not in row
    assert "B" in row.split()[-1] or "KiB" in row  # the size
    assert lines[-1] == "1 cell without saved models: 002-D_ens-mp-p1-bbbb2222"

    doc = json.loads(fugue("models", str(run), "--json").stdout)
    jsonschema.validate(doc, schema("models"), cls=jsonschema.Draft202012Validator)
    assert [m["job_id"] for m in doc["models"]] == ["D_ens_m0", "D_ens_m1"]
    assert doc["models"][1]["weights_sha256"] == digest and doc["models"][1]["value"] == 0.6
    assert doc["models"][0]["size_bytes"] == os.path.getsize(doc["models"][0]["path"])
    assert doc["cells_without_models"] == ["002-D_ens-mp-p1-bbbb2222"]

    attempt = run / "cells" / "001-D_ens-seq-p1-aaaa1111" / "attempt-1"
    one = json.loads(fugue("models", str(attempt), "--json").stdout)
    assert [m["job_id"] for m in one["models"]] == ["D_ens_m0", "D_ens_m1"]


def test_none_saved_is_one_line_naming_the_cells(tmp_path):
    run = make_run(tmp_path / "c", [("001-D_ens-seq-p1-aaaa1111", "false", []),
                                    ("002-D_cv-seq-p1-cccc3333", "best", [])])
    done = fugue("models", str(run))
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        f"no saved models in {run}; 2 cells ran without saving: 001-D_ens-seq-p1-aaaa1111, "
        "002-D_cv-seq-p1-cccc3333 (save_models = true or \"best\", or run --save-models, "
        "keeps them)"]


def test_a_folder_that_is_no_run_folder_is_one_line_exit_2(tmp_path):
    done = fugue("models", str(tmp_path))
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.strip().splitlines() == [
        f"fugue-tui: error: {tmp_path}: not a run folder (no cells/), a cell folder or an "
        "attempt folder: give runs/<campaign> or one of its cells/<cell>/attempt-<n>"]
