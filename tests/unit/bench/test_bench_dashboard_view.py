"""``bench.dashboard_cost --long --view processes``: the flag, its part and its variants (the
measurement itself runs minutes: ``python -m bench.dashboard_cost --long --view processes``;
its figures are in bench/RESULTS.md)."""

from __future__ import annotations

import pytest

from bench import dashboard_cost, dashboard_long


def test_view_goes_with_long_and_takes_only_the_known_screens(capsys):
    with pytest.raises(SystemExit) as info:
        dashboard_cost.main(["--view", "processes"])
    assert info.value.code == 2 and "--view goes with --long" in capsys.readouterr().err
    with pytest.raises(SystemExit) as info:
        dashboard_cost.main(["--long", "--view", "help"])
    assert info.value.code == 2 and "invalid choice: 'help'" in capsys.readouterr().err


def test_the_process_view_is_published_as_its_own_part_naming_the_view():
    assert dashboard_long.VIEWS == {"run": "dashboard_cost_long",
                                    "processes": "dashboard_cost_long_processes"}
    share = dashboard_long.figures()["share"]
    noted = dashboard_long._with_view(share, "processes")  # noqa: SLF001
    assert noted.target == share.target == "<=0.05" and noted.name == share.name
    assert noted.note.startswith(share.note) and "processes view open" in noted.note
