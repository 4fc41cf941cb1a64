"""Cell keys of an option added after keys were pinned (docs/measurement.md, "Cell keys",
rules 1-3), with mp's ``start`` (legacy ``"spawn"``): a cell that runs the legacy form keeps
the key it always had, however the campaign says so; a cell that runs the new form never
shares a key with it — also when the new form becomes the default, so the key follows what
runs, not the word written nor the default of the day."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

import pytest

from engine.define.campaign import load_campaign
from engine.define.executor_options import key_options, option
from engine.define.matrix import build_cells
from engine.executors import MPOptions
from engine.plugins import load_builtins
from engine.registry import EXECUTORS

MACHINE = {"host": "h", "device": "cpu", "gpu_uuid": "", "gpu_name": "", "torch": "2.13.0"}


def _cells(tmp: Path, options: str = "") -> list:
    path = tmp / "c.toml"
    path.write_text('name = "k"\nexperiments = "D_ens"\nexecutors = ["seq", "mp"]\n'
                    + (f"[options.mp]\n{options}\n" if options else ""))
    return build_cells(load_campaign(path), MACHINE)


def _ids(cells) -> list[tuple]:
    return [(c.executor, c.key, c.config_key, c.workload_key, c.slug) for c in cells]


def _spawn_default(monkeypatch) -> None:
    """mp's ``start`` defaulting to the legacy spawn, whatever the default of the day."""
    @dataclass(frozen=True)
    class SpawnDefault(MPOptions):
        start: str | list[str] = option("spawn", choices=("forkserver", "spawn"),  # noqa: RUF009
                                        axis=True, legacy="spawn")

    load_builtins()
    monkeypatch.setitem(EXECUTORS.items, "mp", dataclasses.replace(EXECUTORS.get("mp"),
                                                                   options=SpawnDefault))


def test_legacy_spawn_keeps_its_key_and_forkserver_gets_its_own(tmp_path, monkeypatch):
    legacy = _cells(tmp_path, 'start = "spawn"')
    _spawn_default(monkeypatch)
    assert _ids(_cells(tmp_path)) == _ids(legacy)  # the key of every row before the option
    fork = _cells(tmp_path, 'start = "forkserver"')
    assert fork[0].key == legacy[0].key  # seq is untouched
    assert fork[1].key != legacy[1].key and fork[1].config_key != legacy[1].config_key
    assert fork[1].workload_key == legacy[1].workload_key  # same seq baseline
    assert fork[1].slug == legacy[1].slug  # a single value renames no folder
    assert fork[1].options["start"] == "forkserver"
    # a list runs one cell per value, each keyed as if asked for alone
    both = _cells(tmp_path, 'start = ["forkserver", "spawn"]')
    assert [c.options["start"] for c in both[1:]] == ["forkserver", "spawn"]
    assert [c.key for c in both[1:]] == [fork[1].key, legacy[1].key]
    assert [c.slug[4:] for c in both[1:]] == ["D_ens-mp-forkserver-p1", "D_ens-mp-spawn-p1"]
    assert "forkserver" in both[1].label and "spawn" in both[2].label


def test_a_new_default_enters_the_key_as_its_resolved_value(tmp_path, monkeypatch):
    """Once forkserver is mp's default, a campaign that does not mention ``start`` runs it
    and gets forkserver's key — never the legacy one, whose rows were spawn's."""
    legacy = _cells(tmp_path, 'start = "spawn"')
    asked = _cells(tmp_path, 'start = "forkserver"')

    @dataclass(frozen=True)
    class Flipped(MPOptions):
        start: str | list[str] = option("forkserver", choices=("forkserver", "spawn"),  # noqa: RUF009
                                        axis=True, legacy="spawn")

    load_builtins()
    monkeypatch.setitem(EXECUTORS.items, "mp", dataclasses.replace(EXECUTORS.get("mp"),
                                                                   options=Flipped))
    silent = _cells(tmp_path)
    assert silent[1].key == asked[1].key != legacy[1].key
    assert _ids(_cells(tmp_path, 'start = "spawn"')) == _ids(legacy)


@pytest.mark.parametrize("table, literal, resolved", [
    ({"start": "spawn", "mps": "off"}, {"mps": "off"}, {}),
    ({"start": "forkserver", "max_parallel": 2}, {"max_parallel": 2}, {"start": "forkserver"}),
])
def test_key_options_split(table, literal, resolved):
    load_builtins()
    assert key_options(EXECUTORS.get("mp").option_fields, table) == (literal, resolved)
