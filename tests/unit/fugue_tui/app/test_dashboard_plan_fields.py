"""The plan form's k_sweep field (issue 23) and its [budget] fields (issue 24), through the
keyboard (Textual pilot, no runner started): what is typed reaches the campaign document as
a campaign file would hold it, a bad value is one line naming the key (the CLI's words for
--k-sweep, the campaign file's for [budget]), the selection-dependent rules come from the
preview, and a saved plan loads back with the same cells."""

from __future__ import annotations

import asyncio
import tomllib

from textual.widgets import Input, Static

from fugue_tui.app.app import FugueApp
from fugue_tui.app.models.plan import load_plan, preview
from fugue_tui.app.screens.plan import PlanScreen
from fugue_tui.app.widgets.campaign_form import CampaignForm
from fugue_tui.app.widgets.catalogue_tree import CatalogueTree
from tests.app_screen import screen_text, until

SIZE = (150, 46)


def test_k_sweep_and_budget_fields(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("FUGUE_CONFIG_DIR", str(tmp_path / "config"))

    async def scenario():
        app = FugueApp(runs_dir="runs")
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: isinstance(app.screen, PlanScreen)
                        and app.screen.query_one(CatalogueTree).experiments,
                        timeout=20, what="the catalogue")
            plan = app.screen
            form = plan.query_one(CampaignForm)
            summary = plan.query_one("#preview-summary", Static)
            plan.doc["experiments"] = ["D_ens"]  # an ensemble: the one type K is swept for

            async def type_into(field: str, text: str) -> None:
                box = form.query_one(f"#f-{field}", Input)
                box.focus()
                await pilot.pause()
                box.value = ""
                await pilot.press(*text)
                await until(pilot, lambda: box.value == text, what=f"{field} = {text!r}")

            def shown() -> str:
                return str(summary.render())

            await type_into("k-sweep", "1,2,4")
            assert plan.doc["k_sweep"] == [1, 2, 4]
            await until(pilot, lambda: "preview: 3 cells: 3 run" in shown(),
                        what=f"one cell per K (shows {shown()!r})")
            await until(pilot, lambda: "K=4" in screen_text(app) or "-k4" in screen_text(app)
                        or all(len(p.cell.jobs) in (1, 2, 4) for p in plan.result.cells),
                        what="the swept cells")
            assert sorted(len(p.cell.jobs) for p in plan.result.cells) == [1, 2, 4]
            await type_into("k-sweep", "4,2")  # the rules are the campaign's: the preview's
            await until(pilot, lambda: "preview:" in shown() and "'k_sweep'" in shown()
                        and "increasing" in shown(), what=f"the order error ({shown()!r})")
            await type_into("k-sweep", "1,x")
            await until(pilot, lambda: shown() == "k_sweep: expected comma-separated "
                        "integers such as 1,2,4,8, got '1,x'", what=f"the parse error ({shown()!r})")
            await type_into("k-sweep", "2,8")

            await type_into("budget-ram", "six")
            await until(pilot, lambda: shown().startswith("budget: key 'ram': not a size: "
                                                          "'six'"), what=f"ram ({shown()!r})")
            await type_into("budget-ram", "6GiB")
            await type_into("budget-device", "512")  # a bare number: MiB, kept a number
            await type_into("budget-cores", "0")
            await until(pilot, lambda: shown() == "budget: key 'cores': must be >= 1, got '0'",
                        what=f"cores ({shown()!r})")
            await type_into("budget-cores", "2")
            await until(pilot, lambda: "preview: 2 cells: 2 run" in shown(),
                        what=f"a valid plan again ({shown()!r})")
            assert plan.doc["budget"] == {"ram": "6GiB", "device": 512, "cores": 2}
            assert not form.errors
            await type_into("budget-device", "")  # cleared: not written
            await until(pilot, lambda: "device" not in plan.doc["budget"], what="cleared")
            return dict(plan.doc)

    doc = asyncio.run(scenario())
    from fugue_tui.app.models.plan import save_plan

    saved = save_plan(doc, tmp_path / "swept.toml")
    written = tomllib.loads(saved.read_text())
    assert written["k_sweep"] == [2, 8] and written["budget"] == {"ram": "6GiB", "cores": 2}
    again = load_plan(saved)
    assert [p.cell.key for p in preview(again).cells] == [p.cell.key for p in preview(doc).cells]
