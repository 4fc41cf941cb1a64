"""The cell spec typed in memory (issue 40): ``CellRunSpec.cell`` is the matrix's
``CellSpec``, ``cell_start`` and ``group_id`` are declared (optional) keys set with
``dataclasses.replace``, and the document (spec.json) is byte for byte what runners wrote."""

from __future__ import annotations

import dataclasses
import json

import pytest

from engine.cell.protocol import CellRunSpec
from engine.define.campaign import load_campaign
from engine.define.matrix import CellSpec
from engine.runner.supervisor import Runner


@pytest.fixture
def runner(tmp_path):
    (tmp_path / "c.toml").write_text('name = "c"\nexperiments = ["D_ens"]\nexecutors = ["seq"]\n'
                                     f'runs_dir = "{tmp_path / "runs"}"\nthreads = 1\n')
    return Runner(load_campaign(tmp_path / "c.toml"))


def _old_document(spec: CellRunSpec, cell: CellSpec) -> str:
    """spec.json as the runner wrote it before the spec was typed: its fields in order,
    ``cell = asdict(cell)``, optional keys left out while None."""
    doc = {"schema": spec.schema}
    for f in dataclasses.fields(spec):
        value = dataclasses.asdict(cell) if f.name == "cell" else getattr(spec, f.name)
        if f.name != "schema" and not (f.metadata.get("optional") and value is None):
            doc[f.name] = value
    return json.dumps(doc, indent=1)


def test_the_cell_is_typed_and_the_document_is_unchanged(runner, tmp_path):
    cell = runner.cells[0]
    spec = runner.cell_spec(cell, 1)
    assert isinstance(spec.cell, CellSpec) and spec.cell == cell
    assert spec.cell.key == cell.key and spec.cell.jobs[0]["job_id"] == cell.jobs[0]["job_id"]
    text = spec.to_json()
    assert text == _old_document(spec, cell)
    assert "cell_start" not in json.loads(text) and "group_id" not in json.loads(text)
    path = tmp_path / "spec.json"
    spec.write(path)
    read = CellRunSpec.read(path)
    assert read == spec and isinstance(read.cell, CellSpec)
    assert read.to_json() == path.read_text() == text  # byte for byte, through the file


def test_cell_start_and_group_id_are_declared_and_round_trip(runner, tmp_path):
    spec = runner.cell_spec(runner.cells[0], 1)
    started = dataclasses.replace(spec, group_id="seq_0000beef", cell_start="zygote")
    assert (started.group_id, started.cell_start) == ("seq_0000beef", "zygote")
    assert (spec.group_id, spec.cell_start) == (None, None)  # immutable: a new spec
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.cell_start = "spawn"  # type: ignore[misc]
    doc = started.to_dict()
    assert list(doc)[-2:] == ["group_id", "cell_start"]  # after every key runners wrote
    # runners appended the group they drew: it stays the last key of spec.json, also for a
    # placed cell (multi-device, cluster), byte for byte what older runners wrote
    placed = dataclasses.replace(spec, placement="cuda:1", cpus=[0, 1], node="h 1a2b",
                                 group_id="seq_0000beef")
    assert list(placed.to_dict())[-4:] == ["placement", "cpus", "node", "group_id"]
    assert doc["cell_start"] == "zygote" and doc["group_id"] == "seq_0000beef"
    path = tmp_path / "spec.json"
    started.write(path)
    assert CellRunSpec.read(path) == started
    with pytest.raises(Exception, match="cell_start"):
        CellRunSpec.from_dict({**doc, "cell_start": 3})


def test_a_cell_given_as_its_document_is_typed(runner):
    spec = runner.cell_spec(runner.cells[0], 1)
    doc = spec.to_dict()
    assert CellRunSpec(**{k: v for k, v in doc.items()}) == spec
    assert isinstance(dataclasses.replace(spec, cell=doc["cell"]).cell, CellSpec)


def test_a_spec_dict_is_read_only_as_its_checked_document(runner):
    """The lenient reading of a spec dict (``as_spec``, issue 40's transition) is gone: a
    dict becomes a spec through ``from_dict`` alone, which round-trips the runner's
    document and refuses a partial one, naming every missing key."""
    import engine.cell.protocol as protocol
    from engine.errors import ConfigError

    assert not hasattr(protocol, "as_spec") and not hasattr(protocol, "LegacySpec")
    spec = runner.cell_spec(runner.cells[0], 1)
    assert CellRunSpec.from_dict(spec.to_dict()) == spec
    with pytest.raises(ConfigError, match="missing keys 'campaign_hash', 'runs_dir'"):
        CellRunSpec.from_dict({"schema": 1, "campaign_id": "c",
                               "cell": {"exp_id": "X", "jobs": [{"amp": False}]}})


def test_the_text_of_a_spec_round_trips_and_bad_text_is_one_line(runner):
    from engine.errors import ConfigError

    spec = runner.cell_spec(runner.cells[0], 1)
    assert CellRunSpec.from_json(spec.to_json()) == spec
    assert CellRunSpec.from_json(spec.to_json().encode(), "x") == spec
    with pytest.raises(ConfigError, match="^agent: cannot read the cell spec: "):
        CellRunSpec.from_json("{not json", "agent")
