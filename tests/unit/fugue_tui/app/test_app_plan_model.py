"""The plan model: campaign documents saved and loaded with identical cell keys, bad files
reported by file and key, executor options typed in the form."""

from __future__ import annotations

import pytest

from engine.errors import ConfigError
from fugue_tui.app.models.plan import (
    cell_keys,
    default_doc,
    format_option,
    load_plan,
    parse_option,
    preview,
    save_plan,
)


def _doc(tmp_path, **extra):
    doc = default_doc(str(tmp_path / "runs"))
    doc.update({"experiments": ["D_ens", "D_reg"], "passes": 2, "threads": 1, "device": "cpu",
                **extra})
    return doc


def test_save_then_load_gives_identical_cell_keys(tmp_path):
    user = tmp_path / "mine.toml"
    user.write_text("[experiments.D_ens]\nepochs = 3\n")
    doc = _doc(tmp_path, experiments_file=str(user))
    keys = cell_keys(doc)
    assert len(keys) == 4 and len(set(keys)) == 4
    # saved into another folder: the experiments file is written relative to it
    path = save_plan(doc, tmp_path / "deep" / "er" / "c.toml")
    text = path.read_text()
    assert 'experiments_file = "../../mine.toml"' in text
    assert 'action = "flag"' in text
    loaded = load_plan(path)
    assert cell_keys(loaded) == keys
    # and the runner reading the file itself agrees
    from engine.define.campaign import load_campaign
    from engine.runner.supervisor import Runner

    assert [p.cell.key for p in Runner(load_campaign(path)).plan()] == keys


def test_a_changed_setting_changes_the_keys(tmp_path):
    doc = _doc(tmp_path)
    assert cell_keys({**doc, "seed": 7}) != cell_keys(doc)


def test_preview_reports_cells_skips_and_errors(tmp_path, monkeypatch):
    (tmp_path / "no-data").mkdir()
    monkeypatch.setenv("FUGUE_DATA_DIR", str(tmp_path / "no-data"))  # E01's CIFAR-10 absent
    result = preview(_doc(tmp_path, experiments=["D_ens", "E01"]))
    assert result.error == ""
    # passes outermost, then experiments in selection order
    assert [p.cell.exp_id for p in result.cells] == ["D_ens", "E01", "D_ens", "E01"]
    assert [bool(p.skip) for p in result.cells] == [False, True, False, True]
    assert result.cells[1].skip.startswith("unavailable here: CIFAR-10 not found")
    assert result.summary() == "4 cells: 2 run, 2 skipped"
    bad = preview(_doc(tmp_path, passes=0))
    assert "passes" in bad.error and bad.cells == []
    assert preview(_doc(tmp_path, experiments=[])).error == "select at least one experiment"


def test_load_reports_the_file_and_key(tmp_path):
    broken = tmp_path / "broken.toml"
    broken.write_text('name = "x"\nexperiments = [\n')
    with pytest.raises(ConfigError, match=r"broken\.toml:\d+:\d+: invalid TOML"):
        load_plan(broken)
    unknown = tmp_path / "unknown.toml"
    unknown.write_text('experiments = "D_nope"\n')
    with pytest.raises(ConfigError, match=r"unknown\.toml:1: experiments: unknown experiment "
                                          r"'D_nope'"):
        load_plan(unknown)
    typo = tmp_path / "typo.toml"
    typo.write_text('experiments = "D_ens"\npasess = 2\n')
    with pytest.raises(ConfigError, match=r"typo\.toml.*pasess.*passes"):
        load_plan(typo)


def test_loaded_plan_defaults_to_the_flag_watchdog_and_a_list_of_ids(tmp_path):
    path = tmp_path / "sel.toml"
    path.write_text('experiments = "D_ens,D_cv"\n[watchdog]\ninterval_s = 2.0\n')
    doc = load_plan(path)
    assert doc["experiments"] == ["D_ens", "D_cv"]
    assert doc["watchdog"] == {"interval_s": 2.0, "action": "flag"}
    assert doc["name"] == "sel"
    kill = tmp_path / "kill.toml"
    kill.write_text('experiments = "D_ens"\n[watchdog]\naction = "kill"\n')
    assert load_plan(kill)["watchdog"]["action"] == "kill"  # the user's campaign says so


def test_save_into_an_unwritable_place_names_the_file(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(Exception, match="file/c.toml: cannot write the campaign"):
        save_plan(_doc(tmp_path), blocker / "c.toml")


@pytest.mark.parametrize("text,types,axis,value", [
    ("", (int,), False, None), ("4", (int,), False, 4), ("true", (bool,), False, True),
    ("asha,median", (str, list), True, ["asha", "median"]), ("fifo", (str, list), True, "fifo"),
    ("0.5", (float,), False, 0.5),
])
def test_option_text_round_trips(text, types, axis, value):
    assert parse_option(text, types, axis) == value
    assert format_option(value) == text


def test_option_of_the_wrong_type_is_refused():
    with pytest.raises(ValueError, match="expected an integer"):
        parse_option("four", (int,))


def test_a_nul_byte_in_experiments_file_is_one_config_error_not_a_crash(tmp_path):
    """Issue 44 (found by the paths helper): ``Path.resolve()`` raised ValueError on a NUL
    byte inside the dashboard's plan loader; the campaign check names it instead."""
    path = tmp_path / "c.toml"
    path.write_text('experiments = "D_ens"\nexperiments_file = "a\\u0000b.toml"\n')
    with pytest.raises(ConfigError) as info:
        load_plan(path)
    assert "NUL byte" in str(info.value) and "experiments_file" in str(info.value)


def test_a_stream_campaign_loads_into_the_dashboards_plan(tmp_path):
    """issue 51: a stream campaign (a trace beside it) loads as a plan without gaining an
    experiments list, its trace made absolute; its cell keys are the file's."""
    from engine.define.campaign import load_campaign
    from engine.define.matrix import build_cells

    folder = tmp_path / "c"
    folder.mkdir()
    (folder / "t.csv").write_text("time_s,experiment\n0,D_ens\n0.5,D_reg\n")
    path = folder / "s.toml"
    path.write_text(f'executors = ["seq"]\nruns_dir = "{tmp_path / "runs"}"\n'
                    'arrivals = { trace = "t.csv" }\n')
    doc = load_plan(path)
    assert "experiments" not in doc
    assert doc["arrivals"]["trace"] == str((folder / "t.csv").resolve())
    machine = {"host": "h", "device": "cpu"}
    from fugue_tui.app.models.plan import parse_plan

    keys = [c.key for c in build_cells(load_campaign(path), machine)]
    assert [c.key for c in build_cells(parse_plan(doc), machine)] == keys
    # saved elsewhere: the trace is written relative to the new file, and still found
    saved = save_plan(doc, tmp_path / "elsewhere" / "s.toml")
    assert 'trace = "../c/t.csv"' in saved.read_text()
    assert [c.key for c in build_cells(load_campaign(saved), machine)] == keys


def test_a_stream_plan_previews_saves_and_launches_like_batch(tmp_path):
    """A stream plan (``arrivals``, no experiments: the screen keeps an empty selection)
    previews as the runner's dry run, describes its stream, and saves a file ``--batch``
    reads (no empty ``experiments`` beside ``arrivals``); a bad stream keeps the define
    layer's one-line message."""
    from engine.define.campaign import load_campaign

    doc = {**default_doc(str(tmp_path / "runs")), "name": "s", "device": "cpu",
           "arrivals": {"process": "poisson", "rate": 2.0, "count": 3, "seed": 7,
                        "mix": {"D_ens": 1.0}}}
    assert doc["experiments"] == []
    result = preview(doc)
    assert result.error == ""
    assert len(result.cells) == 1 and result.runs == 1
    assert result.stream == "stream: poisson, 2 jobs/s, 3 jobs, seed 7, mix D_ens 1"
    saved = save_plan(doc, tmp_path / "s.toml")
    assert "experiments" not in saved.read_text()
    assert load_campaign(saved).arrivals.count == 3
    bad = preview({**doc, "arrivals": {**doc["arrivals"], "rate": -1}})
    assert "rate" in bad.error and "\n" not in bad.error
    both = preview({**doc, "experiments": ["D_reg"]})
    assert "key 'arrivals'" in both.error
