"""Executor options are declared once (``engine.define.executor_options``): adding a field
to an executor's options dataclass is the whole change. The fixture adds dummy options to
the unified model's declaration (and removes them); ``run --help``, campaign validation, the
dashboard's option fields and the docs table all pick them up, and cell keys of campaigns
that do not set them stay as they were."""

from __future__ import annotations

import dataclasses

import pytest

from engine.define.axes import DEFAULT_FEATURES
from engine.define.campaign import parse_campaign
from engine.define.executor_options import from_table, option
from engine.define.matrix import build_cells
from engine.errors import ConfigError
from engine.executors import ExecutorSpec, MPOptions, RayOptions, UnifiedOptions
from engine.executors import docs as executor_docs
from engine.plugins import load_builtins
from engine.registry import EXECUTORS
from fugue_tui.app.widgets.campaign_form import option_inputs
from fugue_tui.commands.run_flags import executors_epilog

MACHINE = {"host": "h1", "device": "cpu", "gpu_uuid": "", "gpu_name": "", "torch": "2.x"}
WHERE = "c.toml: options.unified_model"


def _campaign(table: dict | None = None):
    doc = {"experiments": "D_ens", "executors": ["unified_model"]}
    if table is not None:
        doc["options"] = {"unified_model": table}
    return parse_campaign(doc, "c.toml")


@pytest.fixture
def dummy_option():
    """Two fields added to UnifiedOptions, as a developer would add them: an integer with a
    lower bound and a default, and a string with choices."""
    load_builtins()
    spec = EXECUTORS.get("unified_model")

    @dataclasses.dataclass(frozen=True)
    class WithDummy(spec.options):
        zz_dummy: int = option(3, minimum=2, help="a dummy count added by a test")
        zz_flavour: str = option("plain", choices=("plain", "salty"),
                                 help="a dummy choice added by a test")

    EXECUTORS.add(dataclasses.replace(spec, options=WithDummy), replace=True)
    yield
    EXECUTORS.add(spec, replace=True)


def test_run_help_lists_an_added_option(dummy_option, monkeypatch):
    monkeypatch.setenv("COLUMNS", "1000")  # the epilog wraps to the terminal's width
    text = executors_epilog()
    assert "      zz_dummy (int; >= 2; default 3): a dummy count added by a test" in text
    assert ("      zz_flavour (str; plain|salty; default plain): a dummy choice added by a "
            "test") in text


@pytest.mark.parametrize("value, message", [
    ("three", f"{WHERE}: key 'zz_dummy' must be an integer, got 'three'"),
    (1, f"{WHERE}: key 'zz_dummy' must be a number >= 2, got 1"),
    ([2, 4], f"{WHERE}: key 'zz_dummy' must be an integer, got [2, 4]"),
])
def test_campaign_validation_checks_an_added_option(dummy_option, value, message):
    with pytest.raises(ConfigError) as caught:
        _campaign({"zz_dummy": value})
    assert str(caught.value) == message


def test_campaign_validation_checks_an_added_choice(dummy_option):
    with pytest.raises(ConfigError) as caught:
        _campaign({"zz_flavour": "sweet"})
    assert str(caught.value) == (f"{WHERE}: key 'zz_flavour' must be one of plain, salty, "
                                 "got 'sweet'")
    with pytest.raises(ConfigError) as caught:
        _campaign({"zz_dumy": 3})
    assert str(caught.value) == f"{WHERE}: unknown key 'zz_dumy' (did you mean 'zz_dummy'?)"


def test_an_added_option_is_accepted_and_keys_without_it_do_not_change(dummy_option):
    assert _campaign({"zz_dummy": 4, "zz_flavour": "salty"}).options == {
        "unified_model": {"zz_dummy": 4, "zz_flavour": "salty"}}
    with_field = [c.key for c in build_cells(_campaign(), MACHINE)]
    spec = EXECUTORS.get("unified_model")
    EXECUTORS.add(dataclasses.replace(spec, options=UnifiedOptions), replace=True)
    try:
        assert [c.key for c in build_cells(_campaign(), MACHINE)] == with_field
    finally:
        EXECUTORS.add(spec, replace=True)


def test_the_dashboard_shows_an_added_option(dummy_option):
    rows = {option: (widget, hint) for option, widget, hint in option_inputs("unified_model")}
    assert list(rows)[-2:] == ["zz_dummy", "zz_flavour"]
    assert rows["zz_dummy"] == ("opt-unified_model-zz_dummy",
                                ">= 2; default 3  a dummy count added by a test")
    assert rows["zz_flavour"][1].startswith("plain|salty; default plain  ")


def test_the_docs_table_shows_an_added_option(dummy_option):
    table = executor_docs.options_table()
    assert ("| `unified_model` | `zz_dummy` | int |  | 2 | `3` |  | a dummy count added by a "
            "test |") in table
    assert "| `unified_model` | `zz_flavour` | str | `plain`, `salty` |  | `plain` |" in table
    text = executor_docs.with_table(executor_docs.DOC.read_text(), table)
    assert "`zz_dummy`" in text and text.count(executor_docs.BEGIN) == 1


def test_the_docs_table_is_up_to_date():
    load_builtins()
    text = executor_docs.DOC.read_text()
    assert executor_docs.with_table(text, executor_docs.options_table()) == text


# ------------------------------------------------------------------ declared once

def test_executors_read_the_declared_defaults():
    assert from_table(UnifiedOptions, {}).features == DEFAULT_FEATURES
    assert from_table(UnifiedOptions, {"verify": False, "unknown": 1}).verify is False
    assert from_table(MPOptions, None).mps == "auto"
    ray = from_table(RayOptions, {"grace_period": 3})
    assert (ray.scheduler, ray.grace_period, ray.reduction_factor) == ("fifo", 3, 2)


def test_the_scheduler_flag_takes_the_declared_choices():
    import argparse

    from fugue_tui.commands.run_flags import add_run_arguments

    load_builtins()
    parser = argparse.ArgumentParser()
    add_run_arguments(parser, lambda low: int)
    flag = next(a for a in parser._actions if "--scheduler" in a.option_strings)
    # Every value some executor takes (issue 25: seq's sha besides ray's Tune schedulers).
    declared = [c for name in ("ray", "seq", "mp", "unified_model")
                for c in EXECUTORS.get(name).option_fields["scheduler"].choices]
    assert tuple(flag.choices) == tuple(dict.fromkeys(declared))


def test_dict_options_of_a_plugin_and_deprecated_arguments():
    spec = ExecutorSpec(name="zz_dict", label="Dict", color="#000000", baseline=True,
                        supports_scheduler=True, target="not_a_module:Nothing",
                        options={"workers": (int,), "mode": (str, list)},
                        option_help={"workers": "how many"}, choices={"mode": ("a", "b")},
                        minimum={"workers": 1}, axes=("mode",))
    workers, mode = spec.option_fields.values()
    assert (workers.types, workers.help, workers.minimum, workers.default) == (
        (int,), "how many", 1, None)
    assert (mode.choices, mode.axis, spec.option_axes) == (("a", "b"), True, ("mode",))
    with pytest.raises(TypeError, match="target"):
        ExecutorSpec(name="zz_none", label="None")
