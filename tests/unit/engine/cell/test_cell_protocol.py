"""The runner ↔ cell protocol: the typed cell spec (schema 1 on disk, byte-compatible with
what runners always wrote) and the run folder's layout."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest

from engine.cell.protocol import SPEC_SCHEMA, CellRunSpec
from engine.define.campaign import load_campaign
from engine.errors import ConfigError
from engine.runfolder import RunFolder
from engine.runner.supervisor import Runner

REPO = Path(__file__).resolve().parents[4]
#: Keys of a schema-1 spec in the order every runner has written them.
SCHEMA_1_KEYS = ["schema", "campaign_id", "campaign_hash", "runs_dir", "events", "attempt",
                 "reason_file", "seed", "passes", "device", "device_requested", "gpu_uuid",
                 "monitor", "monitor_interval_s", "threads", "cell"]


@pytest.fixture
def runner(tmp_path):
    (tmp_path / "c.toml").write_text('name = "c"\nexperiments = "D_ens"\ndevice = "cpu"\n'
                                     f'runs_dir = "{tmp_path / "runs"}"\nthreads = 1\n')
    return Runner(load_campaign(tmp_path / "c.toml"))


def test_the_runner_builds_a_schema_1_spec_in_the_run_folder(runner, tmp_path, monkeypatch):
    import engine.runner.strategy as strategy  # where the runner's specs are built

    cell = runner.cells[0]
    # with a plugin loaded (an earlier test in this process may have loaded one), its
    # version follows the schema-1 keys; without, the spec is what runners always wrote
    monkeypatch.setattr(strategy, "plugin_versions", lambda: {"my_plugin": "1.2"})
    assert list(runner.cell_spec(cell, 2).to_dict()) == SCHEMA_1_KEYS + ["plugin_versions"]
    monkeypatch.setattr(strategy, "plugin_versions", dict)
    spec = runner.cell_spec(cell, 2)
    doc = spec.to_dict()
    assert list(doc) == SCHEMA_1_KEYS and doc["schema"] == SPEC_SCHEMA == 1
    folder = RunFolder(tmp_path / "runs" / "c").attempt(cell.slug, cell.key, 2)
    assert (doc["events"], doc["reason_file"]) == (str(folder.events), str(folder.reason))
    assert spec.attempt_dir == folder.path and folder.number == 2
    assert folder.path.parent.name == f"{cell.slug}-{cell.key[:8]}"
    assert doc["cell"]["key"] == cell.key and doc["threads"] == 1 and doc["device"] == "cpu"
    # round trip through the file a cell reads
    spec.write(tmp_path / "spec.json")
    assert CellRunSpec.read(tmp_path / "spec.json") == spec
    # a spec of an older runner, without the keys it did not write yet, is still read
    old = {k: v for k, v in doc.items()
           if k not in ("reason_file", "device_requested", "monitor_interval_s", "threads")}
    assert list(CellRunSpec.from_dict(old).to_dict()) == [k for k in SCHEMA_1_KEYS if k in old]
    # a tool's variant: only the optional keys it sets are written, after the others
    tool = dataclasses.replace(spec, job_env={"X": "1"}, group_id="g1")
    assert list(tool.to_dict()) == SCHEMA_1_KEYS + ["job_env", "group_id"]


@pytest.mark.parametrize("change, message", [
    ({"schema": 2}, "cell spec schema 2, expected 1"),
    ({"surprise": 1}, "unknown key 'surprise'"),
    ({"events": None}, "missing key 'events'"),
    ({"seed": None}, "missing key 'seed'"),
    ({"seed": None, "device": None}, "missing keys 'seed', 'device'"),
    ({"schema": None}, "missing key 'schema'"),
    ({"cell": ["not", "a", "table"]}, "key 'cell' must be an object"),
])
def test_a_bad_spec_is_one_line_naming_the_key(runner, tmp_path, change, message):
    doc = runner.cell_spec(runner.cells[0], 1).to_dict()
    doc.update(change)
    doc = {k: v for k, v in doc.items() if v is not None or k == "gpu_uuid"}
    with pytest.raises(ConfigError, match=message):
        CellRunSpec.from_dict(doc)
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(doc))
    cell = subprocess.run([sys.executable, "-m", "engine.cell", str(path)], cwd=REPO,
                          capture_output=True, text=True, timeout=120)
    assert cell.returncode == 2
    lines = cell.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"{path}: ") and message in lines[0]
