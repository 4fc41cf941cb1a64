"""``fugue-tui selfcheck`` as a user runs it: the whole matrix in a real subprocess, its
``--json`` against the versioned schema (fugue_tui/schemas/selfcheck.v1.json), exit 0 with
every path at or inside its bound on this host, the verdict stored beside the profiles and
read back; the table form; exit 1 when the check reports a path outside (stored too); exit
2 for bad input with one line and nothing written."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from engine.selfcheck.store import latest, read
from fugue_tui.commands.selfcheck import print_table, selfcheck
from fugue_tui.jsonout import schema

REPO = Path(__file__).resolve().parents[4]


def fugue(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO), "COLUMNS": "200"}
    return subprocess.run([sys.executable, "-m", "fugue_tui", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)


def _strict(text: str) -> dict:
    def refuse(constant):
        raise ValueError(f"not JSON: {constant}")

    doc = json.loads(text, parse_constant=refuse)
    jsonschema.validate(doc, schema("selfcheck"), cls=jsonschema.Draft202012Validator)
    return doc


@pytest.fixture(scope="module")
def checked(tmp_path_factory):
    """One real run of the whole check (a few seconds): its JSON and its runs folder."""
    cwd = tmp_path_factory.mktemp("selfcheck")
    done = fugue("selfcheck", "--json", "--runs-dir", "runs", cwd=cwd)
    return done, cwd / "runs"


def test_json_validates_every_path_holds_here_and_the_verdict_is_stored(checked):
    done, runs = checked
    assert done.returncode == 0, done.stderr[-2000:]
    doc = _strict(done.stdout)
    assert doc["schema"] == "fugue-tui/selfcheck" and doc["device"] == "cpu"
    names = [p["name"] for p in doc["paths"]]
    assert len(names) == len(set(names)) == 21
    assert sum(doc["counts"].values()) == 21 and doc["counts"]["outside_bound"] == 0
    for p in doc["paths"]:
        if p["holds"] == "construction":  # exact kernels: by construction on any host
            assert p["verdict"] == "bit for bit", p
    assert doc["elapsed_s"] < 60
    stored = read(runs)
    assert len(stored) == 1 and doc["stored"] == "runs/selfcheck.csv"
    row = stored[0].row
    assert (row["device"], row["exit_status"]) == ("cpu", "0")
    assert int(row["bit_for_bit"]) == doc["counts"]["bit_for_bit"]
    assert [p["verdict"] for p in stored[0].document()["paths"]] == \
        [p["verdict"] for p in doc["paths"]]
    from engine.profile.store import identity

    assert latest(runs, identity("cpu")) is not None  # read back as this machine's


def test_the_table_says_each_verdict_and_the_machine(checked, tmp_path):
    import io

    doc = json.loads(checked[0].stdout)
    out = io.StringIO()
    print_table(doc, out)
    text = out.getvalue()
    assert "mlp · sgd · exact · fp32" in text and "by construction" in text
    assert "bit for bit" in text and "ISA" in text and "BLAS" in text
    assert "0 outside bound" in text and "every path at or inside" in text


def _fake_check(tmp_path: Path, doc: dict, status: int) -> str:
    """A stand-in for the check's process: writes ``doc`` to --out, exits ``status``."""
    canned = tmp_path / "canned.json"
    canned.write_text(json.dumps(doc))
    script = tmp_path / "fake-python"
    script.write_text(f"#!{sys.executable}\nimport shutil, sys\n"
                      f"shutil.copy({str(canned)!r}, sys.argv[sys.argv.index('--out') + 1])\n"
                      f"sys.exit({status})\n")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return str(script)


def test_a_path_outside_its_bound_exits_1_and_is_stored(checked, tmp_path, capsys):
    doc = json.loads(checked[0].stdout)
    for key in ("schema", "version", "stored"):
        doc.pop(key)
    doc["paths"][0].update(verdict="outside bound", text="outside bound — a defect, please "
                           "report it (max |Δ| = 0.1, bound 0)", max_diff=0.1, bound=0.0)
    doc["counts"] = {"bit_for_bit": 0, "within_bound": 20, "outside_bound": 1}
    doc["exit_status"] = 1
    code = selfcheck("cpu", str(tmp_path / "runs"), python=_fake_check(tmp_path, doc, 1))
    assert code == 1
    out = capsys.readouterr().out
    assert "1 outside bound" in out and "a defect, please report it" in out
    assert read(tmp_path / "runs")[0].row["outside_bound"] == "1"
    # --json: the same status, a valid document
    assert selfcheck("cpu", str(tmp_path / "runs"), as_json=True,
                     python=_fake_check(tmp_path, doc, 1)) == 1
    assert _strict(capsys.readouterr().out)["exit_status"] == 1


def test_a_check_that_ends_without_a_verdict_exits_1_and_stores_nothing(tmp_path, capsys):
    script = tmp_path / "dies"
    script.write_text(f"#!{sys.executable}\nimport sys\nsys.exit(-9)\n")
    script.chmod(0o755)
    assert selfcheck("cpu", str(tmp_path / "runs"), python=str(script)) == 1
    assert "no verdict" in capsys.readouterr().err
    assert read(tmp_path / "runs") == []


def test_bad_input_is_one_line_exit_2_and_nothing_written(tmp_path):
    for args in (("--device", "tpu"), ("--device", "cuda:x")):
        done = fugue("selfcheck", *args, "--runs-dir", "runs", cwd=tmp_path)
        assert done.returncode == 2, done
        assert done.stderr.count("\n") == 1 and "--device" in done.stderr
        assert not (tmp_path / "runs").exists()
    blocker = tmp_path / "file"
    blocker.write_text("")
    done = fugue("selfcheck", "--runs-dir", "file/runs", cwd=tmp_path)
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
