"""``--json`` on ``list``, ``validate``, ``report`` and the dry runs' plans (issue 29), as
real subprocesses: each output is read by a strict parser (no NaN, no Infinity, one
document), validated against its versioned JSON Schema (fugue_tui/schemas, docs/json.md),
and its values checked against what the text form says. Nothing trains here."""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from engine.results.columns import GROUP_COLUMNS
from engine.results.store import append_rows
from fugue_tui.jsonout import KINDS, SCHEMA_VERSION, clean, schema

REPO = Path(__file__).resolve().parents[3]
HARNESS = REPO / "tests" / "fixtures" / "fugue-harness-cpu"


def fugue(*args: str, cwd: Path = REPO, **extra: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items()
           if k not in ("FUGUE_PLUGINS", "FUGUE_DATA_DIR", "FUGUE_REGISTRY_DIR")}
    env.update(PYTHONPATH=str(REPO), COLUMNS="1000", FUGUE_PLAIN="1", **extra)
    return subprocess.run([sys.executable, "-m", "fugue_tui", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120,
                          stdin=subprocess.DEVNULL)


def _refuse(constant: str):
    raise ValueError(f"not JSON: {constant}")


def strict(text: str, kind: str) -> dict:
    """Parse ``text`` strictly (NaN / Infinity refused, exactly one document) and validate
    it against ``kind``'s schema."""
    doc = json.loads(text, parse_constant=_refuse)
    jsonschema.validate(doc, schema(kind), cls=jsonschema.Draft202012Validator)
    assert doc["schema"] == f"fugue-tui/{kind}" and doc["version"] == SCHEMA_VERSION
    return doc


def test_every_schema_is_a_valid_json_schema():
    for kind in KINDS:
        jsonschema.Draft202012Validator.check_schema(schema(kind))


def test_clean_turns_every_missing_mark_into_null():
    import numpy as np
    import pandas as pd

    assert clean({"a": float("nan"), "b": np.float64("inf"), "c": "", "d": pd.NA,
                  "e": np.int64(3), "f": np.float32(0.5), "g": [np.bool_(True), 0.0]}) == \
        {"a": None, "b": None, "c": None, "d": None, "e": 3, "f": 0.5, "g": [True, 0.0]}


def test_list_json(tmp_path):
    proc = fugue("list", "--json", FUGUE_DATA_DIR=str(tmp_path / "no-data"))
    assert proc.returncode == 0, proc.stderr
    doc = strict(proc.stdout, "list")
    by_id = {e["id"]: e for e in doc["experiments"]}
    assert by_id["D_ens"]["available"] is True and by_id["D_ens"]["reason"] is None
    assert by_id["E01"]["available"] is False and "CIFAR-10" in by_id["E01"]["reason"]
    assert by_id["D_hpo"]["search_space"] and by_id["D_ens"]["search_space"] is None


def test_validate_json_has_the_same_exit_status(tmp_path):
    proc = fugue("validate", "--json", FUGUE_DATA_DIR=str(tmp_path / "no-data"))
    assert proc.returncode == 1, proc.stderr  # E01 cannot run here: as the text form
    doc = strict(proc.stdout, "validate")
    assert doc["runnable"] < doc["total"] == len(doc["experiments"])
    e01 = next(e for e in doc["experiments"] if e["id"] == "E01")
    assert e01["prefetch"] == "fugue-tui prefetch E01"
    assert {"seq", "mp", "ray", "unified_model"} <= {e["name"] for e in doc["executors"]}
    ok = fugue("validate", "D_ens", "--json")
    assert ok.returncode == 0 and strict(ok.stdout, "validate")["runnable"] == 1


def test_report_json_matches_the_tables_and_has_no_nan():
    proc = fugue("report", str(HARNESS), "--json")
    assert proc.returncode == 0, proc.stderr
    doc = strict(proc.stdout, "report")
    from rich.console import Console

    from fugue_tui.report.tables import print_report

    console = Console(width=1000, record=True, color_system=None)
    print_report(HARNESS, console)
    text = console.export_text()
    unified = next(c for c in doc["cells"] if c["exp_id"] == "D_ens"
                   and c["executor"] == "unified_model")
    assert re.search(rf"D_ens\s+│\s+unified_model.*{unified['speedup']:.3f}", text)
    assert unified["ci_low"] is None and unified["ci_high"] is None  # 2 passes: no interval
    assert unified["train_throughput_mean"] is None  # the harness has no such column
    assert unified["gpu_name"] is None and unified["ok"] == unified["n_strategy"]


def test_report_json_carries_intervals_and_failed_cells(tmp_path):
    def row(n, executor, t, status="ok"):
        return {"group_id": f"{executor}_{n:08x}", "exp_id": "E05", "executor": executor,
                "K": 5, "T_group": t, "status": status, "campaign_id": "a",
                "cell_key": f"k{n}", "compile_mode": "off", "host": "box",
                "torch_version": "2.5.1", "energy_method": "none",
                "error": "" if status == "ok" else "boom"}
    append_rows(tmp_path / "master_groups.csv",
                [row(i, "seq", 4.0 + 0.01 * i) for i in range(5)]
                + [row(10 + i, "mp", 2.0 + 0.01 * i) for i in range(5)]
                + [row(20, "ray", 1.0, status="failed")], GROUP_COLUMNS)
    doc = strict(fugue("report", str(tmp_path), "--json").stdout, "report")
    mp = next(c for c in doc["cells"] if c["executor"] == "mp")
    assert mp["ci_low"] < mp["speedup"] < mp["ci_high"]
    assert math.isclose(mp["speedup"], 4.02 / 2.02, rel_tol=1e-9)
    ray = next(c for c in doc["cells"] if c["executor"] == "ray")
    assert ray["ok"] == 0 and ray["not_ok"] == 1 and ray["speedup"] is None


def test_plan_json_has_the_keys_of_the_text_plan(tmp_path):
    campaign = tmp_path / "c.toml"
    campaign.write_text('experiments = "D_ens,D_cv"\nexecutors = ["seq", "mp"]\npasses = 2\n')
    proc = fugue("--batch", str(campaign), "--dry-run", "--json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    doc = strict(proc.stdout, "plan")
    text = fugue("--batch", str(campaign), "--dry-run", cwd=tmp_path).stdout
    assert [c["key"] for c in doc["cells"]] == re.findall(r"\b[0-9a-f]{16}\b", text)
    assert len(doc["cells"]) == 8 and {c["would"] for c in doc["cells"]} == {"run"}
    assert not (tmp_path / "runs").exists()  # a dry run writes nothing
    run = fugue("run", "--exp", "D_ens", "--exec", "seq", "--dry-run", "--json", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert strict(run.stdout, "plan")["cells"][0]["exp_id"] == "D_ens"


@pytest.mark.parametrize("args, needle", [
    (("--json", "list"), "list --json"),
    (("run", "--exp", "D_ens", "--json"), "--json applies with --dry-run"),
])
def test_json_where_it_does_not_apply_is_one_line_exit_2(args, needle):
    proc = fugue(*args)
    assert proc.returncode == 2 and proc.stdout == ""
    assert len(proc.stderr.splitlines()) == 1 and needle in proc.stderr
