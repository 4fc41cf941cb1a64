"""The run screen's parts moved out of it (issue 41): the zoom order and classes
(screens/run_layout), the followed running cell (models/run.followed_cell) and when each
of the screen's actions applies (run_commands.CellCommands.available), without a terminal."""

from __future__ import annotations

from types import SimpleNamespace

from engine.observe.state import CampaignState
from fugue_tui.app.models.run import followed_cell
from fugue_tui.app.screens.run_commands import CellCommands
from fugue_tui.app.screens.run_layout import ZOOMS, next_zoom, zoom_to, zoomed


class _Classes:
    """What zoom_to and zoomed use of a screen: its CSS classes."""

    def __init__(self) -> None:
        self.classes: set[str] = set()

    def set_class(self, on: bool, name: str) -> None:
        (self.classes.add if on else self.classes.discard)(name)

    def has_class(self, name: str) -> bool:
        return name in self.classes


def test_z_walks_every_pane_in_turn_then_shows_them_all_again():
    seen, now = [], ""
    for _ in range(len(ZOOMS) + 2):
        now = next_zoom(now)
        seen.append(now)
    assert seen == [*ZOOMS, "", ZOOMS[0]]


def test_zoom_to_leaves_one_zoom_class_and_the_general_one():
    screen = _Classes()
    zoom_to(screen, "jobs")  # a stand-in with the two methods
    assert screen.classes == {"-zoom-jobs", "-zoom"} and zoomed(screen) == "jobs"
    zoom_to(screen, "log")
    assert screen.classes == {"-zoom-log", "-zoom"}
    zoom_to(screen, "")
    assert screen.classes == set() and zoomed(screen) == ""


def _event(type: str, ts: float, **fields) -> dict:
    return {"v": 1, "ts": ts, "type": type, "campaign": "quick", **fields}


def _running(*keys: str) -> list:
    state = CampaignState()
    state.apply(_event("start", 1000.0, total=len(keys)))
    for i, key in enumerate(keys, 1):  # with a pid and a log: stacks can be asked for
        state.apply(_event("cell_started", 1000.0 + i, cell=key, index=i, label=f"E{i} seq",
                           attempt=1, events="unused", log_path="unused", pid=100 + i))
    return [c for c in state.cells.values() if c.active]


def test_the_followed_cell_is_the_chosen_one_while_it_runs_else_the_first():
    running = _running("c1", "c2")
    assert [c.key for c in running] == ["c1", "c2"]
    assert followed_cell(running, None).key == "c1"
    assert followed_cell(running, "c2").key == "c2"
    assert followed_cell(running[:1], "c2").key == "c1"  # c2 ended
    assert followed_cell([], "c2") is None


def _commands(cell_state, alive, replay=None, stack=3, stopping=False) -> CellCommands:
    screen = SimpleNamespace(selected_cell=lambda: cell_state, runner_alive=alive,
                             stopping=stopping, replay=replay,
                             app=SimpleNamespace(screen_stack=[None] * stack))
    return CellCommands(screen)  # a stand-in: what available() reads


def test_each_action_applies_as_the_runner_and_the_selected_cell_allow():
    running = _running("c1")[0]
    live = _commands(running, True)
    assert live.available("kill_cell") and live.available("skip_cell")
    assert not live.available("back_to_plan") and not live.available("back")
    assert not live.available("step") and live.available("zoom")
    assert live.available("dump_stacks")  # a pid and an attempt folder: stacks to ask for
    assert not _commands(running, True, stopping=True).available("kill_cell")
    gone = _commands(running, False)
    assert gone.available("back_to_plan") and gone.available("back")
    assert not gone.available("kill_cell")  # nobody to send it to
    assert not _commands(running, False, stack=2).available("back")  # nothing under it
    replay = _commands(running, False, replay=object())
    assert replay.available("step") and replay.available("to_end")
    assert not replay.available("dump_stacks")  # a recording has no processes
    assert not _commands(None, True).available("kill_cell")  # no row selected
