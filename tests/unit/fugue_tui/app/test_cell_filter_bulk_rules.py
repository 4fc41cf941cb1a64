"""The rules under the run screen's filter, bulk commands and alerts (issue 48, items 3 and
4), Textual-free: which cells a filter keeps and the count its title gives, the picker's
choices, which cells a bulk retry or skip takes and the question naming the count, the
``[alerts]`` table of the keymap file, and an alert once per cell, attempt and state."""

from __future__ import annotations

import pytest

from engine.errors import ConfigError
from engine.observe.state import CampaignState, CellState
from fugue_tui.app.actions import load_keymap
from fugue_tui.app.alerts import AlertSettings, CellAlerts, load_alerts
from fugue_tui.app.models.cell_filter import CellFilter, choices, parse_choice
from fugue_tui.app.screens.bulk import question, targets


def _cells() -> list[CellState]:
    spec = [("D_ens seq pass 1", "done"), ("D_ens unified_model pass 1", "failed"),
            ("D_cv seq pass 1", "failed"), ("D_cv unified_model pass 1", "running"),
            ("D_ens seq pass 2", "queued"), ("D_ens unified_model pass 2", "queued"),
            ("D_cv seq pass 2", "queued")]
    return [CellState(f"{i:x}" * 16, i, label, state=state)
            for i, (label, state) in enumerate(spec, start=1)]


def test_each_field_filters_and_the_title_never_hides_a_count():
    cells = _cells()
    assert CellFilter().title(cells) == "cells" and not CellFilter().active
    by_status = CellFilter(status="failed")
    assert [c.index for c in cells if by_status.keeps(c)] == [2, 3, 4]  # + the running one
    assert [c.index for c in cells if by_status.matches(c)] == [2, 3]
    assert by_status.title(cells) == "cells · status:failed · 2 of 7 cells + 1 running"
    by_executor = CellFilter(executor="seq")
    assert [c.index for c in cells if by_executor.keeps(c)] == [1, 3, 4, 5, 7]
    assert by_executor.title(cells) == "cells · executor:seq · 4 of 7 cells + 1 running"
    by_both = CellFilter(experiment="D_cv").toggled("executor", "unified_model")
    assert [c.index for c in cells if by_both.keeps(c)] == [4]
    assert by_both.title(cells) == "cells · executor:unified_model exp:D_cv · 1 of 7 cells"
    # picked again: dropped
    assert by_both.toggled("executor", "unified_model") == CellFilter(experiment="D_cv")


def test_the_picker_offers_each_value_with_its_count_and_a_clear():
    cells = _cells()
    offered = choices(cells, CellFilter(status="failed"))
    assert offered[0][0] == "clear" and "all 7 cells" in offered[0][1]
    labels = {oid: label for oid, label, _ in offered}
    assert labels["status=failed"] == "✓ status:failed  (2 cells)"
    assert labels["status=running"] == "  status:running  (1 cell)"
    assert labels["executor=seq"] == "  executor:seq  (4 cells)"
    assert labels["experiment=D_ens"] == "  exp:D_ens  (4 cells)"
    statuses = [oid for oid, _, name in offered if name == "status"]
    assert statuses == ["status=queued", "status=running", "status=done", "status=failed"]
    assert choices(cells, CellFilter())[0][0] == "status=queued"  # nothing to clear
    assert parse_choice("experiment=D_cv") == ("experiment", "D_cv")
    assert parse_choice("clear") is None


def test_bulk_targets_and_the_question_naming_the_count():
    cells = _cells()
    assert [c.index for c in targets("retry", cells)] == [2, 3]
    assert [c.index for c in targets("skip", cells, "D_ens")] == [5, 6]
    assert [c.index for c in targets("skip", cells)] == [5, 6, 7]
    text = question("retry", targets("retry", cells), shown=CellFilter(experiment="D_cv"))
    assert text.startswith("Retry 2 failed cells? Each runs again (one control retry per "
                           "cell, as 'r' sends): 2 D_ens unified_model pass 1, 3 D_cv seq "
                           "pass 1.")
    assert text.endswith(" 1 of them hidden by the filter.")
    text = question("skip", targets("skip", cells, "D_ens"), "D_ens")
    assert text.startswith("Skip 2 queued cells of D_ens? They will not run")
    assert "hidden" not in text


def _config(tmp_path, body: str):
    path = tmp_path / "keymap.toml"
    path.write_text(body)
    return path


def test_alerts_config_defaults_off_and_one_line_on_a_bad_value(tmp_path):
    assert load_alerts(tmp_path / "none.toml") == AlertSettings(bell=True, notify=True)
    path = _config(tmp_path, '[keymap]\n"run.retry" = "R"\n[alerts]\nbell = false\n')
    assert load_alerts(path) == AlertSettings(bell=False, notify=True)
    assert load_keymap(path) == {"run.retry": "R"}  # the keymap takes the [alerts] table
    with pytest.raises(ConfigError) as bad:
        load_alerts(_config(tmp_path, '[alerts]\nbell = "yes"\n'))
    assert str(bad.value) == f"{path}: alerts.bell: expected true or false, got 'yes'"
    with pytest.raises(ConfigError, match=r"alerts: unknown key 'notfy' \(did you mean "
                                          r"'notify'\?\)"):
        load_alerts(_config(tmp_path, "[alerts]\nnotfy = true\n"))


class _App:
    def __init__(self) -> None:
        self.bells, self.notes = 0, []

    def bell(self) -> None:
        self.bells += 1

    def notify(self, message, **kw) -> None:
        self.notes.append((message, kw["severity"]))


def test_an_alert_once_per_cell_attempt_and_state_and_none_when_off():
    state = CampaignState()
    cell = state.cells["c" * 16] = CellState("c" * 16, 4, "D_cv seq pass 1", "running", 1)
    alerts, app = CellAlerts(), _App()
    event = {"type": "sample", "cell": cell.key}
    assert alerts.take(app, state, [event]) == 0  # running: nothing
    cell.state, cell.watchdog = "suspect", "2 checks without progress"
    assert alerts.take(app, state, [event, event]) == 1
    assert alerts.take(app, state, [event]) == 0  # the next tick: not again
    cell.state = "hung"
    alerts.take(app, state, [event])
    assert app.bells == 2 and app.notes == [
        ("cell 4 D_cv seq pass 1 is suspect (attempt 1): 2 checks without progress",
         "warning"),
        ("cell 4 D_cv seq pass 1 is hung (attempt 1): 2 checks without progress", "error")]
    cell.attempt, cell.state = 2, "suspect"  # a retry's attempt: alerted again
    off = CellAlerts(AlertSettings(bell=False, notify=False))
    assert off.take(app, state, [event]) == 1 and app.bells == 2 and len(app.notes) == 2
    assert CellAlerts(live=False).take(app, state, [event]) == 0  # a replay


def test_skip_queued_picks_the_experiment_when_the_selected_one_has_none_queued():
    """K on a cell whose experiment has no queued cell: a list of those that have, with
    their counts; the one picked gets the one question naming its count."""
    from types import SimpleNamespace

    from fugue_tui.app.screens.bulk import BulkCommands
    from fugue_tui.app.screens.modals import ConfirmScreen
    from fugue_tui.app.screens.run_filter import ChoicePicker

    cells = _cells()[:4] + [CellState("7" * 16, 7, "D_cv seq pass 2", state="queued")]
    state = CampaignState()
    state.cells = {c.key: c for c in cells}
    pushed: list = []
    screen = SimpleNamespace(
        runner_alive=True, stopping=False, replay=None, cell_filter=CellFilter(),
        view=SimpleNamespace(state=state), selected_cell=lambda: cells[0],  # D_ens: done
        notify=lambda *a, **k: pushed.append(("notify", a)),
        app=SimpleNamespace(push_screen=lambda s, then=None: pushed.append((s, then))))
    BulkCommands(screen).skip_queued()
    picker, then = pushed[0]
    assert isinstance(picker, ChoicePicker) and picker.options == [("D_cv", "D_cv  (1 queued)")]
    assert picker.question.startswith("D_ens has no queued cell; skip the queued cells of")
    then("D_cv")
    confirm = pushed[1][0]
    assert isinstance(confirm, ConfirmScreen)
    assert confirm.question.startswith("Skip 1 queued cell of D_cv?")
    screen.runner_alive = False  # no live runner: said, nothing asked
    BulkCommands(screen).retry_failed()
    assert pushed[2] == ("notify", ("retry failed: no live runner to send it to",))
