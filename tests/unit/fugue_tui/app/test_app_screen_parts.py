"""The dashboard's typed messages and the parts split out of the plan and results screens
(issue 41): the preview pane, the provenance pane, the launch and the analysis models."""

from __future__ import annotations

import asyncio
import dataclasses
import typing

import pytest
from textual.app import App, ComposeResult
from textual.widgets import Static

from fugue_tui.app import messages
from fugue_tui.app.models.plan import Preview, default_doc


def _hints(cls: type) -> dict[str, object]:
    """The message's field types resolved with the classes its module imports only for the
    type checker: a name that is misspelt or gone raises."""
    from engine.event_base import Event
    from engine.results.load import Runs
    from fugue_tui.app.models.catalogue import ExperimentInfo
    from fugue_tui.app.models.plan import PlanDoc
    from fugue_tui.app.process import RunnerHandle
    from fugue_tui.report.figures import Results
    from fugue_tui.report.sweeps import SweepView

    names = {"Event": Event, "Runs": Runs, "ExperimentInfo": ExperimentInfo,
             "PlanDoc": PlanDoc, "Preview": Preview, "RunnerHandle": RunnerHandle,
             "Results": Results, "SweepView": SweepView}
    namespace = {**vars(messages), **names}
    # Its own fields only: Message's annotations name what its module imports.
    return {name: eval(text, namespace)  # the module's own annotation text
            for name, text in cls.__dict__["__annotations__"].items()}


MESSAGES = [messages.CatalogueLoaded, messages.PreviewReady, messages.PlanLoaded,
            messages.Launched, messages.Followed, messages.ResultsLoaded, messages.Notice]


@pytest.mark.parametrize("cls", MESSAGES, ids=lambda c: c.__name__)
def test_no_message_field_is_typed_any(cls):
    hints = _hints(cls)
    for f in dataclasses.fields(cls):
        assert hints[f.name] is not typing.Any, f.name
        assert typing.Any not in typing.get_args(hints[f.name])[:1] or f.name == "doc", f.name


def test_the_messages_carry_the_classes_the_workers_build():
    from engine.event_base import Event
    from engine.results.load import Runs
    from fugue_tui.app.models.catalogue import ExperimentInfo
    from fugue_tui.app.process import RunnerHandle
    from fugue_tui.report.sweeps import SweepView

    assert _hints(messages.CatalogueLoaded)["experiments"] == list[ExperimentInfo]
    assert _hints(messages.PreviewReady)["preview"] is Preview
    assert _hints(messages.Launched)["handle"] == RunnerHandle | None
    assert _hints(messages.Followed)["events"] == list[Event]
    assert _hints(messages.Followed)["host_sample"] == dict[str, float] | None
    assert _hints(messages.ResultsLoaded)["runs"] == Runs | None
    assert _hints(messages.ResultsLoaded)["sweep"] == SweepView | None
    assert typing.get_args(_hints(messages.Notice)["severity"]) == (
        "information", "warning", "error")


def test_the_replay_posts_typed_events_as_live_does():
    """A replay built from plain documents reaches the run screen as typed events."""
    from engine.event_base import Event
    from engine.event_types import RunnerDone
    from fugue_tui.app.follow import replay_run
    from fugue_tui.app.models.replay import Replay

    posted: list[messages.Followed] = []

    class Worker:
        is_cancelled = False

    class Screen:
        replay = Replay([{"v": 1, "ts": 1.0, "type": "done", "campaign": "c", "cell": "k"}],
                        speed=1000.0)
        replay.to_end()
        log_target = None

        def post_message(self, message):
            posted.append(message)
            Worker.is_cancelled = True

    replay_run(Screen(), Worker())
    [event] = posted[0].events
    assert isinstance(event, Event) and isinstance(event, RunnerDone)
    assert event["cell"] == "k"


class _PreviewApp(App):
    def compose(self) -> ComposeResult:
        from fugue_tui.app.widgets.campaign_form import CampaignForm
        from fugue_tui.app.widgets.plan_preview import PlanPreview

        form = CampaignForm(default_doc(), id="settings")
        yield form
        yield PlanPreview(form, id="preview-pane")


def _summary(app: App) -> str:
    return str(app.query_one("#preview-summary", Static).render())


def test_the_preview_pane_redraws_when_what_it_shows_changes():
    from fugue_tui.app.models.plan import preview
    from fugue_tui.app.widgets.plan_preview import PlanPreview

    async def scenario():
        app = _PreviewApp()
        async with app.run_test() as pilot:
            pane = app.query_one(PlanPreview)
            assert _summary(app) == ""  # nothing is drawn before there is something to say
            pane.result = None
            assert "computing" in _summary(app)
            pane.result = Preview(error="select at least one experiment")
            assert _summary(app) == "preview: select at least one experiment"
            pane.result = preview({**default_doc(), "experiments": ["D_ens"]})
            await pilot.pause()
            assert _summary(app).startswith("preview: ")
            assert "cells:" in _summary(app)
            assert app.query_one("#preview").row_count == len(pane.result.cells) > 0
            pane.form_error = "passes: not a number: 'x'"
            assert _summary(app) == "passes: not a number: 'x'"
            pane.load_error = "bad.toml:3: unknown executor 'sqe'"
            assert _summary(app).startswith("not loaded: bad.toml:3")  # wins over the rest
            assert app.query_one("#preview-summary").has_class("-load-error")
            pane.load_error = ""
            assert _summary(app) == "passes: not a number: 'x'"
            assert not app.query_one("#preview-summary").has_class("-load-error")

    asyncio.run(scenario())


def test_the_preview_pane_previews_the_forms_plan_once_the_edits_pause():
    from fugue_tui.app.widgets.plan_preview import PREVIEW_DEBOUNCE_S, PlanPreview

    async def scenario():
        app = _PreviewApp()
        async with app.run_test() as pilot:
            pane = app.query_one(PlanPreview)
            pane.form.doc["experiments"] = ["D_ens"]
            pane.schedule()
            pane.form.doc["passes"] = 2  # a second edit before the first was previewed
            pane.schedule()
            assert pane.pending and pane.result is None
            assert pane.launch_refusal() == ("the preview is not ready yet", "error")
            for _ in range(200):
                await pilot.pause(PREVIEW_DEBOUNCE_S / 5)
                if not pane.pending:
                    break
            assert not pane.pending and pane.result_revision == pane.revision == 2
            assert pane.result is not None and not pane.result.error
            assert {p.cell.pass_index for p in pane.result.cells} == {1, 2}  # the last plan
            assert pane.launch_refusal() is None
            pane.form.errors["passes"] = "passes: not a number: 'x'"
            pane.schedule()
            assert _summary(app) == "passes: not a number: 'x'"  # at once, not debounced
            assert pane.launch_refusal() == ("passes: not a number: 'x'", "error")
            await pilot.pause(PREVIEW_DEBOUNCE_S * 2)
            assert pane.result is None  # no preview of a plan that does not parse

    asyncio.run(scenario())


def test_the_provenance_pane_shows_the_selected_row_or_the_prompt():
    from fugue_tui.app.widgets.provenance import PROMPT, ProvenancePane

    class PaneApp(App):
        def compose(self) -> ComposeResult:
            yield ProvenancePane()

    async def scenario():
        app = PaneApp()
        async with app.run_test():
            pane = app.query_one(ProvenancePane)
            pane.row = {"exp_id": "D_ens", "executor": "seq", "host": "box", "seed": "42.0"}
            text = str(pane.render())
            assert text.startswith("provenance\n") and "box" in text and "42" in text
            pane.row = None
            assert str(pane.render()) == PROMPT

    asyncio.run(scenario())


def test_a_plan_that_does_not_validate_is_not_launched_and_names_no_run_folder(tmp_path):
    from fugue_tui.app.models.launch import LaunchFailed, launch_plan

    with pytest.raises(LaunchFailed) as caught:
        launch_plan({**default_doc(str(tmp_path)), "experiments": ["nope"]}, False, None)
    assert caught.value.run_dir == "" and "nope" in str(caught.value)


def test_the_analysis_of_the_rows_filters_them_and_says_why_a_filter_was_not_understood():
    from engine.results.load import load_runs
    from fugue_tui.app.models.results import analyse
    from tests.snapshots.helpers import FIXTURES

    runs = load_runs(FIXTURES / "harness")
    kept = analyse(runs, "exec:unified", n_boot=50)
    assert len(kept.shown.groups) == 6 and kept.filter_error == ""
    assert kept.results.figures and kept.sweep is not None
    bad = analyse(runs, "exeuctor:seq", n_boot=50)
    assert len(bad.shown.groups) == len(runs.groups)
    assert "unknown filter field 'exeuctor'" in bad.filter_error


def _field(path: str):
    from fugue_tui.app.models.form_fields import campaign_fields

    return next(f for f in campaign_fields() if f.path == path)


def test_a_typed_setting_is_written_as_the_campaign_file_holds_it_or_refused():
    from fugue_tui.app.models.form_fields import set_setting, shown_value

    doc = default_doc()
    assert set_setting(doc, _field("passes"), " 3 ") == "" and doc["passes"] == 3
    assert set_setting(doc, _field("passes"), "two") == "passes: not a number: 'two'"
    assert doc["passes"] == 3  # a refused value leaves the plan as it was
    assert set_setting(doc, _field("precision"), "fp32, bf16") == ""
    assert doc["precision"] == ["fp32", "bf16"] and shown_value(doc, _field("precision")) == \
        "fp32, bf16"
    assert set_setting(doc, _field("precision"), "fp32") == "" and doc["precision"] == "fp32"
    assert set_setting(doc, _field("k_sweep"), "1,2,4") == "" and doc["k_sweep"] == [1, 2, 4]
    assert "comma-separated integers" in set_setting(doc, _field("k_sweep"), "1,x")
    assert set_setting(doc, _field("budget.ram"), "512") == "" and doc["budget"]["ram"] == 512
    assert set_setting(doc, _field("watchdog.interval_s"), "2.5") == ""
    assert doc["watchdog"]["interval_s"] == 2.5
    assert set_setting(doc, _field("passes"), "") == "" and "passes" not in doc


def test_max_parallel_is_written_into_every_executor_that_declares_it():
    from fugue_tui.app.models.form_fields import set_max_parallel, shown_value

    doc = default_doc()
    error, written = set_max_parallel(doc, "4")
    assert error == "" and "mp" in written and "seq" not in written
    assert all(doc["options"][name]["max_parallel"] == 4 for name in written)
    assert shown_value(doc, _field("max_parallel")) == "4"
    doc["options"]["mp"]["max_parallel"] = 2  # the executors differ: the box is blank
    assert shown_value(doc, _field("max_parallel")) == ""
    error, written = set_max_parallel(doc, "0")
    assert error.startswith("max_parallel: ") and written == []
    assert doc["options"]["mp"]["max_parallel"] == 2


def test_an_executor_option_is_typed_by_its_declaration_and_an_empty_table_dropped():
    from fugue_tui.app.models.form_fields import set_option

    doc = default_doc()
    assert set_option(doc, "mp", "grace_period", "3") == ""
    assert doc["options"]["mp"]["grace_period"] == 3
    assert set_option(doc, "mp", "grace_period", "soon").startswith(
        "options.mp.grace_period: ")
    assert set_option(doc, "mp", "grace_period", "") == "" and "mp" not in doc["options"]


def test_the_form_shows_the_watchdog_action_and_the_executors_a_plan_leaves_unset():
    from engine.results.derived import BASELINE_EXECUTOR
    from fugue_tui.app.models.form_fields import plan_executors, shown_value

    assert plan_executors({}) == [BASELINE_EXECUTOR]
    assert plan_executors({"executors": "mp"}) == ["mp"]
    assert shown_value({}, _field("watchdog.action")) == "flag"
    assert shown_value({}, _field("device")) is None


def test_the_results_header_counts_rows_and_machines_and_says_what_went_wrong():
    from pathlib import Path

    from engine.results.load import load_runs
    from fugue_tui.app.models.results import apply_filter, header_text, parse_filter
    from tests.snapshots.helpers import FIXTURES

    runs = load_runs(FIXTURES / "harness")
    shown = apply_filter(runs, parse_filter("exec:unified"))
    text = header_text(Path("runs"), runs, shown, " exec:unified ", "").plain
    assert text.startswith("results runs · 6 of 12 group rows · ")
    assert text.endswith(" · filter: exec:unified") and "machine" in text
    bad = header_text(Path("runs"), runs, runs, "exeuctor:x", "unknown filter field").plain
    assert bad.splitlines()[1] == "unknown filter field"
