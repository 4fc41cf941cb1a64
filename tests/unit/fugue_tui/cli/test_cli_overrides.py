"""``--batch``'s overrides are campaign keys: the flag, its bound and the ``run`` flag it
may contradict come from the key's declaration (``engine.define.campaign_schema``)."""

from __future__ import annotations

import pytest

from engine.define.campaign_schema import KEYS
from fugue_tui.cli import build_parser
from fugue_tui.commands.batch import OVERRIDES, sub_parsers


def _options(parser) -> dict[str, object]:
    return {s: a for a in parser._actions for s in a.option_strings}  # noqa: SLF001


def test_each_override_is_its_keys_flag_at_the_top_level_and_in_run():
    parser = build_parser()
    top, run = _options(parser), _options(sub_parsers(parser)["run"])
    for name in OVERRIDES:
        flag = KEYS[name].flag
        assert flag is not None
        assert top[flag.spelling].dest == name
        assert run[flag.spelling].dest == flag.dest  # the value check_modes compares


@pytest.mark.parametrize("name", [n for n in OVERRIDES if KEYS[n].flag.checked])
def test_a_checked_override_refuses_a_value_below_its_bound(name, capsys):
    low = int(KEYS[name].bound.low)
    with pytest.raises(SystemExit) as done:
        build_parser().parse_args(["--batch", "x.toml", KEYS[name].flag.spelling, str(low - 1)])
    assert done.value.code == 2
    assert f"must be >= {low}, got {low - 1}" in capsys.readouterr().err
    args = build_parser().parse_args(["--batch", "x.toml", KEYS[name].flag.spelling, str(low)])
    assert getattr(args, name) == low


def test_an_override_that_contradicts_runs_own_flag_is_refused(capsys):
    from fugue_tui.cli import main

    assert main(["--seed", "1", "run", "--seed", "2", "--exp", "E01"]) == 2
    assert ("--seed given twice with different values: 1 before 'run' and 2 after it"
            in capsys.readouterr().err)
